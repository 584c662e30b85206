"""A comparison table on the parent run: its description, per-method metrics and the best student."""

from __future__ import annotations

import logging
import math
from typing import Callable, Mapping

from bert_kd.core.reports.markdown_tables import markdown_table
from bert_kd.tracking.format import format_number, is_number, metric_key, metric_value
from bert_kd.tracking.ui import MAX_NOTE_CHARS, NOTE_TAG, run_url

log = logging.getLogger(__name__)


#: Metric of a comparison's parent run: its top student score, whatever the task's metric (a column of the runs view).
BEST_SCORE = "best/score"


def row_label(row: Mapping) -> str:
    """The name of a comparison row: its method (``okd[a+b]`` when it lists teachers); teacher rows
    of a multi-teacher table are named after the teacher."""
    method = str(row.get("method", "?"))
    teachers = row.get("teachers")
    if method == "teacher":
        return str(teachers) if teachers else "teacher"
    return f"{method}[{teachers}]" if teachers else method


def _numeric_items(row: Mapping) -> dict[str, float]:
    out = {}
    for key, value in row.items():
        if isinstance(value, bool) or not is_number(value) or isinstance(value, str):
            continue
        if math.isfinite(float(value)):
            out[metric_key(key)] = metric_value(value)
    return out


def _best_student(students, primary_metric: str, warning: str | None, label, metrics: dict) -> tuple:
    """(the best student row, None on a tie; the comparison's tags), the top score added to ``metrics``
    as ``best/<primary_metric>`` and [`BEST_SCORE`][] (a tie too)."""
    scored = [r for r in students if is_number(r.get(primary_metric)) and math.isfinite(float(r[primary_metric]))]
    best = max(scored, key=lambda r: float(r[primary_metric])) if scored else None
    tags = {"comparison.primary_metric": primary_metric}
    if best is not None:  # named best/score too, so the runs table's one column shows it
        metrics[f"best/{metric_key(primary_metric)}"] = metrics[BEST_SCORE] = metric_value(best[primary_metric])
    if warning:  # every student ties (bert_kd.core.reports.verdict): no best student is named
        return None, {**tags, "comparison.warning": warning}
    if best is not None:
        tags["best_method"] = label(best)
    return best, tags


def log_comparison_to_parent(
    rows,
    primary_metric: str,
    *,
    markdown: str | None = None,
    title: str = "",
    teacher_run_id: str | None = None,
    label: Callable[[Mapping], str] = row_label,
    run_id: str | None = None,
    warning: str | None = None,
) -> dict[str, float]:
    """Put a comparison on the parent run: its table as the run's description, every numeric cell
    as ``compare/<method>/<column>`` (teacher rows: ``teacher/<column>``), the top score as metrics
    ``best/<primary_metric>`` and [`BEST_SCORE`][] (a tie too), the best
    student (not on a tie) as tag ``best_method``, and a link to the teacher's run.

    ``rows`` is a DataFrame or a list of dicts with a ``method`` column (``"teacher"`` marks teacher
    rows, ``"majority class"`` the floor, logged as ``majority/<column>``). With ``warning`` (every
    student ties, [`bert_kd.core.reports.verdict`][]) the description says so and no best student is named.
    Logs to ``run_id`` or the active run (kedro-mlflow's); returns the metrics (also when
    there is no run, so callers and tests can inspect them).
    """
    if hasattr(rows, "to_dict"):
        rows = rows.to_dict("records")
    rows = [dict(r) for r in rows]
    if primary_metric and rows and not any(primary_metric in r for r in rows):
        raise ValueError(f"primary_metric {primary_metric!r} is not a column of the comparison ({sorted(rows[0])})")
    teachers = [r for r in rows if r.get("method") == "teacher"]
    floors = [r for r in rows if r.get("method") == FLOOR_METHOD]
    students = [r for r in rows if r.get("method") not in ("teacher", FLOOR_METHOD)]
    metrics: dict[str, float] = {}
    for row in floors:
        metrics.update({f"majority/{k}": v for k, v in _numeric_items(row).items()})
    for row in teachers:
        prefix = "teacher" if len(teachers) == 1 else f"teacher/{metric_key(label(row))}"
        metrics.update({f"{prefix}/{k}": v for k, v in _numeric_items(row).items()})
    for row in students:
        metrics.update({f"compare/{metric_key(label(row))}/{k}": v for k, v in _numeric_items(row).items()})
    best, tags = _best_student(students, primary_metric, warning, label, metrics)

    import mlflow
    from mlflow.entities import Metric, RunTag
    from mlflow.tracking import MlflowClient

    run_id = run_id or (mlflow.active_run().info.run_id if mlflow.active_run() else None)
    if run_id is None:
        return metrics
    client = MlflowClient()
    teacher_link = ""
    if teacher_run_id:
        try:
            teacher_run = client.get_run(teacher_run_id)
            url = run_url(teacher_run.info.experiment_id, teacher_run_id)
            tags.update({"teacher_run_id": teacher_run_id, "teacher_run_url": url})
            teacher_link = f"Teacher run: [{teacher_run.info.run_name}]({url})\n\n"
        except Exception as exc:  # a teacher trained against another tracking store
            log.warning("teacher run %s not found in this tracking store (%s)", teacher_run_id, exc)
            tags["teacher_run_id"] = teacher_run_id
    best_line = f"**No best student**: {warning}\n\n" if warning else ""
    if best is not None:
        best_line = f"Best student: **{label(best)}** ({primary_metric} {format_number(best[primary_metric], 4)})\n\n"
    body = markdown if markdown is not None else markdown_table(rows)
    note = (f"### {title}\n\n" if title else "") + best_line + teacher_link + body
    if len(note) > MAX_NOTE_CHARS:  # MLflow refuses tag values over 8000 characters
        note = (
            note[: MAX_NOTE_CHARS - 80].rsplit("\n", 1)[0]
            + "\n\n… (truncated: the full table is in the run's artifacts)\n"
        )
    tags[NOTE_TAG] = note
    import time

    now = int(time.time() * 1000)
    entries = [Metric(k, v, now, 0) for k, v in metrics.items()]
    for start in range(0, max(len(entries), 1), 1000):  # MLflow's per-request limit
        client.log_batch(
            run_id,
            metrics=entries[start : start + 1000],
            tags=[RunTag(k, str(v)) for k, v in tags.items()] if start == 0 else [],
        )
    return metrics


#: ``method`` of the majority-class row of a comparison (``bert_kd.core.reports.verdict.MAJORITY_METHOD``).
FLOOR_METHOD = "majority class"
