"""Expected validation performance vs tuning budget (Dodge et al., 2019, "Show Your Work").

A method tuned over more hyperparameter trials looks better; comparing methods at their best
grid point hides that one needed 12 trials and the other 3. Dodge et al. report, per method, the
expected best dev score after ``k`` trials drawn at random from its search space, for every
``k``: curves that cross show which method wins at which budget.

With N finished trials whose dev scores, sorted, are v_(1) ≤ … ≤ v_(N), the expected maximum of
``k`` trials is estimated by

- [`expected_max`][] (default, unbiased): the mean of the maximum over all C(N, k) subsets of
  k distinct trials, Σ_{i=k}^{N} v_(i) · C(i−1, k−1) / C(N, k) — the U-statistic, unbiased for
  E[max of k i.i.d. trials] (Dodge et al., 2021, "Expected Validation Performance and Estimation
  of a Random Variable's Maximum"); defined for k ≤ N;
- [`expected_max_with_replacement`][]: Dodge et al. (2019), Eq. 1 with the empirical CDF,
  Σ_i v_(i) · [(i/N)^k − ((i−1)/N)^k] (k draws with replacement; biased low for small N, and
  defined for any k).

In a sweep every (seed, grid point) of a (method, task) counts as one trial of that method.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from bert_kd.core.files import write_file_atomically  # noqa: E402
from bert_kd.sweeps.spec import SweepSpec  # noqa: E402

COLUMNS = ["method", "label", "task", "trials", "grid_points", "k", "expected_max", "expected_max_with_replacement"]


def _sorted_scores(values: Sequence[float]) -> np.ndarray:
    scores = np.sort(np.asarray([float(v) for v in values if v is not None and math.isfinite(float(v))]))
    if scores.size == 0:
        raise ValueError("no finite scores to estimate an expected maximum from")
    return scores


def expected_max(values: Sequence[float], k: int) -> float:
    """Unbiased estimate of E[max of k trials] from N ≥ k observed scores (the U-statistic)."""
    scores = _sorted_scores(values)
    n = scores.size
    if not 1 <= k <= n:
        raise ValueError(f"k must be in 1..{n} (the number of trials), got {k}")
    weights = np.array([math.comb(i - 1, k - 1) for i in range(1, n + 1)], dtype=float) / math.comb(n, k)
    return float(np.dot(weights, scores))


def expected_max_with_replacement(values: Sequence[float], k: int) -> float:
    """Dodge et al. (2019), Eq. 1: E[max of k draws] under the empirical distribution of the scores."""
    scores = _sorted_scores(values)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    n = scores.size
    cdf = np.arange(1, n + 1) / n
    return float(np.dot(scores, cdf**k - (cdf - 1 / n) ** k))


def budget_table(sweep: SweepSpec, results: Mapping[str, dict]) -> pd.DataFrame:
    """Per (method, task) with finished trials: the expected best dev score after k = 1..N trials
    (long format, `COLUMNS`); empty when no (method, task) has more than one grid point."""
    trials: dict[tuple[str, str], list] = {}
    labels, points = {}, {}
    for spec in sweep.trials():
        result = results.get(spec.key)
        if result is None or result.get("dev_metric") is None:
            continue
        trials.setdefault((spec.method, spec.task), []).append(float(result["dev_metric"]))
        labels[spec.method] = spec.label
        points.setdefault((spec.method, spec.task), set()).add(repr(sorted(spec.params.items())))
    if not any(len(p) > 1 for p in points.values()):
        return pd.DataFrame(columns=COLUMNS)
    rows = []
    for (method, task), scores in trials.items():
        finite = [s for s in scores if math.isfinite(s)]
        for k in range(1, len(finite) + 1):
            rows.append(
                {
                    "method": method,
                    "label": labels[method],
                    "task": task,
                    "trials": len(finite),
                    "grid_points": len(points[(method, task)]),
                    "k": k,
                    "expected_max": expected_max(finite, k),
                    "expected_max_with_replacement": expected_max_with_replacement(finite, k),
                }
            )
    return pd.DataFrame(rows, columns=COLUMNS)


def budget_figure(table: pd.DataFrame, title: str = ""):
    """One panel per task: expected best dev score (×100) against the number of trials, a line per method."""
    tasks = list(dict.fromkeys(table["task"]))
    fig, axes = plt.subplots(1, max(1, len(tasks)), figsize=(5.5 * max(1, len(tasks)), 4), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        for label, part in table[table["task"] == task].groupby("label", sort=False):
            ax.plot(part["k"], 100 * part["expected_max"], marker="o", markersize=3, label=label)
        ax.set_title(task)
        ax.set_xlabel("trials (hyperparameter assignments × seeds)")
        ax.set_ylabel("expected best dev score")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(
        f"{title}: expected validation performance vs budget (Dodge et al., 2019; unbiased estimator)"
        if title
        else "Expected validation performance vs budget"
    )
    fig.tight_layout()
    return fig


def write_budget(sweep: SweepSpec, results: Mapping[str, dict], directory: str | Path, name: str) -> dict[str, Path]:
    """``<name>_budget.csv`` and ``<name>_budget.png`` beside the table when the sweep has a grid
    (``{}`` otherwise: one grid point per method has no budget to show)."""
    table = budget_table(sweep, results)
    if table.empty:
        return {}
    directory = Path(directory)
    paths = {"budget_csv": directory / f"{name}_budget.csv", "budget_png": directory / f"{name}_budget.png"}
    write_file_atomically(paths["budget_csv"], lambda p: table.to_csv(p, index=False))
    figure = budget_figure(table, name)
    try:
        write_file_atomically(paths["budget_png"], lambda p: figure.savefig(p, dpi=120, format="png"))
    finally:
        plt.close(figure)
    return paths
