from __future__ import annotations

import math

import pytest

from bert_kd.sweeps.selection import select_best, summarize
from bert_kd.sweeps.spec import build_sweep
from tests.sweeps.conftest import RECIPES, fake_run_trial, tiny_reproduce


def _results(sweep):
    return {t.key: fake_run_trial(t) for t in sweep.trials()}


def test_dev_selection_picks_the_best_dev_grid_point():
    sweep = build_sweep(tiny_reproduce(), RECIPES)
    results = _results(sweep)
    chosen = select_best(sweep, results)
    assert len(chosen) == 2 * 2 * 2
    for (method, task, seed), selected in chosen.items():
        candidates = [results[t.key]["dev_metric"] for t in sweep.trials() if t.group == (method, task, seed)]
        assert selected.dev_metric == max(candidates) and selected.candidates == 2


def test_heldout_selection_uses_the_heldout_metric():
    sweep = build_sweep(tiny_reproduce(), RECIPES)
    chosen = select_best(sweep, _results(sweep), selection="heldout")
    # the fake's held-out metric prefers lr 1e-5 although its dev metric prefers 5e-5
    assert {s.spec.params["training.learning_rate"] for s in chosen.values()} == {1e-5}
    assert all(s.criterion == 0.9 for s in chosen.values())


def test_heldout_selection_without_heldout_metric_names_the_trial():
    sweep = build_sweep(tiny_reproduce(methods="nkd", tasks="rte", seeds="1"), RECIPES)
    results = {t.key: {"dev_metric": 0.5} for t in sweep.trials()}
    with pytest.raises(ValueError, match=r"nkd\|rte\|seed=1.* has no heldout_metric"):
        select_best(sweep, results, selection="heldout")


def test_summary_is_mean_std_and_n():
    summary = summarize([0.5, 0.7, 0.6])
    assert summary.n == 3 and math.isclose(summary.mean, 0.6) and math.isclose(summary.std, 0.1)
    assert math.isnan(summarize([0.5]).std) and summarize([]).n == 0


def _mrpc_sweep():
    table = tiny_reproduce(methods="nkd", seeds="1")
    table["tables"]["tiny"]["tasks"] = ["mrpc"]
    return build_sweep(table, RECIPES)


def test_selection_and_report_use_the_papers_metric_not_the_combined_score():
    """MRPC: ALP-KD reports accuracy; the grid point with the better (acc + F1)/2 loses."""
    sweep = _mrpc_sweep()
    low_lr, high_lr = sorted(sweep.trials(), key=lambda t: t.params["training.learning_rate"])
    results = {
        low_lr.key: {"dev_metric": 0.80, "dev_metrics": {"accuracy": 0.70, "f1": 0.90, "combined": 0.80}},
        high_lr.key: {"dev_metric": 0.78, "dev_metrics": {"accuracy": 0.74, "f1": 0.82, "combined": 0.78}},
    }
    (selected,) = select_best(sweep, results).values()
    assert selected.spec == high_lr and selected.dev_metric == 0.74 and selected.combined_metric == 0.78


def test_a_trial_without_the_papers_metric_is_named():
    sweep = _mrpc_sweep()
    results = {t.key: {"dev_metric": 0.8} for t in sweep.trials()}  # only the combined score
    with pytest.raises(ValueError, match="no dev accuracy"):
        select_best(sweep, results)
