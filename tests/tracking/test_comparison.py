"""bert_kd.tracking.comparison: a comparison on the parent run (real temporary SQLite store)."""

import pandas as pd
import pytest

from bert_kd.tracking.comparison import log_comparison_to_parent
from bert_kd.tracking.ui import name_parent_run, parent_run_name


def test_parent_run_gets_name_comparison_metrics_description_and_teacher_link(store, monkeypatch):
    import mlflow

    with mlflow.start_run(run_name="train_teacher:sst2") as teacher_run:
        pass
    table = pd.DataFrame(
        [
            {"method": "teacher", "task": "sst2", "accuracy": 0.9, "% of teacher": 100.0, "parameters (M)": 22.7},
            {"method": "pkd", "task": "sst2", "accuracy": 0.5525, "% of teacher": 61.4, "parameters (M)": 15.6},
            {"method": "alp", "task": "sst2", "accuracy": 0.5631, "% of teacher": 62.6, "parameters (M)": 15.6},
        ]
    )
    with mlflow.start_run(run_name="distill_baselines") as parent:
        name = name_parent_run("distill_baselines", "sst2")
        logged = log_comparison_to_parent(
            table,
            "accuracy",
            markdown="| method |\n|---|\n| alp |\n",
            title="distill_baselines on sst2",
            teacher_run_id=teacher_run.info.run_id,
        )
    run = store.client.get_run(parent.info.run_id)
    assert name == "distill_baselines:sst2 [kedro run]" and run.info.run_name == name
    assert run.data.metrics["compare/alp/accuracy"] == pytest.approx(0.5631)
    assert run.data.metrics["compare/pkd/pct_of_teacher"] == pytest.approx(61.4)
    assert run.data.metrics["teacher/accuracy"] == pytest.approx(0.9)
    assert run.data.metrics["best/accuracy"] == pytest.approx(0.5631)
    assert run.data.tags["best_method"] == "alp"
    assert "| alp |" in run.data.tags["mlflow.note.content"]
    assert "Best student: **alp**" in run.data.tags["mlflow.note.content"]
    assert run.data.tags["teacher_run_id"] == teacher_run.info.run_id
    assert run.data.tags["teacher_run_url"].endswith(
        f"#/experiments/{store.experiment_id}/runs/{teacher_run.info.run_id}?workflowType=machine_learning"
    )
    assert set(logged) == {k for k in run.data.metrics}


def test_sweep_parent_name_and_multi_teacher_rows():
    assert parent_run_name("reproduce", "mrpc", "cpu_protocol") == "reproduce:cpu_protocol [kedro run]"
    rows = [
        {"method": "teacher", "teachers": "a", "accuracy": 0.8},
        {"method": "teacher", "teachers": "b", "accuracy": 0.7},
        {"method": "okd", "teachers": "a+b", "accuracy": 0.75},
    ]
    metrics = log_comparison_to_parent(rows, "accuracy")  # no active run: computed only
    assert metrics == {
        "teacher/a/accuracy": 0.8,
        "teacher/b/accuracy": 0.7,
        "compare/okd_a_b/accuracy": 0.75,
        "best/accuracy": 0.75,
        "best/score": 0.75,
    }
    with pytest.raises(ValueError, match="primary_metric 'f1'"):
        log_comparison_to_parent(rows, "f1")


def test_long_comparison_is_truncated_to_mlflow_tag_limit(store):
    import mlflow

    rows = [{"method": f"m{i}", "accuracy": 0.5, "f1": 0.4} for i in range(600)]  # > 1000 metrics
    with mlflow.start_run() as run:
        log_comparison_to_parent(rows, "accuracy")
    logged = store.client.get_run(run.info.run_id).data
    assert len(logged.metrics) == 1202  # 600 rows × 2, best/accuracy, best/score
    note = logged.tags["mlflow.note.content"]
    assert len(note) <= 8000 and note.endswith("(truncated: the full table is in the run's artifacts)\n")


def test_a_tied_comparison_names_no_best_student_and_logs_the_floor(store):
    import mlflow

    rows = [
        {"method": "teacher", "accuracy": 0.9},
        {"method": "majority class", "accuracy": 0.527},
        {"method": "nkd", "accuracy": 0.527},
        {"method": "alp", "accuracy": 0.527},
    ]
    with mlflow.start_run() as parent:
        metrics = log_comparison_to_parent(rows, "accuracy", warning="every student ties with the majority class")
    run = store.client.get_run(parent.info.run_id)
    assert "best_method" not in run.data.tags  # a tie names no best student, but the parent carries the top score
    assert metrics["best/accuracy"] == metrics["best/score"] == run.data.metrics["best/score"] == 0.527
    assert metrics["majority/accuracy"] == 0.527 and "compare/majority_class/accuracy" not in metrics
    assert run.data.tags["comparison.warning"] == "every student ties with the majority class"
    note = run.data.tags["mlflow.note.content"]
    assert note.startswith("**No best student**: every student ties") and "Best student" not in note
