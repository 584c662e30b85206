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


def test_power_model_fits_the_floor_and_the_per_seed_share():
    from bert_kd.sweeps.significance import PowerModel

    model = PowerModel.from_se(se_one=0.010, se_k=np.sqrt(0.4e-4 + 0.6e-4 / 3), k=3, seed_sd=0.005)
    assert model.se_floor == pytest.approx(np.sqrt(0.4e-4)) and model.se_seed == pytest.approx(np.sqrt(0.6e-4))
    assert model.bootstrap_se(1) == pytest.approx(0.010)


def test_seeds_needed_grows_as_the_effect_shrinks_and_stops_at_the_floor():
    from bert_kd.sweeps.significance import PowerModel

    model = PowerModel(se_floor=0.002, se_seed=0.012, seed_sd=0.008)
    big, small = model.seeds_needed(0.03), model.seeds_needed(0.01)
    assert big == 5  # at least 5
    assert small is not None and small > big
    assert model.power(0.01, small) >= 0.8 > model.power(0.01, small - 1)
    assert model.detectable_effect(small) <= 0.01 < model.detectable_effect(small - 1)
    floor_bound = PowerModel(se_floor=0.008, se_seed=0.008, seed_sd=0.006)  # 1.645 · 0.008 > 0.01
    assert floor_bound.seeds_needed(0.01) is None


def test_pooled_bootstrap_se_shrinks_with_pooled_seeds():
    from bert_kd.sweeps.significance import pooled_bootstrap_se

    rng = np.random.default_rng(0)
    method = (rng.random((4, 500)) < 0.8).astype(float)
    baseline = (rng.random((4, 500)) < 0.8).astype(float)
    assert pooled_bootstrap_se(method, baseline) < pooled_bootstrap_se(method[:1], baseline[:1])
    assert pooled_bootstrap_se(baseline, baseline) == 0.0


def test_holm_adjusted_p_values_step_down_in_input_order():
    from bert_kd.sweeps.significance import holm_adjusted

    # m = 4: sorted 0.01, 0.02, 0.03, 0.5 → 0.04, 0.06, 0.06 (running max of 0.06), 0.5
    assert holm_adjusted([0.03, 0.5, 0.01, 0.02]) == pytest.approx([0.06, 0.5, 0.04, 0.06])
    assert holm_adjusted([0.3, 0.9]) == pytest.approx([0.6, 0.9])
    assert holm_adjusted([0.6, 0.7]) == [1.0, 1.0]  # capped at 1
    assert holm_adjusted([]) == []
