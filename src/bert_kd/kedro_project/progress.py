"""The ``kedro run`` hook that prints [`JobProgress`][bert_kd.experiment.progress.JobProgress]'s line
before each training job of a pipeline with several (``job 3 of 9, ~4 min left, machine busy:
load 3.1 on 2 cores``)."""

from __future__ import annotations

import logging
import time

from kedro.framework.hooks import hook_impl

from bert_kd.experiment.progress import JobProgress

log = logging.getLogger(__name__)

#: Node functions that run one training job (a model trained or reused through the job path), by kind.
JOB_FUNCTIONS = {
    "train_teacher": "teacher",
    "train_ted_filters": "filters",
    "distill_student": "student",
    "distill_multi_teacher": "student",
}


def job_kind(node) -> str | None:
    """The kind of training job ``node`` runs ([`JOB_FUNCTIONS`][bert_kd.kedro_project.progress.JOB_FUNCTIONS]), None for any other node."""
    return JOB_FUNCTIONS.get(getattr(node.func, "__name__", ""))


class JobProgressHook:
    """Counts a pipeline's training jobs; before each (from the second on, or the first when the
    pipeline has several) logs the overall progress line with the time left estimated from the jobs done."""

    def __init__(self) -> None:
        self.progress: JobProgress | None = None
        self.started: dict[str, float] = {}

    @hook_impl
    def before_pipeline_run(self, run_params, pipeline, catalog) -> None:
        kinds = [kind for node in pipeline.nodes if (kind := job_kind(node))]  # Kedro's run order
        self.progress = JobProgress(kinds) if len(kinds) > 1 else None
        self.started = {}

    @hook_impl
    def before_node_run(self, node, inputs) -> None:
        if self.progress is not None and job_kind(node):
            log.info("progress: %s", self.progress.line())
            self.started[node.name] = time.perf_counter()

    @hook_impl
    def after_node_run(self, node, outputs) -> None:
        began = self.started.pop(node.name, None)
        if self.progress is not None and began is not None:
            self.progress.done(job_kind(node), time.perf_counter() - began)
