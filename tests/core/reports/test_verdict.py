"""bert_kd.core.reports.verdict: the majority-class floor and when a table has no best student."""

from __future__ import annotations

import math

import pytest

from bert_kd.core.reports.verdict import comparison_verdict, majority_class_metrics, noise_tolerance


def test_majority_class_metrics_predict_the_most_frequent_label():
    metrics = majority_class_metrics("rte", [0, 0, 0, 1])
    assert metrics["accuracy"] == 0.75
    assert majority_class_metrics("cola", [1, 1, 0])["matthews_correlation"] == 0.0
    assert majority_class_metrics("stsb", [0.5, 3.0]) is None  # regression: no constant floor


def test_noise_tolerance_is_the_largest_standard_error_of_a_proportion():
    assert noise_tolerance(100) == pytest.approx(0.05)
    assert noise_tolerance(872) == pytest.approx(0.5 / math.sqrt(872))
    assert noise_tolerance(None) == 0.0


def test_every_student_at_the_majority_class_has_no_best_student():
    verdict = comparison_verdict({"nkd": 0.527, "alp": 0.53, "pkd": 0.52}, majority=0.527, tolerance=0.05, metric="accuracy")
    assert verdict.best is None and "majority class" in verdict.warning and "0.5270" in verdict.warning


def test_students_within_the_noise_of_each_other_have_no_best_student():
    verdict = comparison_verdict({"nkd": 0.80, "alp": 0.81}, majority=0.5, tolerance=0.05)
    assert verdict.best is None and "ties with the others" in verdict.warning


def test_a_student_clear_of_the_others_and_the_floor_is_named():
    verdict = comparison_verdict({"nkd": 0.70, "alp": 0.81}, majority=0.5, tolerance=0.05)
    assert verdict == type(verdict)("alp", None, 0.05)
    # identical rows tie even at tolerance 0 (no dev-set size known)
    assert comparison_verdict({"a": 0.6, "b": 0.6}, None, 0.0).best is None
    assert comparison_verdict({"a": 0.6}, None, 0.0).best == "a"
