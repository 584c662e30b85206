"""Node of ``evaluate``: GLUE dev metrics of a saved model directory or an MLflow model URI."""

from __future__ import annotations

import logging
from pathlib import Path

from bert_kd.data.glue import get_task, load_glue_task, resolve_glue_dir, subsample
from bert_kd.data.tokenize import tokenize_splits
from bert_kd.models import load_bundle
from bert_kd.pipelines import common
from bert_kd.tracking_models import bundle_directory

log = logging.getLogger(__name__)

MLFLOW_SCHEMES = ("runs:/", "models:/", "mlflow-artifacts:/")


def resolve_model_source(source: str) -> Path:
    """A local model directory, or an MLflow URI downloaded to a local directory."""
    if not source:
        raise ValueError("evaluate.model is empty: give a model directory or an MLflow URI (runs:/<id>/model)")
    if source.startswith(MLFLOW_SCHEMES):
        import mlflow

        local = bundle_directory(mlflow.artifacts.download_artifacts(artifact_uri=source))  # a LoggedModel's data
        log.info("evaluate.model %s downloaded to %s", source, local)
        return local
    path = Path(source)
    if not path.is_dir():
        raise FileNotFoundError(f"evaluate.model: {source!r} is not a directory nor an MLflow URI ({', '.join(MLFLOW_SCHEMES)})")
    return path


def evaluate_model_source(evaluate: dict, task: str, glue_dir: str | None, max_eval_samples: int | None, seed: int,
                          tracking: dict) -> dict:
    """Every dev split of ``task`` through the model's own tokenizer; metrics logged to the active run."""
    source = str(evaluate.get("model") or "")
    bundle = load_bundle(resolve_model_source(source))
    spec = get_task(task)
    labels = int(bundle.model.config.num_labels)
    if labels != spec.num_labels:
        raise ValueError(f"evaluate.model has {labels} labels but task {spec.name} needs {spec.num_labels}")
    root, user_named = resolve_glue_dir(glue_dir)
    splits = load_glue_task(spec.name, root, allow_download=not user_named)
    splits.pop("train")
    frames = {name: subsample(frame, max_eval_samples, seed).reset_index(drop=True) for name, frame in splits.items()}
    tokenized = tokenize_splits(frames, bundle.tokenizer, int(evaluate.get("max_seq_length", 128)))
    evaluation = common.evaluate_bundle(bundle, tokenized, spec.name, batch_size=int(evaluate.get("batch_size", 64)))
    evaluation["model"] = source
    if common.tracking_enabled(tracking):
        _log_active(evaluation)
    log.info("evaluate %s on %s: %s = %.4f", source, spec.name, evaluation["primary_metric"], evaluation["score"])
    return evaluation


def _log_active(evaluation: dict) -> None:
    import mlflow

    if mlflow.active_run() is None or not common.is_main_process():
        return
    mlflow.log_metrics(common.flat_eval_metrics(evaluation))
    mlflow.log_dict(evaluation, "evaluation.json")
    mlflow.set_tag("evaluated_model", evaluation["model"])
