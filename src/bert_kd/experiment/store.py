"""The content-keyed model store of a project checkout (Kedro-free): jobs under
[`STORE_ROOT`][] (teachers, students, TED filters, teacher caches), a model's
key material and the run that stands for a stored model. It stores and nothing else: the job's run, its
model card and its LoggedModel are published by [`bert_kd.experiment.publishing`][]."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from bert_kd.config.schema import Block, Runtime, typed
from bert_kd.core.models import resolve_model_name
from bert_kd.experiment import jobs

#: Where reusable artefacts keyed by their content live (teachers, students, filters, caches).
STORE_ROOT = Path("data/06_models/store")


def model_identity(name: str) -> dict:
    """Key material for a model name: local files' sha256, or hub id + revision."""
    return jobs.model_identity(name, resolve_model_name(name))


def job(kind: str, spec: Mapping) -> jobs.Job:
    """A job of ``kind`` stored under [`STORE_ROOT`][]."""
    return jobs.Job(kind, spec, STORE_ROOT)


def recompute(runtime: Block[Runtime] | None) -> bool:
    """``runtime.recompute: true`` retrains every job of the run instead of reusing stored results."""
    return typed(Runtime, runtime, "runtime").recompute


def model_run_id(info: Mapping) -> str | None:
    """The run that stands for a stored model in the tracking store a run logs to: the source run of
    its finished LoggedModel there (the run that trained it, or, when that run is in another
    tracking store or its logging was killed, the run that logged it here); without a LoggedModel,
    the run that trained it when that run is in this store, else the job's own run. A registered
    version's ``bert_kd.teacher_run_id``/``bert_kd.student_run_id``, a comparison's
    ``teacher_run_id`` and a model card's run link all name it; the run that trained it stays in the
    entry's manifest and, on a reuse run, in its ``bert_kd.trained_in_run_id`` tag."""
    return info.get("model_run_id") or info.get("trained_in_run_id") or info.get("mlflow_run_id")
