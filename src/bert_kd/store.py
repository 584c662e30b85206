"""The content-keyed model store of a project checkout (Kedro-free): jobs under
:data:`STORE_ROOT` (teachers, students, TED filters, teacher caches), a model's key material and
:func:`run_model_job`, which reuses or trains a model through :mod:`bert_kd.jobs`."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from bert_kd import jobs
from bert_kd.models import ModelBundle, load_bundle, resolve_model_name, write_bundle_files
from bert_kd.schema import Block, Runtime, Tracking, typed
from bert_kd.tracking import is_main_process, reopen_run
from bert_kd.tracking_models import log_model_directory


#: Where reusable artefacts keyed by their content live (teachers, students, filters, caches).
STORE_ROOT = Path("data/06_models/store")


def model_identity(name: str) -> dict:
    """Key material for a model name: local files' sha256, or hub id + revision."""
    return jobs.model_identity(name, resolve_model_name(name))


def job(kind: str, spec: Mapping) -> jobs.Job:
    """A job of ``kind`` stored under :data:`STORE_ROOT`."""
    return jobs.Job(kind, spec, STORE_ROOT)


def recompute(runtime: Block[Runtime] | None) -> bool:
    """``runtime.recompute: true`` retrains every job of the run instead of reusing stored results."""
    return typed(Runtime, runtime, "runtime").recompute


def run_model_job(model_job: jobs.Job, train_fn, tracking: Block[Tracking] | None, *,
                  recompute: bool = False) -> ModelBundle:
    """Reuse or train a model through the job path; the bundle's ``info`` names its store path.

    A freshly trained model is logged once, as an MLflow LoggedModel of its training run, when
    ``tracking.log_models`` (:func:`bert_kd.tracking_models.log_model_directory`; its id in
    ``info["mlflow_model_id"]``).
    """
    outcome = jobs.run_job(
        model_job, train_fn, write_bundle_files, load_bundle, recompute=recompute, writer=is_main_process(),
        provenance_fn=lambda bundle: {"mlflow_run_id": bundle.info.get("mlflow_run_id")},
    )
    bundle = outcome.value
    bundle.info.update(key=model_job.key, store_path=str(outcome.path), reused=outcome.reused)
    if not outcome.reused and typed(Tracking, tracking, "tracking").log_models:
        with reopen_run(bundle.info.get("mlflow_run_id"), tracking) as run:
            if run.enabled:
                regression = int(getattr(bundle.model.config, "num_labels", 2)) == 1
                bundle.info["mlflow_model_id"] = log_model_directory(
                    outcome.path, task=bundle.info.get("task"), regression=regression,
                    tags={"role": bundle.info.get("role", ""), "store_key": model_job.key})
    return bundle
