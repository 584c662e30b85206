"""bert_kd.sweeps.budget: expected best dev score after k trials (Dodge et al., 2019)."""

from __future__ import annotations

import pytest

from bert_kd.sweeps.budget import budget_table, expected_max, expected_max_with_replacement, write_budget
from bert_kd.sweeps.spec import build_sweep
from tests.sweeps.conftest import RECIPES, fake_run_trial, tiny_reproduce


def test_the_unbiased_estimator_on_a_hand_computed_example():
    scores = [0.9, 0.6, 0.7]  # sorted: 0.6, 0.7, 0.9
    assert expected_max(scores, 1) == pytest.approx((0.6 + 0.7 + 0.9) / 3)  # k = 1: the mean
    # k = 2: the pairs {0.6, 0.7}, {0.6, 0.9}, {0.7, 0.9} have maxima 0.7, 0.9, 0.9 → 2.5 / 3
    assert expected_max(scores, 2) == pytest.approx(2.5 / 3)
    assert expected_max(scores, 3) == pytest.approx(0.9)  # every trial: the best one
    with pytest.raises(ValueError, match="1..3"):
        expected_max(scores, 4)


def test_the_2019_estimator_draws_with_replacement_and_is_lower():
    scores = [0.6, 0.7, 0.9]
    # k = 2 under the empirical CDF: 0.6·(1/9) + 0.7·(4/9 − 1/9) + 0.9·(1 − 4/9) = 0.8
    assert expected_max_with_replacement(scores, 2) == pytest.approx(0.8)
    assert expected_max_with_replacement(scores, 1) == pytest.approx(expected_max(scores, 1))
    assert expected_max_with_replacement(scores, 2) < expected_max(scores, 2)


def test_ties_and_a_single_trial():
    assert expected_max([0.5, 0.5, 0.5], 2) == pytest.approx(0.5)
    assert expected_max([0.42], 1) == pytest.approx(0.42)


def test_a_sweep_with_a_grid_gets_a_curve_per_method_and_task(tmp_path):
    sweep = build_sweep(tiny_reproduce(), RECIPES)  # 2 learning rates × 2 seeds = 4 trials per (method, task)
    results = {spec.key: fake_run_trial(spec) for spec in sweep.trials()}
    table = budget_table(sweep, results)
    assert set(zip(table["method"], table["task"])) == {(m, t) for m in ("nkd", "alp") for t in ("rte", "sst2")}
    alp_rte = table[(table["method"] == "alp") & (table["task"] == "rte")]
    scores = [results[s.key]["dev_metric"] for s in sweep.trials() if (s.method, s.task) == ("alp", "rte")]
    assert list(alp_rte["k"]) == [1, 2, 3, 4] and set(alp_rte["trials"]) == {4} and set(alp_rte["grid_points"]) == {2}
    assert alp_rte["expected_max"].iloc[-1] == pytest.approx(max(scores))
    assert alp_rte["expected_max"].is_monotonic_increasing
    paths = write_budget(sweep, results, tmp_path, "tiny")
    assert paths["budget_csv"].read_text().startswith("method,label,task,trials,grid_points,k,expected_max")
    assert paths["budget_png"].read_bytes()[:4] == b"\x89PNG"


def test_a_sweep_without_a_grid_writes_nothing(tmp_path):
    reproduce = tiny_reproduce()
    reproduce["tables"]["tiny"]["grid"] = {"training.learning_rate": [5.0e-5]}
    sweep = build_sweep(reproduce, RECIPES)
    results = {spec.key: fake_run_trial(spec) for spec in sweep.trials()}
    assert budget_table(sweep, results).empty and write_budget(sweep, results, tmp_path, "tiny") == {}
    assert list(tmp_path.iterdir()) == []
