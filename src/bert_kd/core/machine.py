"""How busy this machine is: the 1-minute load average against its cores (Kedro-free).

A throughput or a time estimate measured while more processes want the CPU than it has cores
says as much about the other processes as about the model: a busy 2-core machine measured 60
examples/s where the idle one gave 98 for the same model. Whatever reports such a number says
when it was measured on a busy machine ([`busy_note`][bert_kd.core.machine.busy_note]).
"""

from __future__ import annotations

import os


def machine_load() -> tuple[float | None, int]:
    """(the 1-minute load average, None where the platform has none; the number of cores)."""
    try:
        load = float(os.getloadavg()[0])
    except (OSError, AttributeError):
        load = None
    return load, int(os.cpu_count() or 1)


def is_busy(load: float | None, cores: int | None) -> bool:
    """More runnable processes than cores, on average over the last minute."""
    return load is not None and bool(cores) and load > cores


def busy_note(load: float | None, cores: int | None) -> str | None:
    """``machine busy: load 3.1 on 2 cores`` when [`is_busy`][bert_kd.core.machine.is_busy], else None."""
    return f"machine busy: load {load:.1f} on {cores} cores" if is_busy(load, cores) else None
