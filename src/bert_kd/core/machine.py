"""How busy this machine is, and how many torch threads a run should take (Kedro-free).

Two readings. The CPU time other processes take over a short window now ([`cpu_use_now`][]: the
machine's busy jiffies in ``/proc/stat`` less this process's own in ``/proc/self/stat``, over a few
tenths of a second) decides the threads a run starts with: it sees the machine as it is, where the
1-minute load average lags a minute and still counts a job that just finished (a fresh
``bash scripts/setup.sh && kedro run`` starts at load about 1 on an idle machine and got one thread
of two from it). The load average stays for what reports a measured throughput: a throughput
measured while more processes want the CPU than it has cores says as much about the other processes
as about the model (a busy 2-core machine measured 60 examples/s where the idle one gave 98), and
such a number says when it was measured on a busy machine ([`busy_note`][]).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

#: The window over which other processes' CPU use is read before a run chooses its threads.
WINDOW_S = 0.3
#: The share of a core another process must hold for the core to count as taken.
BUSY_CORE = 0.5


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


@dataclass(frozen=True)
class CpuSample:
    """One reading of the CPU counters, in clock ticks: the machine's busy and total time summed
    over its online cores, their count, and this process's own user + system time."""

    busy: int
    total: int
    online: int
    own: int


def parse_proc_stat(text: str) -> tuple[int, int, int]:
    """(busy ticks, total ticks, online cores) from ``/proc/stat``: busy is every field of the
    ``cpu`` line but idle and iowait (a core waiting on a disk is free for torch)."""
    lines = text.splitlines()
    fields = [int(value) for value in lines[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    # guest time is counted inside user and nice already (proc(5)): the first eight fields are the whole
    total = sum(fields[:8])
    online = sum(1 for line in lines[1:] if line.startswith("cpu") and line[3:4].isdigit())
    return total - idle, total, max(1, online)


def parse_self_stat(text: str) -> int:
    """This process's user + system ticks (all its threads) from ``/proc/self/stat``; the command
    name in brackets may hold spaces, so the fields are counted after its closing bracket."""
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of proc(5)


def read_proc(root: Path = Path("/proc")) -> CpuSample:
    """One [`CpuSample`][] of this machine (``OSError`` where there is no ``/proc``)."""
    busy, total, online = parse_proc_stat((root / "stat").read_text())
    return CpuSample(busy, total, online, parse_self_stat((root / "self" / "stat").read_text()))


@dataclass(frozen=True)
class CpuUse:
    """What other processes used over the window: ``other_cores`` cores' worth of CPU (None where
    it could not be read), over ``window_s`` seconds."""

    other_cores: float | None
    window_s: float


def cpu_use_now(
    read: Callable[[], CpuSample] = read_proc,
    sleep: Callable[[float], None] = time.sleep,
    window_s: float = WINDOW_S,
) -> CpuUse:
    """Other processes' CPU use now: the machine's busy ticks over ``window_s`` less this process's
    own, in cores (the busy share of the machine's total ticks times its online cores)."""
    try:
        first = read()
        sleep(window_s)
        second = read()
    except (OSError, ValueError, IndexError):
        return CpuUse(None, window_s)
    total = second.total - first.total
    if total <= 0:
        return CpuUse(None, window_s)
    other = (second.busy - first.busy) - (second.own - first.own)
    return CpuUse(max(0.0, other / total * second.online), window_s)


def free_cores(other_cores: float | None, cores: int) -> int:
    """The cores not taken by other processes: ``cores`` less each core another process holds at
    least half of ([`BUSY_CORE`][]), at least 1; all of them where the use is unknown."""
    if other_cores is None:
        return cores
    return max(1, min(cores, cores - int(other_cores + 1 - BUSY_CORE)))


def thread_choice(
    chosen: int | None,
    environ: Mapping[str, str],
    use: CpuUse,
    cores: int,
    machine_cores: int | None = None,
) -> tuple[int | None, str, str | None]:
    """(the torch threads to set, None to leave them; the log line saying why; a warning or None).

    The user's ``runtime.threads`` (``chosen``) wins, capped at the machine's cores
    (``machine_cores``, default ``cores``: more threads than cores only wait for each other), then
    ``OMP_NUM_THREADS`` (torch read it at start), else the cores free now ([`free_cores`][] of
    ``cores``, this process's share under ``torchrun``): a thread per busy core waits for the other
    work and spins (on 2 cores at load 4–6 a run burned 3.7× the CPU seconds)."""
    limit = machine_cores or cores
    if chosen:
        if chosen > limit:
            warning = (
                f"runtime.threads={chosen} is more than this machine's {limit} cores: {limit} torch threads "
                f"instead (extra threads only wait for each other); set runtime.threads to at most {limit}"
            )
            return (
                limit,
                f"threads: {limit} torch threads (runtime.threads={chosen}, capped at the {limit} cores)",
                warning,
            )
        return chosen, f"threads: {chosen} torch thread{_s(chosen)} (runtime.threads)", None
    if environ.get("OMP_NUM_THREADS"):
        return None, f"threads: {environ['OMP_NUM_THREADS']} torch threads (OMP_NUM_THREADS)", None
    threads = free_cores(use.other_cores, cores)
    window = f"{use.window_s:.1f} s"
    if use.other_cores is None:
        why = f"all {cores} cores: other processes' CPU use unreadable here"
    elif threads == cores:
        why = f"all {cores} cores free: other processes used {use.other_cores:.1f} cores over {window} at start"
    else:
        why = (
            f"{threads} of {cores} cores free: other processes used {use.other_cores:.1f} cores over {window} at start"
        )
    return threads, f"threads: {threads} torch thread{_s(threads)} ({why}; runtime.threads sets it)", None


def _s(count: int) -> str:
    return "s" if count != 1 else ""


def is_busy(load: float | None, cores: int | None) -> bool:
    """More runnable processes than cores, on average over the last minute."""
    return load is not None and bool(cores) and load > cores


def busy_note(load: float | None, cores: int | None) -> str | None:
    """``machine busy: load 3.1 on 2 cores`` when [`is_busy`][], else None."""
    return f"machine busy: load {load:.1f} on {cores} cores" if is_busy(load, cores) else None
