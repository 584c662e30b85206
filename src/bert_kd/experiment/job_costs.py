"""What a training job costs per unit of work, relative to a teacher's (Kedro-free).

[`JobProgress`][bert_kd.experiment.progress.JobProgress] prices a job not run yet from the jobs measured so
far in seconds per unit of work (parameters × epochs). Jobs of one kind differ by more than their work: on
the 2-core machine an ALP-KD student (a softmax over every teacher layer per student layer) took 1.5× the
seconds of a logits-only one of the same size, and a student (whose embedding tables are updated every step
but multiply nothing) more per parameter than its teacher. [`JOB_COSTS`][] holds each job's seconds per unit
of work relative to the teacher's, by the student's method or else by the job's kind; [`measured_costs`][]
computes them from recorded runs' timelines (``eta_timeline.json``, logged by every ``kedro run`` of several
jobs), and ``benchmarks/job_costs.py`` prints them for the timelines given with the record they came from.
"""

from __future__ import annotations

import math
from statistics import median
from typing import Any, Iterable, Mapping

#: Seconds per unit of work relative to the teacher's, from the two recorded CPU comparisons of
#: ``tests/experiment/fixtures/eta_timelines`` (``benchmarks/results/job_costs.md``; a test recomputes them):
#: by the student's method, ``student`` the median method's, ``teacher_cache`` a teacher's forward pass.
JOB_COSTS: dict[str, float] = {
    "teacher": 1.0,
    "teacher_cache": 0.64,
    "alp": 0.94,
    "ckd": 0.72,
    "tinybert": 0.7,
    "logits_mse": 0.58,
    "pkd": 0.45,
    "nkd": 0.44,
    "rkd": 0.44,
    "student": 0.58,
}


def _slowdown(load: float | None, cores: int | None) -> float:
    return max(load / cores, 1.0) if load is not None and cores else 1.0


def timeline_costs(timeline: Mapping[str, Any]) -> dict[str, float]:
    """One timeline's trained jobs' median seconds per unit of work (each at the load it ended at) by
    method or kind, relative to its teacher's; empty without a trained teacher."""
    rates: dict[str, list[float]] = {}
    for step in timeline["steps"]:
        if not step.get("job") or step.get("reused") or step.get("repeats") or not step.get("work"):
            continue
        seconds = float(step["seconds"]) / _slowdown(step.get("load"), timeline.get("cores"))
        rates.setdefault(step.get("method") or step["kind"], []).append(seconds / float(step["work"]))
    if "teacher" not in rates:
        return {}
    teacher = median(rates["teacher"])
    return {key: median(values) / teacher for key, values in rates.items()}


def measured_costs(timelines: Iterable[Mapping[str, Any]], students: Iterable[str]) -> dict[str, float]:
    """The geometric mean over ``timelines`` of each key's [`timeline_costs`][], rounded to two decimals;
    ``student``: the median of the ``students`` methods' (what a method not measured is priced at)."""
    per_key: dict[str, list[float]] = {}
    for timeline in timelines:
        for key, cost in timeline_costs(timeline).items():
            per_key.setdefault(key, []).append(cost)
    costs = {key: round(math.exp(sum(map(math.log, v)) / len(v)), 2) for key, v in sorted(per_key.items())}
    methods = [costs[m] for m in students if m in costs]
    if methods:
        costs["student"] = round(median(methods), 2)
    return costs
