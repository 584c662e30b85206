"""MLflow tracking: one run per training job, nested under the ``kedro run`` when kedro-mlflow
opened one, so every method of a comparison pipeline gets its own comparable run.

What a user sees in the MLflow UI is decided here (Kedro-free):

- the experiment: a description and the "machine learning" kind (:func:`describe_experiment`),
  and the URL of its runs table (:func:`runs_table_url`, ``python -m bert_kd.tracking ui``);
- the parent run of a ``kedro run``: named ``<pipeline>:<task> [kedro run]`` (:func:`name_parent_run`), with
  the comparison table as its description and ``compare/<method>/<metric>`` metrics
  (:func:`log_comparison_to_parent`);
- each training job's child run: a short recipe, the layer map as ``1-6→1``, rounded weights, the
  data source and sample caps, the dataset as an MLflow input, model size as tags
  (:func:`log_training_job`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import platform
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence

log = logging.getLogger(__name__)


def flatten(values: Mapping, prefix: str = "") -> dict[str, object]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}``."""
    flat: dict[str, object] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def is_main_process() -> bool:
    """Rank 0 of a torchrun / ``accelerate launch`` job (or a plain single process): the only
    process that talks to MLflow, so N processes make one run and one store."""
    import os

    return int(os.environ.get("RANK", "0") or 0) == 0


def num_processes() -> int:
    """Processes of this job (``WORLD_SIZE`` set by torchrun / ``accelerate launch``; 1 otherwise)."""
    import os

    return int(os.environ.get("WORLD_SIZE", "1") or 1)


def environment_info() -> dict[str, str]:
    """Device, GPU name, library versions and git commit of this run."""
    import torch
    import transformers

    info = {
        "env.device": "cuda" if torch.cuda.is_available() else "cpu",
        "env.gpu_name": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
        "env.torch": torch.__version__,
        "env.transformers": transformers.__version__,
        "env.python": platform.python_version(),
        "env.cpu_threads": str(torch.get_num_threads()),
    }
    provenance = git_provenance()
    info["env.git_commit"] = provenance["commit"]
    info["env.git_dirty"] = provenance["dirty"]
    return info


#: What provenance says when the project folder is not itself a git checkout.
NOT_A_CHECKOUT = "unknown (not a git checkout)"


def project_root(start: str | os.PathLike[str] | None = None) -> Path:
    """The Kedro project folder of this run: the nearest folder from ``start`` (the working
    directory) upwards whose ``pyproject.toml`` has a ``[tool.kedro]`` table; else ``start``."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        manifest = folder / "pyproject.toml"
        try:
            if manifest.is_file() and "[tool.kedro]" in manifest.read_text(encoding="utf-8", errors="replace"):
                return folder
        except OSError:
            continue
    return here


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_provenance(root: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """``{"commit": …, "dirty": "true" | "false" | "unknown"}`` of the project's own checkout.

    Read only when ``root`` (default: :func:`project_root`) is the top level of a git work
    tree: a copy of the project unpacked inside another repository gets
    ``unknown (not a git checkout)``, never the enclosing repository's commit. ``dirty`` means
    tracked files differ from the commit (untracked outputs, e.g. new result JSONs, do not count).
    """
    root = Path(root).resolve() if root is not None else project_root()
    toplevel = _git(root, "rev-parse", "--show-toplevel")
    commit = _git(root, "rev-parse", "HEAD") if toplevel and Path(toplevel).resolve() == root else None
    if not commit:
        return {"commit": NOT_A_CHECKOUT, "dirty": "unknown"}
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": "unknown" if status is None else str(bool(status)).lower()}


def git_commit_label(root: str | os.PathLike[str] | None = None) -> str:
    """The commit as provenance lines print it: ``<sha>``, ``<sha> (dirty)`` or ``unknown (not a git checkout)``."""
    provenance = git_provenance(root)
    return f"{provenance['commit']} (dirty)" if provenance["dirty"] == "true" else provenance["commit"]


#: Seconds the start-of-run check waits for the tracking server (MLflow's own retries take minutes).
TRACKING_CHECK_TIMEOUT_S = 10.0


def tracking_server_problem(uri: str, timeout: float = TRACKING_CHECK_TIMEOUT_S) -> str | None:
    """Why the MLflow server at an ``http(s)://`` tracking ``uri`` does not answer within
    ``timeout`` seconds (name lookup included); None when it answers anything (an HTTP error
    status is an answer) or ``uri`` is not a server (SQLite, files, Databricks …)."""
    import concurrent.futures
    import urllib.error
    import urllib.request

    if not uri.lower().startswith(("http://", "https://")):
        return None

    def ask() -> None:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout):
            pass

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        pool.submit(ask).result(timeout=timeout + 1)
    except urllib.error.HTTPError:
        return None
    except concurrent.futures.TimeoutError:
        return f"no answer within {timeout:g} s"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"{type(reason).__name__}: {reason}" if not isinstance(reason, str) else reason
    finally:
        pool.shutdown(wait=False)
    return None


class RunLogger:
    """Thin wrapper over the active MLflow run; every call is a no-op when tracking is off."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.run_id: str | None = None

    def log_params(self, params: Mapping) -> None:
        """Flattened params; floats rounded (``0.3``, not ``0.30000000000000004``), layer maps as
        ``1-6→1; none→2``."""
        if not self.enabled:
            return
        import mlflow

        items = [(key, format_param(value)[:6000]) for key, value in flatten(params).items()]
        for start in range(0, len(items), 100):  # MLflow's per-request limit
            mlflow.log_params(dict(items[start:start + 100]))

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Numeric metrics; model-size figures (:data:`SIZE_METRICS`) go to tags instead, since a
        one-point chart per run says nothing."""
        if not self.enabled:
            return
        import mlflow

        clean = {k.replace("@", "_"): float(v) for k, v in metrics.items() if _is_number(v)}
        sizes = {k: v for k, v in clean.items() if k.rsplit("/", 1)[-1] in SIZE_METRICS}
        if sizes:
            mlflow.set_tags(size_tags({k.rsplit("/", 1)[-1]: v for k, v in sizes.items()}))
        clean = {k: v for k, v in clean.items() if k not in sizes}
        if clean:
            mlflow.log_metrics(clean, step=step)

    def set_tags(self, tags: Mapping[str, str]) -> None:
        if self.enabled:
            import mlflow

            mlflow.set_tags({k: str(v) for k, v in tags.items()})

    def log_dict(self, data: Mapping, name: str) -> None:
        if self.enabled:
            import mlflow

            mlflow.log_dict(dict(data), name)

    def log_figure(self, figure, name: str) -> None:
        if self.enabled:
            import mlflow

            mlflow.log_figure(figure, name)

    def log_artifacts(self, directory: str | Path, artifact_path: str) -> None:
        if self.enabled:
            import mlflow

            mlflow.log_artifacts(str(directory), artifact_path)


def _is_number(value) -> bool:
    try:
        float(value)
        return True
    except (TypeError, ValueError):
        return False


def active_run():
    """The active MLflow run of this thread, or ``None`` (none open, or MLflow not installed)."""
    try:
        import mlflow
    except ImportError:  # pragma: no cover
        return None
    return mlflow.active_run()


# ---------------------------------------------------------------- runs of killed processes
HOST_TAG, PID_TAG, STARTED_TAG = "bert_kd.host", "bert_kd.pid", "bert_kd.process_started"
ENDED_BY_TAG = "bert_kd.ended_by"


def owner_tags(pid: int | None = None) -> dict[str, str]:
    """Host, pid and start time of the process that owns a run (pid and start time together
    name one process: a pid may be reused)."""
    import psutil

    process = psutil.Process(pid)
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(process.pid), STARTED_TAG: f"{process.create_time():.2f}"}


def _process_alive(pid: str, started: str) -> bool:
    import psutil

    try:
        return f"{psutil.Process(int(pid)).create_time():.2f}" == started
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return False


def end_orphaned_runs(experiment_ids: list[str], client=None) -> list[str]:
    """End as ``KILLED`` the ``RUNNING`` runs of ``experiment_ids`` owned by a process of this host
    that no longer exists (killed with SIGKILL, or a crashed machine's restart); their ids."""
    import mlflow

    client = client or mlflow.MlflowClient()
    host = socket.gethostname().replace("'", "")
    runs = client.search_runs(experiment_ids, f"attributes.status = 'RUNNING' and tags.`{HOST_TAG}` = '{host}'")
    ended = []
    for run in runs:
        pid, started = run.data.tags.get(PID_TAG, ""), run.data.tags.get(STARTED_TAG, "")
        if _process_alive(pid, started):
            continue
        client.set_tag(run.info.run_id, ENDED_BY_TAG, f"bert-kd: its process (pid {pid} on {host}) was gone")
        client.set_terminated(run.info.run_id, "KILLED")
        ended.append(run.info.run_id)
    return ended


@contextlib.contextmanager
def tracked_run(name: str, enabled: bool = True, tags: Mapping[str, str] | None = None) -> Iterator[RunLogger]:
    """Open an MLflow run called ``name`` (nested when a run is already active).

    With ``enabled=False``, or on a process other than rank 0, yields a logger that does nothing.
    """
    if not enabled or not is_main_process():
        yield RunLogger(False)
        return
    import mlflow

    nested = mlflow.active_run() is not None
    with mlflow.start_run(run_name=name, nested=nested) as run:
        logger = RunLogger(True)
        logger.run_id = run.info.run_id
        logger.set_tags({**environment_info(), **owner_tags(), **(tags or {})})
        logger.log_params({"num_processes": num_processes()})
        yield logger


# ---------------------------------------------------------------- values as the UI shows them
#: Metric names (last path part) that describe the model, not its training: logged as tags.
SIZE_METRICS = ("parameters", "encoder_parameters", "size_on_disk_bytes")


def format_number(value: float, digits: int = 6) -> str:
    """``0.30000000000000004`` → ``0.3``; ``5.0`` → ``5``; ``2e-05`` stays short."""
    return f"{float(value):.{digits}g}"


def format_param(value) -> str:
    """A param value as one short string: rounded floats, layer maps via :func:`layer_map_string`,
    other lists as JSON."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float):
        return format_number(value)
    if _is_layer_map(value):
        return layer_map_string(value)
    if isinstance(value, (list, tuple)):
        return json.dumps([float(format_number(v)) if isinstance(v, float) else v for v in value], default=str)
    return str(value)


def _is_layer_map(value) -> bool:
    return (
        isinstance(value, (list, tuple)) and len(value) > 0
        and all(isinstance(entry, (list, tuple)) for entry in value)
        and all(isinstance(k, int) and not isinstance(k, bool) for entry in value for k in entry)
    )


def _ranges(layers: Sequence[int]) -> str:
    """``[1, 2, 3, 5]`` → ``1-3+5``."""
    parts, ordered = [], sorted(layers)
    start = prev = ordered[0]
    for k in ordered[1:] + [None]:
        if k is not None and k == prev + 1:
            prev = k
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if k is not None:
            start = prev = k
    return "+".join(parts)


def layer_map_string(mapping: Sequence[Sequence[int]]) -> str:
    """A student→teacher layer map (``mapping[j-1]`` = teacher layers of student layer ``j``) as
    ``teacher layers→student layer`` entries: ``[[1,2,3,4,5,6], []]`` → ``1-6→1; none→2``."""
    if not _is_layer_map(mapping):
        raise ValueError(f"mapping must be a list of teacher-layer lists (one per student layer), got {mapping!r}")
    return "; ".join(f"{_ranges(entry) if entry else 'none'}→{j}" for j, entry in enumerate(mapping, start=1))


def recipe_string(weights, temperature: float | None = None) -> str:
    """``ce 0.3 + kd 0.5 + layer 0.2, T=5``: the non-zero loss weights of a recipe and, when a term
    beyond the task loss is on, its temperature. ``weights`` may be a method (``.weights``,
    ``.temperature``) or a mapping term → weight."""
    if hasattr(weights, "weights"):
        temperature = getattr(weights, "temperature", temperature) if temperature is None else temperature
        schedule = getattr(weights, "schedule", None)
        if schedule is not None:  # a staged recipe trains with its stages' weights, not ``.weights``
            return " → ".join(_stage_string(stage) for stage in schedule.stages) + _temperature_suffix(
                temperature, [name for stage in schedule.stages for name in _nonzero_terms(stage.weights)])
        weights = weights.weights
    terms = _nonzero_terms(weights)
    if not terms:
        raise ValueError(f"recipe weights {dict(weights)} are all zero")
    return _terms_string(weights) + _temperature_suffix(temperature, terms)


def _nonzero_terms(weights: Mapping[str, float]) -> list[str]:
    return [name for name, w in weights.items() if float(w) != 0.0]


def _terms_string(weights: Mapping[str, float]) -> str:
    """``ce 0.3 + kd 0.5``: the non-zero terms of one set of weights."""
    return " + ".join(f"{name} {format_number(float(weights[name]), 3)}" for name in _nonzero_terms(weights))


def _temperature_suffix(temperature: float | None, terms: Sequence[str]) -> str:
    return f", T={format_number(temperature, 3)}" if temperature is not None and any(t != "ce" for t in terms) else ""


def _stage_string(stage) -> str:
    """``emb 1 + hidden 1 + attn 1 (60% of epochs)``; the last stage runs to the end."""
    text = _terms_string(stage.weights)
    if stage.epochs is not None:
        return f"{text} ({stage.epochs} epoch{'s' if stage.epochs != 1 else ''})"
    return f"{text} ({format_number(100 * stage.fraction, 3)}% of epochs)" if stage.fraction is not None else text


def weight_params(method) -> dict[str, float]:
    """``weights.<term>``, or ``stages.<i>.<term>`` (non-zero) for a staged recipe, whose
    ``.weights`` are not what it trains with."""
    schedule = getattr(method, "schedule", None)
    if schedule is None:
        return {f"weights.{k}": float(v) for k, v in method.weights.items()}
    return {f"stages.{i}.{k}": float(v) for i, stage in enumerate(schedule.stages) for k, v in stage.weights.items() if v}


def size_tags(values: Mapping[str, float]) -> dict[str, str]:
    """``{"parameters": 4386178, "size_on_disk_bytes": 17.6e6}`` → tags ``parameters``,
    ``parameters_M`` and ``size_MB`` (strings, as the runs table shows them)."""
    tags: dict[str, str] = {}
    for key, value in values.items():
        if key == "size_on_disk_bytes":
            tags["size_MB"] = f"{value / 1e6:.1f}"
        else:
            tags[key] = str(int(value))
            tags[f"{key}_M"] = f"{value / 1e6:.2f}"
    return tags


def adaptive_log_every(total_steps: int, cap: int = 10, points: int = 50) -> int:
    """Steps between loss logs: every ``total_steps / points`` steps, at most ``cap``, at least 1,
    so a 60-step run still draws a curve and a 30k-step run does not log 30k points."""
    return max(1, min(cap, int(total_steps) // points))


# ---------------------------------------------------------------- data source and dataset input
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
    run: "RunLogger",
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
    ``method`` = ``alp_no``, ``algorithm`` = ``alp``)."""
    if not run.enabled:
        return
    import mlflow

    params: dict[str, object] = {"task": task, "seed": seed, **data_params(glue_dir, max_train_samples, max_eval_samples)}
    if method is not None:
        algorithm = getattr(method, "name", type(method).__name__)
        params["method"] = name or algorithm
        if params["method"] != algorithm:
            params["algorithm"] = algorithm
        params["recipe"] = recipe_string(method)
        params["temperature"] = getattr(method, "temperature", None)
        params.update(weight_params(method))
        mapping = mapping if mapping is not None else getattr(method, "mapping", None)
    if mapping is not None and _is_layer_map(mapping):
        params["layer_map"] = layer_map_string(mapping)
    run.log_params(params)
    tags = {"task": task, "seed": str(seed)}
    if method is not None:
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


# ---------------------------------------------------------------- experiment and parent run
EXPERIMENT_DESCRIPTION = """\
**bert-kd**: knowledge distillation of BERT models on GLUE (ALP-KD, TED, multi-teacher KD).

- Each `kedro run` is a **parent run** named `<pipeline>:<task> [kedro run]`; its description holds the
  comparison table and its metrics `compare/<method>/<metric>`, `teacher/<metric>`, `best/<metric>`
  (tag `best_method`).
- Each training job is a **child run** (`distill_alp:rte`, `train_teacher:rte`, …) with the columns
  `method`, `recipe`, `layer_map`, `seed`, `max_train_samples`, `data.source` and the final dev
  metric `final/score`. Expand a parent (the `+` in the runs table) to see its children.
"""

EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
MAX_NOTE_CHARS = 8000  # mlflow.utils.validation.MAX_TAG_VAL_LENGTH
NOTE_TAG = "mlflow.note.content"


def ui_base_url() -> str:
    """The MLflow UI address (``MLFLOW_UI_URL``, default ``http://127.0.0.1:5000``)."""
    return os.environ.get("MLFLOW_UI_URL", "http://127.0.0.1:5000").rstrip("/")


def runs_table_url(experiment_id: str, base: str | None = None) -> str:
    """The experiment's runs table in the training view (MLflow 3 opens the GenAI view unless
    ``workflowType=machine_learning`` is in the URL or was chosen once in that browser)."""
    return f"{base or ui_base_url()}/#/experiments/{experiment_id}/runs?workflowType=machine_learning"


def run_url(experiment_id: str, run_id: str, base: str | None = None) -> str:
    return f"{base or ui_base_url()}/#/experiments/{experiment_id}/runs/{run_id}?workflowType=machine_learning"


#: Columns of the saved comparison view, as the MLflow UI names them (``<type>.`<key>```).
COMPARE_VIEW_COLUMNS = (
    "attributes.`Dataset`", "params.`method`", "params.`recipe`", "params.`layer_map`", "params.`task`",
    "params.`seed`", "params.`max_train_samples`", "metrics.`final/score`", "tags.`parameters_M`",
    "tags.`best_method`",
)
#: Experiment tag prefix under which the MLflow UI looks up ``?viewStateShareKey=<key>`` views.
SHARED_VIEW_TAG_PREFIX = "mlflow.sharedViewState."
COMPARE_VIEW_KEY = "bert_kd_compare"


def compare_view_state() -> dict:
    """The runs-table view behind :func:`compare_view_url`: newest first, the columns that tell
    child runs apart (method, recipe, layer map, task, seed, data cap, final dev score)."""
    return {"orderByKey": "attributes.start_time", "orderByAsc": False, "searchFilter": "",
            "selectedColumns": list(COMPARE_VIEW_COLUMNS)}


def compare_view_url(experiment_id: str, base: str | None = None) -> str:
    """The runs table opened on the saved comparison view (MLflow 3 shared-view link)."""
    return (f"{base or ui_base_url()}/#/experiments/{experiment_id}/runs"
            f"?viewStateShareKey={COMPARE_VIEW_KEY}&workflowType=machine_learning")


def describe_experiment(experiment_id: str, client=None) -> None:
    """Set the experiment's description, mark it a machine-learning (not GenAI) experiment
    (``mlflow.experimentKind``, what the UI's own kind selector writes) and store the comparison
    view (:func:`compare_view_state`)."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    client = client or MlflowClient()
    wanted = {NOTE_TAG: EXPERIMENT_DESCRIPTION, EXPERIMENT_KIND_TAG: "custom_model_development",
              SHARED_VIEW_TAG_PREFIX + COMPARE_VIEW_KEY: json.dumps(compare_view_state())}
    present = client.get_experiment(experiment_id).tags
    for key, value in wanted.items():
        if present.get(key) == value:
            continue
        try:
            client.set_experiment_tag(experiment_id, key, value)
        except MlflowException:
            # two `kedro run`s starting together race to insert the same tag (SQLite UNIQUE
            # constraint): the other process has set it, which is all this needs
            if key not in client.get_experiment(experiment_id).tags:
                raise


#: Suffix that tells a ``kedro run``'s parent from its training jobs: ``kedro run --pipelines
#: distill_alp`` has a parent and a child that would both be ``distill_alp:rte``.
PARENT_SUFFIX = " [kedro run]"


def parent_run_name(pipeline: str, task: str | None, sweep: str | None = None) -> str:
    """``distill_baselines:sst2 [kedro run]``, or ``reproduce:cpu_protocol [kedro run]`` for a
    sweep over tasks."""
    name = pipeline or "__default__"
    if sweep:
        name += f":{sweep}"
    if task and not sweep:
        name += f":{task}"
    return name + PARENT_SUFFIX


def name_parent_run(pipeline: str, task: str | None, sweep: str | None = None, run_id: str | None = None) -> str | None:
    """Rename the active (or given) run ``<pipeline>:<task> [kedro run]``; tag pipeline/task/sweep."""
    import mlflow

    run_id = run_id or (mlflow.active_run().info.run_id if mlflow.active_run() else None)
    if run_id is None:
        return None
    name = parent_run_name(pipeline, task, sweep)
    tags = {"mlflow.runName": name, "pipeline": pipeline, "role": "parent"}
    if task:
        tags["task"] = task
    if sweep:
        tags["sweep"] = sweep
    client = mlflow.tracking.MlflowClient()
    for key, value in tags.items():
        client.set_tag(run_id, key, value)
    return name


def metric_key(text: str) -> str:
    """A column or method name as an MLflow metric-key part: ``% of teacher`` → ``pct_of_teacher``,
    ``throughput (ex/s)`` → ``throughput_ex_s``."""
    text = str(text).replace("%", "pct")
    return re.sub(r"[^\w\-.]+", "_", text).strip("_") or "_"


def row_label(row: Mapping) -> str:
    """The name of a comparison row: its method (``okd[a+b]`` when it lists teachers); teacher rows
    of a multi-teacher table are named after the teacher."""
    method = str(row.get("method", "?"))
    teachers = row.get("teachers")
    if method == "teacher":
        return str(teachers) if teachers else "teacher"
    return f"{method}[{teachers}]" if teachers else method


def _numeric_items(row: Mapping) -> dict[str, float]:
    out = {}
    for key, value in row.items():
        if isinstance(value, bool) or not _is_number(value) or isinstance(value, str):
            continue
        if math.isfinite(float(value)):
            out[metric_key(key)] = float(value)
    return out


def log_comparison_to_parent(
    rows,
    primary_metric: str,
    *,
    markdown: str | None = None,
    title: str = "",
    teacher_run_id: str | None = None,
    label: Callable[[Mapping], str] = row_label,
    run_id: str | None = None,
    warning: str | None = None,
) -> dict[str, float]:
    """Put a comparison on the parent run: its table as the run's description, every numeric cell
    as ``compare/<method>/<column>`` (teacher rows: ``teacher/<column>``), the best student as tag
    ``best_method`` and metric ``best/<primary_metric>``, and a link to the teacher's run.

    ``rows`` is a DataFrame or a list of dicts with a ``method`` column (``"teacher"`` marks teacher
    rows, ``"majority class"`` the floor, logged as ``majority/<column>``). With ``warning`` (every
    student ties, :mod:`bert_kd.verdict`) the description says so and no best student is named.
    Logs to ``run_id`` or the active run (kedro-mlflow's); returns the metrics (also when
    there is no run, so callers and tests can inspect them).
    """
    if hasattr(rows, "to_dict"):
        rows = rows.to_dict("records")
    rows = [dict(r) for r in rows]
    if primary_metric and rows and not any(primary_metric in r for r in rows):
        raise ValueError(f"primary_metric {primary_metric!r} is not a column of the comparison ({sorted(rows[0])})")
    teachers = [r for r in rows if r.get("method") == "teacher"]
    floors = [r for r in rows if r.get("method") == FLOOR_METHOD]
    students = [r for r in rows if r.get("method") not in ("teacher", FLOOR_METHOD)]
    metrics: dict[str, float] = {}
    for row in floors:
        metrics.update({f"majority/{k}": v for k, v in _numeric_items(row).items()})
    for row in teachers:
        prefix = "teacher" if len(teachers) == 1 else f"teacher/{metric_key(label(row))}"
        metrics.update({f"{prefix}/{k}": v for k, v in _numeric_items(row).items()})
    for row in students:
        metrics.update({f"compare/{metric_key(label(row))}/{k}": v for k, v in _numeric_items(row).items()})
    scored = [r for r in students if _is_number(r.get(primary_metric)) and math.isfinite(float(r[primary_metric]))]
    best = max(scored, key=lambda r: float(r[primary_metric])) if scored else None
    tags = {"comparison.primary_metric": primary_metric}
    if warning:  # every student ties (bert_kd.verdict): no best student is named
        best = None
        tags["comparison.warning"] = warning
    if best is not None:
        metrics[f"best/{metric_key(primary_metric)}"] = float(best[primary_metric])
        tags["best_method"] = label(best)

    import mlflow
    from mlflow.entities import Metric, RunTag
    from mlflow.tracking import MlflowClient

    run_id = run_id or (mlflow.active_run().info.run_id if mlflow.active_run() else None)
    if run_id is None:
        return metrics
    client = MlflowClient()
    teacher_link = ""
    if teacher_run_id:
        try:
            teacher_run = client.get_run(teacher_run_id)
            url = run_url(teacher_run.info.experiment_id, teacher_run_id)
            tags.update({"teacher_run_id": teacher_run_id, "teacher_run_url": url})
            teacher_link = f"Teacher run: [{teacher_run.info.run_name}]({url})\n\n"
        except Exception as exc:  # a teacher trained against another tracking store
            log.warning("teacher run %s not found in this tracking store (%s)", teacher_run_id, exc)
            tags["teacher_run_id"] = teacher_run_id
    best_line = f"**No best student**: {warning}\n\n" if warning else ""
    if best is not None:
        best_line = f"Best student: **{label(best)}** ({primary_metric} {format_number(best[primary_metric], 4)})\n\n"
    body = markdown if markdown is not None else _markdown(rows)
    note = (f"### {title}\n\n" if title else "") + best_line + teacher_link + body
    if len(note) > MAX_NOTE_CHARS:  # MLflow refuses tag values over 8000 characters
        note = note[: MAX_NOTE_CHARS - 80].rsplit("\n", 1)[0] + "\n\n… (truncated: the full table is in the run's artifacts)\n"
    tags[NOTE_TAG] = note
    import time

    now = int(time.time() * 1000)
    entries = [Metric(k, v, now, 0) for k, v in metrics.items()]
    for start in range(0, max(len(entries), 1), 1000):  # MLflow's per-request limit
        client.log_batch(run_id, metrics=entries[start:start + 1000],
                         tags=[RunTag(k, str(v)) for k, v in tags.items()] if start == 0 else [])
    return metrics


#: ``method`` of the majority-class row of a comparison (``bert_kd.verdict.MAJORITY_METHOD``).
FLOOR_METHOD = "majority class"


def _markdown(rows: Sequence[Mapping]) -> str:
    columns = list(dict.fromkeys(k for r in rows for k in r))
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join("" if r.get(c) is None else str(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- `python -m bert_kd.tracking ui`
def open_ui(tracking_uri: str | None = None, experiment: str = "bert_kd", host: str = "127.0.0.1",
            port: int = 5000, serve: bool = True) -> str:
    """Print the runs-table URL of ``experiment`` (created and described if new) and start
    ``mlflow ui`` on the same store; returns the URL."""
    import mlflow
    from mlflow.tracking import MlflowClient

    tracking_uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or "sqlite:///mlflow.db"
    client = MlflowClient(tracking_uri)
    found = client.get_experiment_by_name(experiment)
    experiment_id = found.experiment_id if found else client.create_experiment(experiment)
    mlflow.set_tracking_uri(tracking_uri)
    describe_experiment(experiment_id, client)
    base = f"http://{host}:{port}"
    url = runs_table_url(experiment_id, base)
    print(f"MLflow runs table of '{experiment}': {url}", flush=True)
    print(f"  with the comparison columns (method, recipe, layer_map, seed, final/score): "
          f"{compare_view_url(experiment_id, base)}", flush=True)
    if serve:
        command = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", tracking_uri,
                   "--host", host, "--port", str(port)]
        os.execvp(command[0], command)
    return url


def main(argv: Sequence[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bert_kd.tracking", description=open_ui.__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    ui = sub.add_parser("ui", help="print the runs-table URL and start `mlflow ui`")
    ui.add_argument("--backend-store-uri", default=None, help="default: $MLFLOW_TRACKING_URI or sqlite:///mlflow.db")
    ui.add_argument("--experiment", default="bert_kd")
    ui.add_argument("--host", default="127.0.0.1")
    ui.add_argument("--port", type=int, default=5000)
    ui.add_argument("--print-only", action="store_true", help="print the URL, do not start the server")
    args = parser.parse_args(argv)
    open_ui(args.backend_store_uri, args.experiment, args.host, args.port, serve=not args.print_only)


if __name__ == "__main__":
    main()
