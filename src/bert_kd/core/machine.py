"""How busy this machine is: the 1-minute load average against its cores (Kedro-free).

A throughput or a time estimate measured while more processes want the CPU than it has cores
says as much about the other processes as about the model: a busy 2-core machine measured 60
examples/s where the idle one gave 98 for the same model. Whatever reports such a number says
when it was measured on a busy machine ([`busy_note`][]).
"""

from __future__ import annotations

import os
from collections.abc import Mapping


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform tells, else every core)."""
    try:
        return len(os.sched_getaffinity(0)) or int(os.cpu_count() or 1)
    except (AttributeError, OSError):
        return int(os.cpu_count() or 1)


def machine_load() -> tuple[float | None, int]:
    """(the 1-minute load average, None where the platform has none; the cores this process may use)."""
    try:
        load = float(os.getloadavg()[0])
    except (OSError, AttributeError):
        load = None
    return load, usable_cores()


def free_cores(load: float | None, cores: int) -> int:
    """The cores not taken by other work: ``cores`` less the load average, rounded, at least 1 (all
    of them where the load is unknown)."""
    if load is None:
        return cores
    return max(1, min(cores, int(cores - load + 0.5)))


def thread_choice(
    chosen: int | None, environ: Mapping[str, str], load: float | None, cores: int
) -> tuple[int | None, str]:
    """(the torch threads to set, None to leave them; the log line saying why). The user's
    ``runtime.threads`` (``chosen``) wins, then ``OMP_NUM_THREADS`` (torch read it at start), else the
    cores that are free now ([`free_cores`][]): a thread per busy core
    waits for the other work and spins (on 2 cores at load 4–6 a run burned 3.7× the CPU seconds)."""
    if chosen:
        return chosen, f"threads: {chosen} torch threads (runtime.threads)"
    if environ.get("OMP_NUM_THREADS"):
        return None, f"threads: {environ['OMP_NUM_THREADS']} torch threads (OMP_NUM_THREADS)"
    threads = free_cores(load, cores)
    now = f"load {load:.1f} on {cores} cores" if load is not None else f"{cores} cores, load unknown"
    return (
        threads,
        f"threads: {threads} torch thread{'s' if threads > 1 else ''} for the cores free at start ({now}; runtime.threads sets it)",
    )


def is_busy(load: float | None, cores: int | None) -> bool:
    """More runnable processes than cores, on average over the last minute."""
    return load is not None and bool(cores) and load > cores


def busy_note(load: float | None, cores: int | None) -> str | None:
    """``machine busy: load 3.1 on 2 cores`` when [`is_busy`][], else None."""
    return f"machine busy: load {load:.1f} on {cores} cores" if is_busy(load, cores) else None
