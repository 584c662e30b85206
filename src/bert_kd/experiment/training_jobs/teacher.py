"""The teacher's job body: fine-tune a teacher on the task, or reuse the one already trained from the same content."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Mapping

from bert_kd.config.schema import Block, Runtime, Teacher, Tracking, set_values
from bert_kd.core.data.glue import TaskSpec, get_task
from bert_kd.core.models import ModelBundle, fine_tuning_attention, load_classifier, load_tokenizer
from bert_kd.core.training import SupervisedObjective, fit
from bert_kd.core.training.precision import training_device
from bert_kd.experiment import jobs
from bert_kd.experiment import store as model_store
from bert_kd.experiment.evaluation import evaluate_fn, evaluation_split
from bert_kd.experiment.floor import dev_floor
from bert_kd.experiment.publishing import JobRunSpec, run_model_job
from bert_kd.experiment.run_setup import (
    RunSettings,
    collator_for,
    step_logger,
    teacher_block,
    teacher_seed,
    training_config,
)
from bert_kd.experiment.store import model_identity
from bert_kd.experiment.tracker import tracker_for


def train_teacher(tokenized, teacher: Block[Teacher], run: RunSettings | Mapping) -> ModelBundle:
    """Fine-tune ``teacher.model`` on the run's task (AdamW, warm-up, clipping, best dev epoch kept;
    the run's ``data_source``, glue_dir and sample caps, is recorded on the MLflow run). ``teacher`` is
    the ``teacher`` block or a ``multi_teachers`` entry (its own ``seed`` replaces the run's).

    Reused from the store when a teacher with the same rows, model, tokenizer, settings and seed
    exists, unless ``teacher.retrain`` or ``runtime.recompute`` is true.
    """
    run = RunSettings.of(run)
    logged = set_values(teacher)  # the run's ``teacher.*`` params: the block as configured
    teacher, seed = teacher_block(teacher), teacher_seed(teacher, run.seed)
    runtime, tracking, data_source = run.runtime, run.tracking, run.data_source
    spec = get_task(run.task)
    config = training_config(teacher.training, runtime, seed, spec.name, None)
    material = {
        "task": spec.name,
        "model": model_identity(teacher.model),
        "max_seq_length": teacher.max_seq_length,
        "training": jobs.training_spec(vars(config), frozen_teachers=False),  # its own forwards only
        "seed": seed,
        "data": jobs.dataset_fingerprint(tokenized),
    }
    if padding_side(teacher.model) == "left":  # batches padded on the left since 2026-11-24 (XLNet): a new result
        material["padding_side"] = "left"
    job = model_store.job("teacher", material)
    fine_tune = FineTune(tokenized, spec, teacher, logged, seed, tracking, runtime, data_source or {})
    train = partial(_fine_tune, fine_tune=fine_tune, job=job)
    return run_model_job(
        job,
        train,
        tracking,
        recompute=teacher.retrain or runtime.recompute,
        job_run=JobRunSpec(
            f"train_teacher:{spec.name}",
            {"role": "teacher", "task": spec.name},
            partial(_describe_reused, fine_tune=fine_tune, job=job),
        ),
    )


def padding_side(model: str) -> str:
    """The side ``model``'s tokenizer pads on (the collator pads by it); right-padded teachers keep their keys."""
    return str(getattr(load_tokenizer(model), "padding_side", "right"))


@dataclass(frozen=True)
class FineTune:
    """What a teacher job fine-tunes: ``teacher.model`` on ``tokenized`` for task ``spec`` with ``seed``, its
    block as configured (``logged``), the run's tracking, runtime and data source (recorded on its run)."""

    tokenized: Any
    spec: TaskSpec
    teacher: Teacher
    logged: dict
    seed: int
    tracking: Block[Tracking]
    runtime: Runtime
    data_source: dict


def _describe_reused(run, bundle: ModelBundle, *, fine_tune: FineTune, job) -> None:
    """A reuse run that stands for the teacher in its tracking store: the columns and train split
    its training run records (so its LoggedModel and dev metrics name their data)."""
    tracker_for(fine_tune.tracking).describe_job(
        run,
        job,
        fine_tune.spec.name,
        fine_tune.seed,
        fine_tune.data_source,
        len(fine_tune.tokenized["train"]),
        bundle.model,
    )


def _fine_tune(checkpoint_dir, *, fine_tune: FineTune, job, run) -> ModelBundle:
    """Fine-tune from ``teacher.model`` (resuming from ``checkpoint_dir``), recorded on the job's ``run``."""
    tokenized, spec, teacher, seed = fine_tune.tokenized, fine_tune.spec, fine_tune.teacher, fine_tune.seed
    tracking, runtime, data_source, logged = (
        fine_tune.tracking,
        fine_tune.runtime,
        fine_tune.data_source,
        fine_tune.logged,
    )
    tokenizer = load_tokenizer(teacher.model)
    model = load_classifier(teacher.model, spec.num_labels, is_regression=spec.is_regression)
    settings = training_config(
        teacher.training, runtime, seed, spec.name, checkpoint_dir, n_train=len(tokenized["train"])
    )
    key = job.key
    tracker_for(tracking).describe_job(run, job, spec.name, seed, data_source, len(tokenized["train"]), model)
    run.log_params({"teacher": logged, "training": vars(settings), "key": key})
    with fine_tuning_attention(model, on_cpu=training_device(settings.cpu) == "cpu"):
        result = fit(
            SupervisedObjective(model),
            tokenized["train"],
            tokenized[evaluation_split(tokenized)],
            settings,
            collator=collator_for(tokenizer),
            evaluate_fn=evaluate_fn(spec.name),
            log_fn=step_logger(run),
            description=f"teacher {spec.name}",
        )
    return ModelBundle(
        model,
        tokenizer,
        {
            "role": "teacher",
            "task": spec.name,
            "num_labels": spec.num_labels,
            "base_model": teacher.model,
            "key": key,
            "seed": seed,
            "best_epoch": result.best_epoch,
            "best_metrics": result.best_metrics,
            "history": result.history,
            "mlflow_run_id": run.run_id,
            "dev_split": evaluation_split(tokenized),
            "dev_examples": len(tokenized[evaluation_split(tokenized)]),
            "train_examples": len(tokenized["train"]),
            **dev_floor(spec.name, tokenized, evaluation_split(tokenized)),
        },
    )
