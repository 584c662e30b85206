"""A distilled student registered in MLflow and evaluated back through ``models:/<name>/<version>``."""

from __future__ import annotations

import json

import mlflow
import pandas as pd
import pytest

from bert_kd.pipelines.distill.nodes import register_best_student
from tests.pipelines.conftest import latest_version


def test_evaluate_reads_a_registered_student_and_gets_the_same_metric(run_pipeline):
    _, root, uri = run_pipeline(
        "distill_alp", tracking={"enabled": True, "log_models": True, "registered_model": "tiny-rte-student"}
    )
    student = json.loads(latest_version(root / "data/08_reporting/students/alp_metrics.json").read_text())
    teacher = json.loads(latest_version(root / "data/08_reporting/teacher_metrics.json").read_text())
    # a table where ALP clearly beats the other row and the floor (the verdict itself: tests/test_verdict.py)
    table = pd.DataFrame(
        [
            {"method": "teacher", "accuracy": 0.9},
            {"method": "majority class", "accuracy": 0.5},
            {"method": "nkd", "accuracy": 0.5},
            {"method": "alp", "accuracy": 0.8},
        ]
    )
    other = {**student, "info": {**student["info"], "method": "nkd", "key": "another-job"}}
    mlflow.set_tracking_uri(uri)
    settings = {"task": "rte", "seed": 42, "tracking": {"enabled": True, "registered_model": "tiny-rte-student"}}
    registered = register_best_student(table, teacher, settings, other, student, table_name="distill_baselines")
    assert registered == {
        "registered": True,
        "uri": "models:/tiny-rte-student/1",
        "name": "tiny-rte-student",
        "version": "1",
        "method": "alp",
        "alias": "champion",
        "verdict": "winner",
        "tied": [],
    }
    version = mlflow.MlflowClient(uri).get_model_version("tiny-rte-student", "1")
    assert str(mlflow.MlflowClient(uri).get_model_version_by_alias("tiny-rte-student", "champion").version) == "1"
    assert version.description.startswith("Best student of `distill_baselines` on rte by dev accuracy: **alp**")
    assert "| nkd" in version.description  # the comparison it won
    assert version.source == f"models:/{student['info']['mlflow_model_id']}"
    assert version.tags["bert_kd.teacher_run_id"] == teacher["info"]["mlflow_run_id"]
    assert version.tags["bert_kd.store_key"] == student["info"]["key"] and version.tags["bert_kd.recipe"].startswith(
        "ce 0.3"
    )
    assert version.tags["bert_kd.verdict"] == "winner" and "bert_kd.tied" not in version.tags
    run_pipeline("evaluate", evaluate={"model": "models:/tiny-rte-student@champion", "max_seq_length": 32})
    evaluation = json.loads(latest_version(root / "data/08_reporting/evaluation.json").read_text())
    assert evaluation["model"] == "models:/tiny-rte-student@champion"
    assert evaluation["score"] == pytest.approx(student["score"], abs=1e-9)
