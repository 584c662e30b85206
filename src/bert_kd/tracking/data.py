"""What a training run saw: its data source, sample caps and dataset input, logged with its recipe."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from bert_kd.tracking.format import is_layer_map, layer_map_string, recipe_string, size_tags, weight_params

if TYPE_CHECKING:
    from bert_kd.tracking.runs import RunLogger


HUB_GLUE = "https://huggingface.co/datasets/nyu-mll/glue"
DEFAULT_GLUE_DIR = "data/01_raw/glue"


def data_source(glue_dir: str | Path | None) -> str:
    """Where the GLUE files came from: the hub (default folder, filled from ``nyu-mll/glue``) or
    the user's folder."""
    if glue_dir is None or Path(glue_dir) == Path(DEFAULT_GLUE_DIR):
        return f"hub:nyu-mll/glue (cached in {DEFAULT_GLUE_DIR})"
    return str(Path(glue_dir).resolve())


def data_params(glue_dir, max_train_samples, max_eval_samples) -> dict[str, str]:
    """The data params every child run carries, so the compare view shows what each saw."""
    return {
        "data.source": data_source(glue_dir),
        "max_train_samples": "all" if max_train_samples is None else str(max_train_samples),
        "max_eval_samples": "all" if max_eval_samples is None else str(max_eval_samples),
    }


def glue_dataset(task: str, glue_dir=None, digest: str | None = None, split: str = "train", n_rows: int | None = None):
    """An MLflow dataset describing a GLUE split without copying it (fills the Dataset column)."""
    from mlflow.data.dataset_source_registry import resolve_dataset_source
    from mlflow.data.http_dataset_source import HTTPDatasetSource
    from mlflow.data.meta_dataset import MetaDataset

    if glue_dir is None or Path(glue_dir) == Path(DEFAULT_GLUE_DIR):
        source = HTTPDatasetSource(HUB_GLUE)
    else:
        import warnings

        with warnings.catch_warnings():  # "can be interpreted in multiple ways: Local…, Local…"
            warnings.simplefilter("ignore", UserWarning)
            source = resolve_dataset_source(str(Path(glue_dir).resolve()))
    name = f"glue-{task}-{split}" + (f"-{n_rows}" if n_rows is not None else "")
    return MetaDataset(source=source, name=name, digest=(digest or None) and str(digest)[:36])


def log_training_job(
    run: RunLogger,
    *,
    task: str,
    seed: int,
    glue_dir=None,
    max_train_samples: int | None = None,
    max_eval_samples: int | None = None,
    method=None,
    mapping: Sequence[Sequence[int]] | None = None,
    dataset_digest: str | None = None,
    n_train: int | None = None,
    model_parameters: int | None = None,
    name: str | None = None,
) -> None:
    """The columns that make child runs comparable: task, seed, method, ``recipe``, ``layer_map``,
    rounded ``weights.*`` (``stages.<i>.*`` for a staged recipe), data source and sample caps, the train split as an MLflow input, and
    the parameter count as tags. ``method`` is a built distillation method (or None: fine-tuning);
    ``name`` the row it stands for when that differs from the method (``alp_no`` runs ``alp``:
    ``method`` = ``alp_no``, ``algorithm`` = ``alp``; a row named after its method has both equal)."""
    if not run.enabled:
        return

    params: dict[str, object] = {
        "task": task,
        "seed": seed,
        **data_params(glue_dir, max_train_samples, max_eval_samples),
    }
    if method is not None:
        algorithm = getattr(method, "name", type(method).__name__)
        params["method"] = name or algorithm
        params["algorithm"] = algorithm  # every distillation run fills the column (alp_no: alp; alp: alp)
        params["recipe"] = recipe_string(method)
        params["temperature"] = getattr(method, "temperature", None)
        params.update(weight_params(method))
        mapping = mapping if mapping is not None else getattr(method, "mapping", None)
    elif name:
        params["method"] = name  # a fine-tuning job: its kind (teacher, …), so every run fills the column
    if mapping is not None and is_layer_map(mapping):
        params["layer_map"] = layer_map_string(mapping)
    run.log_params(params)
    tags = {"task": task, "seed": str(seed)}
    if "method" in params:
        tags["method"] = params["method"]
    if model_parameters is not None:
        tags.update(size_tags({"parameters": model_parameters}))
    run.set_tags(tags)
    log_input_once(glue_dataset(task, glue_dir, dataset_digest, "train", n_train), context="training")


def log_input_once(dataset, context: str, attempts: int = 3) -> None:
    """``mlflow.log_input`` that survives two processes logging the same data set at once.

    MLflow looks the (experiment, name, digest) row up and inserts it when absent, in two steps;
    two ``kedro run``s starting together both insert and the second hits SQLite's UNIQUE
    constraint. Trying again finds the row the other process wrote and only links this run to it.
    """
    import mlflow
    from mlflow.exceptions import MlflowException

    for attempt in range(attempts):
        try:
            mlflow.log_input(dataset, context=context)
            return
        except MlflowException as error:
            if "UNIQUE constraint" not in str(error) or attempt == attempts - 1:
                raise
