"""Paired bootstrap over dev examples of a method's gain over the plain baseline.

Both methods were evaluated on the same dev examples; one resample draws example indices with
replacement and recomputes the task's metric (the paper's, in sweep tables) for every seed of both methods on
those indices (seeds pooled: the gain is mean over the method's seeds minus mean over the
baseline's seeds). The p-value is the share of resamples whose gain is ≤ 0 (one-sided: "is the
method better than the baseline?").

Holm's correction and the power model of a claim (how many seeds resolve a gain) live once, in
[`bert_kd.analysis.statistics`][].
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
    [`glue_metrics`][]; default the task's primary metric)."""
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
