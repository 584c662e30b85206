"""End to end: multi-teacher distillation and its baselines with two tiny teachers."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.pipelines.conftest import TINY_TRAINING, mlflow_runs



def _teachers(model_dir):
    return [
        {"name": "a", "model": str(model_dir), "seed": 1, "max_seq_length": 32, "training": TINY_TRAINING},
        {"name": "b", "model": str(model_dir), "seed": 2, "max_seq_length": 32, "training": {**TINY_TRAINING, "learning_rate": 1e-4}},
    ]


def test_distill_multi_teacher_and_baselines(run_pipeline, tiny_teacher_dir):
    student = {"num_layers": 2, "init_from_teacher": 0, "training": {**TINY_TRAINING, "aux_learning_rate": 1e-3}}
    _, root, uri = run_pipeline("distill_multi_teacher_baselines", multi_teachers=_teachers(tiny_teacher_dir), multi_student=student)
    table = pd.read_csv(root / "data/08_reporting/distill_multi_teacher_baselines.csv")
    assert set(table["method"]) == {"teacher", "multi_teacher", "okd", "multi_pkd", "rse_kd"}
    assert set(table.loc[table["method"] == "multi_teacher", "teachers"]) == {"a+b", "a", "b"}
    markdown = (root / "data/08_reporting/distill_multi_teacher_baselines.md").read_text()
    assert "Table 2" in markdown and "Table 3" in markdown
    runs = mlflow_runs(uri)
    names = set(runs["tags.mlflow.runName"])
    assert "distill_multi_teacher:multi_teacher[a,b]:rte" in names
    assert "distill_multi_teacher:rse_kd[a,b]:rte" in names
    parent = runs[runs["tags.mlflow.runName"] == "distill_multi_teacher_baselines:rte [kedro run]"].iloc[0]
    assert parent["metrics.teacher/a/accuracy"] == pytest.approx(table.loc[table["configuration"] == "teacher a", "accuracy"].iloc[0])
    assert 0 <= parent["metrics.compare/multi_teacher_a_b/accuracy"] <= 1
    assert "Table 2" in parent["tags.mlflow.note.content"]
