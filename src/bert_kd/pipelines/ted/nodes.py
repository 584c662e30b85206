"""Nodes of TED: Stage I trains task-aware filters, Stage II distils through them."""

from __future__ import annotations

import logging

from bert_kd.data.glue import get_task
from bert_kd.distill.ted import (  # noqa: F401  (load/save_ted_filters: re-exported for callers of this module)
    copy_filters_for_student,
    load_ted_filters,
    save_ted_filters,
    ted_layer_map,
    train_filters,
)
from bert_kd.models import ModelBundle, build_student, num_layers, parameters_fingerprint
from bert_kd.pipelines import common
from bert_kd.pipelines.distill.nodes import build_student_model, check_teacher, distill_student
from bert_kd.plots import per_layer_metric
from bert_kd.training import SupervisedObjective, config_fingerprint, fit

log = logging.getLogger(__name__)


def train_ted_filters(teacher: ModelBundle, tokenized, task: str, ted: dict, ted_student: dict, seed: int,
                      tracking: dict, runtime: dict) -> dict:
    """TED Stage I (Eq. 4–5): filters on the frozen teacher at layers M(k); student filters copied
    from them (``student_filters: copy``, App. A.4 Case 2.2) or trained on a fine-tuned student
    (``train``). Reused from the store when already trained with the same settings."""
    check_teacher(teacher, task)
    spec = get_task(task)
    filters_cfg = dict(ted.get("filters", {}))
    route = filters_cfg.pop("student_filters", "copy")
    if route not in ("copy", "train"):
        raise ValueError(f"ted.filters.student_filters must be 'copy' or 'train', got {route!r}")
    arch = filters_cfg.pop("arch", "linear")
    training = filters_cfg.pop("training", {})
    if filters_cfg:
        raise ValueError(f"unknown ted.filters option(s) {sorted(filters_cfg)}")
    n_student = int(ted_student["num_layers"])
    mapping = ted_layer_map(ted.get("mapping", "distilbert"), num_layers(teacher.model), n_student)
    key = config_fingerprint(teacher.info.get("key"), ted, ted_student, seed, common.data_fingerprint(tokenized))
    store = common.store_dir("ted_filters", spec.name, key)
    if (store / "teacher").exists():
        log.info("reusing TED Stage I filters at %s", store)
        return load_ted_filters(store)

    eval_split = common.evaluation_split(tokenized)
    collator = common.collator_for(teacher.tokenizer)
    config = common.training_config(training, runtime, seed, spec.name, None)
    with common.tracked_run(f"train_ted_filters:{spec.name}", common.tracking_enabled(tracking),
                            {"role": "ted_filters", "task": spec.name}) as run:
        run.log_params({"task": spec.name, "mapping": mapping, "arch": arch, "student_filters": route,
                        "training": vars(config), "teacher_key": teacher.info.get("key")})
        teacher_filters, teacher_layers = train_filters(
            teacher.model, tokenized["train"], tokenized[eval_split], mapping, arch, spec.name, config, collator,
            log_fn=run.log_metrics, description="TED stage I (teacher filters)",
        )
        student_filters, student_layers, student_model = None, {}, None
        if route == "copy":
            student_filters = copy_filters_for_student(teacher_filters, mapping)
        else:
            student_model = _fine_tuned_student(teacher, tokenized, spec.name, ted_student, seed, runtime, run)
            student_filters, student_layers = train_filters(
                student_model.model, tokenized["train"], tokenized[eval_split], list(range(1, n_student + 1)), arch,
                spec.name, config, collator, log_fn=run.log_metrics, out_width=teacher_filters.out_width,
                role="student", description="TED stage I (student filters)",
            )
        metric = common.primary_metric(spec.name)
        per_layer = {"teacher": {str(k): v[metric] for k, v in teacher_layers.items()}}
        if student_layers:
            per_layer["student"] = {str(k): v[metric] for k, v in student_layers.items()}
        for role, values in per_layer.items():
            run.log_metrics({f"filters/{role}/layer_{k}/{metric}": v for k, v in values.items()})
        run.log_figure(per_layer_metric(per_layer, metric, f"TED filters: dev {metric} per layer ({spec.name})"),
                       "ted_filter_metrics.png")
        report = {"mapping": mapping, "arch": arch, "route": route, "per_layer": per_layer, "mlflow_run_id": run.run_id}
    result = {"teacher": teacher_filters, "student": student_filters, "student_model": student_model, "report": report}
    store.parent.mkdir(parents=True, exist_ok=True)
    save_ted_filters(result, store)
    return result


def _fine_tuned_student(teacher, tokenized, task, ted_student, seed, runtime, run) -> ModelBundle:
    """The shallow student fine-tuned on the task alone (the model its Stage I filters read)."""
    model, kept = build_student(teacher.model, int(ted_student["num_layers"]), ted_student.get("layer_selection", "distilbert"))
    config = common.training_config(ted_student.get("training"), runtime, seed, task, None)
    fit(SupervisedObjective(model), tokenized["train"], tokenized[common.evaluation_split(tokenized)], config,
        collator=common.collator_for(teacher.tokenizer), evaluate_fn=common.evaluate_fn(task),
        log_fn=lambda m, s: run.log_metrics({f"student_finetune/{k}": v for k, v in m.items()}, s),
        description="TED stage I (student fine-tuning)")
    return ModelBundle(model, teacher.tokenizer, {"role": "student_init", "task": task, "initialised_from_teacher_layers": kept})


def ted_student_init(ted_filters: dict, teacher: ModelBundle, student: dict, task: str) -> ModelBundle:
    """Stage II starts from the Stage I student when filters were trained on it, else a fresh copy."""
    if ted_filters.get("student_model") is not None:
        return ted_filters["student_model"]
    return build_student_model(teacher, student, task)


def distill_with_filters(ted_filters: dict, teacher: ModelBundle, student: ModelBundle, student_data, cache,
                         method_config: dict, student_params: dict, task: str, seed: int, tracking: dict,
                         runtime: dict) -> ModelBundle:
    """Stage II (Eq. 7): hand the Stage I filters to TED methods, then the generic distillation."""
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
    return distill_student(teacher, student, student_data, cache, config, student_params, task, seed, tracking, runtime)
