"""Several processes of one job (torchrun / ``accelerate launch``): how they are joined and how
they agree. Kedro-free; a plain single process sees none of it."""

from __future__ import annotations

import os
from typing import Any


def launched_processes() -> int:
    """Processes of this job as the launcher set them (``WORLD_SIZE``; 1 otherwise)."""
    return int(os.environ.get("WORLD_SIZE", "1") or 1)


def use_cpu_backend(cpu: bool = False) -> bool:
    """Accelerate's ``cpu`` flag: as configured, and also for several processes on a machine without
    CUDA — Accelerate joins CPU processes into one gloo group only with ``cpu=True``; without it
    each process silently trains alone on all the data (and they overwrite each other's checkpoints)."""
    import torch

    return bool(cpu) or (launched_processes() > 1 and not torch.cuda.is_available())


def check_process_group(accelerator) -> None:
    """Stop when the launcher started several processes but Accelerate did not join them."""
    if launched_processes() > 1 and accelerator.num_processes != launched_processes():
        raise RuntimeError(
            f"WORLD_SIZE={launched_processes()} processes were launched but Accelerate runs {accelerator.num_processes} "
            f"(distributed type {accelerator.distributed_type}); each would train alone on all the data"
        )


def broadcast_from_rank_zero(value: Any) -> Any:
    """Rank 0's ``value`` on every process (any picklable value; joins the process group first
    when no training has yet). With one process: ``value`` itself."""
    if launched_processes() <= 1:
        return value
    import torch.distributed as dist
    from accelerate import PartialState

    PartialState(cpu=use_cpu_backend())  # init_process_group, as the later Accelerator will find it
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]
