"""How the job path reports what it does, without knowing MLflow (Kedro- and MLflow-free).

A training job ([`bert_kd.experiment.publishing.run_model_job`][]) opens one run for itself through a
[`JobTracker`][], trains or reuses its model inside it, logs the stored model and ends the
run when the job ends. The loop and the distillation body write to the [`JobRun`][] they are
handed. With ``tracking.enabled: false`` the tracker is `NO_TRACKER` and nothing here
imports MLflow; with tracking on, the implementation is the one the program installed where it
starts ([`install_tracking`][]): Kedro's ``settings.py`` installs MLflow's
([`bert_kd.tracking.use_mlflow`][]), and so does every other entry point that tracks.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Protocol

#: The alias of the registered version a comparison chose (``models:/<name>@champion``).
CHAMPION_ALIAS = "champion"


class JobRun:
    """One job's run: what the loop and the methods log to. Every method here records nothing (tracking
    off, or a process other than rank 0); MLflow's run ([`bert_kd.tracking.runs.RunLogger`][]) overrides them."""

    enabled: bool = False
    run_id: str | None = None

    def log_params(self, params: Mapping) -> None:
        """Parameters of the run."""

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Metrics of the run (at ``step``)."""

    def set_tags(self, tags: Mapping[str, str]) -> None:
        """Tags of the run."""

    def log_dict(self, data: Mapping, name: str) -> None:
        """``data`` as the JSON artifact ``name``."""

    def log_figure(self, figure, name: str) -> None:
        """A figure as the artifact ``name``."""

    def log_artifacts(self, directory, artifact_path: str) -> None:
        """The files of ``directory`` under ``artifact_path``."""


class JobTracker:
    """Where jobs report: one run per job, its stored model, the evaluation of its model. Every method
    here opens, logs, finds and registers nothing: this class is the tracker of ``tracking.enabled:
    false`` ([`NO_TRACKER`][]), and MLflow's ([`bert_kd.tracking.jobs.MlflowTracker`][]) overrides them."""

    enabled: bool = False

    @contextlib.contextmanager
    def start_job(self, name: str, tags: Mapping[str, str] | None = None) -> Iterator[JobRun]:
        """A run for one job, open while the job trains (or reuses) its model; ended when the job ends."""
        yield JobRun()

    def mark_reused(self, run: JobRun, trained_in_run_id: str | None) -> bool:
        """Say on ``run`` that the job reused a stored model, linking the run that trained it; whether
        that run is in this tracking store."""
        return False

    def logged_model(self, run_id: str | None, store_key: str | None = None) -> str | None:
        """The id of the finished model that run ``run_id`` logged, else of any finished model of the
        store entry ``store_key`` (None: none, unfinished, or another tracking store)."""
        return None

    def model_run(self, model_id: str) -> str | None:
        """The run that logged the model ``model_id`` (None: not in this tracking store)."""
        return None

    def drop_unfinished_models(self, store_key: str) -> list[str]:
        """Delete the models of ``store_key`` whose logging never finished (``PENDING``: their logger died
        holding the key's lock, which the caller now holds); their ids."""
        return []

    def log_model(
        self, run: JobRun, directory, info: Mapping[str, Any], store_key: str, regression: bool = False
    ) -> str | None:
        """Log the stored model ``directory`` on ``run``; its id (None when not logged)."""
        return None

    def log_evaluation(self, run_id: str | None, evaluation: Mapping) -> None:
        """An evaluation's metrics on the (finished) run of the evaluated model, without reopening it."""

    def run_link(self, run_id: str | None) -> str | None:
        """The UI link of run ``run_id`` (a model card's "MLflow run"); None when there is none."""
        return None

    def describe_job(
        self, run: JobRun, store_job, task: str, seed: int, data_source: Mapping | None, n_train: int, model
    ) -> None:
        """The columns that make a job's run comparable (task, seed, data source, sample caps, the
        train split as the run's dataset, the model's size)."""

    def distillation_started(self, run: JobRun, job, model, method, objective, settings) -> None:
        """A distillation job's columns and parameters (recipe, layer map, weights, teachers …)."""

    def distillation_ended(self, run: JobRun, job, method, outcome: Mapping[str, Any]) -> None:
        """What a trained student's method observed (ALP's α map, a multi-teacher alignment)."""

    def ted_stage_one_started(
        self, run: JobRun, job, teacher, mapping, arch: str, route: str, config, data_source, n_train: int
    ) -> None:
        """TED Stage I's columns and parameters (layer map, filter architecture, student-filter route)."""

    def ted_filters_scored(
        self, run: JobRun, per_layer: Mapping[str, Mapping[str, float]], metric: str, task: str
    ) -> None:
        """Each Stage I filter's dev score and one per-layer figure."""

    def log_stored_filters(self, run_id: str, directory) -> None:
        """Freshly trained TED filters (``directory``) as artifacts of their finished Stage I run."""

    def log_onnx_model(self, onnx_path, tags: Mapping[str, str]) -> str | None:
        """The exported ONNX student as a LoggedModel of the open job run; its id."""
        return None

    def champion_source(self, name: str) -> str | None:
        """``models:/<name>@champion`` when the registered model ``name`` has that alias (else None)."""
        return None

    def register_best_student(
        self,
        student_info: Mapping,
        teacher_info: Mapping | None,
        name: str,
        extra_tags: Mapping[str, str],
        description: str,
        alias: str | None = CHAMPION_ALIAS,
    ) -> str | None:
        """Register the student's LoggedModel as a new version of ``name`` with ``alias`` (``champion``
        for a clear winner; a tied row's own ``tied-<row>``); the version number (None when nothing
        was registered)."""
        return None


#: The tracker of ``tracking.enabled: false``: opens nothing, logs nothing, imports nothing.
NO_TRACKER = JobTracker()


def default_registered_name(task: str) -> str:
    """The registered model a comparison's best student joins when ``tracking.registered_model`` is unset."""
    return f"bert_kd-{task}-student"


_factory: Callable[[], JobTracker] | None = None
_kedro_run_factory: Callable[[], KedroRunReporter] | None = None
_model_sources_factory: Callable[[], ModelSources] | None = None


class TrackingNotInstalledError(RuntimeError):
    """Tracking is on but the program installed no tracker where it starts."""


def install_tracking(
    job_tracker: Callable[[], JobTracker],
    kedro_run_reporter: Callable[[], KedroRunReporter],
    sources: Callable[[], ModelSources],
) -> None:
    """Choose this program's implementations of the three interfaces (called where the program
    starts: [`bert_kd.tracking.use_mlflow`][] installs MLflow's)."""
    global _kedro_run_factory, _model_sources_factory
    register_tracker(job_tracker)
    _kedro_run_factory, _model_sources_factory = kedro_run_reporter, sources


def register_tracker(factory: Callable[[], JobTracker]) -> None:
    """Make ``factory`` build the tracker of every run with tracking on."""
    global _factory
    _factory = factory


def _not_installed(what: str) -> TrackingNotInstalledError:
    return TrackingNotInstalledError(
        f"{what}, but this program installed no tracker: call bert_kd.tracking.use_mlflow() where it starts "
        "(Kedro's settings.py does), or set tracking.enabled: false"
    )


def is_main_process() -> bool:
    """Rank 0 of a torchrun / ``accelerate launch`` job (or a plain single process): the only
    process that reports, so N processes make one run and one store."""
    return int(os.environ.get("RANK", "0") or 0) == 0


def tracker_for(tracking) -> JobTracker:
    """The tracker of a ``tracking`` block (a `Tracking` or its dict):
    `NO_TRACKER` when tracking is off or this is not rank 0, else the registered one."""
    enabled = getattr(tracking, "enabled", None)
    if enabled is None:
        enabled = dict(tracking or {}).get("enabled", True)
    if not enabled or not is_main_process():
        return NO_TRACKER
    if _factory is None:
        raise _not_installed("tracking.enabled is true")
    return _factory()


@dataclass(frozen=True)
class Comparison:
    """A comparison table as a report node made it, for [`KedroRunReporter.log_comparison`][]."""

    name: str  # the artifacts' stem: <name>.md, <name>.png
    markdown: str  # the table with its verdict (the .md artifact)
    figure: Any  # the bar chart (the .png artifact)
    frame: Any  # the table's rows, whose numeric cells become compare/<method>/<column> metrics
    metric: str  # the primary metric: best/<metric> and the best_method tag
    body: str  # the table alone: the run's description
    title: str
    warning: str | None = None  # every student ties with the floor: no best student is named
    teacher_run_id: str | None = None  # linked from the description


class KedroRunReporter:
    """What report nodes show on the ``kedro run``'s own run (the one kedro-mlflow opened), if any. Every
    method here shows nothing ([`NO_KEDRO_RUN`][]: MLflow never loaded, or a process other than rank 0);
    MLflow's ([`bert_kd.tracking.kedro_run.MlflowKedroRun`][]) overrides them."""

    def log_files(self, texts: Mapping[str, str], figures: Mapping[str, object]) -> None:
        """Texts and figures as artifacts named by their keys."""

    def log_report(self, name: str, table, figure) -> None:
        """A report node's CSV table and figure (``<name>.csv``, ``<name>.png``)."""

    def log_comparison(self, comparison: Comparison) -> None:
        """A comparison table: ``<name>.md`` and ``<name>.png``, the table as the run's description and
        its ``compare/<method>/<metric>`` metrics."""

    def set_tags(self, tags: Mapping[str, str]) -> None:
        """Tags on the run (a comparison's verdict, the registered model)."""

    def head_note(self, line: str) -> None:
        """``line`` at the head of the run's description (what was registered, above the table)."""

    def log_evaluation(self, evaluation: Mapping) -> None:
        """An evaluated model's flat metrics, ``evaluation.json`` and the ``evaluated_model`` tag."""

    def log_metrics(self, metrics: Mapping[str, float]) -> None:
        """Metrics on the run (how far off the run's progress estimates were: ``eta/…``)."""

    def log_reproduction(self, note: str, compare_means: Mapping[tuple[str, str], float], paths) -> None:
        """The reproduce pipeline's tables: ``note`` as the description, each (method, task) mean as
        ``compare/<method>/<task>``, each file under ``reproduce/``."""


#: No ``kedro run`` run to report on.
NO_KEDRO_RUN = KedroRunReporter()


def kedro_run() -> KedroRunReporter:
    """The reporter of the ``kedro run``'s own run: `NO_KEDRO_RUN` when this is not rank 0,
    mlflow was never imported (then no run can be active, and none is loaded to find out) or the
    program installed no tracking (it has no ``kedro run`` run: Kedro's ``settings.py`` installs one)."""
    if "mlflow" not in sys.modules or not is_main_process() or _kedro_run_factory is None:
        return NO_KEDRO_RUN
    return _kedro_run_factory()


class ModelSources(Protocol):
    """Where a model named by an MLflow URI (``models:/…``, ``runs:/…``) is read from."""

    def local_directory(self, uri: str, key: str) -> Path:
        """The model ``uri`` downloaded to a local directory (a LoggedModel's data, confined to the
        download); a [`UserError`][config.errors.UserError] naming the parameter ``key`` when the
        URI names nothing loadable."""

    def recorded_task(self, uri: str) -> tuple[str | None, str]:
        """The task a ``models:/`` URI is tagged with and where that tag was read (``(None, "")``: none)."""


#: Prefix of the temporary folder a model named by an MLflow URI is downloaded into
#: ([`discard_download`][]).
DOWNLOAD_PREFIX = "bert_kd_model_"


def discard_download(path: Path) -> None:
    """Remove the temporary download folder ([`DOWNLOAD_PREFIX`][])
    that holds ``path``: a refused model leaves nothing behind (a MiniLM teacher is 88 MB, BERT-base about
    440 MB). Any other path is left alone."""
    import shutil
    import tempfile

    temporary = Path(tempfile.gettempdir()).resolve()
    for folder in (Path(path), *Path(path).parents):
        if folder.name.startswith(DOWNLOAD_PREFIX) and folder.resolve().parent == temporary:
            shutil.rmtree(folder, ignore_errors=True)
            return


def model_sources() -> ModelSources:
    """The resolver of MLflow model URIs (loads MLflow: ask only for a URI; resolving a URI is
    MLflow's job, tracking on or off)."""
    if _model_sources_factory is None:
        raise _not_installed("a model is named by an MLflow URI")
    return _model_sources_factory()


@contextlib.contextmanager
def timed(run: JobRun, metric: str) -> Iterator[None]:
    """Log the seconds the block took as ``metric`` on ``run`` (``time/training_seconds`` …)."""
    started = time.perf_counter()
    yield
    run.log_metrics({metric: round(time.perf_counter() - started, 3)})
