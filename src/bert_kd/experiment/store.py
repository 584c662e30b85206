"""The content-keyed model store of a project checkout (Kedro-free): jobs under
[`STORE_ROOT`][bert_kd.experiment.store.STORE_ROOT] (teachers, students, TED filters, teacher caches), a model's key material and
[`run_model_job`][bert_kd.experiment.store.run_model_job], which reuses or trains a model through [`bert_kd.experiment.jobs`][bert_kd.experiment.jobs]."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Mapping

from bert_kd.config.schema import Block, Runtime, Tracking, typed
from bert_kd.core.models import ModelBundle, load_bundle, resolve_model_name, write_bundle_files
from bert_kd.experiment import jobs
from bert_kd.experiment.model_card import CARD_FILE, write_model_card
from bert_kd.experiment.provenance import git_commit_label
from bert_kd.experiment.tracker import is_main_process, timed, tracker_for

log = logging.getLogger(__name__)

#: Where reusable artefacts keyed by their content live (teachers, students, filters, caches).
STORE_ROOT = Path("data/06_models/store")


def model_identity(name: str) -> dict:
    """Key material for a model name: local files' sha256, or hub id + revision."""
    return jobs.model_identity(name, resolve_model_name(name))


def job(kind: str, spec: Mapping) -> jobs.Job:
    """A job of ``kind`` stored under [`STORE_ROOT`][bert_kd.experiment.store.STORE_ROOT]."""
    return jobs.Job(kind, spec, STORE_ROOT)


def recompute(runtime: Block[Runtime] | None) -> bool:
    """``runtime.recompute: true`` retrains every job of the run instead of reusing stored results."""
    return typed(Runtime, runtime, "runtime").recompute


#: Metric of a job's run: the seconds its training took (``train_fn``, model built to best epoch kept).
TRAINING_SECONDS = "time/training_seconds"


def run_model_job(
    model_job: jobs.Job,
    train_fn,
    tracking: Tracking,
    *,
    recompute: bool = False,
    run_name: str | None = None,
    run_tags: Mapping[str, str] | None = None,
) -> ModelBundle:
    """Reuse or train a model through the job path, inside the job's own run; the bundle's
    ``info`` names its store path.

    The run (``run_name``, default ``<kind>:<task>``) opens before the job and ends with it:
    ``train_fn(checkpoint_dir, run=<the run>)`` logs into it and its seconds are logged as
    [`TRAINING_SECONDS`][bert_kd.experiment.store.TRAINING_SECONDS]. A reused model's run is its own short run, tagged with a link to the
    run that trained it (``info["trained_in_run_id"]``); ``info["mlflow_run_id"]`` is this job's run.
    With ``tracking.log_models`` the stored model is logged as a LoggedModel of the run, once: a
    reused entry is logged again only when the run that trained it has no finished LoggedModel in
    this tracking store (a killed logging, another store). Its id goes to ``info["mlflow_model_id"]``.
    The entry gets its model card (``README.md``, [`bert_kd.experiment.model_card`][bert_kd.experiment.model_card]) when it is
    trained, or when a reused entry has none, before its model is logged.
    """
    tracker = tracker_for(tracking)
    name = run_name or f"{model_job.kind}:{model_job.spec.get('task')}"
    with tracker.start_job(name, run_tags) as run:

        def train(checkpoint_dir):
            with timed(run, TRAINING_SECONDS):
                return train_fn(checkpoint_dir, run=run)

        outcome = jobs.run_job(
            model_job,
            train,
            write_bundle_files,
            load_bundle,
            recompute=recompute,
            writer=is_main_process(),
            provenance_fn=lambda bundle: {
                "mlflow_run_id": bundle.info.get("mlflow_run_id"),
                "git_commit": git_commit_label(),
            },
        )
        bundle = outcome.value
        bundle.info.update(key=model_job.key, store_path=str(outcome.path), reused=outcome.reused)
        model_id = None
        if outcome.reused:
            trained_in = bundle.info.get("mlflow_run_id")
            bundle.info["trained_in_run_id"] = trained_in
            tracker.mark_reused(run, trained_in)
            model_id = tracker.logged_model(trained_in, model_job.key)
        if run.enabled:
            bundle.info["mlflow_run_id"] = run.run_id
        card = Path(outcome.path) / CARD_FILE
        if is_main_process() and (not outcome.reused or not card.is_file()):
            write_card_quietly(outcome.path, tracker.run_link(bundle.info.get("trained_in_run_id") or run.run_id))
        if model_id is None and tracking.log_models:
            regression = int(getattr(bundle.model.config, "num_labels", 2)) == 1
            model_id = tracker.log_model(run, outcome.path, bundle.info, model_job.key, regression)
        if model_id is not None:
            bundle.info["mlflow_model_id"] = model_id
    return bundle


def write_card_quietly(directory, run_link: str | None = None, **options) -> Path | None:
    """Write the model card of a store entry; a card that cannot be written is one warning line,
    never a failed job (the model is stored; ``bert-kd card`` writes it again)."""
    try:
        return write_model_card(directory, run_link=run_link, **options)
    except Exception as exc:  # noqa: BLE001 - the card is derived; the stored model stands without it
        log.warning("no model card for %s: %s (write it with `bert-kd card %s`)", directory, exc, directory)
        return None
