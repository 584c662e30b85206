"""The statistics of a claim "row A beats row B on a task", from 0/1 correctness matrices.

A claim is tested on the seeds both rows have: ``better`` and ``worse`` are (seeds × dev examples)
arrays of 0/1 correctness, seed ``i`` of one row paired with seed ``i`` of the other. The gain is
the mean of ``D = better − worse`` over seeds and examples (accuracy points when ×100).

- [`bootstrap_test`][]: the one-sided paired bootstrap over dev examples (seeds pooled, the trained
  students fixed) with its Monte Carlo error; vectorised, on integer sums, so ties (a resampled gain
  of exactly 0) are counted exactly.
- [`variance_components`][]: the crossed seed × example random-effects model
  ``D_ij = μ + s_i + e_j + r_ij`` fitted by the method of moments (two-way ANOVA without replication);
  its [`gain_variance`][VarianceComponents.gain_variance] carries both sources, and [`analytic_p`][] is the
  test on it. (A naive two-way bootstrap — seeds and examples resampled independently — counts the
  seed × example residual three times, σ²_s/n + σ²_e/m + 3σ²_r/(nm): on these data that bias is larger
  than the seed component itself, so it is not used.)
- [`single_run_noise`][]: the SD of the gain of *one* run of each row on this dev set — how far
  a paper's single-run difference scatters.
- [`power`][] / [`resolvable`][]: power and the smallest gain found with 80% power, all from the
  one variance model of [`VarianceComponents`][].
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

#: Bootstrap resamples of the reading: the Monte Carlo error of a p near 0.005 is then ≈ 2·10⁻⁴.
RESAMPLES = 100_000
#: Resamples drawn per vectorised block (memory: block × examples int64).
BLOCK = 5_000


@dataclass(frozen=True)
class TestResult:
    """A one-sided bootstrap test of ``gain > 0`` (and of ``gain < 0``, from the same resamples)."""

    gain: float  # observed mean of better − worse (accuracy, not points)
    exceed: int  # resamples whose gain is ≤ 0
    reverse_exceed: int  # resamples whose gain is ≥ 0 (the reverse claim's count)
    resamples: int
    low: float  # 2.5% quantile of the resampled gain
    high: float  # 97.5% quantile
    se: float  # standard deviation of the resampled gain

    @property
    def p(self) -> float:
        """``(k + 1) / (B + 1)``: never 0 from B resamples (North, Curtis & Sham 2002)."""
        return (self.exceed + 1) / (self.resamples + 1)

    @property
    def reverse_p(self) -> float:
        """The same for the reverse claim ``gain < 0``."""
        return (self.reverse_exceed + 1) / (self.resamples + 1)

    @property
    def mc_error(self) -> float:
        """Monte Carlo standard error of [`p`][]: √(p(1 − p)/B)."""
        return monte_carlo_error(self.p, self.resamples)

    @property
    def reverse_mc_error(self) -> float:
        return monte_carlo_error(self.reverse_p, self.resamples)


def monte_carlo_error(p: float, resamples: int) -> float:
    """Standard error of a p-value estimated as a share of ``resamples`` independent resamples."""
    return math.sqrt(p * (1.0 - p) / resamples)


def _as_matrix(rows: np.ndarray | Sequence) -> np.ndarray:
    matrix = np.atleast_2d(np.asarray(rows))
    if matrix.ndim != 2:
        raise ValueError(f"correctness must be (seeds × examples), got shape {matrix.shape}")
    return matrix.astype(np.int64)


def bootstrap_test(better, worse, resamples: int = RESAMPLES, seed: int = 0) -> TestResult:
    """One-sided paired bootstrap over dev examples of ``mean(better) > mean(worse)``, seeds pooled (the trained
    students fixed): ``better``/``worse`` are (seeds × examples) 0/1 arrays on the same examples. A resample draws
    the examples with replacement and sums the per-example differences as integers, so a resampled gain of
    exactly 0 is a tie and is counted (≤ 0) without rounding."""
    a, b = _as_matrix(better), _as_matrix(worse)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"both rows need the same dev examples: {a.shape[1]} vs {b.shape[1]}")
    # Σ_j (Σ_i a_ij / n_a − Σ_i b_ij / n_b), kept integer by scaling with n_a · n_b
    per_example = a.sum(axis=0) * b.shape[0] - b.sum(axis=0) * a.shape[0]
    m, scale = len(per_example), a.shape[0] * b.shape[0] * len(per_example)
    rng = np.random.default_rng(seed)
    sums = np.empty(resamples, dtype=np.int64)
    for start in range(0, resamples, BLOCK):
        size = min(BLOCK, resamples - start)
        sums[start : start + size] = per_example[rng.integers(0, m, size=(size, m))].sum(axis=1)
    gains = sums / scale
    return TestResult(
        float(per_example.sum() / scale),
        int(np.count_nonzero(sums <= 0)),
        int(np.count_nonzero(sums >= 0)),
        resamples,
        float(np.quantile(gains, 0.025)),
        float(np.quantile(gains, 0.975)),
        float(gains.std()),
    )


def analytic_p(gain: float, sd: float) -> float:
    """One-sided normal p-value of ``gain > 0`` when the gain scatters with standard deviation ``sd``."""
    return float(norm.sf(gain / sd)) if sd > 0 else float(gain <= 0)


def holm(p_values: Sequence[float], errors: Sequence[float] | None = None) -> list[tuple[float, float]]:
    """Holm's step-down adjusted p-values (Holm 1979) in the input order, each with its Monte Carlo error: the
    i-th smallest p (i from 0) times ``m − i``, the running maximum carried, capped at 1; the error is the same
    multiple of the error of the p that sets the adjusted value (0 where capped)."""
    errors = list(errors) if errors is not None else [0.0] * len(p_values)
    m = len(p_values)
    out = [(0.0, 0.0)] * m
    running = (0.0, 0.0)
    for rank, index in enumerate(sorted(range(m), key=lambda i: p_values[i])):
        value = (m - rank) * float(p_values[index])
        candidate = (1.0, 0.0) if value >= 1.0 else (value, (m - rank) * float(errors[index]))
        if candidate[0] > running[0]:
            running = candidate
        out[index] = running
    return out


@dataclass(frozen=True)
class VarianceComponents:
    """The crossed model ``D_ij = μ + s_i + e_j + r_ij`` of a claim's per-seed, per-example differences:
    variances of the seed effect, the example effect and the seed × example residual (method of moments; a
    negative estimate is reported as is and counts as 0 where a variance is needed)."""

    seeds: int
    examples: int
    seed: float
    example: float
    residual: float

    def gain_variance(self, seeds: int | None = None) -> float:
        """Var of the gain pooled over ``seeds`` seeds (default: the fitted count) on these dev examples, as the
        model gives it: σ²_s/n + σ²_e/m + σ²_r/(nm)."""
        n, m = seeds or self.seeds, self.examples
        return max(self.seed, 0.0) / n + max(self.example, 0.0) / m + max(self.residual, 0.0) / (n * m)


def variance_components(better, worse) -> VarianceComponents:
    """Method-of-moments fit of the crossed seed × example model to ``better − worse`` (two-way ANOVA without
    replication): σ²_r = MS_residual, σ²_s = (MS_seed − MS_residual)/m, σ²_e = (MS_example − MS_residual)/n."""
    d = np.atleast_2d(np.asarray(better, dtype=float)) - np.atleast_2d(np.asarray(worse, dtype=float))
    n, m = d.shape
    if n < 2:
        raise ValueError("variance components need at least 2 seeds both rows have")
    grand, by_seed, by_example = d.mean(), d.mean(axis=1), d.mean(axis=0)
    ms_seed = m * float(np.sum((by_seed - grand) ** 2)) / (n - 1)
    ms_example = n * float(np.sum((by_example - grand) ** 2)) / (m - 1)
    residual = d - by_seed[:, None] - by_example[None, :] + grand
    ms_residual = float(np.sum(residual**2)) / ((n - 1) * (m - 1))
    return VarianceComponents(n, m, (ms_seed - ms_residual) / m, (ms_example - ms_residual) / n, ms_residual)


def single_run_noise(components: VarianceComponents) -> float:
    """SD of the gain of one run of each row on this dev set (training seed and which examples a run gets right):
    √(σ²_s + (σ²_e + σ²_r)/m) — the noise of a paper's single-run difference, in this regime."""
    c = components
    return math.sqrt(max(c.seed, 0.0) + (max(c.example, 0.0) + max(c.residual, 0.0)) / c.examples)


def power(effect: float, sd: float, alpha: float = 0.05) -> float:
    """P(a one-sided test at ``alpha`` finds a true ``effect``) when the gain scatters with standard deviation
    ``sd`` (normal approximation): Φ(effect/sd − z₁₋α)."""
    return float(norm.cdf(effect / sd - norm.ppf(1 - alpha))) if sd > 0 else float(effect > 0)


def resolvable(sd: float, alpha: float = 0.05, target: float = 0.8) -> float:
    """The smallest true gain found with probability ``target`` by a one-sided test at ``alpha``:
    (z₁₋α + z_target)·sd."""
    return float((norm.ppf(1 - alpha) + norm.ppf(target)) * sd)


def t_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float] | None:
    """Two-sided t-interval of the mean of ``values``; None below 2 values."""
    from scipy.stats import t

    if len(values) < 2:
        return None
    mean, half = (
        float(np.mean(values)),
        float(t.ppf(0.5 + level / 2, len(values) - 1) * np.std(values, ddof=1) / math.sqrt(len(values))),
    )
    return mean - half, mean + half
