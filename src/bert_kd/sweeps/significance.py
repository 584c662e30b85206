"""Paired bootstrap over dev examples of a method's gain over the plain baseline.

Both methods were evaluated on the same dev examples; one resample draws example indices with
replacement and recomputes the task's metric (the paper's, in sweep tables) for every seed of both methods on
those indices (seeds pooled: the gain is mean over the method's seeds minus mean over the
baseline's seeds). The p-value is the share of resamples whose gain is ≤ 0 (one-sided: "is the
method better than the baseline?").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from bert_kd.core.metrics import glue_metrics, primary_metric


@dataclass(frozen=True)
class BootstrapResult:
    gain: float  # observed gain (primary metric, method − baseline, seeds pooled)
    p_value: float
    resamples: int
    low: float  # 2.5% quantile of the resampled gain
    high: float  # 97.5% quantile

    def significant(self, alpha: float = 0.05) -> bool:
        return self.gain > 0 and self.p_value < alpha


def _score(task: str, metric: str, predictions: np.ndarray, labels: np.ndarray) -> float:
    return glue_metrics(task, predictions, labels)[metric]


def paired_bootstrap(
    task: str,
    method_runs: Sequence[tuple[Sequence, Sequence]],
    baseline_runs: Sequence[tuple[Sequence, Sequence]],
    resamples: int = 1000,
    seed: int = 0,
    metric: str | None = None,
) -> BootstrapResult:
    """Gain of ``method_runs`` over ``baseline_runs`` (each a list of ``(predictions, labels)``,
    one per seed, all on the same dev examples in the same order) in ``metric`` (a key of
    [`glue_metrics`][bert_kd.core.metrics.glue_metrics]; default the task's primary metric)."""
    if not method_runs or not baseline_runs:
        raise ValueError("paired_bootstrap needs at least one run of the method and of the baseline")
    runs = [(np.asarray(p), np.asarray(y)) for p, y in list(method_runs) + list(baseline_runs)]
    n = len(runs[0][1])
    for predictions, labels in runs:
        if len(labels) != n or len(predictions) != n:
            raise ValueError(f"paired_bootstrap needs every run on the same {n} dev examples, got {len(labels)}")
        if not np.array_equal(labels, runs[0][1]):
            raise ValueError("paired_bootstrap: runs disagree on the dev labels (not the same examples/order)")
    metric = metric or primary_metric(task)
    k = len(method_runs)

    def gain(index: np.ndarray | None) -> float:
        scores = [
            _score(task, metric, p if index is None else p[index], y if index is None else y[index]) for p, y in runs
        ]
        return float(np.mean(scores[:k]) - np.mean(scores[k:]))

    observed = gain(None)
    rng = np.random.default_rng(seed)
    gains = np.array([gain(rng.integers(0, n, size=n)) for _ in range(resamples)])
    gains = np.where(np.isnan(gains), -np.inf, gains)  # an undefined metric is no evidence of a gain
    p_value = float(np.mean(gains <= 0))
    finite = gains[np.isfinite(gains)]
    low, high = (
        (float(np.quantile(finite, 0.025)), float(np.quantile(finite, 0.975))) if len(finite) else (float("nan"),) * 2
    )
    return BootstrapResult(observed, p_value, resamples, low, high)


# --------------------------------------------------------------------------- seeds from a power calculation


def pooled_bootstrap_se(
    method_correct: np.ndarray, baseline_correct: np.ndarray, resamples: int = 1000, seed: int = 0
) -> float:
    """Standard deviation of the paired-bootstrap gain in accuracy, seeds pooled (as
    [`paired_bootstrap`][bert_kd.sweeps.significance.paired_bootstrap] resamples it): ``*_correct`` are (seeds, examples) 0/1 arrays."""
    difference = np.mean(np.atleast_2d(method_correct), axis=0) - np.mean(np.atleast_2d(baseline_correct), axis=0)
    index = np.random.default_rng(seed).integers(0, len(difference), size=(resamples, len(difference)))
    return float(difference[index].mean(axis=1).std())


@dataclass(frozen=True)
class PowerModel:
    """How the test's noise shrinks with the number of seeds n per method.

    ``se_floor² + se_seed²/n``: the squared bootstrap standard error of the pooled gain (the floor
    is the examples' share that more seeds cannot average away); ``seed_sd``: a row's standard
    deviation across seeds, so the observed gain of two rows scatters by ``seed_sd·√(2/n)``.
    """

    se_floor: float
    se_seed: float
    seed_sd: float

    @classmethod
    def from_se(cls, se_one: float, se_k: float, k: int, seed_sd: float) -> PowerModel:
        """Fit the two components from the bootstrap SE with one seed and with ``k`` seeds."""
        per_seed = max(0.0, (se_one**2 - se_k**2) * k / (k - 1))
        return cls(float(np.sqrt(max(0.0, se_one**2 - per_seed))), float(np.sqrt(per_seed)), float(seed_sd))

    def bootstrap_se(self, n: int) -> float:
        return float(np.sqrt(self.se_floor**2 + self.se_seed**2 / n))

    def power(self, effect: float, n: int, alpha: float = 0.05) -> float:
        """P(the one-sided bootstrap test at ``alpha`` finds a true ``effect`` with n seeds per row)."""
        from scipy.stats import norm

        spread = self.seed_sd * np.sqrt(2.0 / n)
        margin = effect - norm.ppf(1 - alpha) * self.bootstrap_se(n)
        return float(norm.cdf(margin / spread)) if spread > 0 else float(margin > 0)

    def seeds_needed(
        self, effect: float, alpha: float = 0.05, power: float = 0.8, at_least: int = 5, at_most: int = 1000
    ) -> int | None:
        """Fewest seeds (≥ ``at_least``) giving ``power``; None when the floor makes it unreachable."""
        for n in range(at_least, at_most + 1):
            if self.power(effect, n, alpha) >= power:
                return n
        return None

    def detectable_effect(self, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
        """The smallest true gain found with ``power`` at n seeds."""
        from scipy.stats import norm

        return float(norm.ppf(1 - alpha) * self.bootstrap_se(n) + norm.ppf(power) * self.seed_sd * np.sqrt(2.0 / n))


# --------------------------------------------------------------------------- many claims at once


def holm_adjusted(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (Holm 1979), in the input order: sort ascending, multiply the
    i-th smallest (i from 0) by ``m − i``, carry the running maximum, cap at 1. A claim holds at family-wise
    error ``alpha`` over all ``m`` claims when its adjusted p-value is < ``alpha``."""
    m = len(p_values)
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(sorted(range(m), key=lambda i: p_values[i])):
        running = max(running, min(1.0, (m - rank) * float(p_values[index])))
        adjusted[index] = running
    return adjusted
