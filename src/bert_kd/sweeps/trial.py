"""``run_trial`` on the real training path (the sweep wing's one module that imports Kedro, for the
pipelines' own definitions): one [`TrialSpec`][] → data, teacher(s), teacher
cache, student, distillation, dev (+ held-out) evaluation, each step a job of
[`bert_kd.experiment.jobs`][] (content-keyed, locked, reused), so a finished trial is
reused and a killed sweep continues. A trial is a registered pipeline plus parameters: it runs the nodes of the
pipeline its row names ([`bert_kd.pipelines.registry.compose`][]: ``distill_<row>`` by default, TED,
``distill_multi_teacher``, the transfer-set and BiLSTM pipelines, ...) that the student and its evaluation data need,
in their order on in-memory datasets ([`run_nodes`][]; no Kedro session or catalog), so a trial and ``kedro run``
with the same parameters train the same jobs. The nodes the pipelines tag as data or teacher side run with the
teacher seed, the others with the trial's.

What a trial is (its parameter blocks and content key) is
[`trial_identity`][]'s; its stored result, read before anything trains, is
[`trial_results`][]'s; both are Kedro-free.
"""

from __future__ import annotations

import datetime as _dt
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from kedro.pipeline import Pipeline

from bert_kd.core.data.glue import get_task
from bert_kd.core.metrics import glue_metrics, primary_metric
from bert_kd.core.models import ModelBundle
from bert_kd.core.training import SupervisedObjective, make_loader, predict_logits
from bert_kd.core.training.compiled_step import CompileCounts
from bert_kd.core.training.loop import phase_seconds
from bert_kd.experiment.tracker import tracker_for
from bert_kd.experiment.training_jobs.student import EXPLICIT_WEIGHT_BLOCKS, with_explicit_weights
from bert_kd.pipelines.common import build_run_settings, tags_for
from bert_kd.pipelines.data_processing.nodes import ingest_glue
from bert_kd.pipelines.registry import compose
from bert_kd.sweeps.identity import source_fingerprint
from bert_kd.sweeps.spec import TrialSpec
from bert_kd.sweeps.trial_identity import TrialIdentity
from bert_kd.sweeps.trial_results import ResultsFolder, TrialResults

log = logging.getLogger(__name__)

DEFAULT_HELDOUT_FRACTION = 0.1
HELDOUT_SPLIT = "heldout"


class TrialRunner:
    """``run_trial`` for [`bert_kd.sweeps.reproduce.reproduce`][]: trains
    and evaluates a trial on the job path, or returns its stored result.

    ``params``: the parameter tree ([`TrialIdentity`][], with
    ``data_overrides`` and ``conf_params``); ``folder``: the results folder
    ([`ResultsFolder`][]). It is made of ``identity`` (what a
    trial is) and ``results`` (its stored result); what ``reproduce`` reads of any ``run_trial``
    (``content_key``, ``stored_result``, ``use_variant_folder``, ...) is bound to theirs.
    """

    def __init__(
        self,
        params: Mapping,
        folder: ResultsFolder | None = None,
        *,
        data_overrides: Mapping | None = None,
        conf_params: Mapping | None = None,
    ):
        self.pipelines = TrialPipelines(params)
        self.identity = TrialIdentity(params, data_overrides, conf_params, reads=self.pipelines.reads)
        self.results = TrialResults(self.identity, folder or ResultsFolder())
        self.params = self.identity.params
        self._said_batching = False
        # what reproduce asks of any run_trial (bert_kd.sweeps.reproduce.reproduce)
        self.content_key = self.identity.content_key
        self.data_changes = self.identity.data_changes
        self.setting_changes = self.identity.setting_changes
        self.stored_result = self.results.stored_result
        self.adopt_result = self.results.adopt_result
        self.use_variant_folder = self.results.use_variant_folder
        self.model_store_id = self.results.model_store_id

    @property
    def results_dir(self) -> Path | None:
        return self.results.results_dir

    def __call__(self, spec: TrialSpec) -> dict:
        stored = self.stored_result(spec)
        if stored is not None:
            log.info("trial %s: result read from %s", spec.key, self.results.result_path(spec))
            return {**stored, "from_results_dir": True}
        if self.results.results_only:
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
        self.results.write_result(
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
        sizes = self.identity.data_sizes(spec)
        train, validation, _ = ingest_glue(
            task,
            self.params.get("glue_dir"),
            sizes["max_train_samples"],
            sizes["max_eval_samples"],
            self.identity.data_seed(spec),
        )
        if spec.settings.get("selection") == "heldout":
            train, validation = cut_heldout(
                train, validation, spec.settings.get("heldout") or {}, self.identity.data_seed(spec)
            )
        own_rows, rows = self.identity.teacher_train_samples(spec)
        teacher_train = None
        if own_rows:  # the teacher fine-tuned on its own rows (e.g. the whole split), the students on theirs
            teacher_train, _, _ = ingest_glue(
                task, self.params.get("glue_dir"), rows, sizes["max_eval_samples"], self.identity.data_seed(spec)
            )
        student, data, teacher_metric, *slots = self.run_pipeline(spec, task, train, validation, teacher_train)
        return evaluate_trial(student, data, task, teacher_metric, *slots)

    def run_pipeline(self, spec: TrialSpec, task: str, train, validation, teacher_train=None) -> tuple:
        """Run the trial's pipeline ([`TrialPipelines`][]) on the trial's rows: its teacher side with the teacher
        seed, every teacher checked against the folder's records before the student trains
        ([`check_teacher`][bert_kd.sweeps.trial_results.TrialResults.check_teacher]), then its student side with
        the trial's seed. ``teacher_train``: the teachers' own training rows, where the table gives them (the rest
        of the teacher side, its caches and the students read ``train``). → (student, its evaluation data, the teacher's dev metrics (a multi-teacher pipeline:
        the best chosen slot's), and with several teachers every slot's)."""
        parts = self.pipelines.of(spec)
        parameters = self.identity.parameters(spec)
        namespace, _, row = parts.recipe_at.partition(".")
        recipe = with_explicit_weights(spec.recipe) if namespace in EXPLICIT_WEIGHT_BLOCKS else dict(spec.recipe)
        parameters[namespace] = {**(parameters.get(namespace) or {}), row: recipe}
        teacher_settings = self.run_settings(spec, task, self.identity.teacher_seed(spec))
        given, teacher_side = {"glue_train": train, "glue_validation": validation}, parts.teacher_side
        if teacher_train is not None:  # the teachers trained on their own rows; the rest of that side on the trial's
            models = [model for model, _ in parts.teachers]
            trained = run_nodes(
                parts.teacher_side.to_outputs(*models),
                {"glue_train": teacher_train, "glue_validation": validation},
                parameters,
                teacher_settings,
            )
            given.update({model: trained[model] for model in models})
            teacher_side = Pipeline([n for n in parts.teacher_side.nodes if not set(n.outputs) & set(models)])
        datasets = run_nodes(teacher_side, given, parameters, teacher_settings)
        metrics = [dev_metrics(datasets[model], datasets[tokenized], task) for model, tokenized in parts.teachers]
        if parts.slots:
            blocks = self.identity.teacher_blocks(spec)
            for block, slot in zip(blocks, metrics):  # every slot, before the student trains
                self.results.check_teacher(spec, slot, block)
        else:
            for slot in metrics:
                self.results.check_teacher(spec, slot)
        datasets = run_nodes(parts.student_side, datasets, parameters, self.run_settings(spec, task))
        student, data = datasets[parts.student_model], datasets[parts.student_data]
        if not parts.slots:
            return student, data, metrics[0] if metrics else None
        chosen = spec.recipe.get("teachers") or list(range(len(metrics)))
        best = max((metrics[k] for k in chosen), key=lambda m: m[primary_metric(task)])
        return student, data, best, metrics

    def run_settings(self, spec: TrialSpec, task: str, seed: int | None = None) -> dict:
        """The ``run_settings`` dataset of the trial (built as the pipeline builds it): its task, the
        trial seed (``seed``: another, e.g. the teacher's), the project's tracking, the table's batching
        (`_runtime`) and the data source its MLflow runs record."""
        source = self._data_source(spec)
        return build_run_settings(
            task, spec.seed if seed is None else seed, self._tracking(), self._runtime(spec), source
        )

    def _data_source(self, spec: TrialSpec) -> dict:
        """What the MLflow runs record as the data source (not part of any key)."""
        return {"glue_dir": self.params.get("glue_dir"), **self.identity.data_sizes(spec)}

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


#: The tags of the nodes that run with the teacher seed: the pipelines' data and teacher side.
TEACHER_SIDE = frozenset(tags_for(role="data") + tags_for(role="teacher"))
#: What a trial hands its pipeline itself: the task's rows (its sizes, its held-out slice) and the run settings.
GIVEN = frozenset({"glue_train", "glue_validation", "run_settings"})


@dataclass(frozen=True)
class TrialPipeline:
    """The part of a registered pipeline a trial runs: the nodes its student and that student's evaluation data
    need (none that makes what the trial gives, no report), split into the teacher side and the student side."""

    name: str
    teacher_side: Pipeline
    student_side: Pipeline
    student_model: str  # "alp_kd.pkd.student_model"
    student_data: str  # what the pipeline evaluates the student on ("alp_kd.pkd.student_data")
    recipe_at: str  # the recipe parameter the pipeline reads ("distill_methods.pkd")
    teachers: tuple[tuple[str, str], ...]  # (model, its tokenization) of every teacher the pipeline trains
    reads: frozenset[str]  # the top-level parameter blocks its nodes read

    @property
    def slots(self) -> bool:
        """Teachers of their own blocks (``multi_teacher.teacher_<k>``), one per ``multi_teachers`` entry."""
        return any(model != "teacher_model" for model, _ in self.teachers)


class TrialPipelines:
    """The registered pipeline of each trial ([`bert_kd.pipelines.registry.compose`][] on the project's parameters
    with the row's recipe), cut to what the trial runs ([`TrialPipeline`][]); one composition per pipeline,
    recipe and teacher count."""

    def __init__(self, params: Mapping):
        self.params = dict(params)
        self._cache: dict[tuple, TrialPipeline] = {}

    def reads(self, spec: TrialSpec) -> frozenset[str]:
        return self.of(spec).reads

    def of(self, spec: TrialSpec) -> TrialPipeline:
        teachers = spec.settings.get("teachers") or self.params.get("multi_teachers") or []
        key = (spec.pipeline_name, spec.recipe_ref, len(teachers))
        if key not in self._cache:
            self._cache[key] = self._cut(spec, teachers)
        return self._cache[key]

    def _cut(self, spec: TrialSpec, teachers: Sequence) -> TrialPipeline:
        namespace, _, row = spec.recipe_ref.partition(".")
        parameters = {**self.params, "multi_teachers": list(teachers)}
        parameters[namespace] = {**(self.params.get(namespace) or {}), row: spec.recipe}
        where = f"reproduce.tables.{spec.table}.methods.{spec.method}"
        pipelines = compose(parameters)
        name = spec.pipeline_name
        if name not in pipelines:
            raise ValueError(
                f"{where}.pipeline: {name!r} is not a registered pipeline; valid: {' '.join(sorted(pipelines))}"
            )
        whole = pipelines[name]
        models = sorted(o for o in whole.all_outputs() if o == "student_model" or o.endswith(".student_model"))
        if len(models) != 1:
            raise ValueError(
                f"{where}.pipeline: {name} trains {len(models)} students ({', '.join(models) or 'none'}); "
                "a table row's pipeline trains one (e.g. distill_<row>, distill_bilstm_transfer)"
            )
        model = models[0]
        evaluations = [  # the student's evaluation node: what it reads beside the student is the evaluation data
            n
            for n in whole.nodes
            if n.inputs[:1] == [model] and len(n.inputs) > 1 and any(o.endswith("student_metrics") for o in n.outputs)
        ]
        data = evaluations[0].inputs[1] if evaluations else model.replace("student_model", "student_data")
        kept = Pipeline([n for n in whole.nodes if not set(n.outputs) & GIVEN]).to_outputs(model, data)
        recipes = sorted({p[len("params:") :] for p in kept.inputs() if p.startswith(f"params:{namespace}.")})
        if len(recipes) != 1:
            raise ValueError(
                f"{where}: pipeline {name} reads {len(recipes)} recipes of {namespace} ({', '.join(recipes) or 'none'}); "
                f"the row's recipe {spec.recipe_ref} must be the one it reads"
            )
        teacher_nodes = [n for n in kept.nodes if set(n.tags) & TEACHER_SIDE]
        teacher_models = sorted(
            (o for n in teacher_nodes for o in n.outputs if o == "teacher_model" or o.endswith(".teacher_model")),
            key=lambda o: (len(o), o),
        )
        return TrialPipeline(
            name=name,
            teacher_side=Pipeline(teacher_nodes),
            student_side=Pipeline([n for n in kept.nodes if n not in teacher_nodes]),
            student_model=model,
            student_data=data,
            recipe_at=recipes[0],
            teachers=tuple((m, m[: -len("teacher_model")] + "teacher_tokenized") for m in teacher_models),
            reads=frozenset(p[len("params:") :].split(".")[0] for p in kept.inputs() if p.startswith("params:")),
        )


def trial_identity(
    params: Mapping, data_overrides: Mapping | None = None, conf_params: Mapping | None = None
) -> TrialIdentity:
    """What the trials of ``params`` are ([`TrialIdentity`][]), their pipelines composed as the runner composes
    them (for readers of a results folder that train nothing)."""
    return TrialIdentity(params, data_overrides, conf_params, reads=TrialPipelines(params).reads)


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
