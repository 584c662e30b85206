"""An overall progress line for a run of several training jobs (Kedro-free).

``kedro run`` counts nodes ("k of 57 tasks"); what takes the time is the training jobs (a teacher,
each student). [`JobProgress`][bert_kd.experiment.progress.JobProgress] counts those and estimates the time left from the jobs already
done: each pending job takes the mean time of the finished jobs of its kind (a teacher, a student)
or, for a kind not yet measured, of every finished job. A reused job lasts a fraction of a second,
so a run that reuses many estimates low until it meets a job that trains. The line says when the
machine is busy (load average above the cores): then every estimate is the busy machine's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import fmean
from typing import Sequence

from bert_kd.core.machine import busy_note, machine_load


def duration_text(seconds: float) -> str:
    """``~40 s``, ``~4 min``, ``~1.6 h``."""
    if seconds < 90:
        return f"~{max(round(seconds), 1)} s"
    if seconds < 90 * 60:
        return f"~{round(seconds / 60)} min"
    return f"~{seconds / 3600:.1f} h"


@dataclass
class JobProgress:
    """The jobs of one run, by kind in run order, and the seconds of those finished."""

    kinds: Sequence[str]
    finished: list[tuple[str, float]] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.kinds)

    def done(self, kind: str, seconds: float) -> None:
        """Record one finished job of ``kind`` and the seconds it took."""
        self.finished.append((kind, float(seconds)))

    def seconds_left(self) -> float | None:
        """The estimated seconds of the jobs not finished yet (None before any job finished)."""
        if not self.finished:
            return None
        overall = fmean(seconds for _, seconds in self.finished)
        by_kind: dict[str, list[float]] = {}
        for kind, seconds in self.finished:
            by_kind.setdefault(kind, []).append(seconds)
        pending = list(self.kinds[len(self.finished) :])
        return sum(fmean(by_kind[kind]) if kind in by_kind else overall for kind in pending)

    def line(self, load: float | None = None, cores: int | None = None) -> str:
        """``job 3 of 9, ~4 min left, machine busy: load 3.1 on 2 cores`` for the next job to run
        (``load``/``cores``: default this machine's now)."""
        if load is None and cores is None:
            load, cores = machine_load()
        parts = [f"job {min(len(self.finished) + 1, self.total)} of {self.total}"]
        left = self.seconds_left()
        parts.append(f"{duration_text(left)} left" if left is not None else "time left known after the first job")
        busy = busy_note(load, cores)
        if busy:
            parts.append(busy)
        return ", ".join(parts)
