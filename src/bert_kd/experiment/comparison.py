"""A comparison table's rows, verdict and Markdown display (Kedro-free): shared by the distill and
multi-teacher comparison nodes and the registration policy ([`bert_kd.pipelines.registration`][]), which
read the table the same way."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import pandas as pd

from bert_kd.core.machine import busy_note
from bert_kd.core.reports.markdown_tables import rounded, significant
from bert_kd.core.reports.verdict import (
    MAJORITY_METHOD,
    Verdict,
    comparison_verdict,
    duplicate_rows,
    noise_tolerance,
)
from bert_kd.experiment.evaluation import evaluation_split
from bert_kd.experiment.lineage import Lineage

log = logging.getLogger(__name__)

#: The column of a comparison that names the row a duplicate row's job is (only when a table has one).
SAME_JOB_COLUMN = "same job as"
#: A comparison's inference-speed column (left out of the Markdown table when measured on a busy machine).
THROUGHPUT_COLUMN = "throughput (ex/s)"
#: Significant digits of the Markdown table's metrics (the CSV keeps 4 decimals); other columns by name.
METRIC_DIGITS = 4
#: Decimals of the Markdown table's other numeric columns, by column name.
DECIMALS = {"% of teacher": 1, "parameters (M)": 2, THROUGHPUT_COLUMN: 0}


def display_frame(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    """``frame`` with its numbers as text for the Markdown table: metrics to
    [`METRIC_DIGITS`][] significant digits (0.7890, 0.04210),
    the other numeric columns to the decimals of [`DECIMALS`][];
    empty cells stay empty."""
    shown = frame.astype(object).copy()
    for column in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[column]) or pd.api.types.is_bool_dtype(frame[column]):
            continue
        if column in DECIMALS:
            shown[column] = [None if pd.isna(v) else rounded(float(v), DECIMALS[column]) for v in frame[column]]
        else:
            shown[column] = [None if pd.isna(v) else significant(float(v), METRIC_DIGITS) for v in frame[column]]
    return shown


def sort_score(score) -> float:
    """A row's score for sorting: unscored rows last."""
    try:
        value = float(score)
    except (TypeError, ValueError):
        return float("-inf")
    return value if value == value else float("-inf")


def busy_throughput(*evaluations: dict) -> str | None:
    """``load 3.1 on 2 cores`` when any evaluation measured its throughput on a busy machine
    ([`bert_kd.core.machine.is_busy`][]: the load average above the cores), else None."""
    for evaluation in evaluations:
        note = busy_note(evaluation.get("load_average"), evaluation.get("cores"))
        if note:
            return note.removeprefix("machine busy: ")
    return None


def majority_row(teacher_metrics: dict, student_metrics, kept_column: str = "% of teacher") -> dict | None:
    """The majority-class row ([`bert_kd.core.reports.verdict.MAJORITY_METHOD`][]) from the first evaluation
    that recorded it (same dev rows for every model of a table); None for regression tasks."""
    for evaluation in (teacher_metrics, *student_metrics):
        splits = {k: v for k, v in (evaluation.get("majority_class") or {}).items() if v}
        if splits:
            break
    else:
        return None
    metric = evaluation["primary_metric"]
    main = splits.get(evaluation_split(splits), next(iter(splits.values())))
    row = {"method": MAJORITY_METHOD, "task": evaluation["task"]}
    for split, metrics in splits.items():
        for key, value in metrics.items():
            row[key if len(splits) == 1 else f"{split}/{key}"] = round(float(value), 4)
    row[metric] = round(float(main[metric]), 4)
    teacher_score = teacher_metrics.get("score")
    row[kept_column] = round(100.0 * main[metric] / teacher_score, 1) if teacher_score else None
    return row


def with_verdict(markdown: str, verdict: Verdict, title: str) -> str:
    """``markdown`` headed by the verdict's warning (also logged), or unchanged when a best student exists."""
    if not verdict.warning:
        return markdown
    log.warning("%s: %s", title, verdict.warning)
    return f"**No best student**: {verdict.warning}.\n\n" + markdown


def evaluations_by_row(student_metrics, label) -> dict[str, dict]:
    """Each student evaluation under the label its table row carries (``label(info)``), so rows and evaluations
    are joined by name, never by position (a table sorted by score lists them in another order than the
    pipeline's inputs); two evaluations under one label are an error."""
    by_row: dict[str, dict] = {}
    for evaluation in student_metrics:
        name = label(evaluation.get("info", {}))
        if name in by_row:
            raise ValueError(f"two student evaluations are labelled {name!r}: the comparison cannot tell them apart")
        by_row[name] = evaluation
    return by_row


def table_verdict(
    students: list[dict],
    majority: dict | None,
    metric: str,
    reference: dict,
    label=None,
    evaluations: Mapping[str, dict] | None = None,
) -> Verdict:
    """The verdict over ``students`` rows (their ``metric`` column) against the majority row and the
    teacher (``reference['score']``), at the noise of the evaluation split's size
    (``reference['score_examples']``). ``evaluations``: row label → the row's evaluation
    ([`evaluations_by_row`][]), for the rows that are the same
    job (equal ``info['key']``) and the paired test (``correct``). The rows are read in label order, so the
    verdict does not depend on the table's order."""
    label = label or (lambda row: row["method"])
    students = sorted(students, key=label)
    scores = {label(row): row.get(metric) for row in students}
    floor = majority.get(metric) if majority else None
    same_as, correct = {}, {}
    if evaluations:
        missing = [name for name in scores if name not in evaluations]
        if missing:
            raise ValueError(f"comparison rows without an evaluation: {', '.join(missing)}")
        rows = {name: evaluations[name] for name in scores}
        same_as = same_job_rows(rows)
        for name, evaluation in rows.items():
            splits = evaluation.get("correct") or {}
            if splits:
                correct[name] = splits[evaluation_split(splits)]
    teacher = reference.get("score") if isinstance(reference, dict) else None
    return comparison_verdict(
        scores,
        floor,
        noise_tolerance(reference.get("score_examples")),
        metric,
        teacher=None if teacher is None else float(teacher),
        same_as=same_as,
        correct=correct,
    )


def same_job_rows(evaluations: Mapping[str, dict]) -> dict[str, str]:
    """Row → the row with the same job key that stands for it
    ([`duplicate_rows`][]), the rows read in label order so that the
    answer does not depend on the table's order."""
    rows = dict(sorted(evaluations.items()))
    return duplicate_rows(
        {name: Lineage.of(e.get("info")).key for name, e in rows.items()}, preferred=named_after_method(rows.values())
    )


def named_after_method(evaluations) -> set[str]:
    """The rows named after their method (``alp``, ``ckd``): they stand for rows that are the same job."""
    return {e["info"]["method"] for e in evaluations if e.get("info", {}).get("method") == e["info"].get("algorithm")}


def table_row(name: str, evaluation: dict, teacher: dict) -> dict:
    """A model's row of a comparison: its metrics, score, % of ``teacher``'s score, size and throughput."""
    metric = evaluation["primary_metric"]
    row = {"method": name, "task": evaluation["task"]}
    for split, metrics in evaluation["metrics"].items():
        for key, value in metrics.items():
            row[key if len(evaluation["metrics"]) == 1 else f"{split}/{key}"] = round(float(value), 4)
    row[metric] = round(float(evaluation["score"]), 4)
    row["% of teacher"] = round(100.0 * evaluation["score"] / teacher["score"], 1) if teacher["score"] else None
    row["parameters (M)"] = round(evaluation["parameters"] / 1e6, 2)
    row[THROUGHPUT_COLUMN] = round(evaluation["throughput_examples_per_s"], 1)
    return row
