"""A table's results folder (Kedro-free): one small JSON per finished trial, named by its content key.

A results folder (``reproduce.results_dir``/<table>, e.g. ``results/cpu_protocol``) holds one JSON per
finished trial named by the trial's content key (the parameters that determine it, the data sizes and the
GLUE files' fingerprint when they are not the release: [`identity`][]); it is read
before anything is trained, so a fresh checkout reproduces the tables without retraining. A file is used
only when it proves it is the trial asked for (its recorded key, trial and spec hash all match); anything
else is named in one warning line and recomputed.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from bert_kd.core.files import write_file_atomically
from bert_kd.core.metrics import primary_metric
from bert_kd.core.training.config import numeric_path
from bert_kd.experiment import jobs
from bert_kd.experiment.provenance import git_commit_label
from bert_kd.experiment.store import STORE_ROOT
from bert_kd.sweeps.objective import SweepTrialError, check_result
from bert_kd.sweeps.spec import TrialSpec
from bert_kd.sweeps.trial_identity import TrialIdentity, keyed

log = logging.getLogger(__name__)

#: ``<results folder>/variants/<table>__<changes>``: trial results of a variant run (``.gitignore``: results/*/variants/)
VARIANTS = "variants"


@dataclass(frozen=True)
class ResultsFolder:
    """Where a run's trial results are read and written, and what each file records of how it was made.

    ``path``: the table's results folder (None: none, nothing is read or written). ``command`` and ``commit``
    (None: this checkout's, [`git_commit_label`][]) are
    recorded in each file; ``results_only``: the tables from the folder alone (a missing trial fails,
    nothing trains)."""

    path: str | Path | None = None
    command: str = ""
    commit: str | None = None
    results_only: bool = False


class TeacherMismatch(RuntimeError):
    """A trial's retrained teacher is not the one the table's committed trials were distilled from."""


class TrialResults:
    """The results folder of one table, read and written for trials of ``identity``."""

    def __init__(self, identity: TrialIdentity, folder: ResultsFolder):
        self.identity = identity
        self.results_dir = Path(folder.path) if folder.path else None
        self.table_results_dir = self.results_dir  # the table's own trials; a variant's go below (use_variant_folder)
        self.command = folder.command
        self.commit = folder.commit if folder.commit is not None else git_commit_label()
        self.results_only = folder.results_only
        self._verified: dict[Path, tuple[tuple, dict | None]] = {}  # result file -> (stat, result or None)

    def use_variant_folder(self, name: str | None) -> None:
        """Read and write trial results in ``<results folder>/variants/<name>`` (a variant run: data or
        settings other than the table's; git-ignored, so never committed as the table's trials), or in the
        results folder itself when ``name`` is None."""
        if self.table_results_dir is not None:
            self.results_dir = self.table_results_dir if name is None else self.table_results_dir / VARIANTS / name

    def result_path(self, spec: TrialSpec) -> Path | None:
        return self.results_dir / f"{self.identity.content_key(spec)}.json" if self.results_dir else None

    def stored_result(self, spec: TrialSpec) -> dict | None:
        """The result in the results folder when its file proves it is this trial (recorded key =
        file name = hash of the recorded spec = the key asked for, recorded trial = ``spec.key``,
        a valid result); else ``None``, and a file that exists but fails is named in one warning
        line (once per file version)."""
        path = self.result_path(spec)
        if path is None or not path.is_file():
            return None
        stat = path.stat()
        signature = (stat.st_size, stat.st_mtime_ns, spec.key)
        cached = self._verified.get(path)
        if cached is not None and cached[0] == signature:
            return cached[1]
        result, problem = verify_result_file(path, spec)
        if problem:
            then = (
                "shown as missing (results_only)"
                if self.results_only
                else "not reused: the trial is recomputed and the file replaced"
            )
            log.warning("results file %s %s; %s", path, problem, then)
        self._verified[path] = (signature, result)
        return result

    def adopt_result(self, spec: TrialSpec, result: Mapping, made_in: str) -> Path | None:
        """Write into this results folder a result another worker (``made_in``: its host and results
        folder) trained and recorded in the shared study."""
        return self.write_result(spec, result, 0.0, made_in=made_in)

    def write_result(
        self,
        spec: TrialSpec,
        result: Mapping,
        seconds: float,
        made_in: str | None = None,
        timings: Mapping | None = None,
    ) -> Path | None:
        path = self.result_path(spec)
        if path is None:
            return None
        record = {
            **dict(timings or {}),  # "compile" (graphs, recompiles, seconds) and "phases" (wall seconds)
            "key": path.stem,
            "trial": spec.key,
            "spec": self.identity.key_material(spec),
            "result": dict(result),
            "seconds": round(seconds, 1),
            "commit": self.commit,
            "command": self.command,
            "machine": platform.machine(),
            "numerics": numeric_path(),
            "finished": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        }
        if made_in is not None:  # trained by another worker; seconds, commit and command are not known here
            record.update(seconds=None, commit=None, command=None, made_in=made_in)
        text = json.dumps(record, indent=1, sort_keys=True, default=str)
        return write_file_atomically(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))

    def recorded_teacher_scores(self, spec: TrialSpec, block: Mapping) -> dict[float, int]:
        """Dev score (the task's primary metric) → trials: what the results folder's trials of ``spec``'s table and
        task recorded for a teacher with ``block``'s settings — a single-teacher trial's teacher, or any slot of a
        multi-teacher trial (``teachers_dev_metrics``, recorded per slot since 2026-11-25; older multi-teacher
        trials recorded the best teacher only and are not read)."""
        wanted = json.loads(json.dumps(keyed(block), default=str))  # as write_result stores it
        recorded: dict[float, int] = {}
        for path in sorted(self.results_dir.glob("*.json")):
            for score in _teacher_scores(path, spec, wanted):
                if score is not None:
                    recorded[round(float(score), 9)] = recorded.get(round(float(score), 9), 0) + 1
        return recorded

    def check_teacher(self, spec: TrialSpec, metrics: Mapping[str, float], block: Mapping | None = None) -> None:
        """Refuse ([`TeacherMismatch`][]) a teacher whose dev score differs from the one the results folder's
        trials of the same table and task recorded for the same teacher settings ([`recorded_teacher_scores`][];
        ``block``: a multi-teacher trial's slot, else the trial's teacher): the same key retrained into other
        weights (before 2026-11-25 the new classification head was drawn from an unseeded generator; fp32 training
        on another CPU instruction set or GPU rounds differently, and fine-tuning turns either into a teacher tenths
        of a point to points away), so this trial's student would not be comparable with theirs. Checked before the
        student trains; every trial of that task then stops here."""
        if self.results_dir is None or not self.results_dir.is_dir():
            return
        block = self.identity.teacher_block(spec) if block is None else block
        recorded = self.recorded_teacher_scores(spec, block)
        primary = primary_metric(spec.task)
        here = round(float(metrics[primary]), 9)
        if recorded and here not in recorded:
            seen = ", ".join(f"{100 * score:.2f} ({count} trials)" for score, count in sorted(recorded.items()))
            which = f"teacher {block['name']!r}" if block.get("name") else "teacher"
            raise TeacherMismatch(
                f"trial {spec.key}: the {which} scores {100 * here:.2f} ({primary}) on dev, but the trials of table "
                f"{spec.table!r} on {spec.task} in {self.results_dir} were distilled from a teacher with the same settings "
                f"scoring {seen}. Same content key, other weights: a teacher trained before 2026-11-25 drew its new "
                f"classification head from an unseeded generator, and other fp32 kernels round differently (here: "
                f"{numeric_path()}). Finish the table with its own teachers' store, or start a new table (other name)."
            )

    @staticmethod
    def model_store_id() -> str:
        """The identity of this checkout's model store (``data/06_models/store/.store_id``, made on first use)."""
        return jobs.store_identity(STORE_ROOT)


def verify_result_file(path: Path, spec: TrialSpec) -> tuple[dict | None, str | None]:
    """(result, None) when ``path`` is ``spec``'s trial result file, else (None, what is wrong with it)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        return None, f"is not valid JSON ({type(error).__name__}: {error})"
    if not isinstance(record, dict) or not isinstance(record.get("spec"), dict) or "result" not in record:
        return None, "is not a trial result file (no 'spec' and 'result')"
    recorded = jobs.content_key("trial", record["spec"])
    if record.get("key") != path.stem or recorded != path.stem or record.get("trial") != spec.key:
        return None, (
            f"records trial {record.get('trial')!r} with key {str(record.get('key'))[:12]}… (its spec "
            f"hashes to {recorded[:12]}…), not trial {spec.key!r} with key {path.stem[:12]}…"
        )
    try:
        return check_result(record["result"], spec), None
    except (SweepTrialError, TypeError, ValueError) as error:  # e.g. "dev_predictions": 5
        return None, f"holds an unusable result ({error})"


def _teacher_scores(path: Path, spec: TrialSpec, wanted: Mapping) -> list:
    """The teacher dev scores the trial file ``path`` recorded for the teacher settings ``wanted`` (keyed) on
    ``spec``'s table and task; [] when it recorded none, or is not a trial file (stored_result names it then)."""
    primary = primary_metric(spec.task)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        trial, result = record["spec"]["trial"], record["result"]
        if trial["table"] != spec.table or trial["task"] != spec.task:
            return []
        if record["spec"].get("teachers"):  # a multi-teacher trial: every slot keyed in full
            slots = zip(record["spec"]["teachers"] or [], result.get("teachers_dev_metrics") or [])
            return [metrics[primary] for teacher, metrics in slots if teacher == wanted]
        if record["spec"]["teacher"] == wanted:
            return [(result.get("teacher_dev_metrics") or {}).get(primary, result.get("teacher_dev_metric"))]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return []
