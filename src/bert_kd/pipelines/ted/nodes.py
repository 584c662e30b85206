"""Nodes of TED: Stage I trains task-aware filters, Stage II distils through them."""

from __future__ import annotations

import logging
from functools import partial

from bert_kd import jobs
from bert_kd.data.glue import get_task
from bert_kd.distill.ted.quality import filter_quality_figure, filter_quality_table, majority_class_score
from bert_kd.distill.ted import (
    evaluate_filters,
    copy_filters_for_student,
    load_ted_filters,
    save_ted_filters,
    ted_layer_map,
    train_filters,
)
from bert_kd.models import ModelBundle, init_key_material, num_layers, parameters_fingerprint
from bert_kd.pipelines import common
from bert_kd.pipelines.distill.nodes import build_student_model, check_teacher, distill_student, shallow_student
from bert_kd.plots import per_layer_metric
from bert_kd.training import SupervisedObjective, fit

log = logging.getLogger(__name__)


def train_ted_filters(teacher: ModelBundle, tokenized, task: str, ted: dict, ted_student: dict, seed: int,
                      tracking: dict, runtime: dict, data_source: dict | None = None) -> dict:
    """TED Stage I (Eq. 4–5): filters on the frozen teacher at layers M(k); student filters copied
    from them (``student_filters: copy``, App. A.4 Case 2.2) or trained on a fine-tuned student
    (``train``). Reused from the store when already trained from the same content."""
    check_teacher(teacher, task)
    spec = get_task(task)
    route, arch, training = _filter_options(ted)
    mapping = ted_layer_map(ted.get("mapping", "distilbert"), num_layers(teacher.model), int(ted_student["num_layers"]))
    config = common.training_config(training, runtime, seed, spec.name, None)
    student_config = common.training_config(ted_student.get("training"), runtime, seed, spec.name, None)
    job = common.job("ted_filters", {
        "task": spec.name, "teacher": teacher.info.get("key"), "mapping": mapping, "arch": arch, "route": route,
        "training": jobs.training_spec(vars(config)), "student": init_key_material({k: v for k, v in ted_student.items() if k != "training"}),
        "student_training": jobs.training_spec(vars(student_config)) if route == "train" else None,
        "seed": seed, "data": jobs.dataset_fingerprint(tokenized),
    })

    train = partial(_stage_one, teacher=teacher, tokenized=tokenized, task=spec.name, mapping=mapping, arch=arch, route=route,
                    config=config, ted_student=ted_student, student_config=student_config, tracking=tracking, job=job,
                    seed=seed, data_source=data_source)
    outcome = jobs.run_job(job, train, lambda result, d: save_ted_filters(result, d / "stage1"),
                           lambda d: load_ted_filters(d / "stage1"), recompute=common.recompute(runtime),
                           writer=common.is_main_process(),
                           provenance_fn=lambda result: {"mlflow_run_id": result["report"].get("mlflow_run_id")})
    if not outcome.reused and (tracking or {}).get("log_models", True):
        with common.reopen_run(outcome.value["report"].get("mlflow_run_id"), tracking) as run:
            run.log_artifacts(outcome.path, "ted_filters")
    return {**outcome.value, "key": job.key, "store_path": str(outcome.path)}


def _filter_options(ted: dict) -> tuple[str, str, dict]:
    """``ted.filters``: (student-filter route, filter architecture, training block)."""
    options = dict(ted.get("filters", {}))
    route, arch, training = options.pop("student_filters", "copy"), options.pop("arch", "linear"), options.pop("training", {})
    if route not in ("copy", "train"):
        raise ValueError(f"ted.filters.student_filters must be 'copy' or 'train', got {route!r}")
    if options:
        raise ValueError(f"unknown ted.filters option(s) {sorted(options)}")
    return route, arch, training


def _stage_one(_checkpoint_dir, *, teacher, tokenized, task, mapping, arch, route, config, ted_student, student_config,
               tracking, job, seed, data_source) -> dict:
    """Stage I in its own MLflow run (filters train in one short pass: no checkpoints)."""
    with common.tracked_run(f"train_ted_filters:{task}", common.tracking_enabled(tracking), {"role": "ted_filters", "task": task}) as run:
        common.log_job_columns(run, job, task, seed, data_source, len(tokenized["train"]), teacher.model)
        run.log_params({"mapping": mapping, "arch": arch, "student_filters": route, "training": vars(config),
                        "teacher_key": teacher.info.get("key"), "key": job.key})
        result = _train_stage_one(teacher, tokenized, task, mapping, arch, route, config, ted_student, student_config, run)
        result["report"]["mlflow_run_id"] = run.run_id
    return result


def _train_stage_one(teacher, tokenized, task, mapping, arch, route, config, ted_student, student_config, run) -> dict:
    """Teacher filters, then student filters copied or trained on the fine-tuned student; per-layer report."""
    eval_split = common.evaluation_split(tokenized)
    collator = common.collator_for(teacher.tokenizer)
    teacher_filters, teacher_layers = train_filters(
        teacher.model, tokenized["train"], tokenized[eval_split], mapping, arch, task, config, collator,
        log_fn=run.log_metrics, description="TED stage I (teacher filters)",
    )
    student_filters, student_layers, student_model = None, {}, None
    if route == "copy":
        student_filters = copy_filters_for_student(teacher_filters, mapping)
    else:
        student_model = _fine_tuned_student(teacher, tokenized, task, ted_student, student_config, run)
        student_filters, student_layers = train_filters(
            student_model.model, tokenized["train"], tokenized[eval_split], list(range(1, int(ted_student["num_layers"]) + 1)),
            arch, task, config, collator, log_fn=run.log_metrics, out_width=teacher_filters.out_width,
            role="student", description="TED stage I (student filters)",
        )
    metric = common.primary_metric(task)
    per_layer = {"teacher": {str(k): v[metric] for k, v in teacher_layers.items()}}
    if student_layers:
        per_layer["student"] = {str(k): v[metric] for k, v in student_layers.items()}
    for role, values in per_layer.items():
        run.log_metrics({f"filters/{role}/layer_{k}/{metric}": v for k, v in values.items()})
    run.log_figure(per_layer_metric(per_layer, metric, f"TED filters: dev {metric} per layer ({task})"), "ted_filter_metrics.png")
    report = {"mapping": mapping, "arch": arch, "route": route, "per_layer": per_layer}
    return {"teacher": teacher_filters, "student": student_filters, "student_model": student_model, "report": report}


def _fine_tuned_student(teacher, tokenized, task, ted_student, config, run) -> ModelBundle:
    """The shallow student fine-tuned on the task alone (the model its Stage I filters read)."""
    model, kept = shallow_student(teacher, ted_student, task, default_selection="distilbert")
    fit(SupervisedObjective(model), tokenized["train"], tokenized[common.evaluation_split(tokenized)], config,
        collator=common.collator_for(teacher.tokenizer), evaluate_fn=common.evaluate_fn(task),
        log_fn=lambda m, s: run.log_metrics({f"student_finetune/{k}": v for k, v in m.items()}, s),
        description="TED stage I (student fine-tuning)")
    return ModelBundle(model, teacher.tokenizer, {"role": "student_init", "task": task, "initialised_from_teacher_layers": kept})


def ted_student_init(ted_filters: dict, teacher: ModelBundle, student: dict, task: str) -> ModelBundle:
    """Stage II starts from the Stage I student when filters were trained on it, else a fresh copy."""
    if ted_filters.get("student_model") is not None:
        stage_one = ted_filters["student_model"]
        return ModelBundle(stage_one.model, stage_one.tokenizer, {**stage_one.info, "key": ted_filters.get("key")})
    return build_student_model(teacher, student, task)


def distill_with_filters(ted_filters: dict, teacher: ModelBundle, student: ModelBundle, student_data, cache,
                         method_config: dict, student_params: dict, task: str, seed: int, tracking: dict,
                         runtime: dict, row: str | None = None, data_source: dict | None = None) -> ModelBundle:
    """Stage II (Eq. 7): hand the Stage I filters to TED methods, then the generic distillation
    (``row``, ``data_source``: see :func:`distill_student`)."""
    config = dict(method_config)
    if config["method"] in ("ted", "ted_kl"):
        expected = parameters_fingerprint(teacher.model)
        if ted_filters["teacher"].fingerprint not in (None, expected) and not config.get("allow_filter_mismatch"):
            raise ValueError(
                "the TED filters were trained on another teacher than the one being distilled "
                "(set allow_filter_mismatch: true to use them anyway)"
            )
        config.setdefault("teacher_filters", ted_filters["teacher"])
        config.setdefault("student_filters", ted_filters["student"] if ted_filters["student"] is not None else "copy")
        config.setdefault("task", get_task(task).name)
    return distill_student(teacher, student, student_data, cache, config, student_params, task, seed, tracking, runtime,
                           upstream={"ted_filters": ted_filters.get("key")}, row=row, data_source=data_source)


def ted_filter_quality(ted_filters: dict, teacher: ModelBundle, tokenized, ted_student: dict, task: str):
    """TED per-layer filter quality (:mod:`bert_kd.distill.ted.quality`): the dev score of each
    Stage I filter's task head, teacher filters at M(k) next to student filters at k, against the
    majority class. Teacher (and trained student) scores come from the Stage I report; copied
    student filters are scored here on the student Stage II starts from. → (CSV table, figure)."""
    spec = get_task(task)
    metric = common.primary_metric(spec.name)
    report = ted_filters.get("report") or {}
    if "per_layer" not in report or "mapping" not in report:
        raise ValueError(f"the TED Stage I report in {ted_filters.get('store_path')} has no per-layer scores: "
                         "retrain the filters (runtime.recompute: true)")
    per_layer = {"teacher": report["per_layer"]["teacher"]}
    split = common.evaluation_split(tokenized)
    if "student" in report["per_layer"]:
        per_layer["student"] = report["per_layer"]["student"]
    elif ted_filters.get("student") is not None:
        student = ted_student_init(ted_filters, teacher, ted_student, spec.name)
        scores = evaluate_filters(student.model, ted_filters["student"], tokenized[split],
                                  common.collator_for(student.tokenizer), spec.name)
        per_layer["student"] = {str(k): v[metric] for k, v in scores.items()}
    majority = majority_class_score(spec.name, tokenized[split]["labels"])
    table = filter_quality_table(per_layer, report["mapping"], spec.name, majority)
    figure = filter_quality_figure(
        table, spec.name, f"TED Stage I filters: dev {metric} of each layer's head ({spec.name}, student filters: "
                          f"{report.get('route', '?')})")
    common.log_to_active_run({"figures/ted_filter_quality.csv": table.to_csv(index=False)},
                             {"figures/ted_filter_quality.png": figure})
    return table, figure
