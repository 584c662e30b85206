"""What distillation runs record in MLflow (tracking calls kept out of node bodies).

[`MlflowTracker`][] calls these helpers with what the distillation body
([`bert_kd.experiment.training_jobs.student`][]) and the TED Stage I job computed; nothing here changes a result. This module
imports the models and the distillation package, so ``bert_kd.tracking`` does not re-export it.
"""

from __future__ import annotations

from typing import Any, Mapping

from pydantic import BaseModel

from bert_kd.core.models import count_parameters
from bert_kd.core.reports.plots import attention_heatmap, per_epoch_lines, per_layer_metric
from bert_kd.experiment import jobs
from bert_kd.experiment.lineage import Lineage
from bert_kd.tracking.data import log_training_job
from bert_kd.tracking.runs import RunLogger

__all__ = [
    "log_distillation_end",
    "log_distillation_start",
    "log_job_columns",
    "log_ted_filter_scores",
    "log_ted_stage_one_start",
]


def log_job_columns(
    run: RunLogger,
    job: jobs.Job,
    task: str,
    seed: int,
    data_source: Mapping | None,
    n_train: int,
    model,
    method=None,
    name: str | None = None,
) -> None:
    """``tracking.log_training_job`` for one job: recipe, layer map, weights, data source, sample
    caps, the train split as the run's dataset input (digest = the job's data fingerprint)."""
    data = data_source or {}
    log_training_job(
        run,
        task=task,
        seed=seed,
        glue_dir=data.get("glue_dir"),
        max_train_samples=data.get("max_train_samples"),
        max_eval_samples=data.get("max_eval_samples"),
        method=method,
        dataset_digest=job.spec.get("data"),
        n_train=n_train,
        model_parameters=count_parameters(model),
        name=name if name or method is not None else job.kind,  # a fine-tuning job: method = its kind
    )


def log_distillation_start(run, job, model, method, objective, settings) -> None:
    """The job's comparable columns (task, seed, recipe, layer map, weights, data source) and its
    parameters: teachers, temperature, projection, cache use, student block and training settings."""
    log_job_columns(
        run,
        job.store,
        job.task,
        job.settings.seed,
        job.settings.data_source,
        len(job.data["train"]),
        model,
        method=method,
        name=job.row,
    )
    student = _as_logged(job.student_params)
    if job.multi_teacher:
        run.log_params(
            {
                "teachers": [t.name for t in job.teachers],
                "weights": method.weights,
                "temperature": method.temperature,
                "config": job.recipe,
                "student": student,
                "student_parameters": count_parameters(model),
                "training": vars(settings),
                "key": job.store.key,
                "teacher_cache": [objective.uses_cache(k) for k in range(len(job.teachers))],
            }
        )
        run.log_dict(method.alignment_report(), "alignment_before.json")
        return
    run.log_params(
        {
            "mapping": getattr(method, "mapping", None),
            "weights": method.weights,
            "temperature": method.temperature,
            "projection": "learned linear (student→teacher width)"
            if getattr(method, "projection", None) is not None
            else "none",
            "teacher_cache": objective.uses_cache(0),
            "student": student,
            "student_layers_from_teacher": job.student_layers,
            "student_parameters": count_parameters(model),
            "teacher_parameters": job.teacher_parameters,
            "training": vars(settings),
            "key": job.store.key,
            **({"stages": job.recipe["stages"]} if job.recipe.get("stages") else {}),  # per-epoch weights
        }
    )


def log_distillation_end(run, job, method, outcome: Mapping[str, Any]) -> None:
    """After training: ALP's α heatmap (one teacher); the alignment report, its metrics and each
    teacher's loss share (multi-teacher)."""
    if job.multi_teacher:
        if outcome.get("alignment"):
            run.log_dict(outcome["alignment"], "alignment.json")
        run.log_metrics(method.alignment_metrics())
        if outcome.get("contributions") is not None:
            run.log_dict(outcome["contributions"], "contributions.json")
        observed = {r["epoch"]: r["observed"] for r in outcome.get("history") or [] if r.get("observed")}
        if observed:  # RL-KD: the share of each epoch's examples its agents chose each teacher for
            run.log_figure(
                per_epoch_lines(observed, f"{job.row}: teachers chosen per epoch ({job.task})", "share of examples"),
                "observed_by_epoch.png",
            )
        return
    diagnostics = outcome.get("diagnostics") or {}
    if "alp_attention" in diagnostics:
        run.log_figure(
            attention_heatmap(
                diagnostics["alp_attention"],
                f"ALP α ({job.row}) on {job.task} dev",
                mapping=getattr(method, "mapping", None),
            ),
            "alp_attention.png",
        )
        run.log_dict({"alpha": diagnostics["alp_attention"]}, "alp_attention.json")
    entropy = diagnostics.get("alp_alpha_entropy") or []
    run.log_metrics({f"alp/alpha_entropy/layer_{j}": h for j, h in enumerate(entropy, start=1) if h is not None})


def log_ted_stage_one_start(
    run, job, teacher, mapping, arch: str, route: str, config, data_source, n_train: int
) -> None:
    """TED Stage I's columns and parameters (layer map, filter architecture, student-filter route)."""
    log_job_columns(run, job, job.spec["task"], job.spec["seed"], data_source, n_train, teacher.model)
    run.log_params(
        {
            "mapping": mapping,
            "arch": arch,
            "student_filters": route,
            "training": vars(config),
            "teacher_key": Lineage.of(teacher.info).key,
            "key": job.key,
        }
    )


def log_ted_filter_scores(run, per_layer: Mapping[str, Mapping[str, float]], metric: str, task: str) -> None:
    """Each Stage I filter's dev score as ``filters/<role>/layer_<k>/<metric>`` and one per-layer figure."""
    for role, values in per_layer.items():
        run.log_metrics({f"filters/{role}/layer_{k}/{metric}": v for k, v in values.items()})
    run.log_figure(
        per_layer_metric(per_layer, metric, f"TED filters: dev {metric} per layer ({task})"), "ted_filter_metrics.png"
    )


def _as_logged(params) -> Any:
    """A parameter block as MLflow records it: the dict the user wrote."""
    return params.model_dump(exclude_unset=True) if isinstance(params, BaseModel) else params
