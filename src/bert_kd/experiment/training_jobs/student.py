"""One distillation body: a [`DistillJob`][] says what is trained — the student's
start, the teachers as [`Teacher`][] sources (prefix, cache), the
recipe, the student settings and the run settings — and [`train_student`][] trains it once
through the content-keyed job path, for one teacher (K = 1: the ALP-KD and TED tables) and for
K teachers (multi-teacher) alike.

The nodes of ``distill_<row>``, TED Stage II and multi-teacher describe their job here and call
[`train_student`][]; a sweep trial calls the same nodes. The job's content key is built from
exactly the material the nodes used before this module existed (keys of stored results stay).
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Mapping

from bert_kd.config.schema import Student, set_values, typed
from bert_kd.core.bilstm import bilstm_student
from bert_kd.core.data.glue import get_task
from bert_kd.core.distill.gradient_share import log_gradient_shares as measure_gradient_shares
from bert_kd.core.distill.gradient_share import share_metrics
from bert_kd.core.distill.methods import build_method, method_key_material, recipe_key_material
from bert_kd.core.distill.objective import DistillationObjective, Teacher, collect_diagnostics
from bert_kd.core.distill.outputs import summary_key_material
from bert_kd.core.models import (
    ModelBundle,
    build_pretrained_student,
    build_student,
    count_parameters,
    init_key_material,
    load_classifier,
    load_tokenizer,
    student_init,
)
from bert_kd.core.training import fit, make_loader
from bert_kd.experiment import jobs
from bert_kd.experiment.evaluation import evaluate_fn, evaluation_split
from bert_kd.experiment.floor import dev_floor
from bert_kd.experiment.lineage import Lineage
from bert_kd.experiment.parameters import explicit_weights
from bert_kd.experiment.publishing import JobRunSpec, run_model_job
from bert_kd.experiment.run_setup import (  # RunSettings: re-exported
    RunSettings,
    collator_for,
    step_logger,
    training_config,
)
from bert_kd.experiment.store import job as store_job
from bert_kd.experiment.store import model_identity
from bert_kd.experiment.tracker import JobRun, tracker_for

log = logging.getLogger(__name__)

#: Column prefix of the (single) teacher's own tokenization when the student reads another vocabulary.
TEACHER_PREFIX = "t0_"


def task_of(settings: RunSettings | Mapping | str) -> str:
    """The task of the run settings (or of a task name, for notebooks and benchmarks)."""
    return get_task(settings).name if isinstance(settings, str) else RunSettings.of(settings).task


@dataclass
class StudentStart(ModelBundle):
    """A student's initial weights (copied before each training run) with the typed student block
    it was built from, the table row it is for and the keys of the upstream jobs it depends on."""

    params: Student | None = None  # the validated student block (the node turns a dict into it)
    row: str | None = None
    upstream: dict = field(default_factory=dict)

    def method_inputs(self, recipe: Mapping, teacher: ModelBundle, task: str) -> tuple[dict, dict]:
        """(the recipe as key material, live objects handed to the method beside it); a plain
        start adds nothing (TED's Stage II start adds its Stage I filters)."""
        return dict(recipe), {}


#: Recipe blocks whose entries reach their nodes with their weights written out ([`with_explicit_weights`][]; the
#: validation hook's and a sweep trial's preparation): their students are keyed on that form.
#: ``multi_teacher_configs`` entries reach their node as written: the multi-teacher student is keyed on the recipe
#: as written (every stored one, trial or ``kedro run``) and the node writes the weights out for the method
#: ([`bert_kd.pipelines.multi_teacher.nodes.student_recipe`][]).
EXPLICIT_WEIGHT_BLOCKS = ("distill_methods", "ted_methods")


def with_explicit_weights(recipe) -> dict:
    """A recipe as a ``distill_<row>`` node receives it: its loss weights written out
    ([`bert_kd.experiment.parameters.explicit_weights`][], what MLflow records). The validation hook prepares a
    pipeline's recipes so, a sweep trial its row's."""
    config = set_values(recipe)
    return {**config, "weights": explicit_weights(config)}


def recipe_spec(method_config: Mapping) -> dict:
    """The JSON part of a method recipe (the part that enters the student's content key)."""
    return {
        k: v for k, v in method_config.items() if v is None or isinstance(v, (str, int, float, bool, list, tuple, dict))
    }


def staged_selection(recipe: Mapping) -> dict:
    """Key material of a staged recipe's best-epoch selection: since 2026-11-29 only its last stage's epochs
    (``DistillationObjective.selectable``), so a staged student kept from an earlier stage is never reused."""
    return {"selection": "last_stage"} if recipe.get("stages") else {}


def student_start_spec(student: ModelBundle, params: Student) -> dict:
    """What the student starts from: the teacher copy's layer selection (``init: pretrained``: from
    the teacher's pre-trained checkpoint; ``init: teacher`` is left out, as before the option existed),
    or another model's identity."""
    spec = {
        "num_layers": params.num_layers,
        "layer_selection": params.layer_selection,
        "from_job": Lineage.of(student.info).key,
    }
    if params.model:
        spec["model"] = model_identity(params.model)
    else:
        spec.update(init_key_material({"init": student_init({"init": params.init})}))
    return spec


@dataclass
class DistillJob:
    """Everything one distillation run reads, and its content-keyed store entry (``store``)."""

    store: jobs.Job
    #: builds the student's initial weights when the job trains: (model, tokenizer, teacher layers kept)
    initial_student: Callable[[], tuple[Any, Any, Any]]
    teachers: list[Teacher]
    #: column prefix → tokenizer of each teacher tokenization in ``data`` (the collator pads each by its own)
    teacher_tokenizers: Mapping[str, Any]
    recipe: dict
    #: live objects the method reads beside the recipe (TED's Stage I filters): never key material
    method_objects: dict
    student_params: Student
    settings: RunSettings
    row: str
    data: Any
    run_name: str
    multi_teacher: bool = False
    teacher_parameters: int | None = None
    student_layers: Any = None

    @property
    def task(self) -> str:
        return self.settings.task

    def training(self, checkpoint_dir=None, n_train: int | None = None):
        """The job's [`TrainingConfig`][core.training.config.TrainingConfig] (student ``training`` block + runtime)."""
        return training_config(
            self.student_params.training,
            self.settings.runtime,
            self.settings.seed,
            self.task,
            checkpoint_dir,
            n_train=n_train,
        )


def single_teacher_job(
    teacher: ModelBundle, student: StudentStart, student_data, teacher_cache, recipe: Mapping, settings: RunSettings
) -> DistillJob:
    """The job of one ``distill_methods`` / ``ted_methods`` row: ``student`` distilled from ``teacher``
    (its cache used unless the student reads another vocabulary); key material unchanged since job keys were introduced."""
    task = settings.task
    row = student.row or recipe["method"]
    key_recipe, objects = student.method_inputs(recipe, teacher, task)
    config = training_config(student.params.training, settings.runtime, settings.seed, task, None)
    store = store_job(
        "student",
        {
            "task": task,
            "recipe": recipe_spec(recipe_key_material(key_recipe)),
            "teacher": Lineage.of(teacher.info).key,
            "start": student_start_spec(student, student.params),
            "max_seq_length": None,  # a student block has no such key: material since v1
            "training": jobs.training_spec(vars(config)),
            "seed": settings.seed,
            "data": jobs.dataset_fingerprint(student_data),
            "upstream": student.upstream,
            **summary_key_material(teacher.model, student.model),
            **staged_selection(key_recipe),
            **method_key_material(key_recipe),
        },
    )
    prefix = TEACHER_PREFIX if TEACHER_PREFIX + "input_ids" in student_data["train"].column_names else ""
    source = Teacher(teacher.model, prefix=prefix, cache=teacher_cache if not prefix else None, name="teacher")
    return DistillJob(
        store=store,
        initial_student=lambda: (
            copy.deepcopy(student.model),
            student.tokenizer,
            student.info.get("initialised_from_teacher_layers"),
        ),
        teachers=[source],
        teacher_tokenizers={TEACHER_PREFIX: teacher.tokenizer} if prefix else {},
        recipe=key_recipe,
        method_objects=objects,
        student_params=student.params,
        settings=settings,
        row=row,
        data=student_data,
        run_name=f"distill_{row}:{task}",
        teacher_parameters=count_parameters(teacher.model),
        student_layers=student.info.get("initialised_from_teacher_layers"),
    )


def train_student(job: DistillJob) -> ModelBundle:
    """Train ``job``'s student once (or reuse the stored one with the same content key)."""
    train = partial(_train, job=job)
    bundle = run_model_job(
        job.store,
        train,
        job.settings.tracking,
        recompute=job.settings.runtime.recompute,
        job_run=JobRunSpec(job.run_name, {"role": "student", "method": job.row, "task": job.task}),
    )
    bundle.info["method"] = job.row  # a stored result may have been trained under another name
    return bundle


def _train(checkpoint_dir, *, job: DistillJob, run: JobRun) -> ModelBundle:
    """Build the student, its method and objective, fit it and record it on the job's ``run``."""
    spec = get_task(job.task)
    model, tokenizer, kept = job.initial_student()
    algorithm = job.recipe["method"]
    method = build_method(
        {**job.recipe, **job.method_objects}, model, [t.model for t in job.teachers], regression=spec.is_regression
    )
    token_level = method.teacher_needs.get("hidden") or method.teacher_needs.get("attention")
    if any(t.prefix for t in job.teachers) and token_level and not method.reads_teacher_prefixes:
        raise ValueError(
            f"method {algorithm!r} compares token positions, but student.model uses another tokenizer "
            "than the teacher: use a [CLS]-level method (rkd, pkd, ckd, alp) or multi_teacher"
        )
    objective = DistillationObjective(model, job.teachers, method, method.weights)
    train_split = job.data["train"]
    settings = job.training(checkpoint_dir, n_train=len(train_split))
    collator = collator_for(tokenizer, job.teacher_tokenizers or None)
    eval_split = evaluation_split(job.data)
    tracker = tracker_for(job.settings.tracking)
    tracker.distillation_started(run, job, model, method, objective, settings)
    shares = measure_gradient_shares(
        run,
        objective,
        train_split,
        collator,
        settings.batch_size,
        job.settings.tracking.gradient_share_batches,
        name=job.run_name if job.multi_teacher else f"distill_{job.row}",
        seed=settings.seed,
    )
    result = fit(
        objective,
        train_split,
        job.data[eval_split],
        settings,
        collator=collator,
        evaluate_fn=evaluate_fn(spec.name),
        log_fn=step_logger(run),
        description=progress_label(job.row, algorithm, spec.name),
    )
    outcome = _observations(
        job,
        method,
        objective,
        make_loader(job.data[eval_split], settings.eval_batch_size, collator, shuffle=False),
        eval_split,
    )
    tracker.distillation_ended(run, job, method, {**outcome, "history": result.history})
    info = {
        "role": "student",
        "method": job.row,
        "task": spec.name,
        "key": job.store.key,
        "best_epoch": result.best_epoch,
        "best_metrics": result.best_metrics,
        "history": result.history,
        "mlflow_run_id": run.run_id,
        "gradient_shares": share_metrics(shares, prefix=""),
        "dev_split": eval_split,
        "dev_examples": len(job.data[eval_split]),
        "train_examples": len(job.data["train"]),
        **dev_floor(spec.name, job.data, eval_split),
        "layer_map": getattr(method, "mapping", None),
        **outcome,
    }
    if job.multi_teacher:
        info.update(
            {
                "configuration": job.run_name,
                "teachers": [t.name for t in job.teachers],
                "initialised_from_teacher_layers": kept,
                # what the method observed in each epoch (RL-KD: its selection shares), kept where the
                # evaluation's copy of info (without the history) reaches the comparison table
                "observed_by_epoch": [r["observed"] for r in result.history if r.get("observed")],
            }
        )
    else:
        info.update({"algorithm": algorithm, "teacher_key": job.store.spec.get("teacher")})
    return ModelBundle(model, tokenizer, info)


def progress_label(row: str, algorithm: str, task: str) -> str:
    """A progress bar's label: the table row (``alp_no sst2``), its method when the row's name
    differs (``alp_no (alp) sst2``), so three ALP rows are three labels."""
    return f"{row} ({algorithm}) {task}" if row != algorithm else f"{row} {task}"


def _observations(job: DistillJob, method, objective, dev_loader, split: str) -> dict:
    """What the trained student's method observed on dev: ALP's α map and other diagnostics (one
    teacher); the alignment report and, for the MT method, each teacher's and layer group's loss
    share (multi-teacher contributions figure)."""
    if not job.multi_teacher:
        return {"diagnostics": collect_diagnostics(objective, dev_loader)}
    contributions = method.dev_contributions(objective, dev_loader)
    if contributions is not None:
        contributions = {**contributions, "split": split}
    return {"alignment": method.alignment_report(), "contributions": contributions}


def check_teacher(teacher: ModelBundle, task: str) -> None:
    """Refuse a teacher fine-tuned for another task or label count."""
    spec = get_task(task)
    labels = int(teacher.model.config.num_labels)
    if labels != spec.num_labels:
        raise ValueError(f"teacher has {labels} labels but task {spec.name} needs {spec.num_labels}")
    trained_for = teacher.info.get("task")
    if trained_for and trained_for != spec.name:
        raise ValueError(f"teacher was fine-tuned on {trained_for!r}, not on {spec.name!r}")


def shallow_student(teacher: ModelBundle, student, task: str, default_selection: str = "first"):
    """(model, 1-based layers kept) of a ``student.num_layers``-layer student whose layers
    (``student.layer_selection``, ``default_selection`` when the block sets none) come from the
    fine-tuned teacher (``student.init: teacher``) or from the pre-trained checkpoint the teacher
    was fine-tuned from (``pretrained``, fresh classifier)."""
    params = typed(Student, student, "student")
    selection = params.layer_selection if "layer_selection" in params.model_fields_set else default_selection
    if params.num_layers is None:
        raise ValueError("student.num_layers is needed to copy the teacher's layers (or give student.model)")
    if params.init == "pretrained":
        base = teacher.info.get("base_model")
        if not base:
            raise ValueError(
                "student.init: pretrained needs the checkpoint the teacher was fine-tuned from, "
                "but the teacher's bert_kd.json names no base_model; use student.init: teacher"
            )
        spec = get_task(task)
        return build_pretrained_student(
            base, params.num_layers, selection, spec.num_labels, is_regression=spec.is_regression
        )
    return build_student(teacher.model, params.num_layers, selection)


def build_student_model(teacher: ModelBundle, student, settings, row: str | None = None) -> StudentStart:
    """A shallower copy of the teacher's layers or of its pre-trained checkpoint's
    (``student.num_layers``, ``layer_selection``, ``init``) or, with ``student.model``, any HF
    model/config sized for the task (``settings``: the run settings, or the task's name; ``row``:
    the recipe row the student is for)."""
    task = task_of(settings)
    check_teacher(teacher, task)
    spec = get_task(task)
    params = typed(Student, student, "student")
    if params.model:
        model = load_classifier(params.model, spec.num_labels, is_regression=spec.is_regression)
        tokenizer, kept = load_tokenizer(params.model), None
    elif params.bilstm is not None:
        model = bilstm_student(teacher.model, params.bilstm, spec.num_labels, siamese=spec.has_pair)
        tokenizer, kept = teacher.tokenizer, None
    else:
        model, kept = shallow_student(teacher, params, task)
        tokenizer = teacher.tokenizer
    info = {
        "role": "student_init",
        "task": spec.name,
        "init": None if (params.model or params.bilstm) else params.init,
        "architecture": "bilstm" if params.bilstm is not None else None,
        "initialised_from_teacher_layers": kept,
        "parameters": count_parameters(model),
        "teacher_parameters": count_parameters(teacher.model),
    }
    log.info("student: %d parameters (teacher %d), layers %s", info["parameters"], info["teacher_parameters"], kept)
    return StudentStart(model, tokenizer, info, params=params, row=row)
