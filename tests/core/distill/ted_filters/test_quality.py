"""TED per-layer filter quality: table rows per (filters, k), majority-class reference, figure."""

from __future__ import annotations

import pytest

from bert_kd.core.distill.ted_filters.quality import filter_quality_figure, filter_quality_table, majority_class_score


def test_majority_class_score_and_regression():
    assert majority_class_score("rte", [0, 0, 0, 1]) == pytest.approx(0.75)
    assert majority_class_score("stsb", [0.5, 3.0]) is None


def test_table_pairs_teacher_layer_m_k_with_student_layer_k(tmp_path):
    per_layer = {"teacher": {"1": 0.6, "3": 0.7, "2": 0.1}, "student": {"1": 0.55, "2": 0.65}}
    table = filter_quality_table(per_layer, [1, 3], "rte", majority=0.5)
    assert list(zip(table["filters"], table["k"], table["model_layer"], table["accuracy"])) == [
        ("teacher", 1, 1, 0.6),
        ("teacher", 2, 3, 0.7),
        ("student", 1, 1, 0.55),
        ("student", 2, 2, 0.65),
    ]
    assert list(table["gain_over_majority"]) == pytest.approx([0.1, 0.2, 0.05, 0.15])
    figure = filter_quality_figure(table, "rte", "test")
    ax = figure.axes[0]
    assert len(ax.patches) == 4  # one bar per filter
    assert any(line.get_linestyle() == "--" and line.get_ydata()[0] == pytest.approx(0.5) for line in ax.get_lines())
    figure.savefig(tmp_path / "q.png")


def test_missing_layer_names_it():
    with pytest.raises(ValueError, match=r"per_layer\['student'\] has no score for layer 2"):
        filter_quality_table({"teacher": {"1": 0.6, "3": 0.7}, "student": {"1": 0.5}}, [1, 3], "rte")
