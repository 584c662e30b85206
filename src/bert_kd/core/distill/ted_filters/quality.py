"""How task-predictive each TED Stage I filter is (the figure "TED per-layer filter quality").

Stage I trains, at every mapped layer, a filter g^k with its own task head on Σ_k task-loss(head_k)
(Eq. 5); Stage II then aligns the filtered states, not the heads. The natural per-layer quality
is therefore what Stage I optimises: the dev score (the task's primary GLUE metric) of each
filter's task head reading its own model's layer. Teacher filters read teacher layer M(k);
student filters read student layer k of the model Stage II starts from (the fine-tuned Stage I
student for ``student_filters: train``, the teacher-layer copy for ``copy``, where the copied
filters were never trained on the student). The majority class on the same dev split is the
reference a filter has to beat.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from bert_kd.core.data.glue import get_task
from bert_kd.core.metrics import glue_metrics, primary_metric
from bert_kd.core.reports.plots import per_layer_metric


def majority_class_score(task: str, labels: Sequence[int]) -> float | None:
    """The primary metric of always predicting the most frequent dev label (None for regression)."""
    spec = get_task(task)
    if spec.is_regression:
        return None
    y = np.asarray(labels)
    majority = np.bincount(y, minlength=spec.num_labels).argmax()
    return float(glue_metrics(task, np.full(len(y), majority), y)[primary_metric(task)])


def filter_quality_table(
    per_layer: Mapping[str, Mapping], mapping: Sequence[int], task: str, majority: float | None = None
) -> pd.DataFrame:
    """One row per (filter set, k): the layer it reads, its head's dev score and the gain over the
    majority class. ``per_layer``: ``{"teacher": {M(k): score}, "student": {k: score}}`` (keys may be
    strings, as stored in the Stage I report); ``mapping``: M(1..K)."""
    metric = primary_metric(task)
    rows = []
    for role, values in per_layer.items():
        scores = {int(layer): float(v) for layer, v in values.items()}
        for k, t_layer in enumerate(mapping, start=1):
            layer = t_layer if role == "teacher" else k
            if layer not in scores:
                raise ValueError(f"per_layer[{role!r}] has no score for layer {layer} (mapping M = {list(mapping)})")
            rows.append(
                {
                    "filters": role,
                    "k": k,
                    "model_layer": layer,
                    metric: round(scores[layer], 4),
                    "majority_class": None if majority is None else round(majority, 4),
                    "gain_over_majority": None if majority is None else round(scores[layer] - majority, 4),
                }
            )
    return pd.DataFrame(rows)


def filter_quality_figure(table: pd.DataFrame, task: str, title: str):
    """Grouped bars per k (teacher filter at M(k) next to student filter at k), majority class dashed."""
    metric = primary_metric(task)
    values = {
        f"{role} filters": dict(zip(group["model_layer"], group[metric]))
        for role, group in table.groupby("filters", sort=False)
    }
    fig = per_layer_metric(values, metric, title)
    majority = table["majority_class"].dropna()
    if len(majority):
        ax = fig.axes[0]
        level = float(majority.iloc[0])
        low, high = ax.get_ylim()
        ax.axhline(level, color="black", linestyle="--", linewidth=1, label=f"majority class {level:.3f}")
        ax.set_ylim(min(low, level - 0.05 * (high - low)), max(high, level + 0.05 * (high - low)))
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    return fig
