"""Node: GLUE metrics, size and throughput of a model, written to reporting and MLflow."""

from __future__ import annotations

from bert_kd.config.schema import Block, Tracking
from bert_kd.core.models import ModelBundle
from bert_kd.experiment.evaluation import evaluate_bundle
from bert_kd.experiment.lineage import Lineage
from bert_kd.experiment.tracker import tracker_for


def evaluate_model(bundle: ModelBundle, tokenized, task: str, tracking: Block[Tracking]) -> dict:
    """Evaluate ``bundle`` on every dev split of ``tokenized``; log into its training run."""
    evaluation = evaluate_bundle(bundle, tokenized, task)
    tracker_for(tracking).log_evaluation(Lineage.of(bundle.info).run_id, evaluation)
    return evaluation
