"""Node: GLUE metrics, size and throughput of a model, written to reporting and MLflow."""

from __future__ import annotations

from bert_kd.config.schema import Block, Tracking
from bert_kd.core.models import ModelBundle
from bert_kd.experiment.evaluation import evaluate_bundle
from bert_kd.tracking import log_evaluation


def evaluate_model(bundle: ModelBundle, tokenized, task: str, tracking: Block[Tracking]) -> dict:
    """Evaluate ``bundle`` on every dev split of ``tokenized``; log into its training run."""
    evaluation = evaluate_bundle(bundle, tokenized, task)
    log_evaluation(evaluation, bundle.info.get("mlflow_run_id"), tracking)
    return evaluation
