"""Model selection as the papers did: the best grid point per (method, task, seed), then
mean ± std over seeds.

Every number is the task's metric in the papers ([`bert_kd.core.metrics.paper_metric`][]: MCC for
CoLA, Pearson for STS-B, accuracy elsewhere). ``selection="dev"`` picks on the dev metric and reports that same number (ALP-KD, TED and the
multi-teacher paper all do this, which flatters every method a little); ``"heldout"`` picks on
a slice held out of the training set and reports the dev metric of the chosen point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from bert_kd.core.metrics import paper_metric, primary_metric
from bert_kd.sweeps.spec import SweepSpec, TrialSpec


def trial_metric(result: Mapping, task: str, split: str = "dev") -> float:
    """A finished trial's score in its paper's metric ([`bert_kd.core.metrics.paper_metric`][]) on
    ``split`` (``dev`` or ``heldout``): from ``<split>_metrics`` when the trial stored every metric,
    else the stored ``<split>_metric`` when that already is the paper's metric (the task's primary)."""
    name = paper_metric(task)
    metrics = result.get(f"{split}_metrics") or {}
    if name in metrics:
        return float(metrics[name])
    if name == primary_metric(task) and result.get(f"{split}_metric") is not None:
        return float(result[f"{split}_metric"])
    raise ValueError(
        f"trial result has no {split} {name} (only {sorted(metrics) or split + '_metric'}); "
        "delete its JSON to recompute the trial"
    )


@dataclass(frozen=True)
class Selected:
    """The chosen grid point of one (method, task, seed) group."""

    spec: TrialSpec
    result: dict
    criterion: float  # the number it was chosen on
    candidates: int  # finished grid points it was chosen among

    @property
    def dev_metric(self) -> float:
        """The dev score in the paper's metric for the task (what tables report)."""
        return trial_metric(self.result, self.spec.task)

    @property
    def combined_metric(self) -> float:
        """The dev score in the task's GLUE primary metric ((acc + F1)/2 for MRPC/QQP, …)."""
        return float(self.result["dev_metric"])


@dataclass(frozen=True)
class Summary:
    """mean ± std over seeds of the selected dev metric (std with ddof=1; nan for n = 1)."""

    mean: float
    std: float
    n: int
    values: tuple[float, ...]


def select_best(sweep: SweepSpec, results: Mapping[str, dict], selection: str | None = None) -> dict[tuple, Selected]:
    """``{(method, task, seed): Selected}`` over the finished trials in ``results``.

    Ties keep the first grid point in grid order. A group with no finished trial is absent.
    """
    selection = selection or sweep.selection
    by_group: dict[tuple, list[tuple[TrialSpec, dict]]] = {}
    for spec in sweep.trials():
        if spec.key in results:
            by_group.setdefault(spec.group, []).append((spec, results[spec.key]))
    chosen = {}
    for group, candidates in by_group.items():
        best = None
        for spec, result in candidates:
            if selection == "dev":
                value = trial_metric(result, spec.task)
            elif selection == "heldout":
                if result.get("heldout_metric") is None and not result.get("heldout_metrics"):
                    raise ValueError(f"selection: heldout but trial {spec.key} has no heldout_metric")
                value = trial_metric(result, spec.task, "heldout")
            else:
                raise ValueError(f"selection must be 'dev' or 'heldout', got {selection!r}")
            value = float(value)
            if math.isnan(value):
                value = float("-inf")
            if best is None or value > best[2]:
                best = (spec, result, value)
        chosen[group] = Selected(best[0], best[1], best[2], len(candidates))
    return chosen


def summarize(values: Sequence[float]) -> Summary:
    values = tuple(float(v) for v in values)
    if not values:
        return Summary(float("nan"), float("nan"), 0, values)
    array = np.asarray(values)
    std = float(array.std(ddof=1)) if len(values) > 1 else float("nan")
    return Summary(float(array.mean()), std, len(values), values)


def per_method_task(chosen: Mapping[tuple, Selected]) -> dict[tuple[str, str], dict[int, Selected]]:
    """``{(method, task): {seed: Selected}}``."""
    grouped: dict[tuple[str, str], dict[int, Selected]] = {}
    for (method, task, seed), selected in chosen.items():
        grouped.setdefault((method, task), {})[seed] = selected
    return grouped
