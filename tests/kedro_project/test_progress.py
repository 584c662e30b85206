"""bert_kd.kedro_project.progress: a pipeline with several training jobs logs its overall progress."""

import json
import logging

import pandas as pd  # a DataFrame's ``info`` is a method: no model bundle
import pytest
from kedro.pipeline import Pipeline, node

from bert_kd.experiment.job_costs import JOB_COSTS
from bert_kd.experiment.progress import replay
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
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("progress: job")]
    assert len(lines) == 3  # the teacher and two students; the comparison is no job
    assert lines[0] == "progress: job 1 of 3, time left known after the first job, machine busy: load 5.0 on 2 cores"
    assert lines[2].startswith("progress: job 3 of 3, ~1 s left, machine busy: load 5.0 on 2 cores")
    single = JobProgressHook()
    single.before_pipeline_run({}, Pipeline([pipeline.nodes[0]]), None)
    assert single.progress is None  # one job: Kedro's own progress says it all


class Start:
    """A student start as the hook sees it: a model (an embedding table and a layer) and its block's epochs."""

    def __init__(self, width: int, epochs: int) -> None:
        import torch

        self.model = torch.nn.Sequential(torch.nn.Embedding(5, 2), torch.nn.Linear(width, 1, bias=False))
        self.params = {"training": {"epochs": epochs}}


def evaluate_model(student, data):
    return {"accuracy": 1.0}


def build_student(teacher, row):
    return teacher


def test_a_repeated_row_is_priced_as_reused_and_the_estimates_are_checked_at_the_end(caplog, monkeypatch):
    from kedro.io import DataCatalog, MemoryDataset

    import bert_kd.kedro_project.progress as progress_hook

    alp = {"method": "alp", "mapping": "all"}
    catalog = DataCatalog(
        {
            "params:alp": MemoryDataset(alp),
            "params:alp_no": MemoryDataset(dict(alp)),  # the parameter check handed it alp's recipe
            "params:pkd": MemoryDataset({"method": "pkd"}),
            "parameters": MemoryDataset({"teacher": {"training": {"epochs": 2}}}),
        }
    )
    pipeline = Pipeline(
        [
            node(train_teacher, "data", "teacher", name="teacher"),
            node(build_student, ["teacher", "params:alp"], "alp_start", name="alp_start"),
            node(distill_student, ["alp_start", "params:alp"], "alp", name="alp"),
            node(build_student, ["teacher", "params:alp_no"], "alp_no_start", name="alp_no_start"),
            node(distill_student, ["alp_no_start", "params:alp_no"], "alp_no", name="alp_no"),
            node(distill_student, ["teacher", "params:pkd"], "pkd", name="pkd"),
            node(evaluate_model, ["alp", "data"], "alp_metrics", name="alp_evaluate"),
            node(compare_methods, ["alp", "alp_no", "pkd"], "table", name="compare"),
        ]
    )
    reported = {}

    class Reporter:
        def log_metrics(self, metrics):
            reported.update(metrics)

        def log_files(self, texts, figures):
            reported.update(texts)

    monkeypatch.setattr(progress_hook, "kedro_run", Reporter)
    monkeypatch.setattr("bert_kd.experiment.progress.machine_load", lambda: (0.0, 2))
    now = [0.0]
    hook = JobProgressHook(clock=lambda: now[0])
    hook.before_pipeline_run({}, pipeline, catalog)
    steps = hook.progress.by_name
    assert [each.name for each in pipeline.nodes if each.name in ("alp", "alp_no")] == ["alp", "alp_no"]
    assert steps["alp_no"].repeats == "alp" and steps["pkd"].repeats is None and steps["alp"].repeats is None
    assert (steps["alp"].method, steps["pkd"].method, steps["teacher"].method) == ("alp", "pkd", None)
    with caplog.at_level(logging.INFO, logger="bert_kd.kedro_project.progress"):
        for each in pipeline.nodes:
            hook.before_node_run(each, {})
            now[0] += {"teacher": 60.0, "alp": 30.0, "pkd": 30.0, "alp_no": 0.5}.get(each.name, 1.0)
            outputs = {"alp_start": Start(10, 3)} if each.name == "alp_start" else {"table": pd.DataFrame()}
            hook.after_node_run(each, outputs)
    assert steps["alp"].work == (10 + 10) * 3  # the student start's parameters × its block's epochs
    assert steps["alp_evaluate"].size == 10  # the model it reads, outside its embedding table
    messages = [r.getMessage() for r in caplog.records if r.name == "bert_kd.kedro_project.progress"]
    assert "the estimates against the time actually left" in messages[-1]
    assert "| 1 | teacher | none yet | 124 s |  |" in messages[-1]
    # reused (1 s), the evaluation at its cost per unit of size before any was measured, the table at 1 s; 2.5 s left
    assert "| 4 | alp_no | 5 s | 2 s | +117% |" in messages[-1]
    assert set(reported) == {
        "eta/max_abs_error",
        "eta/mean_abs_error",
        "eta/lines",
        "eta_check.md",
        "eta_timeline.json",
    }
    replayed = replay(json.loads(reported["eta_timeline.json"]))  # the run's own lines, from its timeline
    assert [round(c.estimate or 0) for c in replayed] == [round(c.estimate or 0) for c in hook.progress.checks()]


def fine_tune(data, block):
    return data


fine_tune.__name__ = "train_teacher"  # the node function the hook knows as a teacher job


def test_the_first_line_prices_the_run_at_the_recorded_pace(caplog, monkeypatch):
    """Before the teacher runs the hook reads its work from its checkpoint's config (parameters × epochs), the
    rows from its training split and the run's threads: the first line has an estimate, from recorded runs."""
    import torch

    import bert_kd.kedro_project.progress as progress_hook
    from bert_kd.experiment.job_costs import TEACHER_PACE

    pipeline = Pipeline(
        [
            node(fine_tune, ["tokenized", "params:teacher"], "teacher", name="teacher"),
            node(distill_student, ["teacher", "params:alp"], "alp", name="alp"),
        ]
    )
    monkeypatch.setattr(
        progress_hook, "checkpoint_sizes", lambda name: (22_713_986, 10_796_162) if name == "minilm-l6" else None
    )
    monkeypatch.setattr(progress_hook, "_uses_gpu", lambda: False)
    monkeypatch.setattr("bert_kd.experiment.progress.machine_load", lambda: (0.0, 2))
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    hook = JobProgressHook(clock=lambda: 0.0)
    hook.before_pipeline_run({}, pipeline, None)
    from datasets import Dataset

    tokenized = {"train": Dataset.from_dict({"input_ids": [[1, 2]] * 6000})}
    block = {"model": "minilm-l6", "training": {"epochs": 2}, "train": {"a": 1}}  # a "train" key: no split
    inputs = {"params:teacher": block, "tokenized": tokenized}
    with caplog.at_level(logging.INFO, logger="bert_kd.kedro_project.progress"):
        hook.before_node_run(pipeline.nodes[0], inputs)
    teacher = hook.progress.by_name["teacher"]
    assert (teacher.work, teacher.rows, hook.progress.threads) == (2 * 22_713_986, 6000.0, 2)
    seconds = TEACHER_PACE * 6000 / 2 * 2 * 22_713_986 * (1 + JOB_COSTS["student"])  # the student at the teacher's work
    assert caplog.records[-1].getMessage() == "progress: job 1 of 2, ~5 min left from recorded runs"
    assert hook.progress.seconds_left(0.0) == pytest.approx(seconds)


def test_a_checkpoint_s_sizes_are_read_from_its_config_without_its_weights(tmp_path):
    from transformers import AutoModelForSequenceClassification

    from bert_kd.core.tiny_models import tiny_bert, wordpiece_tokenizer
    from bert_kd.kedro_project.progress import checkpoint_sizes, forward_size

    tiny_bert(tmp_path, wordpiece_tokenizer(["a", "b", "c"]))
    model = AutoModelForSequenceClassification.from_pretrained(tmp_path)
    count = sum(p.numel() for p in model.parameters())
    bundle = type("Bundle", (), {"model": model})()
    assert checkpoint_sizes(str(tmp_path)) == (count, forward_size(bundle))
    assert checkpoint_sizes(str(tmp_path / "missing")) is None
