"""A training run's set-up from its parameter blocks (Kedro-free): the run-wide settings
([`RunSettings`][]), the [`TrainingConfig`][core.training.config.TrainingConfig] of a ``training:`` block
plus ``runtime``, step counts, a teacher block and its seed, the padding collator and the step
logger of the job path."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from pydantic import BaseModel

from bert_kd.config.errors import ParameterError
from bert_kd.config.schema import Block, Runtime, Teacher, Tracking, Training, typed
from bert_kd.core.data.glue import get_task
from bert_kd.core.metrics import metric_names, primary_metric
from bert_kd.core.training import Collator, TrainingConfig
from bert_kd.experiment import jobs
from bert_kd.experiment.tracker import JobRun

#: What a training run records about its data (``tracking.log_training_job``): the key of the
#: ``run_settings`` entry grouping ``glue_dir`` and the sample caps.
DATA_SOURCE = "data_source"


@dataclass(frozen=True)
class RunCommand:
    """How this ``kedro run`` was started, for the commands a run prints back to be run again: its
    ``--env`` and its ``--params`` (dotted keys, as ``--params`` takes them)."""

    env: str | None = None
    params: Mapping[str, object] = field(default_factory=dict)

    @classmethod
    def of(cls, env: str | None, runtime_params: Mapping | None) -> RunCommand:
        """From Kedro's ``run_params`` values (``--params`` arrives nested: ``{"reproduce": {"table": …}}``)."""

        def dotted(values: Mapping, prefix: str = ""):
            for key, value in values.items():
                if isinstance(value, Mapping):
                    yield from dotted(value, f"{prefix}{key}.")
                else:
                    yield f"{prefix}{key}", value

        return cls(env or None, dict(dotted(runtime_params or {})))


_RUN_COMMAND: list[RunCommand] = [RunCommand()]


def record_run_command(command: RunCommand) -> None:
    """Remember how the current ``kedro run`` was started (its project hook calls this first)."""
    _RUN_COMMAND[0] = command


def run_command() -> RunCommand:
    """How the current ``kedro run`` was started (empty outside one: a notebook, a test)."""
    return _RUN_COMMAND[0]


@dataclass(frozen=True)
class RunSettings:
    """The run-wide values every training job reads: the task, the seed, the tracking and
    runtime blocks and where the rows came from (``data_source``: glue_dir and sample caps,
    recorded on MLflow runs, never part of a key)."""

    task: str
    seed: int
    tracking: Tracking = field(default_factory=Tracking)
    runtime: Runtime = field(default_factory=Runtime)
    data_source: Mapping = field(default_factory=dict)

    def __post_init__(self) -> None:
        """The one place a ``tracking`` or ``runtime`` dict (a notebook's, a test's, a sweep trial's) becomes
        its schema model: what reads the run settings gets the validated blocks only."""
        object.__setattr__(self, "tracking", typed(Tracking, self.tracking, "tracking"))
        object.__setattr__(self, "runtime", typed(Runtime, self.runtime, "runtime"))

    @classmethod
    def of(cls, settings: RunSettings | Mapping) -> RunSettings:
        """From the ``run_settings`` dataset ([`bert_kd.pipelines.common.build_run_settings`][]) or as is."""
        if isinstance(settings, cls):
            return settings
        values = dict(settings)
        missing = [name for name in ("task", "seed") if name not in values]
        if missing:
            raise ValueError(f"run settings need {missing}; got {sorted(values)}")
        source = values.get(DATA_SOURCE)
        if source is None:
            source = {k: values.get(k) for k in ("glue_dir", "max_train_samples", "max_eval_samples")}
        return cls(
            task=get_task(values["task"]).name,
            seed=values["seed"],
            tracking=values.get("tracking"),
            runtime=values.get("runtime"),
            data_source=dict(source),
        )


def training_config(
    training: Training,
    runtime: Runtime,
    seed: int,
    task: str,
    checkpoint_dir: Path | None,
    n_train: int | None = None,
):
    """TrainingConfig from a validated ``training:`` block plus the ``runtime`` settings (the nodes and
    [`RunSettings`][] turn dicts into these models).

    With a ``checkpoint_dir`` the checkpoint is kept after training: the job path removes it
    once the result is stored. With ``n_train`` (training rows) and no ``log_every_steps`` set by
    the user, losses are logged [`adaptive_log_every`][] steps apart, so
    small runs still draw a curve.
    """
    select = runtime.select_metric or primary_metric(task)  # a sweep table's paper metric, else the task's primary
    if select not in (known := metric_names(task)):
        raise ParameterError(
            [("runtime.select_metric", f"{select!r} is not a dev metric of {task} ({', '.join(known)})")],
            fix="leave runtime.select_metric out (the task's primary metric) or name one of them",
        )
    config = TrainingConfig.from_schema(
        training, runtime, seed=seed, select_metric=select, checkpoint_dir=checkpoint_dir
    )
    if checkpoint_dir is not None:
        config.keep_checkpoint = True
    chose_log_every = "log_every_steps" in training.model_fields_set or runtime.log_every_steps is not None
    if n_train is not None and not chose_log_every:
        config.log_every_steps = adaptive_log_every(total_steps(config, n_train))
    return config


def adaptive_log_every(total_steps: int, cap: int = 10, points: int = 50) -> int:
    """Steps between loss logs: every ``total_steps / points`` steps, at most ``cap``, at least 1,
    so a 60-step run still draws a curve and a 30k-step run does not log 30k points."""
    return max(1, min(cap, int(total_steps) // points))


def total_steps(config: TrainingConfig, n_train: int) -> int:
    """Optimizer steps of a run over ``n_train`` rows (``max_steps``, else epochs × steps per epoch)."""
    per_epoch = math.ceil(n_train / config.batch_size / config.gradient_accumulation_steps)
    return int(config.max_steps or max(1, math.ceil(per_epoch * config.epochs)))


def teacher_block(teacher: Block[Teacher]) -> Teacher:
    """A ``teacher`` block or a ``multi_teachers`` entry as a `Teacher`: the
    hook's model as is, a dict (a notebook's, a test's, a sweep trial's) validated without its
    ``name`` and ``seed`` (see [`teacher_seed`][])."""
    if isinstance(teacher, Teacher):
        return teacher
    return typed(Teacher, {k: v for k, v in dict(teacher or {}).items() if k not in ("name", "seed")}, "teacher")


def teacher_seed(teacher: Block[Teacher], run_seed: int) -> int:
    """The seed a teacher trains with: its own ``seed`` (a ``multi_teachers`` entry's, a sweep
    table's ``teacher.seed``) where it has one, else the run's."""
    own = getattr(teacher, "seed", None) if isinstance(teacher, BaseModel) else dict(teacher or {}).get("seed")
    return int(run_seed if own is None else own)


def collator_for(tokenizer, extra: Mapping[str, object] | None = None) -> Collator:
    """Collator padding the main inputs by ``tokenizer``'s rules and each prefixed group (``extra``:
    prefix → tokenizer, e.g. a teacher's ``t0_``) by its own tokenizer's (side, pad ids)."""
    return Collator(tokenizers={"": tokenizer, **dict(extra or {})})


def step_logger(run: JobRun):
    """``run.log_metrics`` that also passes the job path's ``step`` fault point (crash tests)."""

    def log_fn(metrics, step):
        run.log_metrics(metrics, step)
        jobs.fault_point("step")

    return log_fn
