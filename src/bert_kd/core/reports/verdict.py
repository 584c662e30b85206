"""Whether a comparison table has a best student at all (a degenerate result must not be crowned).

A short run where every student predicts the majority class gives identical rows; naming one of
them "best" misleads. Every comparison table therefore carries the majority-class row (every
dev example given the most frequent dev label, the floor a student must beat), and
:func:`comparison_verdict` says "no best student" when every student ties with that row, or
with each other, within the table's noise.

The noise of a one-seed table on ``n`` dev examples is taken as the largest standard error of a
proportion measured on ``n`` examples, ``0.5 / √n`` (872 SST-2 dev examples: ±1.7 points; 408
MRPC: ±2.5): two scores closer than that cannot be told apart by one run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from bert_kd.core.data.glue import get_task
from bert_kd.core.metrics import glue_metrics

#: The ``method`` of the majority-class row in every comparison table.
MAJORITY_METHOD = "majority class"


def majority_class_metrics(task: str, labels: Sequence) -> dict[str, float] | None:
    """GLUE metrics of predicting the most frequent label for every example (None for
    regression, where a constant prediction has no correlation)."""
    spec = get_task(task)
    y = np.asarray(labels)
    if spec.is_regression or y.size == 0:
        return None
    majority = np.bincount(y.astype(int), minlength=spec.num_labels).argmax()
    return {k: float(v) for k, v in glue_metrics(spec.name, np.full(len(y), majority), y).items()}


def noise_tolerance(n_examples: int | None) -> float:
    """``0.5 / √n``: the largest standard error of a proportion on ``n`` dev examples (0 when unknown)."""
    return 0.5 / math.sqrt(n_examples) if n_examples else 0.0


@dataclass(frozen=True)
class Verdict:
    """The best student of a table, or why there is none (``warning``)."""

    best: str | None
    warning: str | None
    tolerance: float


def comparison_verdict(scores: Mapping[str, float], majority: float | None, tolerance: float,
                       metric: str = "score") -> Verdict:
    """``scores``: each student's primary metric. No best student when every student is within
    ``tolerance`` of the majority class, or the students span at most ``tolerance``."""
    finite = {name: float(s) for name, s in scores.items() if s is not None and math.isfinite(float(s))}
    if not finite:
        return Verdict(None, "no student has a score", tolerance)
    best = max(finite, key=finite.get)
    band = f"±{tolerance:.4f}" if tolerance else "exactly"
    if majority is not None and math.isfinite(majority) and all(abs(s - majority) <= tolerance for s in finite.values()):
        return Verdict(None, f"every student ties with the majority class ({metric} {majority:.4f}, {band}): "
                             "no student learned more than the label prior; no best student", tolerance)
    if len(finite) > 1 and max(finite.values()) - min(finite.values()) <= tolerance:
        low, high = min(finite.values()), max(finite.values())
        return Verdict(None, f"every student ties with the others ({metric} {low:.4f}–{high:.4f}, within {band} of "
                             "one another, the noise of one dev-set run): no best student", tolerance)
    return Verdict(best, None, tolerance)
