from __future__ import annotations

import math

import pytest

from bert_kd.sweep.selection import select_best, summarize
from bert_kd.sweep.spec import build_sweep
from tests.sweep.conftest import RECIPES, fake_run_trial, tiny_reproduce


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
