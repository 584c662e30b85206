"""A distilled student registered in MLflow and evaluated back through ``models:/<name>/<version>``."""

from __future__ import annotations

import json
import subprocess

import mlflow
import pandas as pd
import pytest

from bert_kd.experiment.run_setup import RunCommand
from bert_kd.pipelines.registration import register_best_student
from tests.pipelines.conftest import latest_version
from tests.recorder import Recorder


def test_evaluate_reads_a_registered_student_and_gets_the_same_metric(run_pipeline):
    # the session's stored teacher, reused in this run's new tracking store: the run that logged its
    # LoggedModel here stands for it, and the version's teacher_run_id tag names that run
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
    teacher_model = mlflow.MlflowClient(uri).get_logged_model(teacher["info"]["mlflow_model_id"])
    assert teacher["info"]["reused"] and teacher["info"]["trained_in_run_id"] != teacher_model.source_run_id
    assert teacher_model.source_run_id in version.tags["bert_kd.teacher_run"]  # a link that opens in this store
    assert version.tags["bert_kd.store_key"] == student["info"]["key"]
    assert len(version.tags) <= 10 and "bert_kd.recipe" not in version.tags  # what identifies the model
    student_run = mlflow.MlflowClient(uri).get_run(student["info"]["model_run_id"]).data.tags  # the rest: on its run
    assert student_run["bert_kd.teacher_run_id"] == teacher["info"]["model_run_id"] == teacher_model.source_run_id
    assert student_run["bert_kd.recipe"].startswith("ce 0.3")
    assert version.tags["bert_kd.verdict"] == "winner" and "bert_kd.tied" not in version.tags
    run_pipeline("evaluate", evaluate={"model": "models:/tiny-rte-student@champion", "max_seq_length": 32})
    evaluation = json.loads(latest_version(root / "data/08_reporting/evaluation.json").read_text())
    assert evaluation["model"] == "models:/tiny-rte-student@champion"
    assert evaluation["score"] == pytest.approx(student["score"], abs=1e-9)


def test_a_tie_registers_no_champion_but_each_tied_job_and_says_how_to_decide_it(monkeypatch, caplog):
    from bert_kd.pipelines import registration as nodes

    tracker, parent = _recorders(monkeypatch, nodes)
    given = {"glue_dir": "../shared/glue", "seed": 42, "tracking": {"register_ties": True}}
    monkeypatch.setattr(nodes, "run_command", lambda: RunCommand.of("compare", given))
    table = pd.DataFrame(
        [
            {"method": "teacher", "accuracy": 0.82},
            {"method": "majority class", "accuracy": 0.51},
            {"method": "nkd", "accuracy": 0.789},
            {"method": "alp", "accuracy": 0.780},
            {"method": "alp_no", "accuracy": 0.780},
        ]
    )
    teacher = {"primary_metric": "accuracy", "score": 0.82, "score_examples": 872, "info": {}}
    students = [
        {"score": score, "info": {"method": row, "algorithm": row.split("_")[0], "key": key}}
        for row, score, key in (("nkd", 0.789, "k1"), ("alp", 0.78, "k2"), ("alp_no", 0.78, "k2"))
    ]
    settings = {"task": "sst2", "seed": 42, "tracking": {"enabled": True}}
    result = nodes.register_best_student(table, teacher, settings, *students, table_name="distill_baselines")
    registered = _registrations(tracker)
    tags = {k: v for call in parent.called("set_tags") for k, v in call["tags"].items()}
    tags["note"] = parent.called("head_note")[-1]["line"]
    assert [(row, alias, verdict) for row, alias, verdict, _ in registered] == [
        ("nkd", "tied-nkd", "tie"),
        ("alp", "tied-alp", "tie"),  # alp_no is the same job: one version
    ]
    assert "champion" not in {alias for _, alias, _, _ in registered}
    assert result["versions"] == {"nkd": "models:/bert_kd-sst2-student/1", "alp": "models:/bert_kd-sst2-student/2"}
    assert result["decide"] == (
        "for seed in 43 44 45 46; do kedro run --env compare --pipelines=distill_baselines "
        '--params "glue_dir=../shared/glue,tracking.register_ties=true,seed=$seed"; done'
    )
    assert tags["comparison.decide"] == result["decide"] and "no `champion`" in registered[0][3]
    assert "tie, no @champion" in caplog.text
    assert tags["note"].startswith("**Registered, tied (no `champion`)**: nkd `models:/bert_kd-sst2-student@tied-nkd`")
    from bert_kd.kedro_project.hooks import closing_summary

    summary = closing_summary("distill_baselines", {}, [], {"distill_baselines": result}, None).splitlines()
    assert summary[-2] == (
        "registered, tied (no @champion): nkd as models:/bert_kd-sst2-student/1 = models:/bert_kd-sst2-student@tied-nkd, "
        "alp as models:/bert_kd-sst2-student/2 = models:/bert_kd-sst2-student@tied-alp"
    )
    assert summary[-1] == f"to decide the tie: {result['decide']}"
    off = {**settings, "tracking": {"enabled": True, "register_ties": False}}
    tracker.calls.clear()
    assert nodes.register_best_student(table, teacher, off, *students)["registered"] is False and not tracker.calls


def _registrations(tracker: Recorder, keyed: bool = False) -> list[tuple]:
    """The registrations a recording tracker saw: (method, [job key,] alias, verdict, description) each."""
    return [
        (c["student_info"]["method"], *([c["student_info"]["key"]] if keyed else []), c["alias"])
        + (c["extra_tags"]["bert_kd.verdict"], c["description"])
        for c in tracker.called("register_best_student")
    ]


def _recorders(monkeypatch, nodes) -> tuple[Recorder, Recorder]:
    """A recording tracker (each registration's version: its number among the registrations) and a
    recording ``kedro run`` reporter, in place of MLflow's."""
    from bert_kd.experiment.tracker import JobTracker, KedroRunReporter

    tracker = Recorder(
        JobTracker, {"register_best_student": lambda **_: str(len(tracker.called("register_best_student")))}
    )
    parent = Recorder(KedroRunReporter)
    monkeypatch.setattr(nodes, "tracker_for", lambda tracking: tracker)
    monkeypatch.setattr(nodes, "kedro_run", lambda: parent)
    return tracker, parent


def _tie_recorder(monkeypatch):
    from bert_kd.pipelines import registration as nodes

    tracker, _ = _recorders(monkeypatch, nodes)
    return nodes, tracker


#: A tied comparison as `--env compare` makes it: rows (method, score, job key), in the pipeline's order;
#: ckd_po is ckd's job, alp_po alp's; rkd and logits_mse are jobs of their own.
TIED = [
    ("logits_mse", 0.800, "k-lm"),
    ("rkd", 0.803, "k-rkd"),
    ("ckd", 0.805, "k-ckd"),
    ("ckd_po", 0.805, "k-ckd"),
    ("alp", 0.806, "k-alp"),
    ("alp_po", 0.806, "k-alp"),
]


def _tied_inputs():
    teacher = {"primary_metric": "accuracy", "score": 0.85, "score_examples": 872, "info": {}}
    students = [
        {"score": score, "info": {"method": row, "algorithm": row.split("_")[0], "key": key}}
        for row, score, key in TIED
    ]
    rows = [{"method": "teacher", "accuracy": 0.85}, {"method": "majority class", "accuracy": 0.51}]
    rows += [{"method": row, "accuracy": score} for row, score, _ in TIED]
    settings = {"task": "sst2", "seed": 42, "tracking": {"enabled": True}}
    return teacher, students, rows, settings


def test_tied_rows_are_registered_with_their_own_evaluations_whatever_the_tables_order(monkeypatch):
    """The comparison table lists rows by score, the evaluations come in the pipeline's order: a row's same-job
    map and its registered model were taken by position (rkd left out, ckd_po registered as ckd's model, "alp (=
    alp_po, rkd)"). Each row is now joined with its own evaluation by name."""
    nodes, tracker = _tie_recorder(monkeypatch)
    teacher, students, rows, settings = _tied_inputs()
    by_score = pd.DataFrame(sorted(rows, key=lambda r: -r["accuracy"]))
    result = nodes.register_best_student(by_score, teacher, settings, *students, table_name="distill_baselines")
    registered = _registrations(tracker, keyed=True)
    assert result["verdict"] == "tie"
    assert {(method, key) for method, key, *_ in registered} == {
        ("logits_mse", "k-lm"),
        ("rkd", "k-rkd"),
        ("ckd", "k-ckd"),
        ("alp", "k-alp"),
    }
    descriptions = {method: description for method, _, _, _, description in registered}
    assert "alp (= alp_po)" in descriptions["alp"] and "rkd)" not in descriptions["alp"].split("\n")[0]


def test_any_order_of_the_tables_rows_gives_the_same_verdict_versions_and_descriptions(monkeypatch):
    """Property: every permutation of the student rows (and of the evaluations) registers the same versions with
    the same aliases and descriptions."""
    import itertools

    teacher, students, rows, settings = _tied_inputs()
    head, body = rows[:2], rows[2:]
    outcomes = set()
    for n, order in enumerate(itertools.permutations(range(len(body)))):
        if n % 7:  # 720 orders; every 7th of them, the identity and reversals among them
            continue
        nodes, tracker = _tie_recorder(monkeypatch)
        table = pd.DataFrame(head + [body[i] for i in order])
        shuffled = [students[i] for i in reversed(order)]
        result = nodes.register_best_student(table, teacher, settings, *shuffled, table_name="distill_baselines")
        registered = _registrations(tracker, keyed=True)
        outcomes.add(
            (
                result["verdict"],
                tuple(result["tied"]),
                tuple(sorted((m, k, a) for m, k, a, _, _ in registered)),
                tuple(sorted(d.split("\n")[0] for *_, d in registered)),
            )
        )
    assert len(outcomes) == 1


def test_a_row_without_its_evaluation_is_an_error_not_a_silent_drop(monkeypatch):
    nodes, _ = _tie_recorder(monkeypatch)
    teacher, students, rows, settings = _tied_inputs()
    with pytest.raises(ValueError, match="without an evaluation: rkd"):
        nodes.register_best_student(
            pd.DataFrame(rows), teacher, settings, *[s for s in students if s["info"]["method"] != "rkd"]
        )
    with pytest.raises(ValueError, match="two student evaluations are labelled 'alp'"):
        nodes.register_best_student(pd.DataFrame(rows), teacher, settings, *students, students[-2])


def test_the_deciding_command_runs_as_printed_with_the_runs_env_and_params(tmp_path):
    """The printed loop, run by a shell with a ``kedro`` that records its arguments: four runs, each with the
    run's ``--env`` and ``--params`` (values with spaces and shell characters intact) and its own seed."""
    from bert_kd.core.reports.verdict import deciding_command

    params = {"glue_dir": "../shared glue", "reproduce.seeds": "1 2", "note": 'a "$b"', "seed": 42, "x": False}
    command = deciding_command("distill_baselines", env="compare", params=params)
    kedro = tmp_path / "kedro"
    kedro.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s|" "$a"; done; echo\n')
    kedro.chmod(0o755)
    ran = subprocess.run(
        ["bash", "-c", command], env={"PATH": f"{tmp_path}:/usr/bin:/bin"}, capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr
    given = 'glue_dir=../shared glue,reproduce.seeds=1 2,note=a "$b",x=false'
    assert ran.stdout.splitlines() == [
        f"run|--env|compare|--pipelines=distill_baselines|--params|{given},seed={seed}|" for seed in (43, 44, 45, 46)
    ]


def test_the_run_command_flattens_kedros_nested_params():
    command = RunCommand.of(None, {"reproduce": {"table": "cpu_protocol", "seeds": "1 2"}, "task": "rte"})
    assert command == RunCommand(None, {"reproduce.table": "cpu_protocol", "reproduce.seeds": "1 2", "task": "rte"})
