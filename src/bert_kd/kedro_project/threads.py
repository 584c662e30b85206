"""The ``kedro run`` hook that chooses torch's thread count at start from the cores free now (other
processes' CPU use over a fraction of a second, [`cpu_use_now`][]; [`thread_choice`][]) and says so in
one log line."""

from __future__ import annotations

import logging
import os

from kedro.framework.hooks import hook_impl

from bert_kd.core.machine import CpuUse, cpu_use_now, thread_choice, usable_cores

log = logging.getLogger(__name__)


def processes_per_machine() -> int:
    """The processes of this job on this machine (``torchrun``'s ``LOCAL_WORLD_SIZE``, else 1): they share its cores."""
    value = os.environ.get("LOCAL_WORLD_SIZE", "1")
    return max(1, int(value)) if value.isdigit() else 1


class ThreadsHook:
    """Before the pipeline runs: ``runtime.threads`` (at most the machine's cores), else
    ``OMP_NUM_THREADS``, else the cores free now (this process's share of them under ``torchrun``)
    become torch's threads."""

    @hook_impl
    def before_pipeline_run(self, run_params, pipeline, catalog) -> None:
        import torch

        try:
            runtime = dict(catalog.load("parameters").get("runtime") or {})
        except Exception:  # noqa: BLE001 - a catalog without the parameters: the machine decides
            runtime = {}
        cores = usable_cores()
        share = max(1, cores // processes_per_machine())
        chosen = runtime.get("threads")
        decided = chosen or os.environ.get("OMP_NUM_THREADS")  # then nothing is read
        use = CpuUse(None, 0.0) if decided else cpu_use_now()
        threads, line, warning = thread_choice(chosen, os.environ, use, share, machine_cores=cores)
        if threads and threads != torch.get_num_threads():
            torch.set_num_threads(threads)
        if warning:
            log.warning(warning)
        log.info(line)
