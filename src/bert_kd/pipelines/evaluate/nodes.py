"""Node of ``evaluate``: GLUE dev metrics of a saved model directory or an MLflow model URI."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from bert_kd.config.errors import (
    DamagedModelError,
    ModelNotFoundError,
    ParameterError,
    TaskMismatchError,
    UserError,
)
from bert_kd.config.schema import Block, Evaluate, Tracking, typed
from bert_kd.core.data.glue import get_task, load_glue_task, resolve_glue_dir, subsample
from bert_kd.core.data.tokenize import tokenize_splits
from bert_kd.core.files import MANIFEST
from bert_kd.core.models import load_bundle
from bert_kd.experiment.evaluation import evaluate_bundle
from bert_kd.experiment.jobs import store_entry_problem
from bert_kd.experiment.parameters import _length_problems
from bert_kd.experiment.tracker import discard_download, kedro_run, model_sources

log = logging.getLogger(__name__)

MLFLOW_SCHEMES = ("runs:/", "models:/", "mlflow-artifacts:/")
#: The model sources the hints show, each loaded by a test from a model the current code logged: a
#: model folder (a store entry), the registered best, a LoggedModel by id, a LoggedModel by its run
#: and name (``alp-sst2-student``; a teacher's is ``teacher-sst2``). ``models:/<name>/<version>`` works too.
MODEL_SOURCE_FORMS = (
    "data/06_models/store/<kind>/<key>",
    "models:/bert_kd-<task>-student@champion",
    "runs:/<run id>/<row>-<task>-student",
    "models:/m-<model id>",
)


def model_source_hint(key: str) -> str:
    """``--params <key>=<…>`` with every form of [`MODEL_SOURCE_FORMS`][]."""
    return f"--params {key}=<{' | '.join(MODEL_SOURCE_FORMS)}>"


#: The parameter every error of this pipeline names.
MODEL_KEY = "evaluate.model"


def resolve_model_source(source: str, key: str = MODEL_KEY) -> Path:
    """A local model directory (a store entry's manifest verified first), or an MLflow URI
    downloaded to a local directory; [`UserError`][] naming the parameter ``key``."""
    if not source:
        raise ModelNotFoundError(
            f"{key} is empty", key, f"give a model folder or an MLflow URI: {model_source_hint(key)}"
        )
    if source.startswith(MLFLOW_SCHEMES):
        path = model_sources().local_directory(source, key)
        shown = source  # the URI, never the temporary folder it was downloaded to
    else:
        path = Path(source).expanduser()
        if not path.exists():
            raise ModelNotFoundError(
                f"{source!r} does not exist",
                key,
                f"give a model folder or an MLflow URI: {model_source_hint(key)}",
            )
        if not path.is_dir():
            raise ModelNotFoundError(
                f"{source!r} is a file, not a model directory",
                key,
                "give the directory that holds config.json and the weights",
            )
        shown = str(path)
    try:
        _check_model_folder(path, key, shown)
    except BaseException:
        if source.startswith(MLFLOW_SCHEMES):
            discard_download(path)  # a refused download leaves nothing in the temporary folder
        raise
    return path


def _check_model_folder(path: Path, key: str, shown: str) -> None:
    """A model folder bert-kd loads: a verified store entry (when it is one) with bert-kd's model files."""
    _check_store_entry(path, key)
    if not (path / "config.json").is_file():
        raise ModelNotFoundError(
            f"{shown!r} is not a model directory (no config.json)",
            key,
            f"give a directory written by save_pretrained or a model bert-kd logged: {model_source_hint(key)}",
        )
    problem = model_files_problem(path)
    if problem:
        raise ModelNotFoundError(
            f"{shown!r} is not a bert-kd model: {problem}",
            key,
            "give a directory written by bert-kd or save_pretrained(safe_serialization=True) "
            f"with its tokenizer, or a model bert-kd logged: {model_source_hint(key)}",
        )


#: Tokenizer files of which a model directory needs one (WordPiece, BPE, SentencePiece, fast).
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model")


def model_files_problem(path: Path) -> str | None:
    """Why ``path`` lacks the files bert-kd loads (None when it has them): a ``config.json`` object
    that names no custom code (``auto_map``), safetensors weights (pickled weights are never
    loaded) and a tokenizer."""
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"config.json cannot be read ({exc})"
    if not isinstance(config, dict):
        return f"config.json is a JSON {type(config).__name__}, not an object"
    if config.get("auto_map"):
        return (
            f"config.json names custom code (auto_map: {sorted(config['auto_map'])}); only the built-in "
            "architectures of transformers are loaded"
        )
    if not any((path / name).is_file() for name in ("model.safetensors", "model.safetensors.index.json")):
        present = sorted(f.name for f in path.iterdir() if f.suffix in (".bin", ".pt", ".pth", ".pkl", ".ckpt"))
        return "no safetensors weights (model.safetensors)" + (
            f"; pickled weights ({', '.join(present)}) are never loaded" if present else ""
        )
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        return f"no tokenizer (none of {', '.join(TOKENIZER_FILES)})"
    return None


def _check_store_entry(path: Path, key: str) -> None:
    """A folder with a ``manifest.json`` (a store entry or an atomically written copy) is used
    only when the manifest proves it whole and, in the store, the result of its own key."""
    if not (path / MANIFEST).exists():
        return
    problem = store_entry_problem(path)
    if problem is not None:
        raise DamagedModelError(
            f"{path} is damaged: {problem}",
            key,
            "evaluate another model, or re-run the pipeline that trains it (a damaged "
            "store entry is then moved aside and retrained)",
        )


def registry_task(source: str) -> tuple[str | None, str]:
    """The task an MLflow ``models:/`` URI is tagged with, and where that tag was read: a
    registered version's (or its registered model's) ``bert_kd.task``, a LoggedModel's ``task``.
    ``(None, "")`` for other URIs and untagged models."""
    if not source.startswith("models:/"):
        return None, ""
    return model_sources().recorded_task(source)


def _task_name(recorded: str) -> str:
    """A recorded task as [`get_task`][] names it (``SST-2`` → ``sst2``); unknown names as given."""
    try:
        return get_task(recorded).name
    except ValueError:
        return recorded


def check_model_task(bundle, task: str, source: str, key: str, allow_mismatch: bool, verb: str) -> str | None:
    """The task ``bundle`` was trained for (its ``bert_kd.json``; a ``models:/`` URI's registry tag
    too) must be ``task``, unless ``allow_mismatch``; the label count must always match.
    [`TaskMismatchError`][] naming both tasks and the overriding parameter.
    Returns the recorded task (None: the model records none)."""
    spec = get_task(task)
    block = key.split(".")[0]
    records = [(bundle.info.get("task"), "its bert_kd.json"), registry_task(source)]
    records = [(_task_name(str(recorded)), where) for recorded, where in records if recorded]
    for recorded, where in records:
        if recorded == spec.name or allow_mismatch:
            continue
        raise TaskMismatchError(
            f"{source} was trained for {recorded} ({where} says so), not for task={spec.name}",
            f"{key}, task",
            f"run with task={recorded}, give a model trained on {spec.name}, or, to {verb} it on {spec.name} "
            f"anyway, --params {block}.allow_task_mismatch=true",
        )
    recorded = records[0][0] if records else None
    if recorded is None:
        log.warning(
            "%s records no task (no bert_kd.json): only its label count is checked against %s", source, spec.name
        )
    elif recorded != spec.name:
        log.warning(
            "%s was trained for %s: %s on %s as %s.allow_task_mismatch asks", source, recorded, verb, spec.name, block
        )
    labels = int(bundle.model.config.num_labels)
    if labels != spec.num_labels:
        raise UserError(
            f"the model has {labels} labels but task {spec.name} needs {spec.num_labels}",
            key,
            f"{verb} it on a task with {labels} labels, or give a model trained on {spec.name}",
        )
    return recorded


def load_model_for_task(
    source: str, task: str, key: str, max_seq_length: int, allow_mismatch: bool, verb: str = "evaluate"
) -> tuple:
    """``source`` resolved (a store entry verified, an MLflow URI downloaded and confined),
    ``max_seq_length`` checked against its positions, loaded, and its task checked
    ([`check_model_task`][]). Returns ``(bundle, recorded task)``. An MLflow URI's download is removed from the
    temporary folder once the model is in memory, or refused (a BERT-base download is 440 MB)."""
    path = resolve_model_source(source, key)
    try:
        bundle = _load_within_length(path, key, max_seq_length)
        return bundle, check_model_task(bundle, task, source, key, allow_mismatch, verb)
    finally:
        if source.startswith(MLFLOW_SCHEMES):
            discard_download(path)


def _load_within_length(path: Path, key: str, max_seq_length: int):
    """The model at ``path`` loaded, once ``max_seq_length`` is checked against its position embeddings."""
    block = key.split(".")[0]
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}
    problems = _length_problems(max_seq_length, config if isinstance(config, dict) else {}, block, key)
    if problems:
        raise ParameterError(problems)
    try:
        return load_bundle(path)
    except (OSError, ValueError, RuntimeError) as exc:
        raise ModelNotFoundError(
            f"{str(path)!r} cannot be loaded as a model ({type(exc).__name__}: {exc})"[:500],
            key,
            "give a directory written by save_pretrained with its tokenizer",
        ) from exc


def evaluate_model_source(
    evaluate: Block[Evaluate],
    task: str,
    glue_dir: str | None,
    max_eval_samples: int | None,
    seed: int,
    tracking: Block[Tracking],
) -> dict:
    """Every dev split of ``task`` through the model's own tokenizer; metrics logged to the active run."""
    evaluate = typed(Evaluate, evaluate, "evaluate")
    source = evaluate.model or ""
    bundle, model_task = load_model_for_task(
        source, task, MODEL_KEY, evaluate.max_seq_length, evaluate.allow_task_mismatch
    )
    spec = get_task(task)
    root, user_named = resolve_glue_dir(glue_dir)
    splits = load_glue_task(spec.name, root, allow_download=not user_named)
    splits.pop("train")
    frames = {name: subsample(frame, max_eval_samples, seed).reset_index(drop=True) for name, frame in splits.items()}
    tokenized = tokenize_splits(frames, bundle.tokenizer, evaluate.max_seq_length)
    evaluation = evaluate_bundle(bundle, tokenized, spec.name, batch_size=evaluate.batch_size)
    evaluation["model"] = source
    evaluation["model_task"] = model_task
    if typed(Tracking, tracking, "tracking").enabled:
        kedro_run().log_evaluation(evaluation)
    log.info("evaluate %s on %s: %s = %.4f", source, spec.name, evaluation["primary_metric"], evaluation["score"])
    return evaluation
