from __future__ import annotations

import numpy as np
import pytest

from bert_kd.sweeps.significance import paired_bootstrap


def _runs(quality: float, seeds, labels):
    runs = []
    for seed in seeds:
        correct = np.random.default_rng(seed).random(len(labels)) < quality
        runs.append((np.where(correct, labels, 1 - labels), labels))
    return runs


def test_clearly_better_method_is_significant_and_identical_is_not():
    labels = np.random.default_rng(0).integers(0, 2, size=400)
    baseline = _runs(0.6, [1, 2, 3], labels)
    better = paired_bootstrap("sst2", _runs(0.85, [4, 5, 6], labels), baseline, resamples=300, seed=0)
    assert better.gain > 0.2 and better.p_value < 0.01 and better.significant()
    same = paired_bootstrap("sst2", baseline, baseline, resamples=300, seed=0)
    assert same.gain == 0 and same.p_value == 1.0 and not same.significant()


def test_bootstrap_is_reproducible_with_a_fixed_seed():
    labels = np.random.default_rng(0).integers(0, 2, size=100)
    a, b = _runs(0.7, [1], labels), _runs(0.65, [2], labels)
    assert paired_bootstrap("mrpc", a, b, resamples=50, seed=3) == paired_bootstrap("mrpc", a, b, resamples=50, seed=3)


def test_runs_on_different_examples_are_refused():
    labels = np.zeros(10, dtype=int)
    with pytest.raises(ValueError, match="same 10 dev examples"):
        paired_bootstrap("sst2", [(labels, labels)], [(labels[:5], labels[:5])], resamples=10)
