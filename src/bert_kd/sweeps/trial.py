"""``run_trial`` on the real training path: one [`TrialSpec`][bert_kd.sweeps.spec.TrialSpec] → data, teacher(s),
teacher cache, student, distillation, dev (+ held-out) evaluation, each step a job of
[`bert_kd.experiment.jobs`][bert_kd.experiment.jobs] (content-keyed, locked, reused), so a finished trial is reused and a killed
sweep continues. A trial is the pipeline: it runs the nodes of the pipeline its row
belongs to (``distill_<row>``, TED, ``distill_multi_teacher``) in their order on in-memory
datasets ([`run_nodes`][bert_kd.sweeps.trial.run_nodes]; no Kedro session or catalog), so a trial and ``kedro run`` with the
same parameters train the same jobs.

Teachers (and TED filters, teacher caches) depend on the task, the data and the *teacher* seed
(the table's ``teacher.seed`` or the global ``seed``), never on the trial seed, so every trial of a
task shares them.

A results folder (``reproduce.results_dir``/<table>, e.g. ``results/cpu_protocol``) holds one small
JSON per finished trial named by the trial's content key (the parameters that determine it, the
data sizes and the GLUE files' fingerprint when they are not the release: [`identity`][bert_kd.sweeps.identity]); it is
read before anything is trained, so a fresh checkout reproduces the tables without retraining. A
file is used only when it proves it is the trial asked for (its recorded key, trial and spec hash
all match); anything else is named in one warning line and recomputed.
"""

from __future__ import annotations

import copy
import datetime as _dt
import json
import logging
import platform
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from kedro.pipeline import Pipeline

from bert_kd.core.data.glue import get_task
from bert_kd.core.files import write_file_atomically
from bert_kd.core.metrics import glue_metrics, primary_metric
from bert_kd.core.models import ModelBundle, init_key_material
from bert_kd.core.training import SupervisedObjective, make_loader, predict_logits
from bert_kd.core.training.compiled_step import CompileCounts
from bert_kd.core.training.config import numeric_path
from bert_kd.core.training.loop import phase_seconds
from bert_kd.core.training.precision import trial_precision_material
from bert_kd.experiment import jobs
from bert_kd.experiment.provenance import git_commit_label
from bert_kd.experiment.run_setup import teacher_seed
from bert_kd.experiment.store import STORE_ROOT
from bert_kd.experiment.tracker import tracker_for
from bert_kd.experiment.training_jobs.student import with_explicit_weights
from bert_kd.pipelines.common import build_run_settings
from bert_kd.pipelines.data_processing.nodes import ingest_glue, tokenize_for_model
from bert_kd.pipelines.distill.pipeline import PAPER as DISTILL_PAPER
from bert_kd.pipelines.distill.pipeline import block_name, method_pipeline, teacher_cache_pipeline
from bert_kd.pipelines.multi_teacher.nodes import TEACHER_COLUMN
from bert_kd.pipelines.multi_teacher.pipeline import PAPER as MT_PAPER
from bert_kd.pipelines.multi_teacher.pipeline import configuration_pipeline, teacher_namespace, teachers_pipeline
from bert_kd.pipelines.ted.pipeline import PAPER as TED_PAPER
from bert_kd.pipelines.ted.pipeline import stage_one_pipeline, ted_method_pipeline
from bert_kd.pipelines.train_teacher.pipeline import create_pipeline as train_teacher_pipeline
from bert_kd.sweeps.identity import keyed_source, short_hash, source_fingerprint
from bert_kd.sweeps.scheduler import SweepTrialError, check_result
from bert_kd.sweeps.spec import TrialSpec

log = logging.getLogger(__name__)

#: Bump when the meaning of a stored trial result changes (new key material, other metric).
TRIAL_SCHEMA = 1
DEFAULT_HELDOUT_FRACTION = 0.1
HELDOUT_SPLIT = "heldout"
DATA_SEED_KEY = "seed"


def merged(base: Mapping | None, *overrides: Mapping | None) -> dict:
    """Recursive dict merge: later mappings win, nested mappings are merged key by key."""
    result = copy.deepcopy(dict(base or {}))
    for override in overrides:
        for key, value in (override or {}).items():
            if isinstance(value, Mapping) and isinstance(result.get(key), Mapping):
                result[key] = merged(result[key], value)
            else:
                result[key] = copy.deepcopy(value)
    return result


#: ``<results folder>/variants/<table>__<changes>``: trial results of a variant run (``.gitignore``: results/*/variants/)
VARIANTS = "variants"


class TrialRunner:
    """``run_trial`` for [`bert_kd.sweeps.reproduce.reproduce`][bert_kd.sweeps.reproduce.reproduce], configured with the project parameters.

    ``params``: the parameter tree (``teacher``, ``student``, ``runtime``, ``tracking``,
    ``teacher_cache``, ``ted``, ``ted_student``, ``multi_teachers``, ``multi_student``,
    ``glue_dir``, ``seed``). ``data_overrides``: ``max_train_samples`` / ``max_eval_samples`` that
    replace the table's per-task sizes (the ones given on the command line).
    """

    def __init__(
        self,
        params: Mapping,
        *,
        data_overrides: Mapping | None = None,
        results_dir: str | Path | None = None,
        command: str = "",
        commit: str | None = None,
        results_only: bool = False,
        conf_params: Mapping | None = None,
    ):
        self.params = copy.deepcopy(dict(params))
        # the parameters without the command line's --params (see ``setting_changes``); None: not known
        self.conf_params = copy.deepcopy(dict(conf_params)) if conf_params is not None else None
        self._said_batching = False
        self.data_overrides = {
            k: v for k, v in (data_overrides or {}).items() if k in ("max_train_samples", "max_eval_samples")
        }
        self.results_dir = Path(results_dir) if results_dir else None
        self.table_results_dir = self.results_dir  # the table's own trials; a variant's go below (use_variant_folder)
        self.command = command
        self.commit = commit if commit is not None else git_commit()
        self.results_only = results_only  # tables from the results folder alone: a missing trial fails, nothing trains
        self._verified: dict[Path, tuple[tuple, dict | None]] = {}  # result file -> (stat, result or None)

    # ------------------------------------------------------------------ identity and results folder
    def table_sizes(self, spec: TrialSpec) -> dict:
        """The data sizes the table gives the trial (``data:`` per task), before command-line sizes."""
        sizes = {"max_train_samples": None, "max_eval_samples": None}
        sizes.update({k: v for k, v in (spec.settings.get("data") or {}).items() if k in sizes})
        return sizes

    def data_sizes(self, spec: TrialSpec) -> dict:
        return {**self.table_sizes(spec), **self.data_overrides}

    def data_changes(self, trials) -> dict:
        """How the data of this run's ``trials`` differ from their table's own: command-line sizes
        that change some trial's sizes, and GLUE files that are not the release (``glue``: a short
        hash of their fingerprints). Empty: the table's own data."""
        trials = list(trials)
        changes = {
            name: value
            for name, value in self.data_overrides.items()
            if any(self.table_sizes(t)[name] != value for t in trials)
        }
        sources = {
            t.task: source for t in trials if (source := keyed_source(t.task, self.params.get("glue_dir"))) is not None
        }
        if sources:
            changes["glue"] = short_hash(sources)
        return changes

    def setting_changes(self, trials) -> dict:
        """``{"params": <short hash>}`` when the command line's ``--params`` change the content key of some of
        ``trials`` (a setting the table does not state, e.g. ``student.training.warmup_ratio`` or ``ted.*``):
        the run is then a variant of the table, not the table. Data sizes and GLUE files are
        [`data_changes`][bert_kd.sweeps.trial.TrialRunner.data_changes]' and are left out here. Empty when nothing changes or ``conf_params`` is unknown."""
        if self.conf_params is None:
            return {}
        reference = TrialRunner(
            {**self.conf_params, "glue_dir": self.params.get("glue_dir")},
            data_overrides=self.data_overrides,
            commit="reference",
        )
        keys = {t.key: (t, self.content_key(t)) for t in trials}
        changed = {name: key for name, (t, key) in keys.items() if key != reference.content_key(t)}
        if not changed:
            return {}
        spec = keys[next(iter(changed))][0]
        ours, theirs = self.key_material(spec), reference.key_material(spec)
        parts = sorted(k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k))
        log.warning(
            "--params change %d trial(s) of %s (e.g. %s: key material %s differs from the configuration's): "
            "the run is a variant, its table is not written as %s",
            len(changed),
            spec.table,
            spec.key,
            ", ".join(parts),
            spec.table,
        )
        return {"params": short_hash(changed)}

    def key_material(self, spec: TrialSpec) -> dict:
        """Everything (but the GLUE files and model weights) that determines the trial's result."""
        p = self.params
        trial = {k: v for k, v in spec.as_dict().items() if k != "label"}  # a relabelled row keeps its results
        if "student" in trial["settings"]:  # student.init: teacher stays out of keys (as before the option)
            trial["settings"]["student"] = init_key_material(trial["settings"]["student"])
        return {
            "schema": TRIAL_SCHEMA,
            "trial": trial,
            "data": self.data_sizes(spec),
            "data_seed": p.get(DATA_SEED_KEY),
            "teacher": _keyed(self.teacher_block(spec)),
            "student": _keyed(init_key_material(self.student_block(spec))),
            "ted": _keyed(p.get("ted")) if spec.job == "ted" else None,
            "teachers": [_keyed(t) for t in self.teacher_blocks(spec)] if spec.job == "multi_teacher" else None,
            "precision": trial_precision_material(p.get("runtime") or {}),
            # GLUE files other than the release's (absent for the release: the committed keys stay valid)
            **({"source": source} if (source := keyed_source(spec.task, p.get("glue_dir"))) is not None else {}),
        }

    def content_key(self, spec: TrialSpec) -> str:
        return jobs.content_key("trial", self.key_material(spec))

    def use_variant_folder(self, name: str | None) -> None:
        """Read and write trial results in ``<results folder>/variants/<name>`` (a variant run: data or
        settings other than the table's; git-ignored, so never committed as the table's trials), or in the
        results folder itself when ``name`` is None."""
        if self.table_results_dir is not None:
            self.results_dir = self.table_results_dir if name is None else self.table_results_dir / VARIANTS / name

    def result_path(self, spec: TrialSpec) -> Path | None:
        return self.results_dir / f"{self.content_key(spec)}.json" if self.results_dir else None

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
        result, problem = self._verify(path, spec)
        if problem:
            then = (
                "shown as missing (results_only)"
                if self.results_only
                else "not reused: the trial is recomputed and the file replaced"
            )
            log.warning("results file %s %s; %s", path, problem, then)
        self._verified[path] = (signature, result)
        return result

    @staticmethod
    def _verify(path: Path, spec: TrialSpec) -> tuple[dict | None, str | None]:
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

    def adopt_result(self, spec: TrialSpec, result: Mapping, made_in: str) -> Path | None:
        """Write into this results folder a result another worker (``made_in``: its host and results
        folder) trained and recorded in the shared study."""
        return self.write_result(spec, result, 0.0, made_in=made_in)

    @staticmethod
    def model_store_id() -> str:
        """The identity of this checkout's model store (``data/06_models/store/.store_id``, made on first use)."""
        return jobs.store_identity(STORE_ROOT)

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
            "spec": self.key_material(spec),
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

    # ------------------------------------------------------------------ parameter blocks
    def teacher_block(self, spec: TrialSpec) -> dict:
        return merged(self.params.get("teacher"), spec.settings.get("teacher"))

    def teacher_seed(self, spec: TrialSpec) -> int:
        return teacher_seed(self.teacher_block(spec), self.params.get(DATA_SEED_KEY, 42))

    def student_block(self, spec: TrialSpec) -> dict:
        base = {"distill": "student", "ted": "ted_student", "multi_teacher": "multi_student"}[spec.job]
        block = merged(self.params.get(base), spec.settings.get("student"))
        block["training"] = merged(block.get("training"), spec.training)
        return block

    def teacher_blocks(self, spec: TrialSpec) -> list[dict]:
        return copy.deepcopy(list(spec.settings.get("teachers") or self.params.get("multi_teachers") or []))

    # ------------------------------------------------------------------ running
    def __call__(self, spec: TrialSpec) -> dict:
        stored = self.stored_result(spec)
        if stored is not None:
            log.info("trial %s: result read from %s", spec.key, self.result_path(spec))
            return {**stored, "from_results_dir": True}
        if self.results_only:
            raise LookupError(f"trial {spec.key}: no result in {self.results_dir} (results_only: nothing is trained)")
        if self._fetch_missing_source(spec) and (stored := self.stored_result(spec)) is not None:
            return {**stored, "from_results_dir": True}  # the downloaded files named a key that has a result
        started = _dt.datetime.now()
        compiled_before, phases_before = CompileCounts.now(), phase_seconds()
        tracking = self.params.get("tracking") or {}
        key = self.content_key(spec)
        with tracker_for(tracking).start_job(
            f"trial:{spec.key}",
            {"role": "trial", "method": spec.method, "task": spec.task, "table": spec.table, "content_key": key},
        ) as run:
            run.log_params(
                {
                    "trial": spec.key,
                    "seed": spec.seed,
                    **{f"grid.{k}": v for k, v in spec.params.items()},
                    "recipe": spec.recipe,
                    "training": spec.training,
                    "content_key": key,
                }
            )
            result = self.train_and_evaluate(spec)
            result["run_id"] = run.run_id
            # what the trial's fits compiled (a later trial of the same shapes in this worker: nothing) and
            # where their wall time went: engineering figures, kept out of the result and its checks
            compiled = CompileCounts.now().since(compiled_before).as_metrics(prefix="")
            phases = {f"{k}_s": round(v - phases_before[k], 2) for k, v in phase_seconds().items()}
            run.log_metrics(
                {
                    **{k: v for k, v in result.items() if k.endswith("_metric") and v is not None},
                    **{f"compile/{k}": v for k, v in compiled.items()},
                    **{f"time/{k}": v for k, v in phases.items()},
                }
            )
        self.write_result(
            spec,
            result,
            (_dt.datetime.now() - started).total_seconds(),
            timings={"compile": compiled, "phases": phases},
        )
        return result

    def _fetch_missing_source(self, spec: TrialSpec) -> bool:
        """Download the task's GLUE files when they are absent (as the data loader would), so the
        trial's key names the files it is trained on; ``True`` when that happened."""
        if source_fingerprint(spec.task, self.params.get("glue_dir")) is not None:
            return False
        from bert_kd.core.data.glue import load_glue_task, resolve_glue_dir

        root, user_named = resolve_glue_dir(self.params.get("glue_dir"))
        load_glue_task(get_task(spec.task).name, root, allow_download=not user_named)
        return True

    def train_and_evaluate(self, spec: TrialSpec) -> dict:
        task = get_task(spec.task).name
        sizes = self.data_sizes(spec)
        train, validation, _ = ingest_glue(
            task,
            self.params.get("glue_dir"),
            sizes["max_train_samples"],
            sizes["max_eval_samples"],
            int(self.params.get(DATA_SEED_KEY, 42)),
        )
        if spec.settings.get("selection") == "heldout":
            train, validation = cut_heldout(
                train, validation, spec.settings.get("heldout") or {}, int(self.params.get(DATA_SEED_KEY, 42))
            )
        runner = {"distill": self._distill, "ted": self._ted, "multi_teacher": self._multi_teacher}[spec.job]
        student, data, teacher_metric, *slots = runner(spec, task, train, validation)  # multi-teacher: + every slot's
        return evaluate_trial(student, data, task, teacher_metric, *slots)

    def run_settings(self, spec: TrialSpec, task: str, seed: int | None = None) -> dict:
        """The ``run_settings`` dataset of the trial (built as the pipeline builds it): its task, the
        trial seed (``seed``: another, e.g. the teacher's), the project's tracking, the table's batching
        (`_runtime`) and the data source its MLflow runs record."""
        source = self._data_source(spec)
        return build_run_settings(
            task, spec.seed if seed is None else seed, self._tracking(), self._runtime(spec), source
        )

    def _teacher(self, spec, task, train, validation):
        """The table's teacher (its block over the project's) through the ``train_teacher`` pipeline's
        node, with the teacher seed; → (teacher, its tokenization)."""
        block = self.teacher_block(spec)
        tokenized = tokenize_for_model(train, validation, block)
        trained = run_nodes(
            train_teacher_pipeline(),
            {"teacher_tokenized": tokenized},
            {"teacher": block},
            self.run_settings(spec, task, self.teacher_seed(spec)),
        )
        return trained["teacher_model"], tokenized

    def _distill(self, spec, task, train, validation, *, ted: bool = False):
        """A ``distill_<row>`` (or TED) trial runs that pipeline's own nodes
        ([`method_pipeline`][bert_kd.pipelines.distill.pipeline.method_pipeline]) on the trial's parameter
        blocks, its recipe with the weights written out as the validation hook writes them
        ([`bert_kd.experiment.training_jobs.student.with_explicit_weights`][bert_kd.experiment.training_jobs.student.with_explicit_weights]). The teacher's jobs (cache, TED filters) run with
        the teacher seed, the student's with the trial seed."""
        teacher, tokenized = self._teacher(spec, task, train, validation)
        teacher_metrics = dev_metrics(teacher, tokenized, task)
        self.check_teacher(spec, teacher_metrics)
        student_params = self.student_block(spec)
        recipe = with_explicit_weights(spec.recipe)
        block = ted_method_pipeline(spec.method) if ted else method_pipeline(spec.method)
        namespace = block_name(TED_PAPER if ted else DISTILL_PAPER, spec.method)
        parameters = {
            "teacher": self.teacher_block(spec),
            "teacher_cache": self.params.get("teacher_cache") or {},
            "ted": self.params.get("ted") or {},
            "student": student_params,
            "ted_student": student_params,
            "distill_methods": {spec.method: recipe},
            "ted_methods": {spec.method: recipe},
        }
        datasets = {
            "teacher_model": teacher,
            "teacher_tokenized": tokenized,
            "glue_train": train,
            "glue_validation": validation,
        }
        teacher_side = teacher_cache_pipeline() + (
            stage_one_pipeline().to_outputs("ted_filters") if ted else Pipeline([])
        )
        datasets = run_nodes(teacher_side, datasets, parameters, self.run_settings(spec, task, self.teacher_seed(spec)))
        datasets = run_nodes(
            block.to_outputs(f"{namespace}.student_model"), datasets, parameters, self.run_settings(spec, task)
        )
        return datasets[f"{namespace}.student_model"], datasets[f"{namespace}.student_data"], teacher_metrics

    def recorded_teacher_scores(self, spec: TrialSpec, block: Mapping) -> dict[float, int]:
        """Dev score (the task's primary metric) → trials: what the results folder's trials of ``spec``'s table and
        task recorded for a teacher with ``block``'s settings — a single-teacher trial's teacher, or any slot of a
        multi-teacher trial (``teachers_dev_metrics``, recorded per slot since 2026-11-25; older multi-teacher
        trials recorded the best teacher only and are not read)."""
        keyed = json.loads(json.dumps(_keyed(block), default=str))  # as write_result stores it
        primary = primary_metric(spec.task)
        recorded: dict[float, int] = {}
        for path in sorted(self.results_dir.glob("*.json")):
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
                trial, result = record["spec"]["trial"], record["result"]
                if trial["table"] != spec.table or trial["task"] != spec.task:
                    continue
                if trial["job"] == "multi_teacher":
                    slots = zip(record["spec"]["teachers"] or [], result.get("teachers_dev_metrics") or [])
                    scores = [metrics[primary] for teacher, metrics in slots if teacher == keyed]
                elif record["spec"]["teacher"] == keyed:
                    scores = [(result.get("teacher_dev_metrics") or {}).get(primary, result.get("teacher_dev_metric"))]
                else:
                    continue
            except (OSError, ValueError, KeyError, TypeError):
                continue  # not a trial file: stored_result names it when it is read as one
            for score in scores:
                if score is not None:
                    recorded[round(float(score), 9)] = recorded.get(round(float(score), 9), 0) + 1
        return recorded

    def check_teacher(self, spec: TrialSpec, metrics: Mapping[str, float], block: Mapping | None = None) -> None:
        """Refuse ([`TeacherMismatch`][bert_kd.sweeps.trial.TeacherMismatch]) a teacher whose dev score differs from the one the results folder's
        trials of the same table and task recorded for the same teacher settings ([`recorded_teacher_scores`][bert_kd.sweeps.trial.TrialRunner.recorded_teacher_scores];
        ``block``: a multi-teacher trial's slot, else the trial's teacher): the same key retrained into other
        weights (before 2026-11-25 the new classification head was drawn from an unseeded generator; fp32 training
        on another CPU instruction set or GPU rounds differently, and fine-tuning turns either into a teacher tenths
        of a point to points away), so this trial's student would not be comparable with theirs. Checked before the
        student trains; every trial of that task then stops here."""
        if self.results_dir is None or not self.results_dir.is_dir():
            return
        block = self.teacher_block(spec) if block is None else block
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

    def _ted(self, spec, task, train, validation):
        return self._distill(spec, task, train, validation, ted=True)

    def _multi_teacher(self, spec, task, train, validation):
        """A multi-teacher trial runs the ``distill_multi_teacher`` pipeline's own nodes: each teacher
        slot the typed ``multi_teachers`` entry alone ([`select_teacher`][bert_kd.pipelines.multi_teacher.nodes.select_teacher]),
        trained with the teacher seed; the recipe as the table gives it, as a ``kedro run`` hands it
        (the node keys the student on it and writes the weights out for the method:
        [`student_recipe`][bert_kd.pipelines.multi_teacher.nodes.student_recipe])."""
        blocks = self.teacher_blocks(spec)
        student_model = f"{block_name(MT_PAPER, spec.method)}.student_model"
        parameters = {
            "multi_teachers": blocks,
            "multi_student": self.student_block(spec),
            "teacher_cache": self.params.get("teacher_cache") or {},
            "multi_teacher_configs": {spec.method: dict(spec.recipe)},
        }
        datasets = run_nodes(
            teachers_pipeline(len(blocks)).to_outputs("multi_teacher_caches"),
            {"glue_train": train, "glue_validation": validation},
            parameters,
            self.run_settings(spec, task, self.teacher_seed(spec)),
        )
        teacher_metrics = [
            dev_metrics(bundle, datasets[f"{teacher_namespace(k)}.teacher_tokenized"], task)
            for k, bundle in enumerate(datasets["multi_teacher_models"])
        ]
        for block, metrics in zip(blocks, teacher_metrics):  # every slot, before the student trains
            self.check_teacher(spec, metrics, block)
        datasets = run_nodes(
            configuration_pipeline(spec.method).to_outputs(student_model),
            datasets,
            parameters,
            self.run_settings(spec, task),
        )
        data = datasets["multi_teacher_data"]
        chosen = spec.recipe.get("teachers") or list(range(len(blocks)))
        view = {
            split: data[split].select_columns([c for c in data[split].column_names if not TEACHER_COLUMN.match(c)])
            for split in data
        }
        best = max((teacher_metrics[k] for k in chosen), key=lambda m: m[primary_metric(task)])
        return datasets[student_model], view, best, teacher_metrics

    def _data_source(self, spec: TrialSpec) -> dict:
        """What the MLflow runs record as the data source (not part of any key)."""
        return {"glue_dir": self.params.get("glue_dir"), **self.data_sizes(spec)}

    def _tracking(self) -> dict:
        return dict(self.params.get("tracking") or {})

    def _runtime(self, spec: TrialSpec) -> dict:
        """The run's runtime settings, but batching as the table says (``group_by_length``, default
        random batches): a protocol's batches must not follow the project's runtime default."""
        runtime = dict(self.params.get("runtime") or {})
        table_grouping = bool(spec.settings.get("group_by_length", False))
        if runtime.get("group_by_length", table_grouping) != table_grouping and not self._said_batching:
            log.info(
                "reproduce: batches as table %s says (group_by_length: %s), not runtime.group_by_length",
                spec.table,
                str(table_grouping).lower(),
            )
            self._said_batching = True
        select = {"select_metric": spec.settings["select_metric"]} if spec.settings.get("select_metric") else {}
        return {**runtime, "group_by_length": table_grouping, **select}  # the table's epoch metric, where it has one


class TeacherMismatch(RuntimeError):
    """A trial's retrained teacher is not the one the table's committed trials were distilled from."""


def run_nodes(pipeline: Pipeline, datasets: Mapping[str, Any], parameters: Mapping, run_settings: Mapping) -> dict:
    """Run ``pipeline``'s nodes in their order on in-memory ``datasets`` (what Kedro's sequential
    runner does with memory datasets), ``params:<a.b>`` inputs read from the ``parameters`` tree
    and ``run_settings`` as the pipeline's dataset of that name. → the datasets afterwards."""
    values = {**datasets, "run_settings": run_settings}
    for node in pipeline.nodes:
        values.update(
            node.run({name: values[name] if name in values else _parameter(parameters, name) for name in node.inputs})
        )
    return values


def _parameter(parameters: Mapping, name: str):
    """``params:teacher.max_seq_length`` → ``parameters["teacher"]["max_seq_length"]``."""
    if not name.startswith("params:"):
        raise KeyError(f"a trial has no dataset {name!r} (its pipeline reads more than the trial gives it)")
    value: Any = parameters
    for part in name[len("params:") :].split("."):
        value = value[part]
    return value


def _keyed(block: Mapping | None) -> dict | None:
    """A parameter block as key material: no ``retrain`` flag, training settings that change weights only."""
    if block is None:
        return None
    result = {k: v for k, v in block.items() if k != "retrain"}
    for name, value in result.items():
        if name == "training" and isinstance(value, Mapping):
            result[name] = jobs.training_spec(value)
        elif isinstance(value, Mapping):
            result[name] = _keyed(value)
    return result


def cut_heldout(train, validation, heldout: Mapping, seed: int):
    """Move ``heldout.fraction`` of the training rows (seeded) into a ``heldout`` split, listed
    first so that training picks its best epoch on it rather than on dev."""
    fraction = float(heldout.get("fraction", DEFAULT_HELDOUT_FRACTION))
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"reproduce.tables.<table>.heldout.fraction must be in (0, 1), got {fraction}")
    rng = np.random.default_rng(seed)
    size = max(1, int(round(fraction * len(train))))
    chosen = np.zeros(len(train), dtype=bool)
    chosen[rng.choice(len(train), size=size, replace=False)] = True
    held = train[chosen].reset_index(drop=True).assign(split=HELDOUT_SPLIT)
    import pandas as pd

    return train[~chosen].reset_index(drop=True), pd.concat([held, validation], ignore_index=True)


def predict(bundle: ModelBundle, dataset, batch_size: int = 64):
    """Logits and labels of ``bundle`` on ``dataset`` (its own tokenization)."""
    from bert_kd.experiment.run_setup import collator_for

    columns = [
        c for c in dataset.column_names if c in ("input_ids", "attention_mask", "token_type_ids", "labels", "idx")
    ]
    loader = make_loader(dataset.select_columns(columns), batch_size, collator_for(bundle.tokenizer), shuffle=False)
    return predict_logits(SupervisedObjective(bundle.model), loader)


def dev_split(data) -> str:
    names = [n for n in data if n not in ("train", HELDOUT_SPLIT)]
    return "validation_matched" if "validation_matched" in names else names[0]


def dev_metrics(bundle: ModelBundle, data, task: str) -> dict[str, float]:
    """Every GLUE metric of ``bundle`` on the dev split (MNLI: matched)."""
    logits, labels = predict(bundle, data[dev_split(data)])
    return {k: float(v) for k, v in glue_metrics(task, logits, labels).items()}


def dev_metric(bundle: ModelBundle, data, task: str) -> float:
    return dev_metrics(bundle, data, task)[primary_metric(task)]


def evaluate_trial(
    student: ModelBundle,
    data,
    task: str,
    teacher_metric: Mapping | float | None,
    teachers_metrics: Sequence[Mapping] | None = None,
) -> dict:
    """The ``run_trial`` result (``scheduler.check_result``): dev metric(s), per-example dev
    predictions and labels, the held-out metrics when there is a held-out split, MNLI's
    mismatched dev metrics, and the teacher's dev metrics (``teacher_metric``: all, or the primary;
    ``teachers_metrics``: a multi-teacher trial's, one per teacher slot, as ``teachers_dev_metrics``)."""
    spec = get_task(task)
    logits, labels = predict(student, data[dev_split(data)])
    metrics = glue_metrics(task, logits, labels)
    teacher_metrics = dict(teacher_metric) if isinstance(teacher_metric, Mapping) else None
    if teacher_metrics is not None:
        teacher_metric = teacher_metrics[primary_metric(task)]
    if spec.is_regression:
        predictions = [round(float(v), 4) for v in np.asarray(logits).reshape(len(labels), -1)[:, 0]]
        labels_list = [round(float(v), 4) for v in labels]
    else:
        predictions, labels_list = [int(v) for v in np.argmax(logits, axis=1)], [int(v) for v in labels]
    result = {
        "dev_metric": float(metrics[primary_metric(task)]),
        "dev_metrics": {k: float(v) for k, v in metrics.items()},
        "dev_predictions": predictions,
        "dev_labels": labels_list,
        "teacher_dev_metric": teacher_metric,
        "model_key": student.info.get("key"),
        "best_epoch": student.info.get("best_epoch"),
    }
    if teacher_metrics is not None:
        result["teacher_dev_metrics"] = teacher_metrics
    if teachers_metrics is not None:
        result["teachers_dev_metrics"] = [{k: float(v) for k, v in metrics.items()} for metrics in teachers_metrics]
    if student.info.get("gradient_shares"):  # each term's share of the student's gradient at the start (grad_share/*)
        result["gradient_shares"] = dict(student.info["gradient_shares"])
    entropy = (student.info.get("diagnostics") or {}).get("alp_alpha_entropy")
    if entropy:  # ALP: α's mean entropy (nats) per student layer on dev (None: unconnected)
        result["alp_alpha_entropy"] = list(entropy)
    if "validation_mismatched" in data:  # MNLI: both dev sets scored (the papers report m and mm)
        mm_logits, mm_labels = predict(student, data["validation_mismatched"])
        result["dev_metrics_mismatched"] = {k: float(v) for k, v in glue_metrics(task, mm_logits, mm_labels).items()}
    if HELDOUT_SPLIT in data:
        held_logits, held_labels = predict(student, data[HELDOUT_SPLIT])
        held = {k: float(v) for k, v in glue_metrics(task, held_logits, held_labels).items()}
        result["heldout_metric"], result["heldout_metrics"] = held[primary_metric(task)], held
    return result


def git_commit() -> str:
    """The project's own commit (``<sha>``, ``<sha> (dirty)`` or ``unknown (not a git checkout)``)."""
    return git_commit_label()
