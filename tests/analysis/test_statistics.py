"""The statistics of a claim on synthetic data whose answer is known."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bert_kd.analysis import statistics as st


def test_identical_rows_give_no_gain_and_every_resample_a_tie():
    rows = np.random.default_rng(0).integers(0, 2, size=(3, 200))
    test = st.bootstrap_test(rows, rows, resamples=2000)
    assert test.gain == 0 and test.exceed == test.reverse_exceed == 2000  # every resample ties, counted both ways
    assert test.p == 1.0 and test.mc_error == 0.0


def test_a_row_right_everywhere_the_other_is_wrong_gives_the_smallest_p():
    better, worse = np.ones((2, 50), dtype=int), np.zeros((2, 50), dtype=int)
    test = st.bootstrap_test(better, worse, resamples=1000)
    assert test.gain == 1.0 and test.exceed == 0 and test.p == pytest.approx(1 / 1001)
    assert test.low == test.high == 1.0


def test_ties_are_counted_on_integers():
    """One example better, one worse, the rest equal: a resample ties whenever both are drawn equally often
    (a float mean of the differences could land a hair off 0)."""
    better = np.array([[1, 0] + [1] * 8])
    worse = np.array([[0, 1] + [1] * 8])
    test = st.bootstrap_test(better, worse, resamples=20_000, seed=1)
    # P(count of example 0 ≤ count of example 1) for multinomial(10, 1/10 each): ties included
    rng = np.random.default_rng(5)
    draws = rng.multinomial(10, np.full(10, 0.1), size=400_000)
    expected = np.mean(draws[:, 0] <= draws[:, 1])
    assert test.p == pytest.approx(expected, abs=4 * test.mc_error)


def test_monte_carlo_error_is_the_binomial_standard_error():
    assert st.monte_carlo_error(0.01, 100_000) == pytest.approx(math.sqrt(0.01 * 0.99 / 100_000))
    test = st.TestResult(0.01, 99, 50, 9999, 0.0, 0.02, 0.005)
    assert test.p == pytest.approx(0.01) and test.mc_error == pytest.approx(math.sqrt(0.01 * 0.99 / 9999))
    assert test.reverse_p == pytest.approx(51 / 10_000)


def test_bootstrap_p_agrees_with_the_normal_approximation_on_a_known_gain():
    rng = np.random.default_rng(3)
    m = 4000
    worse = (rng.random((1, m)) < 0.80).astype(int)
    better = worse.copy()
    wrong, right = np.flatnonzero(worse[0] == 0), np.flatnonzero(worse[0] == 1)
    better[0, rng.choice(wrong, size=60, replace=False)] = 1  # 60 examples gained, 40 lost: +0.5 points, z ≈ 2
    better[0, rng.choice(right, size=40, replace=False)] = 0
    test = st.bootstrap_test(better, worse, resamples=100_000)
    d = (better - worse)[0]
    analytic = st.analytic_p(d.mean(), d.std() / math.sqrt(m))
    assert test.p == pytest.approx(analytic, abs=0.01)
    assert test.se == pytest.approx(d.std() / math.sqrt(m), rel=0.02)


def test_holm_multiplies_by_the_rank_carries_the_maximum_and_scales_the_error():
    adjusted = st.holm([0.01, 0.04, 0.03, 0.5], [0.001, 0.002, 0.003, 0.004])
    assert [value for value, _ in adjusted] == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert [error for _, error in adjusted] == pytest.approx([0.004, 0.009, 0.009, 0.004])
    assert st.holm([0.6, 0.7]) == [(1.0, 0.0), (1.0, 0.0)]  # capped


def test_holm_steps_down_in_input_order():
    assert [value for value, _ in st.holm([0.03, 0.5, 0.01, 0.02])] == pytest.approx([0.06, 0.5, 0.04, 0.06])
    assert [value for value, _ in st.holm([0.3, 0.9])] == pytest.approx([0.6, 0.9])
    assert st.holm([]) == []


def test_variance_components_recover_known_components():
    rng = np.random.default_rng(11)
    n, m = 40, 3000
    seed, example, residual = 0.3, 1.0, 0.5
    d = rng.normal(0, seed, (n, 1)) + rng.normal(0, example, (1, m)) + rng.normal(0, residual, (n, m))
    fitted = st.variance_components(d, np.zeros_like(d))
    assert fitted.seed == pytest.approx(seed**2, rel=0.3)
    assert fitted.example == pytest.approx(example**2, rel=0.1)
    assert fitted.residual == pytest.approx(residual**2, rel=0.05)
    assert fitted.gain_variance() == pytest.approx(seed**2 / n + example**2 / m + residual**2 / (n * m), rel=0.3)


def test_the_model_variance_is_the_examples_bootstraps_plus_the_seed_component():
    rng = np.random.default_rng(2)
    easy = rng.random(800)  # each example's chance to be right, the same for every seed of a row
    shift = rng.choice([-0.3, 0.0, 0.3], size=800)  # the better row's own example effect
    worse = (rng.random((6, 800)) < easy).astype(int)
    better = (rng.random((6, 800)) < np.clip(easy + shift, 0, 1)).astype(int)
    components = st.variance_components(better, worse)
    test = st.bootstrap_test(better, worse, resamples=50_000)
    assert components.example > 0  # the examples' own effect is found
    seeds_part = max(components.seed, 0.0) / components.seeds  # what resampling examples alone leaves out
    assert components.gain_variance() == pytest.approx(test.se**2 + seeds_part, rel=0.05)
    assert st.single_run_noise(components) > math.sqrt(components.gain_variance())  # one run each: noisier


def test_variance_components_need_two_seeds():
    with pytest.raises(ValueError, match="at least 2 seeds"):
        st.variance_components(np.ones((1, 5)), np.zeros((1, 5)))


def test_power_and_resolvable_gain_are_one_model():
    sd = 0.004
    effect = st.resolvable(sd, alpha=0.05, target=0.8)
    assert effect == pytest.approx((1.6449 + 0.8416) * sd, rel=1e-3)
    assert st.power(effect, sd, alpha=0.05) == pytest.approx(0.8)
    assert st.power(effect, sd, alpha=0.05 / 16) < 0.8  # after Holm's first step the same gain is found less often
    assert st.power(0.01, 0.0) == 1.0 and st.power(-0.01, 0.0) == 0.0


def test_more_seeds_resolve_a_smaller_gain_down_to_the_examples_floor():
    components = st.VarianceComponents(seeds=3, examples=400, seed=0.012**2, example=400 * 0.002**2, residual=0.0)
    resolvable = [st.resolvable(math.sqrt(components.gain_variance(n))) for n in (1, 3, 10, 100, 10_000)]
    assert resolvable == sorted(resolvable, reverse=True) and resolvable[0] > resolvable[-1]
    floor = st.resolvable(math.sqrt(components.example / components.examples))  # no seed count averages it away
    assert resolvable[-1] > floor and resolvable[-1] == pytest.approx(floor, rel=0.01)


def test_pooling_seeds_shrinks_the_bootstraps_standard_error():
    rng = np.random.default_rng(0)
    method = (rng.random((4, 500)) < 0.8).astype(int)
    baseline = (rng.random((4, 500)) < 0.8).astype(int)
    assert st.bootstrap_test(method, baseline).se < st.bootstrap_test(method[:1], baseline[:1]).se
    assert st.bootstrap_test(baseline, baseline).se == 0.0


def test_t_interval_needs_two_values():
    assert st.t_interval([1.0]) is None
    low, high = st.t_interval([1.0, 0.0, -1.0])
    assert (low, high) == pytest.approx((-2.484, 2.484), abs=1e-3)  # t(2) 4.303 × 1 / √3
