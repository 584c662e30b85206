"""Glue shared by the Kedro nodes: training settings, model stores, MLflow, evaluation."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Mapping

import numpy as np
import torch

from bert_kd.data.glue import get_task
from bert_kd.metrics import glue_metrics, primary_metric
from bert_kd.models import ModelBundle, count_parameters, load_bundle, save_bundle
from bert_kd.tracking import RunLogger, is_main_process, tracked_run
from bert_kd.training import Collator, TrainingConfig, config_fingerprint, make_loader, predict_logits

log = logging.getLogger(__name__)

#: Where reusable artefacts keyed by their settings live (teachers, caches, filters).
STORE_ROOT = Path("data/06_models/store")


def training_config(section: Mapping, runtime: Mapping | None, seed: int, task: str, checkpoint_dir: Path | None):
    """TrainingConfig from a ``training:`` parameter block plus ``runtime`` settings."""
    values = dict(section or {})
    values.update({k: v for k, v in (runtime or {}).items() if k in TrainingConfig.__dataclass_fields__})
    values.setdefault("seed", seed)
    values.setdefault("select_metric", primary_metric(task))
    if checkpoint_dir is not None:
        values.setdefault("checkpoint_dir", str(checkpoint_dir))
    return TrainingConfig.from_dict(values)


def collator_for(tokenizer, extra: Mapping[str, object] | None = None) -> Collator:
    """Collator padding the main inputs with ``tokenizer``'s pad id (and each prefixed extra)."""
    pad_ids = {"": tokenizer.pad_token_id or 0}
    for prefix, other in (extra or {}).items():
        pad_ids[prefix] = other.pad_token_id or 0
    return Collator(pad_ids)


def evaluation_split(tokenized) -> str:
    """The dev split used for model selection (MNLI: matched)."""
    names = [name for name in tokenized if name != "train"]
    return "validation_matched" if "validation_matched" in names else names[0]


def evaluate_fn(task: str):
    return lambda predictions, labels: glue_metrics(task, predictions, labels)


def data_fingerprint(tokenized) -> str:
    """Identify the exact examples a model was trained on (by split sizes and example ids)."""
    train_ids = tokenized["train"]["idx"]
    return config_fingerprint(len(train_ids), train_ids[:50], train_ids[-50:], sorted(tokenized.keys()))


def store_dir(kind: str, task: str, key: str) -> Path:
    return STORE_ROOT / kind / task / key


def load_stored_bundle(path: Path) -> ModelBundle | None:
    """A finished model from the store, or None (an unfinished directory never counts)."""
    if (path / "bert_kd.json").exists() and (path / "config.json").exists():
        return load_bundle(path)
    return None


def store_bundle(bundle: ModelBundle, path: Path) -> None:
    """Save to the store (rank 0 only: the other processes of a DDP job hold the same weights)."""
    if not is_main_process():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    save_bundle(bundle, path)


def tracking_enabled(tracking: Mapping | None) -> bool:
    return bool((tracking or {}).get("enabled", True))


def reopen_run(run_id: str | None, tracking: Mapping | None):
    """Re-enter a finished training run to add evaluation results to it (or a no-op logger)."""
    import contextlib

    if not run_id or not tracking_enabled(tracking) or not is_main_process():
        return contextlib.nullcontext(RunLogger(False))

    @contextlib.contextmanager
    def reopened():
        import mlflow

        nested = mlflow.active_run() is not None
        with mlflow.start_run(run_id=run_id, nested=nested):
            logger = RunLogger(True)
            logger.run_id = run_id
            yield logger

    return reopened()


@torch.no_grad()
def measure_throughput(model, dataset, collator, batch_size: int = 32, max_batches: int = 10) -> float:
    """Inference examples per second on the current device (a few dev batches)."""
    model.eval()
    loader = make_loader(dataset, batch_size, collator, shuffle=False)
    warm_up = next(iter(loader))
    model(**{k: v for k, v in warm_up.items() if k in ("input_ids", "attention_mask", "token_type_ids")})
    seen, start = 0, time.perf_counter()
    for i, batch in enumerate(loader):
        if i >= max_batches:
            break
        inputs = {k: v for k, v in batch.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
        model(**inputs)
        seen += len(batch["labels"])
    return seen / max(time.perf_counter() - start, 1e-9)


def evaluate_bundle(bundle: ModelBundle, tokenized, task: str, batch_size: int = 64) -> dict:
    """GLUE metrics on every dev split, parameter count, size on disk and throughput."""
    from bert_kd.training import SupervisedObjective

    spec = get_task(task)
    collator = collator_for(bundle.tokenizer)
    objective = SupervisedObjective(bundle.model)
    result: dict = {"task": spec.name, "metrics": {}}
    for split in [name for name in tokenized if name != "train"]:
        loader = make_loader(tokenized[split], batch_size, collator, shuffle=False)
        predictions, labels = predict_logits(objective, loader)
        result["metrics"][split] = glue_metrics(spec.name, predictions, labels)
    main = result["metrics"][evaluation_split(tokenized)]
    result["primary_metric"] = primary_metric(spec.name)
    result["score"] = main[result["primary_metric"]]
    result["parameters"] = count_parameters(bundle.model)
    encoder = getattr(bundle.model, bundle.model.base_model_prefix, bundle.model)
    result["encoder_parameters"] = count_parameters(encoder)
    result["size_on_disk_bytes"] = _saved_size(bundle)
    result["throughput_examples_per_s"] = measure_throughput(
        bundle.model, tokenized[evaluation_split(tokenized)], collator
    )
    result["device"] = "cuda" if torch.cuda.is_available() else "cpu"
    result["info"] = {k: v for k, v in bundle.info.items() if k != "history"}
    return result


def _saved_size(bundle: ModelBundle) -> int:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        bundle.model.save_pretrained(tmp, safe_serialization=True)
        return sum(f.stat().st_size for f in Path(tmp).rglob("*") if f.is_file())


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


def log_evaluation(evaluation: dict, run_id: str | None, tracking: Mapping | None) -> None:
    with reopen_run(run_id, tracking) as logger:
        logger.log_metrics(flat_eval_metrics(evaluation))
        logger.log_dict(evaluation, "evaluation.json")


def log_model_artifact(bundle_dir: Path, logger: RunLogger, tracking: Mapping | None) -> None:
    if (tracking or {}).get("log_models", True):
        logger.log_artifacts(bundle_dir, "model")


def dump(data) -> str:
    return json.dumps(data, indent=2, default=str)





def log_to_active_run(texts: Mapping[str, str], figures: Mapping[str, object]) -> None:
    """Attach texts and figures to the run kedro-mlflow opened for this ``kedro run``, if any."""
    try:
        import mlflow
    except ImportError:  # pragma: no cover
        return
    if mlflow.active_run() is None or not is_main_process():
        return
    for name, text in texts.items():
        mlflow.log_text(text, name)
    for name, figure in figures.items():
        mlflow.log_figure(figure, name)
