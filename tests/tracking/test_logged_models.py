"""bert_kd.tracking.logged_models: models as MLflow LoggedModels, registered with their lineage."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from bert_kd.tracking import glue_dataset
from bert_kd.tracking import logged_models as tracking_models
from bert_kd.tracking.evaluation import log_evaluation_to_run
from tests.conftest import migrated_mlflow_db


@pytest.fixture()
def store(tmp_path):
    import mlflow

    uri = migrated_mlflow_db(tmp_path / "mlflow.db")
    mlflow.set_tracking_uri(uri)
    experiment = mlflow.create_experiment("bert_kd_models", artifact_location=str(tmp_path / "artifacts"))
    mlflow.set_experiment(experiment_id=experiment)
    return mlflow.MlflowClient(uri)


@pytest.fixture()
def stored_student(tmp_path, tiny_teacher_dir):
    """A store-like entry: the tiny model's files, bert_kd.json and the job manifest."""
    import shutil

    directory = tmp_path / "store" / "student" / "abc123"
    shutil.copytree(tiny_teacher_dir, directory)
    (directory / "bert_kd.json").write_text(json.dumps({"task": "rte", "role": "student", "method": "alp"}))
    (directory / "manifest.json").write_text(
        json.dumps({"spec": {"data": "d1g3st", "teacher": "t-key", "recipe": {"method": "alp"}}})
    )
    return directory


EVALUATION = {
    "task": "rte",
    "metrics": {"validation": {"accuracy": 0.61}},
    "score": 0.61,
    "parameters": 10,
    "encoder_parameters": 8,
    "size_on_disk_bytes": 40,
    "throughput_examples_per_s": 5.0,
    "evaluation_seconds": 1.5,
}


def trained_run(directory):
    import mlflow

    with mlflow.start_run(run_name="distill_alp:rte") as run:
        mlflow.log_param("recipe", "ce 0.3 + kd 0.5 + layer 0.2, T=5")
        mlflow.log_input(glue_dataset("rte", directory.parent, "d1g3st", "train", 48), context="training")
        model_id = tracking_models.log_model_directory(directory, task="rte")
    log_evaluation_to_run(EVALUATION, run.info.run_id)  # the evaluation, later (tracking.log_evaluation)
    return run.info.run_id, model_id


def test_a_logged_model_is_named_and_linked_to_its_run_dataset_and_metrics(store, stored_student):
    run_id, model_id = trained_run(stored_student)
    model = store.get_logged_model(model_id)
    assert model.name == "alp-rte-student" and model.source_run_id == run_id and model.tags["task"] == "rte"
    metrics = {m.key: m for m in model.metrics}
    assert metrics["final/score"].value == 0.61 and metrics["time/evaluation_seconds"].value == 1.5
    assert metrics["final/score"].dataset_name == "glue-rte-validation"  # the Models tab's Dataset column
    assert [i.model_id for i in store.get_run(run_id).inputs.model_inputs] == [model_id]  # the train data → the model
    assert tracking_models.find_logged_model(run_id) == model_id
    assert tracking_models.find_logged_model("0" * 32) is None


def test_an_evaluation_does_not_reopen_the_finished_run(store, stored_student):
    import mlflow

    with mlflow.start_run(run_name="distill_alp:rte") as run:
        pass
    ended = store.get_run(run.info.run_id).info
    log_evaluation_to_run(EVALUATION, run.info.run_id)
    after = store.get_run(run.info.run_id)
    assert (after.info.status, after.info.end_time) == (ended.status, ended.end_time)
    assert after.data.metrics["final/score"] == 0.61 and mlflow.active_run() is None


@pytest.mark.parametrize(
    ("info", "name"),
    [
        ({"role": "student", "method": "alp_no", "task": "sst2"}, "alp_no-sst2-student"),
        ({"role": "teacher", "task": "sst2"}, "teacher-sst2"),
        ({"role": "student", "task": "rte"}, "student-rte"),
        ({"role": "student", "method": "mt one/many", "task": "rte"}, "mt-one-many-rte-student"),
    ],
)
def test_logged_models_are_named_after_what_they_are(info, name):
    assert tracking_models.logged_model_name(info) == name


def test_a_model_left_pending_by_a_killed_logging_is_not_found(store, stored_student):
    """A LoggedModel created but never finalised (the process was killed while MLflow copied the
    files) is not a model a reused store entry can point at."""
    import mlflow

    with mlflow.start_run() as run:
        pending = mlflow.initialize_logged_model(name="alp-rte-student", tags={"store_key": "abc123"})
    assert str(store.get_logged_model(pending.model_id).status) == "PENDING"
    assert tracking_models.find_logged_model(run.info.run_id) is None
    assert tracking_models.find_logged_model(None, store_key="abc123") is None


def test_the_requirements_pin_bert_kd_and_the_loaders_libraries():
    import bert_kd

    pins = tracking_models._requirements()
    assert pins[0] == f"bert-kd=={bert_kd.__version__}"
    assert all("==" in pin for pin in pins) and any(pin.startswith("transformers==") for pin in pins)


def test_the_best_student_is_registered_with_its_lineage_and_loads_back(store, stored_student):
    import mlflow

    run_id, model_id = trained_run(stored_student)
    with mlflow.start_run(run_name="train_teacher:rte") as teacher:
        pass
    info = {"mlflow_run_id": run_id, "task": "rte", "method": "alp", "key": "abc123", "store_path": str(stored_student)}
    version = tracking_models.register_best_student(info, {"mlflow_run_id": teacher.info.run_id}, "bert_kd-rte-student")
    tags = store.get_model_version("bert_kd-rte-student", version.version).tags
    assert set(tags) <= set(tracking_models.VERSION_TAGS)  # what identifies the model, no more
    assert tags["bert_kd.teacher_run"].endswith(f"/runs/{teacher.info.run_id}?workflowType=machine_learning")
    assert tags["bert_kd.student_run"].endswith(f"/runs/{run_id}?workflowType=machine_learning")
    assert tags["bert_kd.store_key"] == "abc123"
    lineage = store.get_run(run_id).data.tags  # the rest of the lineage: on the student's run
    assert lineage["bert_kd.teacher_run_id"] == teacher.info.run_id
    assert lineage["bert_kd.recipe"] == "ce 0.3 + kd 0.5 + layer 0.2, T=5"
    assert (lineage["bert_kd.data_digest"], lineage["bert_kd.store_entry"]) == ("d1g3st", "student/abc123")
    assert not [v for v in [*tags.values(), *lineage.values()] if str(stored_student.parent) in v]  # no path here
    assert store.get_model_version_by_alias("bert_kd-rte-student", "champion").version == version.version
    assert store.get_registered_model("bert_kd-rte-student").tags["bert_kd.task"] == "rte"
    assert version.source == f"models:/{model_id}"
    from huggingface_hub import ModelCard

    card = ModelCard.load(stored_student / "README.md")  # the entry's card names its registration
    assert f"`models:/bert_kd-rte-student/{version.version}`" in card.text
    local = mlflow.artifacts.download_artifacts(artifact_uri=f"models:/bert_kd-rte-student/{version.version}")
    assert (tracking_models.bundle_directory(local) / "manifest.json").is_file()
    served = mlflow.pyfunc.load_model(f"models:/bert_kd-rte-student/{version.version}")
    out = served.predict(pd.DataFrame({"sentence1": ["the dog sat", "a cat"], "sentence2": ["yes", "no"]}))
    assert list(out.columns) == ["label", "score"] and set(out["label"]) <= {"entailment", "not_entailment"}


def test_bundle_directory_passes_plain_directories_through(tmp_path):
    assert tracking_models.bundle_directory(tmp_path) == tmp_path
    (tmp_path / "MLmodel").write_text("flavors:\n  onnx: {}\n")
    with pytest.raises(FileNotFoundError, match="onnx"):
        tracking_models.bundle_directory(tmp_path)


def test_a_registered_version_tagged_for_another_task_is_refused(store, tmp_path, tiny_teacher_dir):
    """``models:/<name>/<version>``: the version's ``bert_kd.task`` is checked as the model's own
    ``bert_kd.json`` is, before anything is evaluated."""
    import shutil

    import mlflow

    from bert_kd.config.errors import TaskMismatchError
    from bert_kd.core.files import write_atomically
    from bert_kd.pipelines.evaluate.nodes import load_model_for_task

    entry = write_atomically(tmp_path / "entry", lambda d: shutil.copytree(tiny_teacher_dir, d, dirs_exist_ok=True))
    with mlflow.start_run() as run:
        model_id = tracking_models.log_model_directory(entry)  # no bert_kd.json: only the registry knows the task
    info = {"mlflow_run_id": run.info.run_id, "mlflow_model_id": model_id, "task": "mrpc", "store_path": str(entry)}
    version = tracking_models.register_best_student(info, None, "bert_kd-mrpc-student")
    uri = f"models:/bert_kd-mrpc-student/{version.version}"
    with pytest.raises(TaskMismatchError) as caught:
        load_model_for_task(uri, "rte", "evaluate.model", 128, allow_mismatch=False)
    assert "trained for mrpc" in caught.value.block() and "bert_kd.task" in caught.value.block()
    bundle, recorded = load_model_for_task(uri, "mrpc", "evaluate.model", 128, allow_mismatch=False)
    assert recorded == "mrpc" and bundle.model.config.num_labels == 2


@pytest.mark.parametrize(
    "entry",
    [
        "data: /etc",
        "data: ../elsewhere",
        "data: data/../../elsewhere",
        "data: data/link",
        "data: data\n    code: /usr/lib/python3",
        "data: data\n    env:\n      conda: ../c.yaml",
    ],
)
def test_an_mlmodel_path_that_leaves_the_download_is_refused(tmp_path, tiny_teacher_dir, entry):
    import shutil

    local = tmp_path / "download"
    shutil.copytree(tiny_teacher_dir, tmp_path / "elsewhere")
    (local / "data").mkdir(parents=True)
    (local / "data" / "link").symlink_to(tmp_path / "elsewhere")
    (local / "MLmodel").write_text(f"flavors:\n  python_function:\n    {entry}\n")
    with pytest.raises(tracking_models.UnsafeModelPathError, match="outside"):
        tracking_models.bundle_directory(local)


def test_a_link_inside_the_downloaded_model_that_leaves_it_is_refused(tmp_path, tiny_teacher_dir):
    import shutil

    local = tmp_path / "download"
    shutil.copytree(tiny_teacher_dir, local / "data" / "model")
    (local / "data" / "model" / "vocab.txt").symlink_to("/etc/hostname")
    (local / "MLmodel").write_text("flavors:\n  python_function:\n    data: data/model\n")
    with pytest.raises(tracking_models.UnsafeModelPathError, match="vocab.txt.*outside"):
        tracking_models.bundle_directory(local)
    (local / "data" / "model" / "vocab.txt").unlink()
    assert tracking_models.bundle_directory(local) == local / "data" / "model"


def test_a_runs_uri_whose_mlmodel_names_another_folder_is_not_evaluated(store, tmp_path, tiny_teacher_dir):
    """The MLmodel of a logged model edited to point at another local model: refused with one block,
    never evaluated as the URI's model."""
    import shutil

    import mlflow

    from bert_kd.config.errors import DamagedModelError
    from bert_kd.core.files import write_atomically
    from bert_kd.pipelines.evaluate.nodes import resolve_model_source

    entry = write_atomically(tmp_path / "entry", lambda d: shutil.copytree(tiny_teacher_dir, d, dirs_exist_ok=True))
    other = write_atomically(tmp_path / "other", lambda d: shutil.copytree(tiny_teacher_dir, d, dirs_exist_ok=True))
    with mlflow.start_run() as run:
        tracking_models.log_model_directory(entry)
    mlmodel = next((tmp_path / "artifacts").rglob("MLmodel"))
    mlmodel.write_text(mlmodel.read_text().replace("data: data/entry", f"data: {other}"))
    with pytest.raises(DamagedModelError) as caught:
        resolve_model_source(f"runs:/{run.info.run_id}/model")
    assert "outside" in caught.value.block() and "evaluate.model" in caught.value.block()


def test_the_served_model_names_its_labels_from_its_task_record(tmp_path, tiny_teacher_dir):
    from bert_kd.core.models import ModelBundle, load_bundle, save_bundle

    bundle = load_bundle(tiny_teacher_dir)
    path = save_bundle(ModelBundle(bundle.model, bundle.tokenizer, {"task": "mrpc"}), tmp_path / "mrpc")
    out = tracking_models.BertKdPyfunc(path).predict(pd.DataFrame({"sentence1": ["a dog"], "sentence2": ["a cat"]}))
    assert set(out["label"]) <= {"not_equivalent", "equivalent"}


def test_a_uri_of_a_model_left_pending_is_refused_naming_the_model_not_a_temporary_folder(store, stored_student):
    """A run killed while MLflow logged its model leaves a PENDING, empty LoggedModel: evaluating its
    URI says so, naming the model and its run, never the temporary download folder."""
    import mlflow

    from bert_kd.config.errors import DamagedModelError
    from bert_kd.pipelines.evaluate.nodes import resolve_model_source

    with mlflow.start_run() as run:
        pending = mlflow.initialize_logged_model(name="alp-rte-student")
    for uri in (f"runs:/{run.info.run_id}/alp-rte-student", f"models:/{pending.model_id}"):
        with pytest.raises(DamagedModelError) as caught:
            resolve_model_source(uri)
        block = caught.value.block()
        assert "alp-rte-student" in block and "never finished logging (status PENDING)" in block
        assert run.info.run_id in block and "/tmp" not in block.split("fix")[0]
    run_id, model_id = trained_run(stored_student)
    assert tracking_models.unfinished_model(f"runs:/{run_id}/alp-rte-student") is None
    assert tracking_models.unfinished_model(f"models:/{model_id}") is None


def test_every_model_source_the_hints_show_loads_a_model_the_current_code_logged(
    store, tiny_teacher_dir, tmp_path, monkeypatch
):
    """The forms ``evaluate``/``predict_glue`` name in their errors and parameter files
    (``MODEL_SOURCE_FORMS``), filled in for a tiny model logged and registered by this code."""
    import shutil
    from pathlib import Path

    import mlflow

    from bert_kd.core.models import load_bundle
    from bert_kd.pipelines.evaluate.nodes import MODEL_SOURCE_FORMS, model_source_hint, resolve_model_source

    stored_student = tmp_path / "model" / "abc123"  # a model folder as bert-kd writes it (no store manifest)
    shutil.copytree(tiny_teacher_dir, stored_student)
    (stored_student / "bert_kd.json").write_text(json.dumps({"task": "rte", "role": "student", "method": "alp"}))
    run_id, model_id = trained_run(stored_student)
    with mlflow.start_run(run_name="train_teacher:rte") as teacher:
        pass
    info = {"mlflow_run_id": run_id, "task": "rte", "method": "alp", "key": "abc123", "store_path": str(stored_student)}
    tracking_models.register_best_student(info, {"mlflow_run_id": teacher.info.run_id}, "bert_kd-rte-student")
    folder = tmp_path / "data/06_models/store/student/abc123"
    shutil.copytree(stored_student, folder)
    monkeypatch.chdir(tmp_path)
    values = {
        "<kind>": "student",
        "<key>": "abc123",
        "<task>": "rte",
        "<model id>": model_id.removeprefix("m-"),
        "<run id>": run_id,
        "<row>": "alp",
    }
    for form in MODEL_SOURCE_FORMS:
        source = form
        for placeholder, value in values.items():
            source = source.replace(placeholder, value)
        assert "<" not in source, source
        bundle = load_bundle(resolve_model_source(source))
        assert bundle.info["task"] == "rte" and bundle.model.config.num_labels == 2, source
    assert store.get_logged_model(model_id).name == "alp-rte-student"  # runs:/<run id>/alp-rte-student above
    # the parameter files show the same forms, and never the unnamed runs:/<run id>/model
    root = Path(__file__).resolve().parents[2]
    for block in ("evaluate", "predict_glue"):
        text = (root / f"conf/base/parameters_{block}.yml").read_text(encoding="utf-8")
        assert all(form in text for form in MODEL_SOURCE_FORMS) and "/model|" not in text.replace(" ", "")
        assert all(form in model_source_hint(f"{block}.model") for form in MODEL_SOURCE_FORMS)


def test_a_refused_mlflow_model_leaves_no_download_behind(store, tmp_path, tiny_teacher_dir, monkeypatch):
    """A ``models:/`` URI refused (another task) or naming nothing downloadable leaves nothing in the
    temporary folder; nor does one that is used, once its model is in memory."""
    import shutil
    import tempfile

    import mlflow

    from bert_kd.config.errors import ModelNotFoundError, TaskMismatchError
    from bert_kd.core.files import write_atomically
    from bert_kd.pipelines.evaluate.nodes import load_model_for_task

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    entry = write_atomically(tmp_path / "entry", lambda d: shutil.copytree(tiny_teacher_dir, d, dirs_exist_ok=True))
    with mlflow.start_run() as run:
        model_id = tracking_models.log_model_directory(entry)
    info = {"mlflow_run_id": run.info.run_id, "mlflow_model_id": model_id, "task": "mrpc", "store_path": str(entry)}
    version = tracking_models.register_best_student(info, None, "bert_kd-leftover-student")
    uri = f"models:/bert_kd-leftover-student/{version.version}"
    with pytest.raises(TaskMismatchError):
        load_model_for_task(uri, "rte", "evaluate.model", 128, allow_mismatch=False)
    with pytest.raises(ModelNotFoundError):
        load_model_for_task("models:/bert_kd-leftover-student/99", "rte", "evaluate.model", 128, allow_mismatch=False)
    assert not [p.name for p in scratch.iterdir() if p.name.startswith("bert_kd_model_")]
    bundle, _ = load_model_for_task(uri, "mrpc", "evaluate.model", 128, allow_mismatch=False)
    assert bundle.model is not None and not [p.name for p in scratch.iterdir() if p.name.startswith("bert_kd_model_")]


def _bytes_on_disk(*folders) -> int:
    """Bytes of the files under ``folders``, each inode counted once (what ``du`` counts)."""
    seen, total = set(), 0
    for folder in folders:
        for path in folder.rglob("*"):
            if path.is_file() and (stat := path.stat()).st_ino not in seen:
                seen.add(stat.st_ino)
                total += stat.st_size
    return total


def test_a_logged_model_is_stored_once_its_files_hard_links_to_the_store_entry(store, stored_student, tmp_path):
    _, model_id = trained_run(stored_student)
    artifacts = tmp_path / "artifacts"
    data = next(artifacts.rglob(f"data/{stored_student.name}"))
    weights = stored_student / "model.safetensors"
    logged = data / "model.safetensors"
    assert logged.stat().st_ino == weights.stat().st_ino and weights.stat().st_nlink == 2
    entry = _bytes_on_disk(stored_student)
    assert _bytes_on_disk(stored_student, artifacts) < entry + 100_000  # MLmodel, requirements: kilobytes
    assert sum(p.stat().st_size for p in data.rglob("*") if p.is_file()) >= entry  # MLflow sees whole files
    import shutil

    shutil.rmtree(stored_student)  # the logged model stands on its own
    assert logged.stat().st_size > 0 and logged.stat().st_nlink == 1


def test_a_file_shared_with_the_store_is_read_only(tmp_path, monkeypatch):
    """A LoggedModel's file is the store entry's file (one inode): an edit in place through the logged model
    would condemn the entry and retrain it, so the shared file carries no write bit."""
    import stat

    entry, artifacts = tmp_path / "store" / "abc123", tmp_path / "artifacts"
    entry.mkdir(parents=True)
    (entry / "model.safetensors").write_bytes(b"weights")
    (artifacts / "data" / entry.name).mkdir(parents=True)
    (artifacts / "data" / entry.name / "model.safetensors").write_bytes(b"weights")
    monkeypatch.setattr(tracking_models, "_local_artifacts", lambda model_id, client=None: artifacts)
    assert tracking_models.share_with_store(entry, "m-1") == len(b"weights")
    logged = artifacts / "data" / entry.name / "model.safetensors"
    assert logged.stat().st_ino == (entry / "model.safetensors").stat().st_ino
    assert not logged.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
