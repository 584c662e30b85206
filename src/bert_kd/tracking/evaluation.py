"""An evaluation's results on MLflow: flat ``final/…`` metrics and ``evaluation.json`` on the
model's training run."""

from __future__ import annotations

import numpy as np

from bert_kd.schema import Block, Tracking
from bert_kd.tracking.runs import reopen_run


def flat_eval_metrics(evaluation: dict) -> dict[str, float]:
    """``{"final/validation/accuracy": …, "final/parameters": …}`` for MLflow."""
    flat = {}
    for split, metrics in evaluation["metrics"].items():
        for name, value in metrics.items():
            if value is not None and np.isfinite(value):
                flat[f"final/{split}/{name}"] = value
    for key in ("score", "parameters", "encoder_parameters", "size_on_disk_bytes", "throughput_examples_per_s"):
        flat[f"final/{key}"] = evaluation[key]
    return flat


def log_evaluation(evaluation: dict, run_id: str | None, tracking: Block[Tracking] | None) -> None:
    """``evaluation``'s flat metrics and ``evaluation.json`` on the model's training run ``run_id``."""
    with reopen_run(run_id, tracking) as logger:
        logger.log_metrics(flat_eval_metrics(evaluation))
        logger.log_dict(evaluation, "evaluation.json")
