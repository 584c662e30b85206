"""End to end: train_teacher (+ evaluate_teacher) through a Kedro session on a tiny model."""

from __future__ import annotations

import json

from tests.pipelines.conftest import TEACHER_STORE, latest_version, mlflow_runs


def test_train_teacher_writes_model_metrics_and_mlflow_run(run_pipeline_training_the_teacher):
    outputs, root, uri = run_pipeline_training_the_teacher("train_teacher")
    stored = list((root / "data/06_models/store/teacher").iterdir())
    assert len(stored) == 1  # the content-keyed store is the one on-disk copy of the model
    model_dir = stored[0]
    assert (model_dir / "manifest.json").exists()
    assert (model_dir / "config.json").exists()
    assert (model_dir / "model.safetensors").exists()
    assert (model_dir / "tokenizer.json").exists() or (model_dir / "vocab.txt").exists()
    metrics = json.loads(latest_version(root / "data/08_reporting/teacher_metrics.json").read_text())
    assert set(metrics["metrics"]["validation"]) == {"accuracy"}
    assert 0.0 <= metrics["score"] <= 1.0
    assert metrics["parameters"] > 0 and metrics["size_on_disk_bytes"] > 0
    import mlflow

    assert mlflow.active_run() is None  # the session leaves no run open in this process
    runs = mlflow_runs(uri)
    assert set(runs["status"]) == {"FINISHED"}
    teacher_runs = runs[runs["tags.mlflow.runName"] == "train_teacher:rte"]
    assert len(teacher_runs) == 1
    run = teacher_runs.iloc[0]
    assert run["params.task"] == "rte"
    assert run["params.method"] == run["tags.method"] == "teacher"  # every run fills the compare view's method axis
    assert run["params.teacher.max_seq_length"] == "32"
    assert 0.0 <= run["metrics.final/validation/accuracy"] <= 1.0
    assert run["metrics.train/loss"] > 0
    assert run["tags.env.device"] == "cpu"
    parent = runs[runs["tags.mlflow.runName"].str.endswith("[kedro run]")].iloc[0]
    # kedro-mlflow logs each node's params: inputs as the configuration wrote them (flattened dicts),
    # though the nodes receive the hook's models: epochs 1 stays "1" (a dumped model says "1.0")
    assert parent["params.teacher.training.epochs"] == "1" and parent["params.teacher.max_seq_length"] == "32"
    assert parent["params.runtime.progress_bar"] == "False"
    assert "params.teacher" not in parent  # never one repr of a whole model


def test_second_run_reuses_the_teacher(run_pipeline_training_the_teacher, caplog):
    run_pipeline_training_the_teacher("train_teacher")
    caplog.clear()
    with caplog.at_level("INFO"):
        run_pipeline_training_the_teacher("train_teacher")
    assert any("reusing the stored teacher" in r.getMessage() for r in caplog.records)


def test_a_store_holding_the_sessions_teacher_reuses_it_by_key(run_pipeline, trained_tiny_teacher, caplog):
    """``run_pipeline`` starts from a store holding the session's tiny teacher: found by its key, not
    trained again, and its run is the short run of a reused job."""
    with caplog.at_level("INFO"):
        _, root, uri = run_pipeline("train_teacher")
    assert any("reusing the stored teacher" in r.getMessage() for r in caplog.records)
    assert [p.name for p in (root / TEACHER_STORE).iterdir()] == [trained_tiny_teacher.name]
    metrics = json.loads(latest_version(root / "data/08_reporting/teacher_metrics.json").read_text())
    assert metrics["info"]["reused"] is True and metrics["info"]["key"] == trained_tiny_teacher.name
    run = mlflow_runs(uri).query("`tags.mlflow.runName` == 'train_teacher:rte (reused)'").iloc[0]
    assert run["tags.bert_kd.reused"] == "true" and "metrics.train/loss" not in run.dropna()


# ---- node level (in-memory inputs, no Kedro session)


def _tokenized(glue_dir, model_dir, flip: bool = False):
    from bert_kd.core.data.glue import load_glue_task
    from bert_kd.core.data.tokenize import tokenize_splits
    from bert_kd.core.models import load_tokenizer

    splits = load_glue_task("rte", glue_dir, allow_download=False)
    if flip:  # every label flipped and every first sentence edited: a different data set
        splits = {
            name: frame.assign(label=1 - frame["label"], sentence1=frame["sentence1"] + " really")
            for name, frame in splits.items()
        }
    return tokenize_splits(splits, load_tokenizer(str(model_dir)), 32)


def test_train_teacher_node_stores_once_and_retrains_on_changed_data(
    tmp_path, monkeypatch, tiny_teacher_dir, tiny_glue_dir
):
    from bert_kd.pipelines.train_teacher.nodes import train_teacher

    monkeypatch.chdir(tmp_path)
    teacher = {"model": str(tiny_teacher_dir), "max_seq_length": 32, "training": {"epochs": 1, "batch_size": 16}}
    runtime = {"progress_bar": False, "checkpoint_every_steps": 0}
    args = (teacher, {"task": "rte", "seed": 0, "tracking": {"enabled": False}, "runtime": runtime})
    first = train_teacher(_tokenized(tiny_glue_dir, tiny_teacher_dir), *args)
    store = tmp_path / "data/06_models/store/teacher"
    assert first.info["store_path"] == str(store / first.info["key"]) and first.info["reused"] is False
    again = train_teacher(_tokenized(tiny_glue_dir, tiny_teacher_dir), *args)
    assert (again.info["key"], again.info["reused"]) == (first.info["key"], True)
    flipped = train_teacher(_tokenized(tiny_glue_dir, tiny_teacher_dir, flip=True), *args)
    assert flipped.info["reused"] is False and flipped.info["key"] != first.info["key"]
    assert sorted(p.name for p in store.iterdir()) == sorted([first.info["key"], flipped.info["key"]])
    assert not (tmp_path / "data/06_models/store/checkpoints/teacher").exists() or not any(
        (tmp_path / "data/06_models/store/checkpoints/teacher").iterdir()
    )


def test_a_typed_teacher_block_and_its_dict_make_the_same_job(tmp_path, monkeypatch, tiny_teacher_dir, tiny_glue_dir):
    """The hook's models (``Teacher``, ``Runtime``, ``Tracking``) and a notebook's or a sweep trial's
    dicts give the same teacher key; a ``multi_teachers`` entry trains with its own seed."""
    from bert_kd.config.schema import MultiTeacher, Runtime, Teacher, Tracking
    from bert_kd.experiment.run_setup import RunSettings
    from bert_kd.pipelines.train_teacher.nodes import train_teacher

    monkeypatch.chdir(tmp_path)
    tokenized = _tokenized(tiny_glue_dir, tiny_teacher_dir)
    teacher = {"model": str(tiny_teacher_dir), "max_seq_length": 32, "training": {"epochs": 1, "batch_size": 16}}
    runtime = {"progress_bar": False, "checkpoint_every_steps": 0}
    run = {"task": "rte", "seed": 0, "tracking": {"enabled": False}, "runtime": runtime}
    first = train_teacher(tokenized, teacher, run)
    typed = train_teacher(
        tokenized,
        Teacher.model_validate(teacher),
        RunSettings("rte", 0, Tracking(enabled=False), Runtime.model_validate(runtime)),
    )
    assert (typed.info["key"], typed.info["reused"]) == (first.info["key"], True)
    entry = {**teacher, "name": "t1", "seed": 5}
    from_dict = train_teacher(tokenized, entry, run)
    from_model = train_teacher(tokenized, MultiTeacher.model_validate(entry), run)
    assert from_dict.info["seed"] == from_model.info["seed"] == 5 and from_dict.info["key"] != first.info["key"]
    assert (from_model.info["key"], from_model.info["reused"]) == (from_dict.info["key"], True)
    unseeded = MultiTeacher.model_validate({**teacher, "name": "t0"})  # no seed of its own: the run's
    assert train_teacher(tokenized, unseeded, run).info["key"] == first.info["key"]


def test_the_same_teacher_key_retrains_into_the_same_weights_whatever_the_process_rng(
    tmp_path, monkeypatch, tiny_glue_dir
):
    """A head the checkpoint lacks is drawn from the job's seed, not from the state the process's generators
    happen to be in (PyTorch seeds its default generator from the OS at start): before 2026-11-25 every process
    that trained the same teacher key got another head, and so another teacher."""
    import torch

    from bert_kd.pipelines.train_teacher.nodes import train_teacher
    from tests.conftest import make_tiny_bert

    monkeypatch.chdir(tmp_path)
    model_dir = make_tiny_bert(tmp_path / "three_labels", num_labels=3)  # RTE has 2 labels: a fresh head
    teacher = {"model": str(model_dir), "max_seq_length": 32, "training": {"epochs": 1, "batch_size": 16}}
    run = {
        "task": "rte",
        "seed": 0,
        "tracking": {"enabled": False},
        "runtime": {"progress_bar": False, "checkpoint_every_steps": 0, "recompute": True},
    }
    trained = []
    for state in (1, 2):
        torch.manual_seed(state)  # another process: another default-generator state
        bundle = train_teacher(_tokenized(tiny_glue_dir, model_dir), teacher, run)
        trained.append({name: tensor.clone() for name, tensor in bundle.model.state_dict().items()})
    assert trained[0].keys() == trained[1].keys()
    different = [name for name in trained[0] if not torch.equal(trained[0][name], trained[1][name])]
    assert different == []


def test_teacher_mixed_precision_stays_out_of_the_teachers_own_key(
    tmp_path, monkeypatch, tiny_teacher_dir, tiny_glue_dir
):
    """``runtime.teacher_mixed_precision`` concerns the frozen teacher's forwards during distillation:
    the teacher's own fine-tuning is the default run's job, reused, not retrained under a key of its own."""
    from bert_kd.pipelines.train_teacher.nodes import train_teacher

    monkeypatch.chdir(tmp_path)
    tokenized = _tokenized(tiny_glue_dir, tiny_teacher_dir)
    teacher = {"model": str(tiny_teacher_dir), "max_seq_length": 32, "training": {"epochs": 1, "batch_size": 16}}
    runtime = {"progress_bar": False, "checkpoint_every_steps": 0}
    run = {"task": "rte", "seed": 0, "tracking": {"enabled": False}, "runtime": runtime}
    first = train_teacher(tokenized, teacher, run)
    bf16 = train_teacher(tokenized, teacher, {**run, "runtime": {**runtime, "teacher_mixed_precision": "bf16"}})
    assert (bf16.info["key"], bf16.info["reused"]) == (first.info["key"], True)
