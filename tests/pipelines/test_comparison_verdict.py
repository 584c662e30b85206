"""Comparison tables carry the majority-class row and refuse to crown a student that ties."""

from __future__ import annotations

import logging

import pytest

from bert_kd.pipelines.distill.nodes import compare_methods
from bert_kd.pipelines.multi_teacher.nodes import compare_multi_teacher


def evaluation(method: str | None, accuracy: float, majority: float = 0.5, n: int = 400, **info) -> dict:
    return {
        "task": "rte",
        "primary_metric": "accuracy",
        "score": accuracy,
        "metrics": {"validation": {"accuracy": accuracy}},
        "majority_class": {"validation": {"accuracy": majority}},
        "examples": {"validation": n},
        "score_examples": n,
        "parameters": 4e6,
        "throughput_examples_per_s": 100.0,
        "info": {"method": method, **info},
    }


def test_a_majority_class_only_run_is_reported_as_such(caplog):
    teacher = evaluation(None, 0.7)
    students = [evaluation(m, 0.5) for m in ("nkd", "alp")]
    with caplog.at_level(logging.WARNING):
        frame, markdown, _ = compare_methods(teacher, *students, table="distill_baselines")
    assert list(frame["method"]) == ["teacher", "majority class", "nkd", "alp"]
    floor = frame[frame["method"] == "majority class"].iloc[0]
    assert floor["accuracy"] == 0.5 and floor["% of teacher"] == pytest.approx(71.4)
    assert markdown.startswith("**No best student**: every student ties with the majority class")
    assert "every student ties with the majority class" in caplog.text


def test_students_within_noise_tie_and_a_clear_winner_is_not_warned_about(caplog):
    teacher = evaluation(None, 0.8)
    # 400 dev examples: noise 0.5/√400 = 0.025
    _, tied, _ = compare_methods(teacher, evaluation("nkd", 0.70), evaluation("alp", 0.72))
    assert tied.startswith("**No best student**: tied: alp, nkd (accuracy 0.7000–0.7200")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        _, clear, _ = compare_methods(teacher, evaluation("nkd", 0.65), evaluation("alp", 0.72))
    assert clear.startswith("| method |") and "No best student" not in caplog.text


def test_a_teacher_at_the_majority_class_is_named_as_the_cause(caplog):
    teacher = evaluation(None, 0.51)
    with caplog.at_level(logging.WARNING):
        _, markdown, _ = compare_methods(teacher, evaluation("nkd", 0.5), evaluation("alp", 0.5))
    assert markdown.startswith("**No best student**: the teacher itself ties with the majority class (accuracy 0.5100")
    assert "label prior" not in markdown


def test_rows_that_are_one_job_say_so_and_do_not_tie_with_themselves():
    teacher = evaluation(None, 0.8)
    frame, markdown, _ = compare_methods(
        teacher,
        evaluation("alp", 0.78, key="k1"),
        evaluation("alp_no", 0.78, key="k1"),
        evaluation("nkd", 0.70, key="k2"),
    )
    assert list(frame["same job as"].iloc[2:].fillna("")) == ["", "alp", ""]
    assert markdown.startswith("| method |")  # alp is a clear winner over nkd: alp_no is not a runner-up
    assert "| alp_no | rte | 0.7800 | 97.5 | 4.00 | 100 | alp |" in markdown  # 4 significant digits, fixed decimals


def test_the_table_reads_top_score_first_and_leaves_out_a_throughput_measured_on_a_busy_machine():
    teacher = evaluation(None, 0.8)
    students = [evaluation("nkd", 0.70123), evaluation("alp", 0.72), evaluation("pkd", 0.6)]
    frame, markdown, _ = compare_methods(teacher, *students)
    assert list(frame["method"]) == ["teacher", "majority class", "alp", "nkd", "pkd"]
    assert "| nkd | rte | 0.7012 |" in markdown and "throughput (ex/s)" in markdown
    busy = {**evaluation("ckd", 0.65), "load_average": 3.1, "cores": 2}
    frame, markdown, _ = compare_methods(teacher, *students, busy)
    assert "throughput (ex/s)" in frame.columns  # the CSV keeps it
    assert "| throughput (ex/s) |" not in markdown.splitlines()[0 if markdown.startswith("|") else 2]
    assert "throughput (ex/s) left out: measured on a loaded machine (load 3.1 on 2 cores)" in markdown


def test_the_multi_teacher_tables_carry_the_floor_and_the_warning():
    teachers = [{**evaluation(None, 0.7), "name": "a"}, {**evaluation(None, 0.6), "name": "b"}]
    students = [
        evaluation("okd", 0.5, configuration="okd", teachers=["a", "b"]),
        evaluation("multi_teacher", 0.51, configuration="mt", teachers=["a", "b"]),
    ]
    table, markdown, _ = compare_multi_teacher(teachers, *students)
    assert list(table["method"]) == ["teacher", "teacher", "majority class", "multi_teacher", "okd"]  # top first
    assert table.loc[2, "% of best teacher"] == pytest.approx(71.4)
    assert markdown.startswith("**No best student**")
    assert "| majority class |" in markdown.split("## Table 3")[1]  # the floor in both tables
