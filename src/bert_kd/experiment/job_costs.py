"""What a training job costs per unit of work, relative to a teacher's (Kedro-free).

[`JobProgress`][bert_kd.experiment.progress.JobProgress] prices a job not run yet from the jobs measured so
far in seconds per unit of work (parameters × epochs). Jobs of one kind differ by more than their work: on
the 2-core machine an ALP-KD student (a softmax over every teacher layer per student layer) took 1.5× the
seconds of a logits-only one of the same size, and a student (whose embedding tables are updated every step
but multiply nothing) more per parameter than its teacher. [`JOB_COSTS`][] holds each job's seconds per unit
of work relative to the teacher's, by the student's method or else by the job's kind; [`measured_costs`][]
computes them from recorded runs' timelines (``eta_timeline.json``, logged by every ``kedro run`` of several
jobs), and ``benchmarks/job_costs.py`` prints them for the timelines given with the record they came from.

Before any job of a run has been measured, a job is priced at [`TEACHER_PACE`][]: a teacher's thread-seconds
per unit of work per training row on the recorded CPU runs ([`teacher_pace`][]), divided by the run's threads.
"""

from __future__ import annotations

import math
from statistics import median
from typing import Any, Iterable, Mapping

#: Seconds per unit of work relative to the teacher's, from the three recorded CPU comparisons of
#: ``tests/experiment/fixtures/eta_timelines`` (``benchmarks/results/job_costs.md``; a test recomputes them):
#: by the student's method, ``student`` the median method's, ``teacher_cache`` a teacher's forward pass,
#: ``evaluate_model`` an evaluation per unit of the forward work of the model it reads.
JOB_COSTS: dict[str, float] = {
    "teacher": 1.0,
    "teacher_cache": 0.66,
    "evaluate_model": 0.63,
    "alp": 0.92,
    "tinybert": 0.8,
    "ckd": 0.7,
    "logits_mse": 0.6,
    "pkd": 0.52,
    "nkd": 0.51,
    "rkd": 0.5,
    "student": 0.6,
}


#: A teacher's thread-seconds per unit of work (parameters × epochs) per training row with a core to itself on
#: the recorded CPU runs that say their threads and rows: the geometric mean of the README's main job
#: (2 threads, 6,000 rows: 168 s) and the quiet comparison (1 thread, 2,000 rows: 190 s) of
#: ``tests/experiment/fixtures/eta_timelines`` ([`teacher_pace`][]; a test recomputes it). What a run's first
#: line prices its jobs at before one of them is measured; a GPU run has no such line.
TEACHER_PACE = 1.31e-9


def slowdown(load: float | None, cores: int | None) -> float:
    """How many times longer a step takes at ``load`` than with a core to itself: the runnable threads share
    the ``cores``, one thread gets cores / load of a core (1 where the load or the cores are unknown)."""
    return max(load / cores, 1.0) if load is not None and cores else 1.0


#: The steps that are no jobs priced by their cost before one of their function is measured (per unit of the
#: forward work of the model they read): the evaluations, a tail of a dozen steps in a comparison.
PRICED_NODES = ("evaluate_model",)


def _rate(step: Mapping[str, Any], cores: int | None) -> tuple[str, float] | None:
    """(method or kind, seconds per unit of work or of size at the load it ended at) of a trained job or a
    priced node; None for any other step."""
    seconds = float(step["seconds"]) / slowdown(step.get("load"), cores)
    if step.get("job"):
        if step.get("reused") or step.get("repeats") or not step.get("work"):
            return None
        return step.get("method") or step["kind"], seconds / float(step["work"])
    if step["kind"] in PRICED_NODES and step.get("size"):
        return step["kind"], seconds / float(step["size"])
    return None


def timeline_costs(timeline: Mapping[str, Any]) -> dict[str, float]:
    """One timeline's trained jobs' median seconds per unit of work (each at the load it ended at) by
    method or kind, and its evaluations' per unit of size, relative to its teacher's seconds per unit of work;
    empty without a trained teacher."""
    rates: dict[str, list[float]] = {}
    for step in timeline["steps"]:
        if (found := _rate(step, timeline.get("cores"))) is not None:
            rates.setdefault(found[0], []).append(found[1])
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


def teacher_pace(timelines: Iterable[Mapping[str, Any]]) -> float | None:
    """The geometric mean over ``timelines`` that record their ``threads`` and ``train_rows`` of their trained
    teachers' thread-seconds per unit of work per training row (each at the load it ended at), to three
    significant digits; None where no timeline says both."""
    paces = []
    for timeline in timelines:
        threads, rows = timeline.get("threads"), timeline.get("train_rows")
        if not threads or not rows:
            continue
        for step in timeline["steps"]:
            found = _rate(step, timeline.get("cores"))
            if found is not None and found[0] == "teacher" and step.get("job"):
                paces.append(found[1] * threads / rows)
    if not paces:
        return None
    return float(f"{math.exp(sum(map(math.log, paces)) / len(paces)):.3g}")
