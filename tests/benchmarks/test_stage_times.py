"""benchmarks/stage_times.py: the stages of a main-job log add up to its wall time."""

from __future__ import annotations

import importlib.util
from datetime import datetime

import pytest

from tests.conftest import REPO_ROOT

spec = importlib.util.spec_from_file_location("stage_times", REPO_ROOT / "benchmarks" / "stage_times.py")
stage_times = importlib.util.module_from_spec(spec)
spec.loader.exec_module(stage_times)


def log_lines(start: float, end: float) -> list[str]:
    return [
        f"start: {start}",
        "23:59:50.000 kedro.pipeline.node INFO Running node: ingest_glue: ingest_glue([run_settings]) -> [glue_train]",
        "23:59:51.500 kedro.runner.sequential_runner INFO Completed node: ingest_glue",
        "23:59:52.000 kedro.pipeline.node INFO Running node: train_teacher: train_teacher([x]) -> [teacher_model]",
        "00:00:12.000 bert_kd.core.training.loop INFO teacher sst2 epoch 1: {'accuracy': 0.8}",
        "00:00:32.000 bert_kd.core.training.loop INFO teacher sst2 epoch 2: {'accuracy': 0.85}",
        "00:00:35.000 kedro.runner.sequential_runner INFO Completed node: train_teacher",
        "00:00:35.500 kedro.pipeline.node INFO Running node: evaluate_student: evaluate_model([m]) -> [metrics]",
        "00:00:40.000 kedro.runner.sequential_runner INFO Completed node: alp_kd.alp.evaluate_student",
        f"end: {end}",
    ]


def test_stages_follow_the_marks_across_midnight_and_add_up_to_the_wall():
    start = datetime(2026, 11, 27, 23, 59, 40).timestamp()
    end = datetime(2026, 11, 28, 0, 0, 42).timestamp()
    seconds = stage_times.stage_seconds(log_lines(start, end))
    assert seconds["start-up (imports, catalog, hooks)"] == pytest.approx(10.0)
    assert seconds["ingest"] == pytest.approx(1.5)
    assert seconds["teacher epoch 1"] == pytest.approx(20.0)
    assert seconds["teacher epoch 2"] == pytest.approx(20.0)
    assert seconds["train_teacher: save and log"] == pytest.approx(3.0)
    assert seconds["student evaluation"] == pytest.approx(4.5)
    assert seconds["end (hooks, MLflow parent run, exit)"] == pytest.approx(2.0)
    parts = sum(value for stage, value in seconds.items() if stage != "wall")
    assert parts == pytest.approx(seconds["wall"]) == pytest.approx(62.0)


def test_a_log_without_its_edges_is_refused():
    with pytest.raises(ValueError, match="main_job.sh"):
        stage_times.stage_seconds(log_lines(0.0, 1.0)[1:-1])
