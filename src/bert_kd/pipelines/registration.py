"""The registration policy of a comparison, shared by the distill and multi-teacher pipelines: the best
student (or, on a tie, each tied student) as a registered MLflow model version through
[`JobTracker`][experiment.tracker.JobTracker] (nodes never call MLflow), and the node functions that
gather a comparison's students into one input ([`gather_students`][], [`join_gathered`][]), so the compare
and register nodes read one input for all the rows, whatever their number."""

from __future__ import annotations

import logging
from functools import update_wrapper

import pandas as pd

from bert_kd.core.reports.markdown_tables import markdown_table, significant
from bert_kd.core.reports.verdict import MAJORITY_METHOD, TIE, Verdict, deciding_command, tied_alias
from bert_kd.experiment.comparison import display_frame, evaluations_by_row, table_verdict
from bert_kd.experiment.run_setup import RunSettings, run_command
from bert_kd.experiment.tracker import (
    CHAMPION_ALIAS,
    default_registered_name,
    is_main_process,
    kedro_run,
    tracker_for,
)
from bert_kd.pipelines.wrapping import located_at

log = logging.getLogger(__name__)


def register_best_student(
    table: pd.DataFrame,
    teacher_metrics: dict,
    settings,
    *student_metrics: dict,
    table_name: str | None = None,
    label=None,
) -> dict:
    """Register the comparison's best student (``tracking.registered_model``, default
    ``bert_kd-<task>-student``) with its lineage tags and the verdict's
    ([`Verdict.tags`][]) and the alias ``champion``. A tie
    crowns no one: each tied job's student is registered with its own alias ``tied-<row>``
    ([`tied_alias`][]), no ``champion``, and the result names
    the command that can decide it (more seeds,
    [`deciding_command`][]), unless
    ``tracking.register_ties`` is false (then nothing). Nothing is registered when the teacher or every
    student sits at the majority class, tracking is off or ``tracking.register_best`` is false
    (``settings``: the run settings). → what was done (``registered``, ``uri``, ``alias``,
    ``verdict``, ``tied``, ``versions``, ``decide`` or ``reason``), also tagged on the parent run."""
    run = RunSettings.of(settings)
    tracking = run.tracking
    label = label or (lambda info: info.get("method", "?"))
    if not tracking.enabled or not tracking.register_best or not is_main_process():
        return {"registered": False, "reason": "tracking.enabled or tracking.register_best is false"}
    metric = teacher_metrics["primary_metric"] if isinstance(teacher_metrics, dict) else None
    rows = table.to_dict("records")
    majority = next((r for r in rows if r.get("method") == MAJORITY_METHOD), None)
    students = [r for r in rows if r.get("method") not in ("teacher", MAJORITY_METHOD)]
    row_label = (lambda r: f"{r['method']}[{r['teachers']}]") if "teachers" in table.columns else None
    evaluations = evaluations_by_row(student_metrics, label)
    verdict = table_verdict(students, majority, metric, teacher_metrics, label=row_label, evaluations=evaluations)
    tie = verdict.kind == TIE
    decide = decide_tie(table_name) if tie else None
    chosen = [verdict.best] if verdict.best else []
    if tie and tracking.register_ties:  # one version per tied job (rows that are the same job share it)
        chosen = [row for row in verdict.tied if row not in verdict.same_as]
    if not chosen:
        log.warning("%s: no student registered: %s", table_name or "comparison", verdict.warning)
        return {
            "registered": False,
            "reason": verdict.warning,
            "verdict": verdict.kind,
            "tied": list(verdict.tied),
            **({"decide": decide} if decide else {}),
        }
    name = tracking.registered_model or default_registered_name(run.task)
    versions: dict[str, str] = {}
    for row in chosen:
        best = evaluations[row]
        alias = tied_alias(row) if tie else CHAMPION_ALIAS
        version = tracker_for(tracking).register_best_student(
            best["info"],
            teacher_metrics.get("info"),
            name,
            extra_tags={
                "bert_kd.metric": metric,
                "bert_kd.score": significant(float(best["score"]), 4),
                "bert_kd.table": table_name or "",
                **verdict.tags(),
                **({"bert_kd.decide": decide} if decide else {}),
            },
            description=registration_description(row, table, metric, table_name, run.task, verdict),
            alias=alias,
        )
        versions[row] = f"models:/{name}/{version}"
        log.info("%s: %s registered as %s (alias %s)", table_name or "comparison", row, versions[row], alias)
    top = chosen[0]
    kedro_run().head_note(
        f"**Registered, tied (no `{CHAMPION_ALIAS}`)**: "
        + ", ".join(f"{row} `models:/{name}@{tied_alias(row)}`" for row in chosen)
        + f". To decide it: `{decide}`"
        if tie
        else f"**Registered**: {top} as `models:/{name}@{CHAMPION_ALIAS}` ({versions[top]})"
    )
    if tie:
        log.warning(
            "%s: tie, no @%s: %s registered as %s; to decide it: %s",
            table_name or "comparison",
            CHAMPION_ALIAS,
            ", ".join(chosen),
            ", ".join(f"models:/{name}@{tied_alias(row)}" for row in chosen),
            decide,
        )
    kedro_run().set_tags(
        {
            "registered_model": versions[top],
            "registered_method": top if not tie else ", ".join(chosen),
            **verdict.tags(),
            **({"comparison.decide": decide} if decide else {}),
        }
    )
    return {
        "registered": True,
        "uri": versions[top],
        "name": name,
        "version": versions[top].rsplit("/", 1)[-1],
        "method": top,
        "alias": tied_alias(top) if tie else CHAMPION_ALIAS,
        "verdict": verdict.kind,
        "tied": list(verdict.tied),
        **({"versions": versions, "decide": decide} if tie else {}),
    }


def decide_tie(table_name: str | None) -> str:
    """[`deciding_command`][] for this table with the
    current run's ``--env`` and ``--params`` ([`run_command`][])."""
    command = run_command()
    return deciding_command(table_name, env=command.env, params=command.params)


def registration_description(
    best: str,
    table: pd.DataFrame,
    metric: str | None,
    table_name: str | None,
    task: str,
    verdict: Verdict | None = None,
) -> str:
    """The registered version's description: which row won what (or that it tops a tie), then the comparison."""
    if verdict is not None and verdict.kind == TIE:
        head = (
            f"One of the rows tied in `{table_name or 'comparison'}` on {task} by dev {metric}: **{best}** "
            f"(alias `{tied_alias(best)}`, no `{CHAMPION_ALIAS}`); {verdict.warning}. To decide it: "
            f"`{decide_tie(table_name)}`.\n\n"
        )
    else:
        head = f"Best student of `{table_name or 'comparison'}` on {task} by dev {metric}: **{best}**.\n\n"
    return head + markdown_table(display_frame(table, metric or ""))


def registration_node(table_name: str, label=None):
    """[`register_best_student`][] as a node function over
    ``(table, teacher_metrics, students, run_settings)``: ``students`` is the comparison's student
    evaluations gathered into one list ([`gather_students`][])."""

    def register(table, teacher_metrics, students, settings):
        return register_best_student(table, teacher_metrics, settings, *students, table_name=table_name, label=label)

    return update_wrapper(register, register_best_student)


#: The most inputs a node reads: a comparison's students are gathered in groups of at most this many.
FAN_IN = 6


def gather_students(*evaluations: dict) -> list[dict]:
    """Student evaluations (one per comparison row, in the recipe's order) as one list: the one input
    that a comparison's table and its registration read."""
    return list(evaluations)


def join_gathered(*groups: list[dict]) -> list[dict]:
    """Groups made by [`gather_students`][] as one list, in order (a comparison of more than
    [`FAN_IN`][] rows)."""
    return [evaluation for group in groups for evaluation in group]


def over_gathered(compare):
    """``compare(teacher_metrics, *student_metrics)`` as a node function over ``(teacher_metrics, students)``,
    ``students`` being the gathered list ([`gather_students`][])."""

    def compare_gathered(teacher_metrics, students):
        return compare(teacher_metrics, *students)

    return located_at(update_wrapper(compare_gathered, compare), compare)  # kedro-viz shows compare's file
