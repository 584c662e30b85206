"""Glue shared by the Kedro nodes: training settings, model stores, MLflow, evaluation."""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import math
import time
from pathlib import Path
from typing import Mapping

import numpy as np
import torch
from kedro.pipeline import node
from pydantic import BaseModel

from bert_kd.data.glue import get_task
from bert_kd.metrics import glue_metrics, primary_metric
from bert_kd import jobs
from bert_kd.models import ModelBundle, count_parameters, load_bundle, resolve_model_name, write_bundle_files
from bert_kd.schema import Block, Runtime, Teacher, Tracking, typed
from bert_kd.distill.gradient_share import log_gradient_shares as measure_and_log_gradient_shares
from bert_kd.tracking import RunLogger, adaptive_log_every, is_main_process, log_training_job, tracked_run
from bert_kd.training import Collator, SupervisedObjective, TrainingConfig, make_loader, predict_logits
from bert_kd.tracking_models import log_model_directory
from bert_kd.verdict import majority_class_metrics

log = logging.getLogger(__name__)

#: Where reusable artefacts keyed by their content live (teachers, students, filters, caches).
STORE_ROOT = Path("data/06_models/store")


def training_config(section: Mapping, runtime: Mapping | None, seed: int, task: str, checkpoint_dir: Path | None,
                    n_train: int | None = None):
    """TrainingConfig from a ``training:`` parameter block plus ``runtime`` settings.

    With a ``checkpoint_dir`` the checkpoint is kept after training: the job path removes it
    once the result is stored. With ``n_train`` (training rows) and no ``log_every_steps`` set by
    the user, losses are logged :func:`~bert_kd.tracking.adaptive_log_every` steps apart, so
    small runs still draw a curve.
    """
    from bert_kd.schema import Runtime, Training, typed

    training, runtime = typed(Training, section, "training"), typed(Runtime, runtime, "runtime")
    config = TrainingConfig.from_schema(training, runtime, seed=seed, select_metric=primary_metric(task),
                                        checkpoint_dir=checkpoint_dir)
    if checkpoint_dir is not None:
        config.keep_checkpoint = True
    if n_train is not None and training.log_every_steps is None and runtime.log_every_steps is None:
        config.log_every_steps = adaptive_log_every(total_steps(config, n_train))
    return config


def total_steps(config: TrainingConfig, n_train: int) -> int:
    """Optimizer steps of a run over ``n_train`` rows (``max_steps``, else epochs × steps per epoch)."""
    per_epoch = math.ceil(n_train / config.batch_size / config.gradient_accumulation_steps)
    return int(config.max_steps or max(1, math.ceil(per_epoch * config.epochs)))


def model_identity(name: str) -> dict:
    """Key material for a model name: local files' sha256, or hub id + revision."""
    return jobs.model_identity(name, resolve_model_name(name))


def job(kind: str, spec: Mapping) -> jobs.Job:
    """A job of ``kind`` stored under :data:`STORE_ROOT`."""
    return jobs.Job(kind, spec, STORE_ROOT)


def recompute(runtime: Block[Runtime] | None) -> bool:
    """``runtime.recompute: true`` retrains every job of the run instead of reusing stored results."""
    return typed(Runtime, runtime, "runtime").recompute


def teacher_block(teacher: Block[Teacher]) -> Teacher:
    """A ``teacher`` block or a ``multi_teachers`` entry as a :class:`~bert_kd.schema.Teacher`: the
    hook's model as is, a dict (a notebook's, a test's, a sweep trial's) validated without its
    ``name`` and ``seed`` (see :func:`teacher_seed`)."""
    if isinstance(teacher, Teacher):
        return teacher
    return typed(Teacher, {k: v for k, v in dict(teacher or {}).items() if k not in ("name", "seed")}, "teacher")


def teacher_seed(teacher: Block[Teacher], run_seed: int) -> int:
    """The seed a teacher trains with: its own ``seed`` (a ``multi_teachers`` entry's, a sweep
    table's ``teacher.seed``) where it has one, else the run's."""
    own = getattr(teacher, "seed", None) if isinstance(teacher, BaseModel) else dict(teacher or {}).get("seed")
    return int(run_seed if own is None else own)


def run_model_job(model_job: jobs.Job, train_fn, tracking: Block[Tracking] | None, *,
                  recompute: bool = False) -> ModelBundle:
    """Reuse or train a model through the job path; the bundle's ``info`` names its store path.

    A freshly trained model is logged once, as an MLflow LoggedModel of its training run, when
    ``tracking.log_models`` (:func:`bert_kd.tracking_models.log_model_directory`; its id in
    ``info["mlflow_model_id"]``).
    """
    outcome = jobs.run_job(
        model_job, train_fn, write_bundle_files, load_bundle, recompute=recompute, writer=is_main_process(),
        provenance_fn=lambda bundle: {"mlflow_run_id": bundle.info.get("mlflow_run_id")},
    )
    bundle = outcome.value
    bundle.info.update(key=model_job.key, store_path=str(outcome.path), reused=outcome.reused)
    if not outcome.reused and typed(Tracking, tracking, "tracking").log_models:
        with reopen_run(bundle.info.get("mlflow_run_id"), tracking) as run:
            if run.enabled:
                regression = int(getattr(bundle.model.config, "num_labels", 2)) == 1
                bundle.info["mlflow_model_id"] = log_model_directory(
                    outcome.path, task=bundle.info.get("task"), regression=regression,
                    tags={"role": bundle.info.get("role", ""), "store_key": model_job.key})
    return bundle


def log_job_columns(run: RunLogger, job: jobs.Job, task: str, seed: int, data_source: Mapping | None, n_train: int, model,
                    method=None, name: str | None = None) -> None:
    """``tracking.log_training_job`` for one job: recipe, layer map, weights, data source, sample
    caps, the train split as the run's dataset input (digest = the job's data fingerprint)."""
    data = data_source or {}
    log_training_job(run, task=task, seed=seed, glue_dir=data.get("glue_dir"), max_train_samples=data.get("max_train_samples"),
                     max_eval_samples=data.get("max_eval_samples"), method=method, dataset_digest=job.spec.get("data"),
                     n_train=n_train, model_parameters=count_parameters(model), name=name)


def log_gradient_shares(run: RunLogger, objective, train_dataset, collator, settings: TrainingConfig,
                        tracking: Block[Tracking] | None, name: str):
    """Each weighted loss term's share of the student's gradient on the first
    ``tracking.gradient_share_batches`` training batches (default 2; 0 = off), logged as
    ``grad_share/<term>`` with a warning for a term below 5% (:mod:`bert_kd.distill.gradient_share`)."""
    batches = typed(Tracking, tracking, "tracking").gradient_share_batches
    return measure_and_log_gradient_shares(run, objective, train_dataset, collator, settings.batch_size, batches, name=name,
                           seed=settings.seed)


def step_logger(run: RunLogger):
    """``run.log_metrics`` that also passes the job path's ``step`` fault point (crash tests)."""

    def log_fn(metrics, step):
        run.log_metrics(metrics, step)
        jobs.fault_point("step")

    return log_fn


def collator_for(tokenizer, extra: Mapping[str, object] | None = None) -> Collator:
    """Collator padding the main inputs by ``tokenizer``'s rules and each prefixed group (``extra``:
    prefix → tokenizer, e.g. a teacher's ``t0_``) by its own tokenizer's (side, pad ids)."""
    return Collator(tokenizers={"": tokenizer, **dict(extra or {})})


def evaluation_split(tokenized) -> str:
    """The dev split used for model selection (MNLI: matched)."""
    names = [name for name in tokenized if name != "train"]
    return "validation_matched" if "validation_matched" in names else names[0]


def evaluate_fn(task: str):
    return lambda predictions, labels: glue_metrics(task, predictions, labels)


def tracking_enabled(tracking: Block[Tracking] | None) -> bool:
    """``tracking.enabled``: whether this run logs to MLflow."""
    return typed(Tracking, tracking, "tracking").enabled


def reopen_run(run_id: str | None, tracking: Block[Tracking] | None):
    """Re-enter a finished training run to add evaluation results to it (or a no-op logger)."""
    if not run_id or not tracking_enabled(tracking) or not is_main_process():
        return contextlib.nullcontext(RunLogger(False))

    @contextlib.contextmanager
    def reopened():
        import mlflow
        from mlflow.exceptions import MlflowException

        try:
            mlflow.MlflowClient().get_run(run_id)
        except MlflowException:
            log.warning("MLflow run %s of this stored model is not in the tracking store %s: not logging to it",
                        run_id, mlflow.get_tracking_uri())
            yield RunLogger(False)
            return
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
    spec = get_task(task)
    collator = collator_for(bundle.tokenizer)
    objective = SupervisedObjective(bundle.model)
    result: dict = {"task": spec.name, "metrics": {}, "majority_class": {}, "examples": {}}
    for split in [name for name in tokenized if name != "train"]:
        loader = make_loader(tokenized[split], batch_size, collator, shuffle=False)
        predictions, labels = predict_logits(objective, loader)
        result["metrics"][split] = glue_metrics(spec.name, predictions, labels)
        result["majority_class"][split] = majority_class_metrics(spec.name, labels)  # the floor of every table
        result["examples"][split] = int(len(labels))
    main = result["metrics"][evaluation_split(tokenized)]
    result["score_examples"] = result["examples"][evaluation_split(tokenized)]
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


def _model_files(folder: Path) -> list[Path]:
    """The files ``save_pretrained`` writes for a model: its config and (sharded) safetensors weights."""
    return [f for f in folder.iterdir() if f.is_file()
            and (f.name == "config.json" or f.name.startswith("model") and ".safetensors" in f.name)]


def _saved_size(bundle: ModelBundle) -> int:
    """Bytes of the model's config + weights: read from its store entry when the job path wrote one
    (the in-memory model is that entry), else measured by saving it to a temporary folder."""
    import tempfile

    stored = bundle.info.get("store_path")
    files = _model_files(Path(stored)) if stored and Path(stored).is_dir() else []
    if any(f.suffix == ".safetensors" for f in files):
        return sum(f.stat().st_size for f in files)
    with tempfile.TemporaryDirectory() as tmp:
        bundle.model.save_pretrained(tmp, safe_serialization=True)
        return sum(f.stat().st_size for f in _model_files(Path(tmp)))


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
    with reopen_run(run_id, tracking) as logger:
        logger.log_metrics(flat_eval_metrics(evaluation))
        logger.log_dict(evaluation, "evaluation.json")


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


# ---------------------------------------------------------------- run-wide settings as one input
#: Parameters every run shares. Nodes read them from the one ``run_settings`` dataset, so the DAG
#: shows one input instead of ``task``, ``seed``, ``tracking``, ``runtime`` fanned out to every
#: node; users still set them by their own names (``--params task=rte``).
RUN_PARAMETERS = ("task", "seed", "tracking", "runtime", "glue_dir", "max_train_samples", "max_eval_samples")
#: What a training run records about its data (``tracking.log_training_job``).
DATA_SOURCE = "data_source"


def build_run_settings(task: str, seed: int, tracking: Block[Tracking] | None, runtime: Block[Runtime] | None,
                       glue_dir, max_train_samples, max_eval_samples) -> dict:
    """The run-wide parameters as one dict, ``tracking`` and ``runtime`` as schema models (the
    hook's, or validated here from a notebook's dicts); ``data_source`` groups where the rows came from."""
    data = {"glue_dir": glue_dir, "max_train_samples": max_train_samples, "max_eval_samples": max_eval_samples}
    return {"task": task, "seed": seed, "tracking": typed(Tracking, tracking, "tracking"),
            "runtime": typed(Runtime, runtime, "runtime"), **data, DATA_SOURCE: data}


def run_settings_node():
    return node(build_run_settings, [f"params:{p}" for p in RUN_PARAMETERS], "run_settings", name="build_run_settings",
                tags=["role.data"])


def reads_run_settings(func, **fixed):
    """``func`` as a node function whose arguments named like a run setting (``task``, ``seed``,
    ``tracking``, ``runtime``, ``glue_dir``, ``max_*_samples``, ``data_source``) come from the
    last input, ``run_settings``; the others are the node's inputs in order; ``fixed`` keyword
    arguments are bound when the pipeline is built (e.g. ``row="alp_no"``).

    ``func`` itself keeps its plain signature (notebooks and tests call it directly).
    """
    names = (*RUN_PARAMETERS, DATA_SOURCE)
    parameters = list(inspect.signature(func).parameters.values())
    from_settings = [p.name for p in parameters if p.name in names]
    own = [p for p in parameters if p.name not in names and p.name not in fixed and p.default is inspect.Parameter.empty
           and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if not from_settings:
        raise ValueError(f"{func.__qualname__} takes none of the run settings {names}")

    def call(*args):
        *values, settings = args
        kwargs = {p.name: v for p, v in zip(own, values)}
        kwargs.update({name: settings[name] for name in from_settings})
        return func(**kwargs, **fixed)

    functools.update_wrapper(call, func)  # name, docstring and source shown by kedro-viz are func's
    call.__signature__ = inspect.Signature(
        [p.replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in own]
        + [inspect.Parameter("run_settings", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    )
    return call


def settings_node(func, inputs, outputs, *, name: str, tags=None, namespace: str | None = None, fixed=None):
    """``node(func, [*inputs, "run_settings"], …)`` with :func:`reads_run_settings` (``fixed``: bound keywords)."""
    inputs = [inputs] if isinstance(inputs, str) else list(inputs)
    return node(reads_run_settings(func, **(fixed or {})), [*inputs, "run_settings"], outputs, name=name, tags=tags,
                namespace=namespace)


def tags_for(paper: str | None = None, method: str | None = None, role: str | None = None) -> list[str]:
    """kedro-viz filter tags: ``paper.alp_kd``, ``method.alp``, ``role.student`` (Kedro allows ``[\\w.-]``)."""
    return [f"{kind}.{value}" for kind, value in (("paper", paper), ("method", method), ("role", role)) if value]
