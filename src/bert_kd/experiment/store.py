"""The content-keyed model store of a project checkout (Kedro-free): jobs under
[`STORE_ROOT`][] (teachers, students, TED filters, teacher caches), a model's
key material. It stores and nothing else (a stored model's lineage: [`bert_kd.experiment.lineage`][]): the job's run, its
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
