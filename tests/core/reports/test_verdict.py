"""bert_kd.core.reports.verdict: the majority-class floor and when a table has no best student."""

from __future__ import annotations

import math

import pytest

from bert_kd.core.reports.verdict import (
    FLOOR,
    TEACHER_FLOOR,
    TIE,
    WINNER,
    comparison_verdict,
    duplicate_rows,
    majority_class_metrics,
    mcnemar_exact,
    noise_tolerance,
    tied_name,
)


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
    verdict = comparison_verdict(
        {"nkd": 0.527, "alp": 0.53, "pkd": 0.52}, majority=0.527, tolerance=0.05, metric="accuracy"
    )
    assert verdict.best is None and "majority class" in verdict.warning and "0.5270" in verdict.warning


def test_students_within_the_noise_of_each_other_have_no_best_student():
    verdict = comparison_verdict({"nkd": 0.80, "alp": 0.81}, majority=0.5, tolerance=0.05)
    assert verdict.best is None and verdict.kind == TIE and verdict.warning.startswith("tied: alp, nkd")
    assert verdict.top == "alp" and verdict.tied == ("alp", "nkd")
    assert verdict.tags() == {"bert_kd.verdict": "tie", "bert_kd.tied": "alp, nkd"}


def test_one_weak_row_does_not_crown_the_top_of_a_tie():
    """The spread of all rows exceeds the noise (TinyBERT far below), but the top four lie within it."""
    scores = {"ckd": 0.815, "ckd_po": 0.815, "alp": 0.808, "pkd": 0.80, "nkd": 0.79, "tinybert": 0.70}
    verdict = comparison_verdict(
        scores, majority=0.509, tolerance=0.017, metric="accuracy", teacher=0.86, same_as={"ckd_po": "ckd"}
    )
    assert verdict.kind == TIE and verdict.best is None and verdict.top == "ckd"
    assert verdict.tied == ("ckd", "ckd_po", "alp", "pkd")  # nkd is 0.025 below: outside the band
    assert verdict.warning.startswith("tied: ckd (= ckd_po), alp, pkd (accuracy 0.8000–0.8150")
    # the comparison figure's bars say which rows are tied
    assert [tied_name(row, row, verdict) for row in ("ckd", "alp", "nkd")] == ["ckd (tied)", "alp (tied)", "nkd"]


def test_a_row_that_is_the_same_job_is_no_runner_up():
    verdict = comparison_verdict({"alp": 0.81, "alp_no": 0.81, "nkd": 0.70}, 0.5, 0.05, same_as={"alp_no": "alp"})
    assert verdict.kind == WINNER and verdict.best == "alp" and verdict.tied == ()


def test_a_paired_test_separates_rows_within_the_noise():
    # 40 examples where only "alp" is right, none where only "nkd" is: p = 2 * 0.5**40
    alp, nkd = "1" * 840 + "0" * 32, "1" * 800 + "0" * 72
    assert mcnemar_exact(alp, nkd) < 1e-10 and mcnemar_exact(alp, alp) == 1.0
    verdict = comparison_verdict({"alp": 840 / 872, "nkd": 800 / 872}, 0.5, 0.05, correct={"alp": alp, "nkd": nkd})
    assert verdict.kind == WINNER and verdict.best == "alp" and verdict.p_runner_up < 0.05
    # a gap of 6 examples with 30 vs 24 discordant pairs: within the noise and not separated
    close_alp = "1" * 778 + "1" * 30 + "0" * 24 + "0" * 40
    close_nkd = "1" * 778 + "0" * 30 + "1" * 24 + "0" * 40
    tie = comparison_verdict(
        {"alp": 808 / 872, "nkd": 802 / 872}, 0.5, 0.05, correct={"alp": close_alp, "nkd": close_nkd}
    )
    assert tie.kind == TIE and tie.p_runner_up > 0.05 and "McNemar" in tie.warning
    with pytest.raises(ValueError, match="same examples"):
        mcnemar_exact("10", "1")


def test_a_teacher_at_the_floor_is_named_not_the_students():
    verdict = comparison_verdict(
        {"nkd": 0.51, "alp": 0.512}, majority=0.509, tolerance=0.017, metric="accuracy", teacher=0.515
    )
    assert verdict.kind == TEACHER_FLOOR and verdict.best is None
    assert verdict.warning.startswith("the teacher itself ties with the majority class (accuracy 0.5150 against 0.5090")
    assert "students" in verdict.warning and "label prior" not in verdict.warning
    # a teacher clear of the floor leaves the students' floor verdict as it was
    assert comparison_verdict({"nkd": 0.51}, 0.509, 0.017, teacher=0.8).kind == FLOOR


def test_duplicate_rows_point_to_the_first_row_with_the_same_key():
    keys = {"ckd": "k1", "ckd_po": "k1", "alp_no": "k2", "alp_po": "k2", "alp": "k2", "nkd": "k3", "x": None, "y": None}
    assert duplicate_rows(keys) == {"ckd_po": "ckd", "alp_po": "alp_no", "alp": "alp_no"}
    assert duplicate_rows(keys, preferred={"alp"}) == {"ckd_po": "ckd", "alp_no": "alp", "alp_po": "alp"}


def test_a_student_clear_of_the_others_and_the_floor_is_named():
    verdict = comparison_verdict({"nkd": 0.70, "alp": 0.81}, majority=0.5, tolerance=0.05)
    assert (verdict.kind, verdict.best, verdict.top, verdict.warning) == (WINNER, "alp", "alp", None)
    assert verdict.tags() == {"bert_kd.verdict": "winner"}
    # identical rows tie even at tolerance 0 (no dev-set size known)
    assert comparison_verdict({"a": 0.6, "b": 0.6}, None, 0.0).best is None
    assert comparison_verdict({"a": 0.6}, None, 0.0).best == "a"
