"""The model store's ``runtime.recompute`` (and ``tracking.enabled``) from the hook's models or from dicts."""

from __future__ import annotations

from pathlib import Path

import pytest

from bert_kd.config.schema import Runtime, Tracking
from bert_kd.experiment.publishing import JobRunSpec
from bert_kd.experiment.store import recompute
from bert_kd.tracking import tracking_enabled
from tests.conftest import migrated_mlflow_db


@pytest.mark.parametrize("form", [dict, "model"])
def test_settings_helpers_read_the_hooks_models_and_dicts_alike(form):
    tracking, runtime = {"enabled": False, "log_models": False}, {"recompute": True}
    if form == "model":
        tracking, runtime = Tracking.model_validate(tracking), Runtime.model_validate(runtime)
    assert tracking_enabled(tracking) is False and recompute(runtime) is True
    assert tracking_enabled(None) is True and recompute(None) is False  # the schema's defaults


def test_a_bad_key_in_a_notebooks_dict_names_the_block():
    from bert_kd.config.errors import ParameterError

    with pytest.raises(ParameterError, match="runtime.recompte"):
        recompute({"recompte": True})


# ---------------------------------------------------------------- one run per job, open while the job runs
@pytest.fixture()
def tracking_store(tmp_path):
    import mlflow

    uri = migrated_mlflow_db(tmp_path / "mlflow.db")
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment(experiment_id=mlflow.create_experiment("bert_kd", artifact_location=str(tmp_path / "art")))
    return mlflow.MlflowClient(uri)


def tiny_model_job(tmp_path, tiny_teacher_dir, name: str, kind: str = "student"):
    """A student (or teacher) job of the store whose ``train_fn`` loads the tiny model (a run's worth of logging)."""
    from bert_kd.core.models import ModelBundle, load_classifier, load_tokenizer
    from bert_kd.experiment import jobs

    job = jobs.Job(kind, {"task": "rte", "row": name}, tmp_path / "store")

    def train(checkpoint_dir, *, run):
        run.log_params({"method": name, "recipe": f"{name} recipe"})
        run.log_metrics({"train/loss": 0.5}, step=1)
        model = load_classifier(str(tiny_teacher_dir), 2)
        return ModelBundle(
            model,
            load_tokenizer(str(tiny_teacher_dir)),
            {"role": kind, "method": name, "task": "rte", "mlflow_run_id": run.run_id},
        )

    return job, train


def run_job(tmp_path, tiny_teacher_dir, name, tracking=None, kind: str = "student"):
    from bert_kd.experiment.publishing import run_model_job

    job, train = tiny_model_job(tmp_path, tiny_teacher_dir, name, kind)
    return run_model_job(
        job,
        train,
        Tracking.model_validate(tracking or {}),
        job_run=JobRunSpec(f"distill_{name}:rte", {"role": kind, "method": name, "task": "rte"}),
    )


def test_a_jobs_run_ends_when_its_job_ends_and_an_evaluation_does_not_reopen_it(
    tracking_store, tmp_path, tiny_teacher_dir
):
    import mlflow

    from bert_kd.experiment.publishing import TRAINING_SECONDS
    from bert_kd.tracking import log_evaluation

    with mlflow.start_run(run_name="distill_baselines:rte [kedro run]") as parent:
        first = run_job(tmp_path, tiny_teacher_dir, "alp")
        second = run_job(tmp_path, tiny_teacher_dir, "pkd")
        log_evaluation(
            {
                "task": "rte",
                "metrics": {"validation": {"accuracy": 0.5}},
                "score": 0.5,
                "parameters": 1,
                "encoder_parameters": 1,
                "size_on_disk_bytes": 1,
                "throughput_examples_per_s": 1.0,
                "evaluation_seconds": 0.25,
            },
            first.info["mlflow_run_id"],
            {},
        )
    a, b = (tracking_store.get_run(bundle.info["mlflow_run_id"]) for bundle in (first, second))
    assert a.info.status == b.info.status == "FINISHED"
    assert (
        a.info.end_time
        <= b.info.start_time
        < b.info.end_time
        <= tracking_store.get_run(parent.info.run_id).info.end_time
    )
    assert a.data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert a.data.metrics[TRAINING_SECONDS] > 0 and a.data.metrics["time/evaluation_seconds"] == 0.25
    assert a.data.metrics["time/training_seconds"] * 1000 <= a.info.end_time - a.info.start_time
    model = tracking_store.get_logged_model(first.info["mlflow_model_id"])
    assert (model.name, model.source_run_id) == ("alp-rte-student", a.info.run_id)


def test_a_reused_model_gets_its_own_short_run_linked_to_the_run_that_trained_it(
    tracking_store, tmp_path, tiny_teacher_dir
):
    from bert_kd.tracking.jobs import TRAINED_IN_ID_TAG, TRAINED_IN_TAG

    trained = run_job(tmp_path, tiny_teacher_dir, "alp")
    before = tracking_store.get_run(trained.info["mlflow_run_id"]).info
    reused = run_job(tmp_path, tiny_teacher_dir, "alp")
    run = tracking_store.get_run(reused.info["mlflow_run_id"])
    assert reused.info["reused"] and reused.info["trained_in_run_id"] == before.run_id != run.info.run_id
    assert run.info.run_name == "distill_alp:rte (reused)" and run.info.status == "FINISHED"
    assert run.data.tags[TRAINED_IN_ID_TAG] == before.run_id
    assert run.data.tags[TRAINED_IN_TAG].endswith(
        f"#/experiments/{before.experiment_id}/runs/{before.run_id}?workflowType=machine_learning"
    )
    assert run.data.params["recipe"] == "alp recipe"  # the comparison view's columns, copied
    assert f"]({run.data.tags[TRAINED_IN_TAG]})" in run.data.tags["mlflow.note.content"]  # a link in its Overview
    after = tracking_store.get_run(before.run_id).info
    assert (after.end_time, after.status) == (before.end_time, before.status)  # never reopened
    assert reused.info["mlflow_model_id"] == trained.info["mlflow_model_id"]  # not logged again
    assert reused.info["model_run_id"] == before.run_id  # the run that trained it stands for it here
    assert len(tracking_store.search_logged_models([before.experiment_id])) == 1


def test_a_reuse_run_keeps_its_own_row_and_names_the_row_whose_job_it_repeats(
    tracking_store, tmp_path, tiny_teacher_dir
):
    # alp_po with a 2-layer student is alp's job: its reuse run must still read alp_po (it read "alp")
    from bert_kd.experiment.publishing import run_model_job
    from bert_kd.tracking.jobs import SAME_JOB_AS_TAG

    run_job(tmp_path, tiny_teacher_dir, "alp")
    job, train = tiny_model_job(tmp_path, tiny_teacher_dir, "alp")  # the same job under another row
    reused = run_model_job(
        job,
        train,
        Tracking(),
        job_run=JobRunSpec("distill_alp_po:rte", {"role": "student", "method": "alp_po", "task": "rte"}),
    )
    run = tracking_store.get_run(reused.info["mlflow_run_id"])
    assert run.info.run_name == "distill_alp_po:rte (reused)"
    assert run.data.tags["method"] == "alp_po" and run.data.tags[SAME_JOB_AS_TAG] == "alp"
    assert (run.data.params["method"], run.data.params["algorithm"]) == ("alp_po", "alp")  # param and tag agree
    assert (Path(reused.info["store_path"]) / "README.md").is_file()  # the entry's model card, written once
    again = run_job(tmp_path, tiny_teacher_dir, "alp")  # the row that trained it: no same-job tag
    assert SAME_JOB_AS_TAG not in tracking_store.get_run(again.info["mlflow_run_id"]).data.tags


def test_a_reused_entry_whose_logged_model_never_finished_is_logged_again(tracking_store, tmp_path, tiny_teacher_dir):
    """The run that trained the entry was killed while MLflow logged its model: the LoggedModel is
    left PENDING and empty. The next run that reuses the entry deletes it and logs the model (once), so its
    URIs work and the key has one model (the chaos soak found two)."""
    import mlflow

    trained = run_job(tmp_path, tiny_teacher_dir, "alp", tracking={"log_models": False})
    left = mlflow.initialize_logged_model(
        name="alp-rte-student", source_run_id=trained.info["mlflow_run_id"], tags={"store_key": trained.info["key"]}
    )  # what the killed logging left
    reused = run_job(tmp_path, tiny_teacher_dir, "alp")
    experiment = tracking_store.get_run(reused.info["mlflow_run_id"]).info.experiment_id
    of_key = [
        m.model_id
        for m in mlflow.MlflowClient().search_logged_models(experiment_ids=[experiment])
        if m.tags.get("store_key") == trained.info["key"]
    ]
    assert of_key == [reused.info["mlflow_model_id"]] and left.model_id not in of_key
    model = tracking_store.get_logged_model(reused.info["mlflow_model_id"])
    assert str(model.status) == "READY" and model.source_run_id == reused.info["mlflow_run_id"]
    assert reused.info["model_run_id"] == model.source_run_id  # the run that logged its finished model stands for it
    local = mlflow.artifacts.download_artifacts(f"models:/{model.model_id}")
    assert list(Path(local).rglob("config.json"))
    again = run_job(tmp_path, tiny_teacher_dir, "alp")
    assert again.info["mlflow_model_id"] == model.model_id  # found by its store key: not logged a third time
    assert again.info["model_run_id"] == model.source_run_id


def test_a_model_reused_in_another_tracking_store_is_stood_for_by_the_run_that_logs_it_there(
    tracking_store, tmp_path, tiny_teacher_dir
):
    """A stored teacher trained against one tracking store and reused in a new one (a test project,
    another machine): the reuse run that logs its LoggedModel there records the train split (its
    model and dev metrics name their data, as a trained teacher's do) and is the run that stands for
    it: the LoggedModel's source run, ``model_run_id`` and a registered student's teacher tags agree."""
    import mlflow

    from bert_kd.experiment.lineage import Lineage
    from bert_kd.experiment.publishing import run_model_job
    from bert_kd.tracking.data import glue_dataset, log_input_once
    from bert_kd.tracking.evaluation import log_evaluation_to_run
    from bert_kd.tracking.logged_models import lineage_tags

    trained = run_job(tmp_path, tiny_teacher_dir, "teacher", kind="teacher")
    assert Lineage.of(trained.info).model_run_id == trained.info["mlflow_run_id"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    uri = migrated_mlflow_db(elsewhere / "mlflow.db")
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment(experiment_id=mlflow.create_experiment("bert_kd", artifact_location=str(elsewhere / "art")))
    client = mlflow.MlflowClient(uri)
    described = []

    def describe(run, bundle):
        described.append(run.run_id)
        log_input_once(glue_dataset("rte", tmp_path, "digest", "train", 8), context="training")

    def reuse():
        job, train = tiny_model_job(tmp_path, tiny_teacher_dir, "teacher", "teacher")
        return run_model_job(
            job, train, Tracking(), job_run=JobRunSpec("train_teacher:rte", {"role": "teacher"}, describe)
        )

    reused = reuse()
    model = client.get_logged_model(reused.info["mlflow_model_id"])
    assert reused.info["trained_in_run_id"] == trained.info["mlflow_run_id"]  # the manifest's run, elsewhere
    assert (
        described == [model.source_run_id] == [reused.info["mlflow_run_id"]] == [Lineage.of(reused.info).model_run_id]
    )
    assert [i.model_id for i in client.get_run(model.source_run_id).inputs.model_inputs] == [model.model_id]
    evaluation = {"task": "rte", "metrics": {"validation": {"accuracy": 0.5}}, "score": 0.5}
    evaluation.update(parameters=1, encoder_parameters=1, size_on_disk_bytes=1, throughput_examples_per_s=1.0)
    log_evaluation_to_run(evaluation, Lineage.of(reused.info).model_run_id)
    model = client.get_logged_model(model.model_id)
    assert {m.dataset_name for m in model.metrics if m.key == "final/score"} == {"glue-rte-validation"}
    tags = lineage_tags({"task": "rte"}, reused.info, client)
    assert tags["bert_kd.teacher_run_id"] == model.source_run_id and model.source_run_id in tags["bert_kd.teacher_run"]
    again = reuse()  # that store's next reuse finds the model: the run that logged it still stands for it
    assert (
        again.info["mlflow_model_id"] == model.model_id and Lineage.of(again.info).model_run_id == model.source_run_id
    )
    assert described == [model.source_run_id, again.info["mlflow_run_id"]]  # its run records its data too


@pytest.mark.parametrize(
    "second_comes",
    [
        "while the first trains the entry",
        "while the first logs the entry it trained",
        "while the first logs an entry stored without its model",
    ],
)
def test_two_workers_on_one_store_log_the_shared_teacher_once(
    second_comes, tracking_store, tmp_path, tiny_teacher_dir, monkeypatch
):
    """Two workers of a sweep share one store and one tracking store. The second reaches the shared
    teacher while the first trains it (it waits on the key's lock), or finds the entry while the
    first is still logging its LoggedModel (stored, not yet READY: it waits on the key's lock too).
    Either way it reuses the first one's model and logs no second copy of the teacher."""
    import threading

    from bert_kd.experiment import jobs
    from bert_kd.tracking.jobs import MlflowTracker

    if second_comes.endswith("stored without its model"):  # the entry exists; its training run logged no model
        run_job(tmp_path, tiny_teacher_dir, "teacher", {"log_models": False}, kind="teacher")
    worker_one = threading.current_thread()
    second: dict = {}
    waiting_or_done = threading.Event()  # the second worker waits on the key's lock, or has finished

    class KeyLock(jobs.FileLock):
        def acquire(self, *args, **kwargs):
            if threading.current_thread() is not worker_one:
                waiting_or_done.set()
            return super().acquire(*args, **kwargs)

    def second_worker():
        try:
            second["bundle"] = run_job(tmp_path, tiny_teacher_dir, "teacher", kind="teacher")
        finally:
            waiting_or_done.set()

    def then(step):  # worker one's step, with worker two arriving just before it
        def step_with_the_second_worker_arriving(*args, **kwargs):
            if threading.current_thread() is worker_one and "thread" not in second:
                second["thread"] = threading.Thread(target=second_worker)
                second["thread"].start()
                assert waiting_or_done.wait(120)
            return step(*args, **kwargs)

        return step_with_the_second_worker_arriving

    monkeypatch.setattr(jobs, "FileLock", KeyLock)
    if second_comes.startswith("while the first trains"):
        monkeypatch.setattr(jobs, "train_seeded", then(jobs.train_seeded))
    else:
        monkeypatch.setattr(MlflowTracker, "log_model", then(MlflowTracker.log_model))
    one = run_job(tmp_path, tiny_teacher_dir, "teacher", kind="teacher")
    second["thread"].join(120)
    two = second["bundle"]
    assert two.info["reused"] and two.info["store_path"] == one.info["store_path"]
    assert two.info["mlflow_model_id"] == one.info["mlflow_model_id"]
    models = tracking_store.search_logged_models([tracking_store.get_run(one.info["mlflow_run_id"]).info.experiment_id])
    assert [(m.name, m.source_run_id) for m in models] == [("teacher-rte", one.info["mlflow_run_id"])]
    assert str(models[0].status) == "READY"


def test_the_job_path_with_tracking_off_imports_no_mlflow(tmp_path, tiny_teacher_dir):
    """``tracking.enabled: false``: training, storing and reusing a model never loads mlflow."""
    import textwrap

    from tests import fresh_interpreter

    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        sys.path.insert(0, {str(Path(__file__).parent.parent)!r})
        from tests.experiment.test_store import run_job
        for _ in range(2):  # trained, then reused
            bundle = run_job(Path({str(tmp_path)!r}), Path({str(tiny_teacher_dir)!r}), "alp", tracking={{"enabled": False}})
        import bert_kd.experiment.training_jobs.student, bert_kd.experiment.evaluation, bert_kd.experiment.run_setup  # the rest of the job path
        print(bundle.info["reused"], "mlflow" in sys.modules)
    """)
    done = fresh_interpreter.run(script, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-2:] == ["True", "False"]
