"""``run_trial`` on the real training path (issue 11): one :class:`TrialSpec` → data, teacher(s),
teacher cache, student, distillation, dev (+ held-out) evaluation, each step a job of
:mod:`bert_kd.jobs` (content-keyed, locked, reused), so a finished trial is reused and a killed
sweep continues. No Kedro: the functions called are the pipelines' node functions, which are
plain Python.

Teachers (and TED filters, teacher caches) depend on the task, the data and the *teacher* seed
(the table's ``teacher.seed`` or the global ``seed``), never on the trial seed, so every trial of a
task shares them.

A results folder (``reproduce.results_dir``/<table>, e.g. ``results/cpu_protocol``) holds one small
JSON per finished trial named by the trial's content key (the parameters that determine it); it is
read before anything is trained, so a fresh checkout reproduces the tables without retraining.
"""

from __future__ import annotations

import copy
import datetime as _dt
import json
import logging
import platform
import subprocess
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from bert_kd import jobs
from bert_kd.data.glue import get_task
from bert_kd.metrics import glue_metrics, primary_metric
from bert_kd.models import ModelBundle, init_key_material
from bert_kd.sweep.spec import TrialSpec
from bert_kd.tracking import tracked_run
from bert_kd.training import SupervisedObjective, make_loader, predict_logits

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


class TrialRunner:
    """``run_trial`` for :func:`bert_kd.sweep.run.reproduce`, configured with the project parameters.

    ``params``: the parameter tree (``teacher``, ``student``, ``runtime``, ``tracking``,
    ``teacher_cache``, ``ted``, ``ted_student``, ``multi_teachers``, ``multi_student``,
    ``glue_dir``, ``seed``). ``data_overrides``: ``max_train_samples`` / ``max_eval_samples`` that
    replace the table's per-task sizes (the ones given on the command line).
    """

    def __init__(self, params: Mapping, *, data_overrides: Mapping | None = None, results_dir: str | Path | None = None,
                 command: str = "", commit: str | None = None, results_only: bool = False):
        self.params = copy.deepcopy(dict(params))
        self.data_overrides = {k: v for k, v in (data_overrides or {}).items()
                               if k in ("max_train_samples", "max_eval_samples")}
        self.results_dir = Path(results_dir) if results_dir else None
        self.command = command
        self.commit = commit if commit is not None else git_commit()
        self.results_only = results_only  # tables from the results folder alone: a missing trial fails, nothing trains

    # ------------------------------------------------------------------ identity and results folder
    def data_sizes(self, spec: TrialSpec) -> dict:
        sizes = {"max_train_samples": None, "max_eval_samples": None}
        sizes.update({k: v for k, v in (spec.settings.get("data") or {}).items() if k in sizes})
        sizes.update(self.data_overrides)
        return sizes

    def key_material(self, spec: TrialSpec) -> dict:
        """Everything (but the GLUE files and model weights) that determines the trial's result."""
        p = self.params
        trial = {k: v for k, v in spec.as_dict().items() if k != "label"}  # a relabelled row keeps its results
        if "student" in trial["settings"]:  # student.init: teacher stays out of keys (as before the option)
            trial["settings"]["student"] = init_key_material(trial["settings"]["student"])
        return {
            "schema": TRIAL_SCHEMA, "trial": trial, "data": self.data_sizes(spec),
            "data_seed": p.get(DATA_SEED_KEY), "teacher": _keyed(self.teacher_block(spec)),
            "student": _keyed(init_key_material(self.student_block(spec))), "ted": _keyed(p.get("ted")) if spec.job == "ted" else None,
            "teachers": [_keyed(t) for t in self.teacher_blocks(spec)] if spec.job == "multi_teacher" else None,
            "precision": {k: (p.get("runtime") or {}).get(k) for k in ("mixed_precision", "teacher_mixed_precision")},
        }

    def content_key(self, spec: TrialSpec) -> str:
        return jobs.content_key("trial", self.key_material(spec))

    def result_path(self, spec: TrialSpec) -> Path | None:
        return self.results_dir / f"{self.content_key(spec)}.json" if self.results_dir else None

    def stored_result(self, spec: TrialSpec) -> dict | None:
        path = self.result_path(spec)
        if path is None or not path.exists():
            return None
        try:
            stored = json.loads(path.read_text(encoding="utf-8"))
            return stored["result"]
        except (json.JSONDecodeError, KeyError) as error:
            raise ValueError(f"{path}: not a trial result file ({error}); delete it to recompute the trial") from None

    def write_result(self, spec: TrialSpec, result: Mapping, seconds: float) -> Path | None:
        path = self.result_path(spec)
        if path is None:
            return None
        record = {"key": path.stem, "trial": spec.key, "spec": self.key_material(spec), "result": dict(result),
                  "seconds": round(seconds, 1), "commit": self.commit, "command": self.command,
                  "machine": platform.machine(), "finished": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
        text = json.dumps(record, indent=1, sort_keys=True, default=str)
        return jobs.write_file_atomically(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))

    # ------------------------------------------------------------------ parameter blocks
    def teacher_block(self, spec: TrialSpec) -> dict:
        return merged(self.params.get("teacher"), spec.settings.get("teacher"))

    def teacher_seed(self, spec: TrialSpec) -> int:
        return int(self.teacher_block(spec).get("seed", self.params.get(DATA_SEED_KEY, 42)))

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
        started = _dt.datetime.now()
        tracking = self.params.get("tracking") or {}
        with tracked_run(f"trial:{spec.key}", bool(tracking.get("enabled", True)),
                         {"role": "trial", "method": spec.method, "task": spec.task, "table": spec.table}) as run:
            run.log_params({"trial": spec.key, "seed": spec.seed, **{f"grid.{k}": v for k, v in spec.params.items()},
                            "recipe": spec.recipe, "training": spec.training, "content_key": self.content_key(spec)})
            result = self.train_and_evaluate(spec)
            result["run_id"] = run.run_id
            run.log_metrics({k: v for k, v in result.items() if k.endswith("_metric") and v is not None})
        self.write_result(spec, result, (_dt.datetime.now() - started).total_seconds())
        return result

    def train_and_evaluate(self, spec: TrialSpec) -> dict:
        from bert_kd.pipelines.data_processing.nodes import ingest_glue

        task = get_task(spec.task).name
        sizes = self.data_sizes(spec)
        train, validation, _ = ingest_glue(task, self.params.get("glue_dir"), sizes["max_train_samples"],
                                           sizes["max_eval_samples"], int(self.params.get(DATA_SEED_KEY, 42)))
        if spec.settings.get("selection") == "heldout":
            train, validation = cut_heldout(train, validation, spec.settings.get("heldout") or {},
                                            int(self.params.get(DATA_SEED_KEY, 42)))
        runner = {"distill": self._distill, "ted": self._ted, "multi_teacher": self._multi_teacher}[spec.job]
        student, data, teacher_metric = runner(spec, task, train, validation)
        return evaluate_trial(student, data, task, teacher_metric)

    def _teacher(self, spec, task, train, validation, block=None):
        from bert_kd.pipelines.data_processing.nodes import tokenize_for_model
        from bert_kd.pipelines.train_teacher.nodes import train_teacher

        block = block if block is not None else self.teacher_block(spec)
        tokenized = tokenize_for_model(train, validation, block)
        seed = int(block.get("seed", self.teacher_seed(spec)))
        teacher = train_teacher(tokenized, task, block, seed, self._tracking(), self._runtime(), self._data_source(spec))
        return teacher, tokenized

    def _distill(self, spec, task, train, validation, *, ted: bool = False):
        from bert_kd.pipelines.distill import nodes as distill
        from bert_kd.pipelines.ted import nodes as ted_nodes
        from bert_kd.schema import explicit_weights

        teacher, tokenized = self._teacher(spec, task, train, validation)
        student_params = self.student_block(spec)
        cache = distill.cache_teacher_outputs(teacher, tokenized, self.params.get("teacher_cache") or {}, self._runtime())
        recipe = dict(spec.recipe)
        recipe["weights"] = explicit_weights(recipe)
        if ted:
            filters = ted_nodes.train_ted_filters(teacher, tokenized, task, self.params.get("ted") or {}, student_params,
                                                  self.teacher_seed(spec), self._tracking(), self._runtime(),
                                                  self._data_source(spec))
            student = ted_nodes.ted_student_init(filters, teacher, student_params, task)
        else:
            student = distill.build_student_model(teacher, student_params, task)
        data = distill.prepare_student_data(student, teacher, tokenized, train, validation,
                                            int(self.teacher_block(spec)["max_seq_length"]))
        args = (teacher, student, data, cache, recipe, student_params, task, spec.seed, self._tracking(), self._runtime())
        named = {"row": spec.method, "data_source": self._data_source(spec)}
        trained = ted_nodes.distill_with_filters(filters, *args, **named) if ted else distill.distill_student(*args, **named)
        return trained, data, dev_metrics(teacher, tokenized, task)

    def _ted(self, spec, task, train, validation):
        return self._distill(spec, task, train, validation, ted=True)

    def _multi_teacher(self, spec, task, train, validation):
        from bert_kd.pipelines.multi_teacher import nodes as mt

        blocks = self.teacher_blocks(spec)
        bundles, teacher_metrics = [], []
        for slot in range(len(blocks)):
            block = merged(self.params.get("teacher"), mt.select_teacher(blocks, slot))
            bundle, tokenized = self._teacher(spec, task, train, validation, block)
            bundles.append(bundle)
            teacher_metrics.append(dev_metrics(bundle, tokenized, task))
        bundles = mt.gather_teachers(blocks, *bundles)
        student_params = self.student_block(spec)
        data = mt.prepare_multi_teacher_data(bundles, train, validation, blocks, student_params)
        caches = mt.cache_multi_teacher_outputs(bundles, data, self.params.get("teacher_cache") or {}, self._runtime())
        trained = mt.distill_multi_teacher(bundles, data, caches, dict(spec.recipe), student_params, task, spec.seed,
                                           self._tracking(), self._runtime(), self._data_source(spec))
        chosen = spec.recipe.get("teachers") or list(range(len(bundles)))
        view = {split: data[split].select_columns([c for c in data[split].column_names if not mt.TEACHER_COLUMN.match(c)])
                for split in data}
        return trained, view, max((teacher_metrics[k] for k in chosen), key=lambda m: m[primary_metric(task)])

    def _data_source(self, spec: TrialSpec) -> dict:
        """What the MLflow runs record as the data source (not part of any key)."""
        return {"glue_dir": self.params.get("glue_dir"), **self.data_sizes(spec)}

    def _tracking(self) -> dict:
        return dict(self.params.get("tracking") or {})

    def _runtime(self) -> dict:
        return dict(self.params.get("runtime") or {})


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
    from bert_kd.pipelines.common import collator_for

    columns = [c for c in dataset.column_names if c in ("input_ids", "attention_mask", "token_type_ids", "labels", "idx")]
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


def evaluate_trial(student: ModelBundle, data, task: str, teacher_metric: Mapping | float | None) -> dict:
    """The ``run_trial`` result (``scheduler.check_result``): dev metric(s), per-example dev
    predictions and labels, the held-out metrics when there is a held-out split, MNLI's
    mismatched dev metrics, and the teacher's dev metrics (``teacher_metric``: all, or the primary)."""
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
    result = {"dev_metric": float(metrics[primary_metric(task)]), "dev_metrics": {k: float(v) for k, v in metrics.items()},
              "dev_predictions": predictions, "dev_labels": labels_list, "teacher_dev_metric": teacher_metric,
              "model_key": student.info.get("key"), "best_epoch": student.info.get("best_epoch")}
    if teacher_metrics is not None:
        result["teacher_dev_metrics"] = teacher_metrics
    if "validation_mismatched" in data:  # MNLI: both dev sets scored (the papers report m and mm)
        mm_logits, mm_labels = predict(student, data["validation_mismatched"])
        result["dev_metrics_mismatched"] = {k: float(v) for k, v in glue_metrics(task, mm_logits, mm_labels).items()}
    if HELDOUT_SPLIT in data:
        held_logits, held_labels = predict(student, data[HELDOUT_SPLIT])
        held = {k: float(v) for k, v in glue_metrics(task, held_logits, held_labels).items()}
        result["heldout_metric"], result["heldout_metrics"] = held[primary_metric(task)], held
    return result


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
                              cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def make_run_trial(params: Mapping, **options: Any) -> TrialRunner:
    """The job-path ``run_trial`` (see :class:`TrialRunner`)."""
    return TrialRunner(params, **options)
