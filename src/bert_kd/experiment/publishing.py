"""A stored model's publication (Kedro-free, MLflow behind [`JobTracker`][tracker.JobTracker]):
[`run_model_job`][] reuses or trains a model through the store
([`bert_kd.experiment.store`][], [`bert_kd.experiment.jobs`][])
inside the job's run, then writes the entry's model card and logs its LoggedModel. The store itself
writes no card and logs nothing."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from bert_kd.config.schema import Tracking
from bert_kd.core.models import ModelBundle, load_bundle, write_bundle_files
from bert_kd.experiment import jobs
from bert_kd.experiment.lineage import Lineage
from bert_kd.experiment.model_card import CARD_FILE, write_model_card
from bert_kd.experiment.provenance import git_commit_label
from bert_kd.experiment.tracker import is_main_process, timed, tracker_for

log = logging.getLogger(__name__)


#: Metric of a job's run: the seconds its training took (``train_fn``, model built to best epoch kept).
TRAINING_SECONDS = "time/training_seconds"


@dataclass(frozen=True)
class JobRunSpec:
    """A job's run: its ``name`` (default ``<kind>:<task>``), ``tags``, and ``describe_fn(run, bundle)``,
    which records on a reuse run that stands for the model (see
    [`Lineage.model_run_id`][]) what the job's training run records."""

    name: str | None = None
    tags: Mapping[str, str] | None = None
    describe_fn: Callable[[Any, ModelBundle], None] | None = None


def run_model_job(
    model_job: jobs.Job,
    train_fn,
    tracking: Tracking,
    *,
    recompute: bool = False,
    job_run: JobRunSpec = JobRunSpec(),
) -> ModelBundle:
    """Reuse or train a model through the job path, inside the job's own run; the bundle's
    ``info`` carries the job's frozen [`Lineage`][] (read it back with [`Lineage.of`][]).

    The run (``job_run``: [`JobRunSpec`][]) opens before the job and ends with it:
    ``train_fn(checkpoint_dir, run=<the run>)`` logs into it and its seconds are logged as
    [`TRAINING_SECONDS`][]. A reused model's run is its own short run, tagged with a link to the
    run that trained it ([`Lineage.trained_in_run_id`][]); [`Lineage.run_id`][] is this job's run.
    With ``tracking.log_models`` the stored model is logged as a LoggedModel of the run, once per
    store entry and tracking store: the run that trains the entry logs it before it releases the
    key's lock ([`bert_kd.experiment.jobs.key_lock`][]), and a run that reuses the entry and finds no
    finished LoggedModel of it (the training run's logging killed, another tracking store, or that
    logging still under way) takes the lock and looks again before it logs one. Its id is
    [`Lineage.model_id`][]; [`Lineage.model_run_id`][] is the run that stands for the stored model
    in this tracking store, its LoggedModel's source run; a reuse run that is
    that run (the training run is in another tracking store) first records what its job's training
    would have, through ``job_run.describe_fn`` (the train split as its dataset, the comparable
    columns), so the model it logs and the evaluation logged on it name their data. The entry gets its model card (``README.md``,
    [`bert_kd.experiment.model_card`][]) when it is trained, or when a reused entry has none, before its
    model is logged.
    """
    tracker = tracker_for(tracking)
    name = job_run.name or f"{model_job.kind}:{model_job.spec.get('task')}"
    with tracker.start_job(name, job_run.tags) as run:

        def train(checkpoint_dir):
            with timed(run, TRAINING_SECONDS):
                return train_fn(checkpoint_dir, run=run)

        def publish(outcome: jobs.JobOutcome) -> None:  # the key's lock held: logged before anyone reuses it
            _describe(outcome, model_job, run)
            if is_main_process():
                write_card_quietly(outcome.path, tracker.run_link(run.run_id))
            _log_model(tracker, run, tracking, outcome.value, outcome.path)

        outcome = jobs.run_job(
            model_job,
            train,
            write_bundle_files,
            load_bundle,
            recompute=recompute,
            writer=is_main_process(),
            provenance_fn=lambda bundle: {
                "mlflow_run_id": Lineage.of(bundle.info).run_id,
                "git_commit": git_commit_label(),
            },
            publish_fn=publish,
        )
        if outcome.reused:
            _reuse_entry(outcome, model_job, tracker, run, tracking, job_run.describe_fn)
        else:  # described when published already; a rank other than 0 publishes nothing
            _describe(outcome, model_job, run)
    return outcome.value


def _describe(outcome: jobs.JobOutcome, model_job: jobs.Job, run) -> Lineage:
    """The job's [`Lineage`][]: its key, store path, whether reused (then the run that trained it) and
    this job's run; written into the bundle's ``info``."""
    stored = Lineage.of(outcome.value.info)
    return _stamp(outcome, stored.placed(model_job.key, str(outcome.path), outcome.reused, _run_id(run)))


def _stamp(outcome: jobs.JobOutcome, lineage: Lineage) -> Lineage:
    """``lineage`` written into the bundle's ``info`` (the form ``bert_kd.json`` and the nodes read)."""
    outcome.value.info.update(lineage.info())
    return lineage


def _run_id(run) -> str | None:
    return run.run_id if run.enabled else None


def _reuse_entry(
    outcome: jobs.JobOutcome, model_job: jobs.Job, tracker, run, tracking: Tracking, describe_fn=None
) -> None:
    """A reused entry's run: linked to the run that trained it, and the entry's LoggedModel found
    (or, when it has none in this tracking store, logged under the key's lock). When the run that
    trained it is not in this tracking store, this run records what that run would have
    (``describe_fn``) and stands for the model unless an earlier run logged it here
    ([`Lineage.model_run_id`][])."""
    lineage = _describe(outcome, model_job, run)
    trained_in = lineage.trained_in_run_id
    trained_here = tracker.mark_reused(run, trained_in)
    if run.enabled and not trained_here:
        lineage = _stamp(outcome, lineage.with_model(stands_for_run_id=run.run_id))
        if describe_fn is not None:
            describe_fn(run, outcome.value)
    model_id = tracker.logged_model(trained_in, model_job.key)
    if model_id is None and tracking.log_models and run.enabled:
        with jobs.key_lock(model_job):  # the run that trained it may be logging it right now: wait, then look again
            model_id = tracker.logged_model(trained_in, model_job.key)
            if model_id is None:
                tracker.drop_unfinished_models(model_job.key)  # a logging killed half-way: not a second model
                _stamp(outcome, lineage.with_model(stands_for_run_id=run.run_id))
                _write_missing_card(outcome, tracker, run.run_id)
                _log_model(tracker, run, tracking, outcome.value, outcome.path)
                return
    if model_id is not None:
        stands_for = tracker.model_run(model_id) or lineage.model_run_id
        lineage = _stamp(outcome, lineage.with_model(model_id, stands_for))
    _write_missing_card(outcome, tracker, lineage.model_run_id)


def _write_missing_card(outcome: jobs.JobOutcome, tracker, run_id: str | None) -> None:
    """The model card of a reused entry that has none (its link: the run that stands for the model)."""
    if is_main_process() and not (Path(outcome.path) / CARD_FILE).is_file():
        write_card_quietly(outcome.path, tracker.run_link(run_id))


def _log_model(tracker, run, tracking: Tracking, bundle: ModelBundle, directory) -> None:
    """With ``tracking.log_models``, the store entry ``directory`` as a LoggedModel of ``run``; its id in the ``info``."""
    if not tracking.log_models:
        return
    regression = int(getattr(bundle.model.config, "num_labels", 2)) == 1
    lineage = Lineage.of(bundle.info)
    model_id = tracker.log_model(run, directory, bundle.info, lineage.key, regression)
    if model_id is not None:
        bundle.info.update(lineage.with_model(model_id).info())


def write_card_quietly(directory, run_link: str | None = None, **options) -> Path | None:
    """Write the model card of a store entry; a card that cannot be written is one warning line,
    never a failed job (the model is stored; ``bert-kd card`` writes it again)."""
    try:
        return write_model_card(directory, run_link=run_link, **options)
    except Exception as exc:  # noqa: BLE001 - the card is derived; the stored model stands without it
        log.warning("no model card for %s: %s (write it with `bert-kd card %s`)", directory, exc, directory)
        return None
