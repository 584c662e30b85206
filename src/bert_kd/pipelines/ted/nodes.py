"""Nodes of TED: Stage I trains task-aware filters, Stage II distils through them (the job bodies:
[`bert_kd.experiment.training_jobs.ted_filters`][]), and the filters' per-layer quality report."""

from __future__ import annotations

from bert_kd.core.data.glue import get_task
from bert_kd.core.distill.ted_filters import evaluate_filters
from bert_kd.core.distill.ted_filters.quality import filter_quality_figure, filter_quality_table, majority_class_score
from bert_kd.core.metrics import primary_metric
from bert_kd.core.models import ModelBundle
from bert_kd.experiment.evaluation import evaluation_split
from bert_kd.experiment.run_setup import collator_for
from bert_kd.experiment.tracker import kedro_run
from bert_kd.experiment.training_jobs import ted_filters as ted_job
from bert_kd.experiment.training_jobs.student import task_of


def train_ted_filters(teacher: ModelBundle, tokenized, ted, ted_student, settings) -> dict:
    """TED Stage I (Eq. 4–5), reused from the store when already trained from the same content
    ([`bert_kd.experiment.training_jobs.ted_filters.train_ted_filters`][])."""
    return ted_job.train_ted_filters(teacher, tokenized, ted, ted_student, settings)


def ted_student_init(
    ted_filters: dict, teacher: ModelBundle, student, settings, row: str | None = None
) -> ted_job.FilteredStudentStart:
    """Stage II's student start with the Stage I filters
    ([`bert_kd.experiment.training_jobs.ted_filters.ted_student_init`][])."""
    return ted_job.ted_student_init(ted_filters, teacher, student, settings, row=row)


def ted_filter_quality(ted_filters: dict, teacher: ModelBundle, tokenized, ted_student, settings):
    """TED per-layer filter quality ([`bert_kd.core.distill.ted_filters.quality`][]): the dev score of each
    Stage I filter's task head, teacher filters at M(k) next to student filters at k, against the
    majority class. Teacher (and trained student) scores come from the Stage I report; copied
    student filters are scored here on the student Stage II starts from. → (CSV table, figure)."""
    spec = get_task(task_of(settings))
    metric = primary_metric(spec.name)
    report = ted_filters.get("report") or {}
    if "per_layer" not in report or "mapping" not in report:
        raise ValueError(
            f"the TED Stage I report in {ted_filters.get('store_path')} has no per-layer scores: "
            "retrain the filters (runtime.recompute: true)"
        )
    per_layer = {"teacher": report["per_layer"]["teacher"]}
    split = evaluation_split(tokenized)
    if "student" in report["per_layer"]:
        per_layer["student"] = report["per_layer"]["student"]
    elif ted_filters.get("student") is not None:
        student = ted_job.ted_student_init(ted_filters, teacher, ted_student, spec.name)
        scores = evaluate_filters(
            student.model, ted_filters["student"], tokenized[split], collator_for(student.tokenizer), spec.name
        )
        per_layer["student"] = {str(k): v[metric] for k, v in scores.items()}
    majority = majority_class_score(spec.name, tokenized[split]["labels"])
    table = filter_quality_table(per_layer, report["mapping"], spec.name, majority)
    figure = filter_quality_figure(
        table,
        spec.name,
        f"TED Stage I filters: dev {metric} of each layer's head ({spec.name}, student filters: "
        f"{report.get('route', '?')})",
    )
    kedro_run().log_report("figures/ted_filter_quality", table, figure)
    return table, figure
