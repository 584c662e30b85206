"""How the job path reports what it does, without knowing MLflow (Kedro- and MLflow-free).

A training job (:func:`bert_kd.experiment.store.run_model_job`) opens one run for itself through a
:class:`JobTracker`, trains or reuses its model inside it, logs the stored model and ends the
run when the job ends. The loop and the distillation body write to the :class:`JobRun` they are
handed. With ``tracking.enabled: false`` the tracker is :data:`NO_TRACKER` and nothing here
imports MLflow; with tracking on, :mod:`bert_kd.tracking` provides the MLflow implementation
(:class:`bert_kd.tracking.jobs.MlflowTracker`), registered by :func:`register_tracker` when that
package is imported, or looked up by its module name (:data:`DEFAULT_TRACKER`) on first use.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import time
from typing import Any, Callable, ContextManager, Iterator, Mapping, Protocol, runtime_checkable


@runtime_checkable
class JobRun(Protocol):
    """One job's run: what the loop and the methods log to (every call a no-op when disabled)."""

    enabled: bool
    run_id: str | None

    def log_params(self, params: Mapping) -> None: ...
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None: ...
    def set_tags(self, tags: Mapping[str, str]) -> None: ...
    def log_dict(self, data: Mapping, name: str) -> None: ...
    def log_figure(self, figure, name: str) -> None: ...
    def log_artifacts(self, directory, artifact_path: str) -> None: ...


class NoRun:
    """A run that records nothing (tracking off, or a process other than rank 0)."""

    enabled = False
    run_id: str | None = None

    def log_params(self, params: Mapping) -> None:
        pass

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        pass

    def set_tags(self, tags: Mapping[str, str]) -> None:
        pass

    def log_dict(self, data: Mapping, name: str) -> None:
        pass

    def log_figure(self, figure, name: str) -> None:
        pass

    def log_artifacts(self, directory, artifact_path: str) -> None:
        pass


class JobTracker(Protocol):
    """Where jobs report: one run per job, its stored model, the evaluation of its model."""

    enabled: bool

    def start_job(self, name: str, tags: Mapping[str, str] | None = None) -> ContextManager[JobRun]:
        """A run for one job, open while the job trains (or reuses) its model; ended when the job ends."""

    def mark_reused(self, run: JobRun, trained_in_run_id: str | None) -> None:
        """Say on ``run`` that the job reused a stored model, linking the run that trained it."""

    def logged_model(self, run_id: str | None, store_key: str | None = None) -> str | None:
        """The id of the finished model that run ``run_id`` logged, else of any finished model of the
        store entry ``store_key`` (None: none, unfinished, or another tracking store)."""

    def log_model(
        self, run: JobRun, directory, info: Mapping[str, Any], store_key: str, regression: bool = False
    ) -> str | None:
        """Log the stored model ``directory`` on ``run``; its id (None when not logged)."""

    def log_evaluation(self, run_id: str | None, evaluation: Mapping) -> None:
        """An evaluation's metrics on the (finished) run of the evaluated model, without reopening it."""

    def describe_job(
        self, run: JobRun, store_job, task: str, seed: int, data_source: Mapping | None, n_train: int, model
    ) -> None:
        """The columns that make a job's run comparable (task, seed, data source, sample caps, the
        train split as the run's dataset, the model's size)."""

    def distillation_started(self, run: JobRun, job, model, method, objective, settings) -> None:
        """A distillation job's columns and parameters (recipe, layer map, weights, teachers …)."""

    def distillation_ended(self, run: JobRun, job, method, outcome: Mapping[str, Any]) -> None:
        """What a trained student's method observed (ALP's α map, a multi-teacher alignment)."""


class NoTracker:
    """The tracker of ``tracking.enabled: false``: opens nothing, logs nothing, imports nothing."""

    enabled = False

    @contextlib.contextmanager
    def start_job(self, name: str, tags: Mapping[str, str] | None = None) -> Iterator[JobRun]:
        yield NoRun()

    def mark_reused(self, run: JobRun, trained_in_run_id: str | None) -> None:
        pass

    def logged_model(self, run_id: str | None, store_key: str | None = None) -> str | None:
        return None

    def log_model(
        self, run: JobRun, directory, info: Mapping[str, Any], store_key: str, regression: bool = False
    ) -> str | None:
        return None

    def log_evaluation(self, run_id: str | None, evaluation: Mapping) -> None:
        pass

    def describe_job(
        self, run: JobRun, store_job, task: str, seed: int, data_source: Mapping | None, n_train: int, model
    ) -> None:
        pass

    def distillation_started(self, run: JobRun, job, model, method, objective, settings) -> None:
        pass

    def distillation_ended(self, run: JobRun, job, method, outcome: Mapping[str, Any]) -> None:
        pass


NO_TRACKER = NoTracker()

#: The MLflow tracker, by module and class name (``bert_kd.tracking`` registers it when imported).
DEFAULT_TRACKER = "bert_kd.tracking.jobs:MlflowTracker"

_factory: Callable[[], JobTracker] | None = None


def register_tracker(factory: Callable[[], JobTracker]) -> None:
    """Make ``factory`` build the tracker of every run with tracking on."""
    global _factory
    _factory = factory


def is_main_process() -> bool:
    """Rank 0 of a torchrun / ``accelerate launch`` job (or a plain single process): the only
    process that reports, so N processes make one run and one store."""
    return int(os.environ.get("RANK", "0") or 0) == 0


def tracker_for(tracking) -> JobTracker:
    """The tracker of a ``tracking`` block (a :class:`~bert_kd.config.schema.Tracking` or its dict):
    :data:`NO_TRACKER` when tracking is off or this is not rank 0, else the registered one."""
    enabled = getattr(tracking, "enabled", None)
    if enabled is None:
        enabled = dict(tracking or {}).get("enabled", True)
    if not enabled or not is_main_process():
        return NO_TRACKER
    factory = _factory
    if factory is None:
        module, _, name = DEFAULT_TRACKER.partition(":")
        factory = getattr(importlib.import_module(module), name)
    return factory()


@contextlib.contextmanager
def timed(run: JobRun, metric: str) -> Iterator[None]:
    """Log the seconds the block took as ``metric`` on ``run`` (``time/training_seconds`` …)."""
    started = time.perf_counter()
    yield
    run.log_metrics({metric: round(time.perf_counter() - started, 3)})
