"""Node of ``evaluate``: GLUE dev metrics of a saved model directory or an MLflow model URI."""

from __future__ import annotations

import logging
from pathlib import Path

from bert_kd.data.glue import get_task, load_glue_task, resolve_glue_dir, subsample
from bert_kd.data.tokenize import tokenize_splits
from bert_kd.errors import DamagedModelError, ModelNotFoundError, UserError
from bert_kd.jobs import MANIFEST, store_entry_problem
from bert_kd.models import load_bundle
from bert_kd.pipelines import common
from bert_kd.schema import Block, Evaluate, Tracking, typed
from bert_kd.tracking_models import bundle_directory

log = logging.getLogger(__name__)

MLFLOW_SCHEMES = ("runs:/", "models:/", "mlflow-artifacts:/")


#: The parameter every error of this pipeline names.
MODEL_KEY = "evaluate.model"


def resolve_model_source(source: str, key: str = MODEL_KEY) -> Path:
    """A local model directory (a store entry's manifest verified first), or an MLflow URI
    downloaded to a local directory; :class:`~bert_kd.errors.UserError` naming the parameter ``key``."""
    if not source:
        raise ModelNotFoundError(f"{key} is empty", key,
                                 f"give a model directory or an MLflow URI: --params {key}=runs:/<run id>/model")
    if source.startswith(MLFLOW_SCHEMES):
        path = _download(source, key)
    else:
        path = Path(source).expanduser()
        if not path.exists():
            raise ModelNotFoundError(f"{source!r} does not exist", key,
                                     f"give a model directory or an MLflow URI ({', '.join(MLFLOW_SCHEMES)})")
        if not path.is_dir():
            raise ModelNotFoundError(f"{source!r} is a file, not a model directory", key,
                                     "give the directory that holds config.json and the weights")
    _check_store_entry(path, key)
    if not (path / "config.json").is_file():
        raise ModelNotFoundError(f"{str(path)!r} is not a model directory (no config.json)", key,
                                 "give a directory written by save_pretrained (a store entry under "
                                 "data/06_models/store/<kind>/<key>) or runs:/<run id>/model")
    return path


def _download(source: str, key: str) -> Path:
    import mlflow

    try:
        local = bundle_directory(mlflow.artifacts.download_artifacts(artifact_uri=source))  # a LoggedModel's data
    except Exception as exc:  # noqa: BLE001 - MlflowException, OSError …: the URI names nothing downloadable
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise ModelNotFoundError(f"{source!r} cannot be downloaded from MLflow ({first_line})", key,
                                 f"check the run id in the MLflow UI (tracking URI {mlflow.get_tracking_uri()}); "
                                 "the run must have logged its model (tracking.log_models: true)") from None
    log.info("%s %s downloaded to %s", key, source, local)
    return local


def _check_store_entry(path: Path, key: str) -> None:
    """A folder with a ``manifest.json`` (a store entry or an atomically written copy) is used
    only when the manifest proves it whole and, in the store, the result of its own key."""
    if not (path / MANIFEST).exists():
        return
    problem = store_entry_problem(path)
    if problem is not None:
        raise DamagedModelError(f"{path} is damaged: {problem}", key,
                                "evaluate another model, or re-run the pipeline that trains it (a damaged "
                                "store entry is then moved aside and retrained)")


def evaluate_model_source(evaluate: Block[Evaluate], task: str, glue_dir: str | None, max_eval_samples: int | None,
                          seed: int, tracking: Block[Tracking]) -> dict:
    """Every dev split of ``task`` through the model's own tokenizer; metrics logged to the active run."""
    evaluate = typed(Evaluate, evaluate, "evaluate")
    source = evaluate.model or ""
    path = resolve_model_source(source)
    try:
        bundle = load_bundle(path)
    except (OSError, ValueError, RuntimeError) as exc:
        raise ModelNotFoundError(f"{str(path)!r} cannot be loaded as a model ({type(exc).__name__}: {exc})"[:500],
                                 MODEL_KEY, "give a directory written by save_pretrained with its tokenizer") from exc
    spec = get_task(task)
    labels = int(bundle.model.config.num_labels)
    if labels != spec.num_labels:
        raise UserError(f"the model has {labels} labels but task {spec.name} needs {spec.num_labels}", MODEL_KEY,
                        f"evaluate it on a task with {labels} labels, or give a model trained on {spec.name}")
    root, user_named = resolve_glue_dir(glue_dir)
    splits = load_glue_task(spec.name, root, allow_download=not user_named)
    splits.pop("train")
    frames = {name: subsample(frame, max_eval_samples, seed).reset_index(drop=True) for name, frame in splits.items()}
    tokenized = tokenize_splits(frames, bundle.tokenizer, evaluate.max_seq_length)
    evaluation = common.evaluate_bundle(bundle, tokenized, spec.name, batch_size=evaluate.batch_size)
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
