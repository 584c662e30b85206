"""End to end: export_student distils the ALP student, exports it to ONNX and times it."""

from __future__ import annotations

import json

import pandas as pd

from tests.pipelines.conftest import latest_version, mlflow_runs


def test_export_student_writes_onnx_files_report_and_latency_table(run_pipeline):
    _, root, uri = run_pipeline(
        "export_student", export_student={"quantize_int8": True, "batch_sizes": [1, 4], "max_batches": 2, "repeats": 1}
    )
    files = latest_version(root / "data/06_models/exported_student")
    assert sorted(p.name for p in files.iterdir()) == ["manifest.json", "student.int8.onnx", "student.onnx"]
    manifest = json.loads((files / "manifest.json").read_text())  # written atomically, sizes and sha256 listed
    assert sorted(manifest["files"]) == ["student.int8.onnx", "student.onnx"]
    report = json.loads(latest_version(root / "data/08_reporting/export_student.json").read_text())
    fp32 = next(v for v in report["verification"] if v["name"] == "onnx_fp32")
    assert fp32["within_tolerance"] and fp32["agreement"] == 1.0 and fp32["max_abs_logit_diff"] < 1e-3
    table = pd.read_csv(root / "data/08_reporting/export_latency.csv")
    models = {
        "teacher (PyTorch fp32)",
        "student (PyTorch fp32)",
        "student (PyTorch bf16)",
        "student (ONNX fp32)",
        "student (ONNX int8)",
    }
    assert set(table["model"]) == models and sorted(set(table["batch_size"])) == [1, 4]
    assert (table["ms_per_batch"] > 0).all() and table["dev_score"].between(0, 1).all()
    assert (root / "data/08_reporting/export_latency.md").read_text().startswith("| model |")
    runs = mlflow_runs(uri)
    export = runs[runs["tags.mlflow.runName"] == "export_student:rte"]
    assert len(export) == 1 and export.iloc[0]["params.num_processes"] == "1"
    assert "metrics.export/ms_b1/student_ONNX_fp32" in runs.columns
    # the fp32 ONNX student is a LoggedModel of the export run (onnx flavour)
    import mlflow

    client = mlflow.MlflowClient(uri)
    onnx_models = [
        m
        for m in client.search_logged_models(experiment_ids=[export.iloc[0]["experiment_id"]])
        if m.name == "student_onnx"
    ]
    assert [m.source_run_id for m in onnx_models] == [export.iloc[0]["run_id"]]
    assert "onnx" in mlflow.models.get_model_info(f"models:/{onnx_models[0].model_id}").flavors


def test_the_student_to_export_is_the_given_model_the_champion_or_the_pipelines(tiny_teacher_dir, monkeypatch):
    import pytest

    from bert_kd.config.errors import UserError
    from bert_kd.config.schema import Tracking
    from bert_kd.core.models import ModelBundle, load_classifier, load_tokenizer
    from bert_kd.pipelines.export_student import nodes

    pipeline_student = ModelBundle(load_classifier(str(tiny_teacher_dir), 2), load_tokenizer(str(tiny_teacher_dir)), {})
    off, on = Tracking(enabled=False), Tracking()
    assert nodes.chosen_student(pipeline_student, None, off, "rte") == (pipeline_student, nodes.PIPELINE_STUDENT)
    monkeypatch.setattr(
        "bert_kd.tracking.jobs.MlflowTracker.champion_source", lambda self, name: None
    )  # nothing registered yet
    assert nodes.chosen_student(pipeline_student, None, on, "rte")[1] == nodes.PIPELINE_STUDENT
    chosen, source = nodes.chosen_student(pipeline_student, str(tiny_teacher_dir), off, "rte")
    assert source == str(tiny_teacher_dir) and chosen is not pipeline_student
    monkeypatch.setattr(
        "bert_kd.tracking.jobs.MlflowTracker.champion_source", lambda self, name: f"models:/{name}@champion"
    )
    monkeypatch.setattr(
        "bert_kd.pipelines.export_student.nodes.resolve_model_source", lambda source, key: tiny_teacher_dir
    )
    assert nodes.chosen_student(pipeline_student, None, on, "rte")[1] == "models:/bert_kd-rte-student@champion"
    other_vocabulary = type("Tokenizer", (), {"get_vocab": lambda self: {"[PAD]": 0, "zebra": 1}})()
    monkeypatch.setattr(
        "bert_kd.pipelines.export_student.nodes.load_bundle", lambda path: ModelBundle(None, other_vocabulary, {})
    )
    with pytest.raises(UserError, match="export_student.model"):
        nodes.chosen_student(pipeline_student, "models:/x/1", off, "rte")
