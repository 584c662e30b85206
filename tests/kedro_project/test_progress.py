"""bert_kd.kedro_project.progress: a pipeline with several training jobs logs its overall progress."""

import logging

from kedro.pipeline import Pipeline, node

from bert_kd.kedro_project.progress import JobProgressHook


def train_teacher(data):
    return data


def distill_student(teacher, row):
    return teacher


def compare_methods(*students):
    return students


def test_each_training_job_is_announced_with_the_jobs_left_and_report_nodes_are_not(caplog, monkeypatch):
    pipeline = Pipeline(
        [
            node(train_teacher, "data", "teacher", name="teacher"),
            node(distill_student, ["teacher", "params:alp"], "alp", name="alp"),
            node(distill_student, ["teacher", "params:pkd"], "pkd", name="pkd"),
            node(compare_methods, ["alp", "pkd"], "table", name="compare"),
        ]
    )
    monkeypatch.setattr("bert_kd.experiment.progress.machine_load", lambda: (5.0, 2))
    hook = JobProgressHook()
    hook.before_pipeline_run({}, pipeline, None)
    with caplog.at_level(logging.INFO, logger="bert_kd.kedro_project.progress"):
        for each in pipeline.nodes:
            hook.before_node_run(each, {})
            hook.after_node_run(each, {})
    lines = [r.getMessage() for r in caplog.records if r.name == "bert_kd.kedro_project.progress"]
    assert len(lines) == 3  # the teacher and two students; the comparison is no job
    assert lines[0] == "progress: job 1 of 3, time left known after the first job, machine busy: load 5.0 on 2 cores"
    assert lines[2].startswith("progress: job 3 of 3, ~1 s left, machine busy: load 5.0 on 2 cores")
    single = JobProgressHook()
    single.before_pipeline_run({}, Pipeline([pipeline.nodes[0]]), None)
    assert single.progress is None  # one job: Kedro's own progress says it all
