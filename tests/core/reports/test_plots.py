import math

import matplotlib.pyplot as plt
import numpy as np
import pytest

from bert_kd.core.reports import plots


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def _texts(ax):
    return [t.get_text() for t in ax.texts]


def test_comparison_bars_sorted_zoomed_with_error_bars_and_titled():
    fig = plots.comparison_bars(
        ["nkd", "alp", "pkd"],
        [0.549, 0.563, 0.556],
        0.57,
        "accuracy",
        plots.comparison_title("distill_baselines", "sst2", "accuracy"),
        errors=[0.004, 0.003, 0.006],
        counts=[3, 3, 3],
    )
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["nkd (n=3)", "pkd (n=3)", "alp (n=3)"]  # bottom-up: best on top
    low, high = ax.get_xlim()
    assert 0.5 < low < 0.545 and high < 0.6  # zoomed to the data, not from 0
    assert ax.get_title(loc="left") == "distill_baselines · SST2 dev accuracy"
    assert "0.563 ± 0.003" in _texts(ax)
    assert any(c.__class__.__name__ == "LineCollection" for c in ax.collections)  # error bars drawn
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["students (mean ± std)", "teacher 0.570"]
    assert legend.get_bbox_to_anchor().x0 > ax.get_window_extent().x1 - 1  # outside the bars


def test_teacher_far_above_students_does_not_flatten_their_differences():
    fig = plots.comparison_bars(["a", "b"], [0.549, 0.563], 0.86, "accuracy", "t")
    ax = fig.axes[0]
    low, high = ax.get_xlim()
    assert high < 0.6
    assert "teacher 0.860 (off this scale)" in [t.get_text() for t in ax.get_legend().get_texts()]


def test_comparison_bars_rejects_mismatched_lengths():
    with pytest.raises(ValueError, match="2 names but 3 scores"):
        plots.comparison_bars(["a", "b"], [0.1, 0.2, 0.3], None, "accuracy", "t")
    with pytest.raises(ValueError, match="1 errors for 2 scores"):
        plots.comparison_bars(["a", "b"], [0.1, 0.2], None, "accuracy", "t", errors=[0.1])


def test_alp_heatmap_draws_unconnected_layers_as_not_connected():
    fig = plots.attention_heatmap([[0.1, 0.2, 0.7], [0.0, 0.0, 0.0]], "ALP α")
    ax = fig.axes[0]
    texts = _texts(ax)
    assert "not connected" in texts
    assert texts.count("0.00") == 0 and "0.70" in texts
    shown = ax.images[0].get_array()
    assert np.ma.is_masked(shown[1, 0]) or math.isnan(shown[1, 0])


def test_heatmap_with_mapping_blanks_layers_outside_each_set():
    fig = plots.attention_heatmap(
        [[0.6, 0.4, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0, 0, 0, 0]], "CKD α", mapping=[[1, 2], [3, 4], []]
    )
    ax = fig.axes[0]
    texts = _texts(ax)
    assert texts.count("0.00") == 1  # student 2 ↔ teacher 4 is in its set, so it shows
    assert "not connected" in texts
    assert "blank" in ax.get_xlabel()
    with pytest.raises(ValueError, match="mapping has 1 entries"):
        plots.attention_heatmap([[1.0], [1.0]], mapping=[[1]])


def test_ted_per_layer_pairs_teacher_and_student_layers():
    fig = plots.per_layer_metric(
        {"teacher": {"2": 0.71, "5": 0.83}, "student": {"1": 0.69, "2": 0.74}}, "accuracy", "TED filters"
    )
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["teacher 2\nstudent 1", "teacher 5\nstudent 2"]
    assert len(ax.patches) == 4
    assert ax.get_ylim()[0] > 0.6
    assert "0.830" in _texts(ax)


def test_ted_per_layer_single_model_uses_layer_numbers():
    fig = plots.per_layer_metric({"teacher": {"2": 0.71, "5": 0.83}}, "accuracy", "TED filters")
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["2", "5"]


def test_one_seed_comparison_spans_floor_to_teacher_with_its_noise_band():
    fig = plots.comparison_bars(
        ["nkd", "alp", "ckd"], [0.780, 0.786, 0.770], 0.819, "accuracy", "t", floor=0.509, noise=0.017
    )
    ax = fig.axes[0]
    low, high = ax.get_xlim()
    assert low < 0.509 < 0.52 and high > 0.819  # from the majority class to the teacher, not zoomed to the spread
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == [
        "students (± 0.017: noise of one dev-set run)",
        "within ± 0.017 of the top score",
        "teacher 0.819",
        "majority class 0.509",
    ]
    assert any(c.__class__.__name__ == "LineCollection" for c in ax.collections)  # ± noise error bars
    assert "0.786" in _texts(ax) and not any("±" in t for t in _texts(ax))  # the band is in the legend, not per bar
    dotted = [line for line in ax.get_lines() if line.get_linestyle() == ":"]
    assert [line.get_xdata()[0] for line in dotted] == [0.509]
    assert "from the majority class to the teacher" in ax.get_xlabel()
