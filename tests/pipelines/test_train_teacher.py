"""End to end: train_teacher (+ evaluate_teacher) through a Kedro session on a tiny model."""

from __future__ import annotations

import json

from tests.pipelines.conftest import latest_version, mlflow_runs



def test_train_teacher_writes_model_metrics_and_mlflow_run(run_pipeline):
    outputs, root, uri = run_pipeline("train_teacher")
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
    runs = mlflow_runs(uri)
    teacher_runs = runs[runs["tags.mlflow.runName"] == "train_teacher:rte"]
    assert len(teacher_runs) == 1
    run = teacher_runs.iloc[0]
    assert run["params.task"] == "rte"
    assert run["params.teacher.max_seq_length"] == "32"
    assert 0.0 <= run["metrics.final/validation/accuracy"] <= 1.0
    assert run["metrics.train/loss"] > 0
    assert run["tags.env.device"] == "cpu"


def test_second_run_reuses_the_teacher(run_pipeline, caplog):
    run_pipeline("train_teacher")
    caplog.clear()
    with caplog.at_level("INFO"):
        run_pipeline("train_teacher")
    assert any("reusing the stored teacher" in r.getMessage() for r in caplog.records)
