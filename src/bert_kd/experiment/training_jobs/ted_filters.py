"""TED's job bodies: Stage I trains task-aware filters (a content-keyed job), and Stage II's student
starts with them ([`FilteredStudentStart`][]) before the one distillation body trains it."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from bert_kd.config.schema import Student, Ted, Tracking, set_values, typed
from bert_kd.core.data.glue import get_task
from bert_kd.core.distill.outputs import summary_key_material
from bert_kd.core.distill.ted_filters import (
    FilterPlacement,
    FilterTraining,
    copy_filters_for_student,
    load_ted_filters,
    save_ted_filters,
    ted_layer_map,
    train_filters,
)
from bert_kd.core.metrics import primary_metric
from bert_kd.core.models import ModelBundle, init_key_material, num_layers, parameters_fingerprint
from bert_kd.core.training import SupervisedObjective, TrainingConfig, fit
from bert_kd.experiment import jobs
from bert_kd.experiment import store as model_store
from bert_kd.experiment.evaluation import evaluate_fn, evaluation_split
from bert_kd.experiment.lineage import Lineage
from bert_kd.experiment.run_setup import collator_for, training_config
from bert_kd.experiment.tracker import is_main_process, tracker_for
from bert_kd.experiment.training_jobs.student import (
    RunSettings,
    StudentStart,
    build_student_model,
    check_teacher,
    shallow_student,
)

log = logging.getLogger(__name__)

#: Stage II methods that read the Stage I filters.
FILTER_METHODS = ("ted", "ted_kl")


def train_ted_filters(teacher: ModelBundle, tokenized, ted, ted_student, settings) -> dict:
    """TED Stage I (Eq. 4–5): filters on the frozen teacher at layers M(k); student filters copied
    from them (``student_filters: copy``, App. A.4 Case 2.2) or trained on a fine-tuned student
    (``train``). Reused from the store when already trained from the same content."""
    run = RunSettings.of(settings)
    check_teacher(teacher, run.task)
    spec = get_task(run.task)
    options, student = typed(Ted, ted, "ted"), typed(Student, ted_student, "ted_student")
    route, arch = options.filters.student_filters, options.filters.arch
    mapping = ted_layer_map(options.mapping, num_layers(teacher.model), int(student.num_layers))
    config = training_config(options.filters.training, run.runtime, run.seed, spec.name, None)
    student_block = set_values(ted_student)
    student_config = training_config(student.training, run.runtime, run.seed, spec.name, None)
    job = model_store.job(
        "ted_filters",
        {
            "task": spec.name,
            "teacher": Lineage.of(teacher.info).key,
            "mapping": mapping,
            "arch": arch,
            "route": route,
            "training": jobs.training_spec(vars(config)),
            "student": init_key_material({k: v for k, v in student_block.items() if k != "training"}),
            "student_training": jobs.training_spec(vars(student_config)) if route == "train" else None,
            "seed": run.seed,
            "data": jobs.dataset_fingerprint(tokenized),
            **summary_key_material(teacher.model),
        },
    )
    stage = StageOne(teacher, tokenized, mapping, arch, route, config, student, student_config, run)
    train = partial(_stage_one, stage=stage, job=job)
    outcome = jobs.run_job(
        job,
        train,
        lambda result, d: save_ted_filters(result, d / "stage1"),
        lambda d: load_ted_filters(d / "stage1"),
        recompute=run.runtime.recompute,
        writer=is_main_process(),
        provenance_fn=lambda result: {"mlflow_run_id": result["report"].get("mlflow_run_id")},
    )
    _log_stored_filters(outcome, run.tracking)
    return {**outcome.value, "key": job.key, "store_path": str(outcome.path)}


def _log_stored_filters(outcome, tracking) -> None:
    """Freshly trained TED filters as artifacts of their (finished) Stage I run (``tracking.log_models``)."""
    run_id = outcome.value["report"].get("mlflow_run_id")
    if outcome.reused or not typed(Tracking, tracking, "tracking").log_models or not run_id:
        return
    tracker_for(tracking).log_stored_filters(run_id, outcome.path)


@dataclass(frozen=True)
class StageOne:
    """What one TED Stage I job trains: filters on ``teacher`` at the mapped layers (``mapping``, ``arch``,
    trained with ``config``) and, by ``route``, the student's filters copied or trained on the shallow
    ``ted_student`` fine-tuned with ``student_config``; ``settings``: the run settings."""

    teacher: ModelBundle
    tokenized: Any
    mapping: list
    arch: str
    route: str
    config: TrainingConfig
    ted_student: Student
    student_config: TrainingConfig
    settings: RunSettings


def _stage_one(_checkpoint_dir, *, stage: StageOne, job) -> dict:
    """Stage I in its own MLflow run (filters train in one short pass: no checkpoints)."""
    task, settings = stage.settings.task, stage.settings
    tracker = tracker_for(settings.tracking)
    with tracker.start_job(f"train_ted_filters:{task}", {"role": "ted_filters", "task": task}) as run:
        tracker.ted_stage_one_started(
            run,
            job,
            stage.teacher,
            stage.mapping,
            stage.arch,
            stage.route,
            stage.config,
            settings.data_source,
            len(stage.tokenized["train"]),
        )
        result = _train_stage_one(stage, run)
        tracker.ted_filters_scored(run, result["report"]["per_layer"], primary_metric(task), task)
        result["report"]["mlflow_run_id"] = run.run_id
    return result


def _train_stage_one(stage: StageOne, run) -> dict:
    """Teacher filters, then student filters copied or trained on the fine-tuned student; per-layer report."""
    teacher, tokenized, task, arch = stage.teacher, stage.tokenized, stage.settings.task, stage.arch
    mapping, config, route, ted_student = stage.mapping, stage.config, stage.route, stage.ted_student
    eval_split = evaluation_split(tokenized)
    collator = collator_for(teacher.tokenizer)
    teacher_filters, teacher_layers = train_filters(
        teacher.model,
        tokenized["train"],
        tokenized[eval_split],
        FilterPlacement(mapping, task, arch),
        FilterTraining(config, collator, run.log_metrics, "TED stage I (teacher filters)"),
    )
    student_filters, student_layers, student_model = None, {}, None
    if route == "copy":
        student_filters = copy_filters_for_student(teacher_filters, mapping)
    else:
        student_model = _fine_tuned_student(teacher, tokenized, task, ted_student, stage.student_config, run)
        student_filters, student_layers = train_filters(
            student_model.model,
            tokenized["train"],
            tokenized[eval_split],
            FilterPlacement(
                list(range(1, int(ted_student.num_layers) + 1)),
                task,
                arch,
                out_width=teacher_filters.out_width,
                role="student",
            ),
            FilterTraining(config, collator, run.log_metrics, "TED stage I (student filters)"),
        )
    metric = primary_metric(task)
    per_layer = {"teacher": {str(k): v[metric] for k, v in teacher_layers.items()}}
    if student_layers:
        per_layer["student"] = {str(k): v[metric] for k, v in student_layers.items()}
    report = {"mapping": mapping, "arch": arch, "route": route, "per_layer": per_layer}
    return {"teacher": teacher_filters, "student": student_filters, "student_model": student_model, "report": report}


def _fine_tuned_student(teacher, tokenized, task, ted_student, config, run) -> ModelBundle:
    """The shallow student fine-tuned on the task alone (the model its Stage I filters read)."""
    model, kept = shallow_student(teacher, ted_student, task, default_selection="distilbert")
    fit(
        SupervisedObjective(model),
        tokenized["train"],
        tokenized[evaluation_split(tokenized)],
        config,
        collator=collator_for(teacher.tokenizer),
        evaluate_fn=evaluate_fn(task),
        log_fn=lambda m, s: run.log_metrics({f"student_finetune/{k}": v for k, v in m.items()}, s),
        description="TED stage I (student fine-tuning)",
    )
    return ModelBundle(
        model, teacher.tokenizer, {"role": "student_init", "task": task, "initialised_from_teacher_layers": kept}
    )


@dataclass
class FilteredStudentStart(StudentStart):
    """TED Stage II's student start: the Stage I student (or a fresh copy) with the Stage I
    filters, which it hands to the TED methods beside their recipe (Eq. 7)."""

    filters: dict = field(default_factory=dict)

    def method_inputs(self, recipe, teacher: ModelBundle, task: str) -> tuple[dict, dict]:
        """For ``ted``/``ted_kl``: the recipe with ``task`` (and ``student_filters: copy`` when Stage I
        copied them) filled in, and beside it the Stage I filter modules the recipe does not name
        itself (``teacher_filters``, trained ``student_filters``), which stay out of the content key."""
        config, objects = dict(recipe), {}
        if config["method"] not in FILTER_METHODS:
            return config, objects
        expected = parameters_fingerprint(teacher.model)
        if self.filters["teacher"].fingerprint not in (None, expected) and not config.get("allow_filter_mismatch"):
            raise ValueError(
                "the TED filters were trained on another teacher than the one being distilled "
                "(set allow_filter_mismatch: true to use them anyway)"
            )
        if "teacher_filters" not in config:
            objects["teacher_filters"] = self.filters["teacher"]
        if "student_filters" not in config:
            if self.filters["student"] is None:
                config["student_filters"] = "copy"
            else:
                objects["student_filters"] = self.filters["student"]
        config.setdefault("task", get_task(task).name)
        return config, objects


def ted_student_init(
    ted_filters: dict, teacher: ModelBundle, student, settings, row: str | None = None
) -> FilteredStudentStart:
    """Stage II starts from the Stage I student when filters were trained on it, else a fresh
    copy ([`build_student_model`][]); either way with the
    Stage I filters and their job's key (``upstream``)."""
    if ted_filters.get("student_model") is not None:
        stage_one = ted_filters["student_model"]
        model, tokenizer, info = (
            stage_one.model,
            stage_one.tokenizer,
            {**stage_one.info, "key": Lineage.of(ted_filters).key},
        )
    else:
        start = build_student_model(teacher, student, settings, row=row)
        model, tokenizer, info = start.model, start.tokenizer, start.info
    return FilteredStudentStart(
        model,
        tokenizer,
        info,
        params=typed(Student, student, "ted_student"),
        row=row,
        upstream={"ted_filters": Lineage.of(ted_filters).key},
        filters=ted_filters,
    )
