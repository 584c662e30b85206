"""The ``kedro run`` hook that prints [`JobProgress`][]'s line
before each training job of a pipeline with several (``job 3 of 9, ~4 min left, machine busy:
load 3.1 on 2 cores``) and, when the last node has run, how far off each line's estimate was. Before the first
job it prices the run at the recorded CPU runs' pace (a teacher's work read from its checkpoint's config, the
rows from its training split, the run's torch threads); on a GPU it waits for the first job."""

from __future__ import annotations

import json
import logging
import time
from typing import Callable

from kedro.framework.hooks import hook_impl

from bert_kd.experiment.job_costs import JOB_COSTS, TEACHER_PACE
from bert_kd.experiment.lineage import Lineage
from bert_kd.experiment.progress import JobProgress, Step, check_metrics, check_table
from bert_kd.experiment.tracker import kedro_run

log = logging.getLogger(__name__)

#: Node functions that run one training job (a model trained or reused through the job path), by kind.
JOB_FUNCTIONS = {
    "train_teacher": "teacher",
    "cache_teacher_outputs": "teacher_cache",
    "train_ted_filters": "filters",
    "distill_student": "student",
    "distill_multi_teacher": "student",
}
#: A teacher-output cache is one forward pass over the train rows: a third of one training epoch's
#: forward and backward passes, in the work units (parameters × epochs) a job kind not yet measured is priced by.
FORWARD_PASS_WORK = 1 / 3


def job_kind(node) -> str | None:
    """The kind of training job ``node`` runs ([`JOB_FUNCTIONS`][]), None for any other node."""
    return JOB_FUNCTIONS.get(getattr(node.func, "__name__", ""))


def _function(node) -> str:
    return getattr(node.func, "__name__", node.name)


def _signature(node, catalog) -> str | None:
    """A job node's function and ``params:`` inputs: two job nodes that agree run the same job (the
    parameter check hands a row that repeats another that row's recipe). None where a value cannot be read."""
    try:
        values = {name: catalog.load(name) for name in node.inputs if name.startswith("params:")}
        return json.dumps([_function(node), list(values.values())], sort_keys=True, default=str)
    except Exception:  # noqa: BLE001 - an unreadable value: the job is priced as one of its kind
        return None


def _method(node, catalog) -> str | None:
    """The ``method`` of the recipe a student job's node reads (its ``params:`` input that names one), else None."""
    for name in node.inputs:
        if name.startswith("params:"):
            try:
                value = catalog.load(name)
            except Exception:  # noqa: BLE001 - an unreadable value: the job is priced as one of its kind
                continue
            if isinstance(value, dict) and isinstance(value.get("method"), str):
                return value["method"]
    return None


def run_steps(pipeline, catalog, recompute: bool) -> list[Step]:
    """Every node of ``pipeline`` in run order as a [`Step`][] (a student job with its recipe's method); a job
    that repeats an earlier one is marked so (not under ``runtime.recompute``, which trains it again)."""
    steps, first = [], {}
    for node in pipeline.nodes:  # Kedro's sequential run order
        kind = job_kind(node)
        repeats = None
        if kind and not recompute and (signature := _signature(node, catalog)) is not None:
            repeats = first.setdefault(signature, node.name)
            repeats = None if repeats == node.name else repeats
        method = _method(node, catalog) if kind == "student" else None
        steps.append(Step(node.name, kind or _function(node), job=kind is not None, method=method, repeats=repeats))
    return steps


def _reused(value) -> bool:
    """Whether ``value`` is a model bundle the store handed back (its ``info`` says so)."""
    info = getattr(value, "info", None)
    return isinstance(info, dict) and bool(Lineage.of(info).reused)


def parameter_count(value) -> int | None:
    """The parameters of a model bundle's model (None for anything else)."""
    model = getattr(value, "model", None)
    parameters = getattr(model, "parameters", None)
    return sum(p.numel() for p in parameters()) if callable(parameters) else None


def forward_size(value) -> int | None:
    """The parameters of a model bundle's model outside its embedding tables: what one forward pass
    multiplies by (a lookup multiplies nothing), the size an evaluation is priced by. None for anything else."""
    import torch

    model = getattr(value, "model", None)
    if not isinstance(model, torch.nn.Module):
        return None
    tables = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Embedding))
    return sum(p.numel() for p in model.parameters()) - tables


def checkpoint_sizes(name: str) -> tuple[int, int] | None:
    """(parameters, forward size: [`forward_size`][]) of the classifier the checkpoint ``name`` makes, built from
    its config on PyTorch's meta device (no weights read, no memory taken); None where the config cannot be read."""
    try:
        import torch
        from transformers import AutoConfig, AutoModelForSequenceClassification

        from bert_kd.core.models import resolve_model_name

        config = AutoConfig.from_pretrained(resolve_model_name(name))
        with torch.device("meta"):
            model = AutoModelForSequenceClassification.from_config(config)
    except Exception:  # noqa: BLE001 - an unreadable checkpoint: the job is priced once measured
        return None
    return sum(p.numel() for p in model.parameters()), forward_size(_Bundle(model))


class _Bundle:
    def __init__(self, model) -> None:
        self.model = model


def train_rows(inputs) -> int | None:
    """The rows of the ``train`` split of the first input that is a tokenized task (a mapping of splits that are
    datasets: ``column_names``), None where none is."""
    for value in (inputs or {}).values():
        try:
            split = value["train"]
        except Exception:  # noqa: BLE001 - not a mapping of splits
            continue
        if hasattr(split, "column_names") and hasattr(split, "__len__"):
            return len(split)
    return None


def _block_value(block, key: str):
    return block.get(key) if isinstance(block, dict) else getattr(block, key, None)


def _uses_gpu() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - no torch: no GPU
        return False


def _epochs(block) -> float:
    training = getattr(block, "training", None)
    if training is None and isinstance(block, dict):
        training = block.get("training")
    epochs = getattr(training, "epochs", None) if not isinstance(training, dict) else training.get("epochs")
    return float(epochs or 1)


class JobProgressHook:
    """Counts a pipeline's training jobs; before each logs the overall progress line with the time
    left estimated from the steps done; after the last node logs each line's estimate against the
    time that was actually left (and reports it on the ``kedro run``'s run)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.progress: JobProgress | None = None
        self.pipeline = None
        self.teacher_epochs = 1.0

    @hook_impl
    def before_pipeline_run(self, run_params, pipeline, catalog) -> None:
        self.pipeline = pipeline
        if sum(1 for node in pipeline.nodes if job_kind(node)) < 2:
            self.progress = None  # one job: Kedro's own progress says it all
            return
        parameters = _parameters(catalog)
        recompute = bool((parameters.get("runtime") or {}).get("recompute"))
        self.teacher_epochs = _epochs(parameters.get("teacher") or {})
        steps = run_steps(pipeline, catalog, recompute)
        pace = None if _uses_gpu() else TEACHER_PACE
        self.progress = JobProgress(steps, clock=self.clock, sample_load=True, costs=JOB_COSTS, pace=pace)

    @hook_impl
    def before_node_run(self, node, inputs) -> None:
        if self.progress is None:
            return
        if job_kind(node):
            self._price_before(node, inputs)
            log.info("progress: %s", self.progress.announce(node.name))
        self.progress.begin(node.name)

    @hook_impl
    def after_node_run(self, node, outputs) -> None:
        if self.progress is None or node.name not in self.progress.by_name:
            return
        self.progress.end(node.name, reused=any(_reused(value) for value in (outputs or {}).values()))
        for name, value in (outputs or {}).items():
            self._price_consumers(name, value)
        if node.name == self.progress.steps[-1].name:
            self._report()

    def _price_before(self, node, inputs) -> None:
        """What a job's inputs tell before it runs: its training rows, the run's threads and, for a teacher not
        measured yet, its work and its readers' sizes from its checkpoint's config."""
        import torch

        self.progress.threads = torch.get_num_threads()
        self.progress.set_rows(node.name, train_rows(inputs))
        step = self.progress.by_name[node.name]
        if step.kind != "teacher" or step.work:
            return
        block = next((v for k, v in (inputs or {}).items() if k.startswith("params:")), None)
        name = _block_value(block, "model") if block is not None else None
        sizes = checkpoint_sizes(name) if isinstance(name, str) else None
        if sizes is None:
            return
        count, size = sizes
        self.progress.set_work(node.name, count * _epochs(block))
        for output in node.outputs:
            self._price_readers(output, count, size, student_start=None)

    def _price_consumers(self, dataset: str, value) -> None:
        """The work of the jobs that read ``dataset`` when it is a model: a student start's (its
        parameters × its epochs) for the job that trains it, a teacher's forward pass for its cache;
        the size of the other nodes that read it or the model its job trains (their evaluations)."""
        count = parameter_count(value)
        if count is None:
            return
        self._price_readers(dataset, count, forward_size(value), getattr(value, "params", None))
        for producer in self.pipeline.nodes:
            if dataset in producer.outputs and job_kind(producer) == "teacher":
                self.progress.set_work(producer.name, count * self.teacher_epochs)

    def _price_readers(self, dataset: str, count: int, size: int | None, student_start) -> None:
        """The nodes that read the model ``dataset`` (``count`` parameters, ``size`` forward work): a teacher's
        cache by one forward pass, a student's job by its start's epochs (``student_start``: its block), the
        other nodes by the model's size."""
        for consumer in self.pipeline.nodes:
            if dataset not in consumer.inputs:
                continue
            kind = job_kind(consumer)
            if kind is None:
                self.progress.set_size(consumer.name, size)
            elif kind == "teacher_cache":
                self.progress.set_work(consumer.name, count * FORWARD_PASS_WORK)
            elif student_start is not None:  # a student start: its block's epochs
                self.progress.set_work(consumer.name, count * _epochs(student_start))
                self._size_readers(consumer.outputs, size)

    def _size_readers(self, datasets, size: int | None) -> None:
        """The nodes (no jobs) that read ``datasets``, a job's trained model, are priced by its start's size."""
        for reader in self.pipeline.nodes:
            if job_kind(reader) is None and set(datasets) & set(reader.inputs):
                self.progress.set_size(reader.name, size)

    def _report(self) -> None:
        checks = self.progress.checks()
        if not any(c.estimate is not None for c in checks):
            return
        table = check_table(checks)
        metrics = check_metrics(checks)
        log.info(
            "progress: the estimates against the time actually left (worst %+.0f%%):\n%s",
            100 * max((c.error for c in checks if c.error is not None), key=abs),
            table,
        )
        reporter = kedro_run()
        reporter.log_metrics(metrics)
        timeline = json.dumps(self.progress.timeline(), indent=1)
        reporter.log_files({"eta_check.md": table + "\n", "eta_timeline.json": timeline + "\n"}, {})


def _parameters(catalog) -> dict:
    try:
        return dict(catalog.load("parameters") or {})
    except Exception:  # noqa: BLE001 - a catalog without the parameters: defaults
        return {}
