"""Where a stored model comes from, as one frozen record (Kedro- and MLflow-free): its store entry, the
teacher's entry, the run that trained it, the job's own run and the run and LoggedModel that stand for it
in the tracking store a run logs to.

A job ([`bert_kd.experiment.publishing.run_model_job`][]) works its [`Lineage`][] out and writes it into
its bundle's ``info`` under the keys ``info`` has always had ([`INFO_KEYS`][]), so ``bert_kd.json``, a
metrics file's ``info`` and the nodes' outputs keep their layout; [`Lineage.of`][] and
[`Lineage.read`][] are the one place that reads those keys back."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from bert_kd.core.files import MANIFEST

#: The ``info`` key of each field of a [`Lineage`][] (the names ``bert_kd.json`` has always used).
INFO_KEYS = {
    "key": "key",
    "store_path": "store_path",
    "reused": "reused",
    "teacher_key": "teacher_key",
    "run_id": "mlflow_run_id",
    "trained_in_run_id": "trained_in_run_id",
    "stands_for_run_id": "model_run_id",
    "model_id": "mlflow_model_id",
}


@dataclass(frozen=True)
class Lineage:
    """A stored model's lineage: its entry, its teacher's, and the runs and LoggedModel that stand for it
    (every field given: [`Lineage.of`][] reads them all, None where unknown)."""

    key: str | None
    """Its store key."""
    store_path: str | None
    """Its store entry (a directory)."""
    reused: bool | None
    """Whether this job reused the stored model instead of training it."""
    teacher_key: str | None
    """The store key of the teacher it learnt from (a student)."""
    run_id: str | None
    """The job's own run; in a stored entry's ``bert_kd.json``, the run that trained it."""
    trained_in_run_id: str | None
    """The run that trained a reused model."""
    stands_for_run_id: str | None
    """The run recorded as standing for the model ([`model_run_id`][Lineage.model_run_id] reads it with its
    fallbacks)."""
    model_id: str | None
    """Its LoggedModel in the tracking store this job logs to."""

    @classmethod
    def of(cls, info: Mapping[str, Any] | None) -> Lineage:
        """The lineage an ``info`` mapping (a bundle's, a metrics file's ``info``, a ``bert_kd.json``)
        records; a key it lacks (an entry written before the key existed) is None."""
        info = info or {}
        return cls(**{field: info.get(key) for field, key in INFO_KEYS.items()})

    @classmethod
    def read(cls, directory: str | Path) -> Lineage:
        """The lineage of the store entry (or copy of one) ``directory``: its ``bert_kd.json``, with the
        key and the teacher's key from its manifest when ``bert_kd.json`` has none (older entries)."""
        directory = Path(directory)
        manifest = _read_json(directory / MANIFEST)
        stored = cls.of(_read_json(directory / "bert_kd.json"))
        spec = manifest.get("spec") or {}
        return dataclasses.replace(
            stored,
            key=manifest.get("key") or stored.key,
            teacher_key=stored.teacher_key or spec.get("teacher"),
        )

    @property
    def model_run_id(self) -> str | None:
        """The run that stands for the stored model in the tracking store a run logs to: the source run
        of its finished LoggedModel there (the run that trained it, or, when that run is in another
        tracking store or its logging was killed, the run that logged it here); without a LoggedModel,
        the run that trained it when that run is in this store, else the job's own run. A registered
        version's ``bert_kd.teacher_run_id``/``bert_kd.student_run_id``, a comparison's
        ``teacher_run_id`` and a model card's run link all name it."""
        return self.stands_for_run_id or self.trained_in_run_id or self.run_id

    @property
    def training_run_id(self) -> str | None:
        """The run that trained the model (a reuse run's ``trained_in_run_id``, else the job's run)."""
        return self.trained_in_run_id or self.run_id

    def placed(self, key: str, store_path: str, reused: bool, job_run_id: str | None) -> Lineage:
        """This stored lineage once a job has trained or reused the entry ``key`` at ``store_path`` in
        the run ``job_run_id`` (None: tracking off): a reused model's training run is the run the entry
        recorded, and the run that stands for it is that run (reused) or the job's own (trained)."""
        trained_in = self.run_id if reused else self.trained_in_run_id
        placed = dataclasses.replace(self, key=key, store_path=store_path, reused=reused, trained_in_run_id=trained_in)
        if job_run_id is None:
            return placed
        return dataclasses.replace(placed, run_id=job_run_id, stands_for_run_id=trained_in if reused else job_run_id)

    def with_model(self, model_id: str | None = None, stands_for_run_id: str | None = None) -> Lineage:
        """This lineage with its LoggedModel and the run that stands for the model (None: unchanged)."""
        changes = {"model_id": model_id, "stands_for_run_id": stands_for_run_id}
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})

    def info(self) -> dict[str, Any]:
        """The ``info`` keys this lineage is written under ([`INFO_KEYS`][]); unset fields left out."""
        return {key: getattr(self, field) for field, key in INFO_KEYS.items() if getattr(self, field) is not None}


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
