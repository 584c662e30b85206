"""Models as MLflow 3 LoggedModels: what the Models tab, the registry and
``models:/<name>/<version>`` see.

- [`log_model_directory`][]: a trained teacher or
  student (the content-keyed store's directory: weights, config, tokenizer, ``bert_kd.json``, model
  card) as a pyfunc LoggedModel of its job's run, named after what it is
  ([`logged_model_name`][]: ``alp-sst2-student``,
  ``teacher-sst2``) and linked to the run's training dataset. Logged once per store entry and tracking
  store (a reused entry is logged again only when no finished LoggedModel of it exists there), and
  stored once: where the artifacts are a local folder on the store's file system, their files are hard
  links to the entry's ([`share_with_store`][]).
  ``runs:/<run id>/<model name>`` and
  ``models:/<model id>`` both name it; its ``data`` folder is a plain transformers directory.
- [`register_best_student`][]: the best student of a comparison as a registered model version
  (``bert_kd-<task>-student`` by default) with the alias ``champion``, a description holding the
  comparison and lineage tags that are links and relative facts (teacher run, recipe, data
  digest, store key), never a machine path.
- [`bundle_directory`][]: the bert-kd model directory inside a downloaded MLflow model, so
  ``evaluate``/``predict_glue`` read ``models:/…`` like a store path.
- [`log_onnx_model`][]: the exported ONNX student as an ``onnx``-flavoured LoggedModel.

Served through pyfunc, a model takes a DataFrame with ``sentence1`` (and ``sentence2`` for
pair tasks) and returns ``label`` (the task's label name; STS-B: none) and ``score`` (the
winning class's probability; STS-B: the predicted similarity).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Mapping, Sequence

from bert_kd.experiment.lineage import Lineage
from bert_kd.experiment.tracker import CHAMPION_ALIAS

log = logging.getLogger(__name__)

#: Name of the LoggedModels bert-kd logged before they were named after what they are.
MODEL_NAME = "model"
#: Name of the exported ONNX student's LoggedModel.
ONNX_MODEL_NAME = "student_onnx"
#: Manifest the job path writes into each store entry (spec: recipe, data digest, teacher key…).
MANIFEST = "manifest.json"


def logged_model_name(info: Mapping) -> str:
    """What a stored model is, as its LoggedModel's name: ``<row>-<task>-student`` for a student
    (``alp-sst2-student``), ``teacher-<task>`` for a teacher; letters, digits, ``-`` ``_`` ``.``."""
    import re

    task = info.get("task") or "task"
    if info.get("role") == "teacher":
        name = f"teacher-{task}"
    elif info.get("method"):
        name = f"{info['method']}-{task}-student"
    else:
        name = f"student-{task}"
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or MODEL_NAME


#: Distributions the pyfunc loader imports, pinned to what this run used.
LOADER_DISTRIBUTIONS = ("torch", "transformers", "tokenizers", "safetensors", "pandas", "numpy", "pydantic")


def _requirements() -> list[str]:
    """What loading the model needs, pinned (given explicitly: MLflow's inference would load the
    model): ``bert-kd==<version>`` and the versions of the libraries its loader imports."""
    from importlib.metadata import PackageNotFoundError, version

    pins = [f"bert-kd=={version('bert_kd')}"]  # the installed distribution (pyproject's version: bert_kd.__version__)
    for name in LOADER_DISTRIBUTIONS:
        try:
            pins.append(f"{name}=={version(name).split('+')[0]}")
        except PackageNotFoundError:  # pragma: no cover - every one is a dependency of bert-kd
            continue
    return pins


def _signature(regression: bool):
    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec, Schema

    inputs = Schema([ColSpec("string", "sentence1"), ColSpec("string", "sentence2", required=False)])
    outputs = Schema(
        [ColSpec("double", "score")] if regression else [ColSpec("string", "label"), ColSpec("double", "score")]
    )
    return ModelSignature(inputs=inputs, outputs=outputs)


def log_model_directory(
    directory: str | Path,
    *,
    task: str | None = None,
    regression: bool = False,
    tags: Mapping[str, str] | None = None,
    name: str | None = None,
) -> str:
    """Log the bert-kd model ``directory`` as a LoggedModel of the active run (``name``, default
    from the directory's ``bert_kd.json``: [`logged_model_name`][]), link the run's training
    dataset(s) to it, and return its model id."""
    import warnings

    import mlflow

    with warnings.catch_warnings():  # "no input example": one would make MLflow load and run the model here
        warnings.filterwarnings("ignore", message=".*input example was not provided.*")
        info = mlflow.pyfunc.log_model(
            name=name or _default_name(directory),
            loader_module="bert_kd.tracking.logged_models",
            data_path=str(directory),
            pip_requirements=_requirements(),
            signature=_signature(regression),
            tags={k: str(v) for k, v in {**({"task": task} if task else {}), **(tags or {})}.items()},
        )
    link_training_data(mlflow.active_run().info.run_id, info.model_id)
    share_with_store(directory, info.model_id)
    return info.model_id


def _local_artifacts(model_id: str, client=None) -> Path | None:
    """The local folder of a LoggedModel's artifacts (None: a remote artifact store)."""
    from urllib.parse import urlparse

    from mlflow import MlflowClient
    from mlflow.utils.file_utils import local_file_uri_to_path

    location = (client or MlflowClient()).get_logged_model(model_id).artifact_location
    scheme = urlparse(location).scheme
    if scheme not in ("", "file") and not Path(location).is_absolute():
        return None
    path = Path(local_file_uri_to_path(location) if scheme == "file" else location)
    return path if path.is_dir() else None


def share_with_store(directory: str | Path, model_id: str, client=None) -> int:
    """Store a model once: each file MLflow copied from the store entry ``directory`` into the
    LoggedModel's artifacts (``data/<entry>/…``) becomes a hard link to the entry's file (same
    bytes, one inode), where the artifacts are a local folder on the same file system; a copy stays
    a copy otherwise (a remote artifact store, another disk). Neither side depends on the other
    afterwards: deleting the entry leaves the logged model whole; a shared file is read-only, so an edit in place
    through the logged model cannot change the entry. → bytes no longer stored twice."""
    import filecmp
    import os
    import uuid

    artifacts = _local_artifacts(model_id, client)
    source = Path(directory)
    data = artifacts / "data" / source.name if artifacts is not None else None
    if data is None or not data.is_dir():
        return 0
    saved = 0
    for stored in sorted(p for p in source.rglob("*") if p.is_file() and not p.is_symlink()):
        copy = data / stored.relative_to(source)
        if not copy.is_file() or copy.stat().st_ino == stored.stat().st_ino:
            continue
        if not filecmp.cmp(stored, copy, shallow=False):
            continue
        temporary = copy.with_name(f".{copy.name}.link-{uuid.uuid4().hex[:8]}")
        try:
            os.link(stored, temporary)
            os.replace(temporary, copy)
            _read_only(stored)
        except OSError as exc:  # another file system, links not allowed: the copy stays
            temporary.unlink(missing_ok=True)
            log.debug("%s stays a copy of %s (%s)", copy, stored, exc)
            continue
        saved += stored.stat().st_size
    if saved:
        log.info("LoggedModel %s shares %.1f MB with store entry %s (hard links)", model_id, saved / 1e6, source.name)
    return saved


def _read_only(path: Path) -> None:
    """A file shared by a LoggedModel and a store entry loses its write bits: an edit in place through the
    logged model (one inode) is refused with "Permission denied" instead of condemning the store entry,
    which would then be retrained. An editor that writes a new file and renames it leaves the entry intact."""
    import stat

    path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def _bundle_info(directory: str | Path) -> dict:
    path = Path(directory) / "bert_kd.json"
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, ValueError):
        return {}


def _default_name(directory: str | Path) -> str:
    """[`logged_model_name`][] of the directory's ``bert_kd.json``; ``model`` for a folder without one."""
    info = _bundle_info(directory)
    return logged_model_name(info) if info.get("role") else MODEL_NAME


def link_training_data(run_id: str, model_id: str, client=None) -> int:
    """Link the run's ``training`` dataset inputs to the LoggedModel ``model_id`` (``log_input``
    with the model: the model page then lists the data it was trained on); how many."""
    from mlflow import MlflowClient
    from mlflow.entities import DatasetInput, LoggedModelInput

    client = client or MlflowClient()
    inputs = [
        d
        for d in client.get_run(run_id).inputs.dataset_inputs
        if any(t.key == "mlflow.data.context" and t.value == "training" for t in d.tags)
    ]
    if inputs:
        client.log_inputs(
            run_id, datasets=[DatasetInput(d.dataset, d.tags) for d in inputs], models=[LoggedModelInput(model_id)]
        )
    return len(inputs)


def _experiments(client, run_id: str | None, active: bool) -> list[str]:
    """The experiment of run ``run_id`` (where it is in this tracking store) and, with ``active``, the active run's."""
    import mlflow
    from mlflow.exceptions import MlflowException

    experiments: list[str] = []
    if run_id:
        try:
            experiments.append(client.get_run(run_id).info.experiment_id)
        except MlflowException:
            pass
    current = mlflow.active_run() if active else None
    if current is not None and current.info.experiment_id not in experiments:
        experiments.append(current.info.experiment_id)
    return experiments


def _models(client, experiments: list[str]) -> list:
    """Every LoggedModel of ``experiments`` (all pages)."""
    models, token = [], None
    while experiments:
        page = client.search_logged_models(experiment_ids=experiments, page_token=token)
        models.extend(page)
        token = page.token
        if not token:
            break
    return models


def _status(model) -> str:
    return str(getattr(model.status, "value", model.status)).upper()


def find_logged_model(run_id: str | None, client=None, store_key: str | None = None) -> str | None:
    """The id of the newest finished (``READY``) LoggedModel that training run ``run_id`` logged,
    else, with ``store_key``, of any finished LoggedModel of that store entry in the run's or the
    active experiment. None when there is none: never logged, logging killed half-way (a model
    left ``PENDING`` with no files), or the run is not in this tracking store."""
    import mlflow

    client = client or mlflow.MlflowClient()
    models = _models(client, _experiments(client, run_id, active=bool(store_key)))
    ready = [m for m in models if _status(m) == "READY"]
    matches = [m for m in ready if run_id and m.source_run_id == run_id]
    if not matches and store_key:
        matches = [m for m in ready if (m.tags or {}).get("store_key") == store_key]
    return max(matches, key=lambda m: m.creation_timestamp).model_id if matches else None


def drop_unfinished_models(store_key: str, client=None) -> list[str]:
    """Delete the LoggedModels of the store entry ``store_key`` in the active run's experiment that were left
    ``PENDING``: a process killed while it logged the entry's model (it held the key's lock, which the caller
    holds now, so none is still being logged). Without this, the next process logs the model again and the key
    has two. Their ids."""
    import mlflow

    client = client or mlflow.MlflowClient()
    models = _models(client, _experiments(client, None, active=True))
    pending = [m for m in models if (m.tags or {}).get("store_key") == store_key and _status(m) == "PENDING"]
    for model in pending:
        client.delete_logged_model(model.model_id)
        log.warning("deleted model %s of store entry %s: its logging was killed half-way", model.model_id, store_key)
    return [m.model_id for m in pending]


def store_manifest(store_path: str | Path | None) -> dict:
    """The job spec of a store entry (``manifest.json`` → ``spec``), ``{}`` when absent."""
    path = Path(store_path or "") / MANIFEST
    if not store_path or not path.is_file():
        return {}
    return json.loads(path.read_text(encoding="utf-8")).get("spec", {})


def run_link(run_id: str | None, client) -> str | None:
    """The MLflow UI link of a run of this tracking store (None: not in it)."""
    from mlflow.exceptions import MlflowException

    from bert_kd.tracking.ui import run_url

    if not run_id:
        return None
    try:
        return run_url(client.get_run(run_id).info.experiment_id, run_id)
    except MlflowException:
        return None


def store_entry(store_path: str | Path | None) -> str | None:
    """A store entry as a relative fact, ``<kind>/<key>`` (``student/3f2a…``): never the training
    machine's path."""
    if not store_path:
        return None
    parts = Path(store_path).parts
    return "/".join(parts[-2:]) if len(parts) >= 2 else None


def lineage_tags(student_info: Mapping, teacher_info: Mapping | None = None, client=None) -> dict[str, str]:
    """Tags that say where a registered student comes from: its training run and the teacher's
    (ids and UI links), the teacher's store key, the method and its recipe, the data digest (rows'
    fingerprint) and the store entry (``student/<key>``)."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    client = client or MlflowClient()
    student = Lineage.of(student_info)
    spec = store_manifest(student.store_path)
    run_id = student.model_run_id
    teacher_run_id = Lineage.of(teacher_info).model_run_id
    recipe = None
    if run_id:
        try:
            recipe = client.get_run(run_id).data.params.get("recipe")
        except MlflowException:
            pass
    tags = {
        "bert_kd.task": student_info.get("task"),
        "bert_kd.method": student_info.get("method"),
        "bert_kd.recipe": recipe or json.dumps(spec.get("recipe", {}), sort_keys=True, default=str)[:5000],
        "bert_kd.data_digest": spec.get("data"),
        "bert_kd.store_key": student.key,
        "bert_kd.store_entry": store_entry(student.store_path),
        "bert_kd.student_run_id": run_id,
        "bert_kd.student_run": run_link(run_id, client),
        "bert_kd.teacher_run_id": teacher_run_id,
        "bert_kd.teacher_run": run_link(teacher_run_id, client),
        "bert_kd.teacher_key": student.teacher_key or spec.get("teacher"),
    }
    return {k: str(v) for k, v in tags.items() if v not in (None, "")}


#: The tags a registered version keeps: what identifies the model (task, method, its score and the
#: verdict that chose it, its store key, its run and its teacher's). The rest of its lineage (recipe,
#: data digest, store entry, run ids, teacher key, table) goes on the student's run
#: ([`tag_student_run`][]), which the version links.
VERSION_TAGS = (
    "bert_kd.task",
    "bert_kd.method",
    "bert_kd.metric",
    "bert_kd.score",
    "bert_kd.verdict",
    "bert_kd.tied",
    "bert_kd.decide",
    "bert_kd.store_key",
    "bert_kd.student_run",
    "bert_kd.teacher_run",
)


def tag_student_run(run_id: str | None, tags: Mapping[str, str], client) -> None:
    """``tags`` on the student's run ``run_id`` (nothing when it is in another tracking store)."""
    from mlflow.entities import RunTag
    from mlflow.exceptions import MlflowException

    if not run_id or not tags:
        return
    try:
        client.log_batch(run_id, tags=[RunTag(key, str(value)) for key, value in tags.items()])
    except MlflowException as exc:
        log.debug("the student's run %s is not in this tracking store (%s): its lineage tags stay off it", run_id, exc)


def register_best_student(
    student_info: Mapping,
    teacher_info: Mapping | None,
    name: str,
    extra_tags: Mapping[str, str] | None = None,
    client=None,
    *,
    description: str | None = None,
    alias: str | Sequence[str] | None = CHAMPION_ALIAS,
):
    """Register the student's LoggedModel as a new version of ``name`` with the tags that identify it
    ([`VERSION_TAGS`][]; ``bert_kd.task`` on the registered
    model too; the rest of its lineage on the student's run), ``description`` (the comparison) and
    ``alias`` (default ``champion``: ``models:/<name>@champion`` is the version a comparison chose
    last). A student whose model was never logged (``tracking.log_models: false``, another
    tracking store) is logged first, into the active run. Returns the ModelVersion."""
    import mlflow
    from mlflow import MlflowClient

    client = client or MlflowClient()
    student = Lineage.of(student_info)
    store_path = student.store_path
    model_id = student.model_id or find_logged_model(student.training_run_id, client, store_key=student.key)
    if model_id is None:
        if not store_path or not Path(store_path).is_dir():
            raise FileNotFoundError(
                f"the best student ({student_info.get('method')}, store entry "
                f"{store_entry(store_path)}) has no LoggedModel and no store directory to log"
            )
        log.info(
            "the best student had no LoggedModel in this tracking store: logging store entry %s into the current run",
            store_entry(store_path),
        )
        model_id = log_model_directory(
            store_path,
            task=student_info.get("task"),
            name=logged_model_name(student_info),
            tags={"role": "student", "store_key": student.key or ""},
        )
    lineage = {**lineage_tags(student_info, teacher_info, client), **(extra_tags or {})}
    tags = {key: value for key, value in lineage.items() if key in VERSION_TAGS}
    tag_student_run(student.model_run_id, {k: v for k, v in lineage.items() if k not in VERSION_TAGS}, client)
    version = mlflow.register_model(f"models:/{model_id}", name, tags=tags)
    if "bert_kd.task" in tags:
        client.set_registered_model_tag(name, "bert_kd.task", tags["bert_kd.task"])
    if description:
        client.update_model_version(name, version.version, description=description[:5000])
    for each in [alias] if isinstance(alias, str) else alias or ():
        client.set_registered_model_alias(name, each, version.version)
    if store_path and Path(store_path, "config.json").is_file():  # the entry's card names its registration
        from bert_kd.experiment.publishing import write_card_quietly

        write_card_quietly(
            store_path, run_link(student.model_run_id, client), registered=f"models:/{name}/{version.version}"
        )
    return version


class UnsafeModelPathError(ValueError):
    """A downloaded MLflow model names a path outside its own folder (its ``MLmodel``'s ``data:``
    absolute or through ``..``, or a symbolic link inside it pointing out)."""


def _inside(root: Path, path: Path) -> bool:
    return path.resolve().is_relative_to(root.resolve())


def unfinished_model(uri: str, client=None) -> str | None:
    """What is wrong when the MLflow URI ``uri`` (``runs:/<run>/<name>``, ``models:/<model id>``,
    ``models:/<name>/<version>`` or ``@<alias>``) names a LoggedModel that never finished logging
    (``PENDING``/``FAILED``: a run killed while MLflow copied the files leaves it empty); None
    when it is finished or is not a LoggedModel of this store."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    client = client or MlflowClient()
    body = uri.split(":/", 1)[-1].strip("/")
    try:
        if uri.startswith("runs:/") and "/" in body:
            run_id, name = body.split("/", 1)
            experiment = client.get_run(run_id).info.experiment_id
            found = [
                m
                for m in client.search_logged_models(experiment_ids=[experiment])
                if m.source_run_id == run_id and m.name == name
            ]
            model = max(found, key=lambda m: m.creation_timestamp) if found else None
        elif uri.startswith("models:/") and body.startswith("m-") and "/" not in body:
            model = client.get_logged_model(body)
        elif uri.startswith("models:/"):
            name, _, version = body.partition("/")
            name, _, alias = name.partition("@")
            found = client.get_model_version_by_alias(name, alias) if alias else client.get_model_version(name, version)
            model = client.get_logged_model(found.model_id) if getattr(found, "model_id", None) else None
        else:
            model = None
    except MlflowException:
        return None
    status = str(getattr(model.status, "value", model.status)).upper() if model is not None else "READY"
    if status == "READY":
        return None
    return (
        f"its LoggedModel {model.name} ({model.model_id}, run {model.source_run_id}) never finished logging "
        f"(status {status}): the run was stopped while MLflow copied the model's files"
    )


def champion_uri(name: str, client=None) -> str | None:
    """``models:/<name>@champion`` when the registered model ``name`` has that alias in this
    tracking store (None otherwise, or when the store cannot be read)."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    try:
        (client or MlflowClient()).get_model_version_by_alias(name, CHAMPION_ALIAS)
    except MlflowException:
        return None
    return f"models:/{name}@{CHAMPION_ALIAS}"


def bundle_directory(local: str | Path) -> Path:
    """The bert-kd model directory in a downloaded MLflow model (its pyfunc ``data``), or ``local``
    itself when it is not one (a plain directory logged as artifacts by bert-kd < 0.x).

    Every path is confined to the download: the pyfunc flavour's ``data``, ``code``,
    ``python_model`` and ``env`` files must lie inside ``local`` (links resolved), and no symbolic
    link inside ``local`` may point out of it;
    [`UnsafeModelPathError`][] otherwise."""
    local = Path(local)
    for path in sorted(local.rglob("*")):
        if path.is_symlink() and not _inside(local, path):
            raise UnsafeModelPathError(f"{path} is a link to {path.resolve()}, outside the downloaded model {local}")
    mlmodel = local / "MLmodel"
    if not mlmodel.is_file():
        return local
    import yaml

    flavors = (yaml.safe_load(mlmodel.read_text(encoding="utf-8")) or {}).get("flavors", {})
    pyfunc = flavors.get("python_function") or {}
    env = pyfunc.get("env") if isinstance(pyfunc.get("env"), dict) else {"env": pyfunc.get("env")}
    named = {
        "data": pyfunc.get("data"),
        "code": pyfunc.get("code"),
        "python_model": pyfunc.get("python_model"),
        **{f"env.{k}": v for k, v in env.items()},
    }
    for field, value in named.items():
        if isinstance(value, str) and value and (Path(value).is_absolute() or not _inside(local, local / value)):
            raise UnsafeModelPathError(
                f"{mlmodel}'s {field}: {value} names a path outside the downloaded model {local}"
            )
    data = pyfunc.get("data")
    if isinstance(data, str) and data and (local / data).is_dir():
        return local / data
    raise FileNotFoundError(
        f"{local} is an MLflow model without a bert-kd model directory (flavors: {sorted(flavors)})"
    )


def log_onnx_model(onnx_path: str | Path, tags: Mapping[str, str] | None = None) -> str:
    """The exported ONNX student as a LoggedModel (``student_onnx``, onnx flavour) of the active run."""
    import mlflow
    import onnx

    info = mlflow.onnx.log_model(
        onnx.load(str(onnx_path)),
        name=ONNX_MODEL_NAME,
        pip_requirements=[f"onnx=={onnx.__version__}", "onnxruntime"],
        tags={k: str(v) for k, v in (tags or {}).items()},
    )
    return info.model_id


# ---------------------------------------------------------------- pyfunc loader (MLmodel: loader_module)
class BertKdPyfunc:
    """A bert-kd classifier behind MLflow's pyfunc ``predict``."""

    def __init__(self, directory: str | Path):
        from bert_kd.core.models import load_bundle

        self.bundle = load_bundle(Path(directory))
        self.bundle.model.eval()

    def predict(self, model_input, params: Mapping | None = None):
        import pandas as pd
        import torch

        frame = pd.DataFrame(model_input)
        first = frame["sentence1"].astype(str).tolist()
        second = (
            frame["sentence2"].astype(str).tolist()
            if "sentence2" in frame and frame["sentence2"].notna().any()
            else None
        )
        encoded = self.bundle.tokenizer(
            first,
            second,
            truncation=True,
            padding=True,
            max_length=int((params or {}).get("max_seq_length", 128)),
            return_tensors="pt",
        )
        with torch.no_grad():
            logits = self.bundle.model(**encoded).logits
        if logits.shape[-1] == 1:
            return pd.DataFrame({"score": logits[:, 0].double().numpy()})
        probabilities = logits.softmax(-1)
        names = self._label_names(logits.shape[-1])
        best = probabilities.argmax(-1)
        return pd.DataFrame(
            {
                "label": [names[i] for i in best.tolist()],
                "score": probabilities.gather(-1, best[:, None])[:, 0].double().numpy(),
            }
        )

    def _label_names(self, n: int) -> list[str]:
        from bert_kd.core.data.glue import get_task

        recorded = self.bundle.info.get("label_names")  # bert_kd.json's task record
        if isinstance(recorded, list) and len(recorded) == n:
            return [str(name) for name in recorded]
        task = self.bundle.info.get("task")
        try:
            names = get_task(task).label_names if task else []
        except ValueError:
            names = []
        return list(names) if len(names) == n else [str(i) for i in range(n)]


def _load_pyfunc(data_path: str) -> BertKdPyfunc:
    """MLflow's entry point for ``loader_module: bert_kd.tracking.logged_models``."""
    return BertKdPyfunc(data_path)
