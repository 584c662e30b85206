"""An overall progress line for a run of several training jobs, and how far off it was (Kedro-free).

``kedro run`` counts nodes ("k of 57 tasks"); what takes the time is the training jobs (a teacher,
its output cache, each student). [`JobProgress`][] knows every
step of the run in run order and estimates the time left as the sum of a price for each step not
finished yet. Every price is a **median** of the latest steps of its kind this run measured (one
job slowed by other work on the machine does not set the price of the rest, and the machine's speed
follows its load) and, where a step's size is known, a **rate** (measured seconds per unit of size)
times that step's size:

- a job is priced from the jobs of its own kind trained so far in this run (seconds per unit of
  work, work = parameters × epochs), mixed with the price of a reused job in the share in which
  this kind was reused; each job's seconds per unit of work are divided by its **cost** (its method's
  for a student, its kind's otherwise: [`bert_kd.experiment.job_costs.JOB_COSTS`][], measured on
  recorded runs) and the price multiplied by the priced job's, so an ALP-KD student measured first does
  not price a logits-only student at its own 1.5×;
- a job that repeats an earlier job of the run (the same job under another row's name) is priced as
  a reused one: the store hands it the first job's result;
- a kind not measured yet is priced at the median seconds per unit of work of the jobs trained so
  far (a student from the teacher it is distilled from and its cache), else at their median;
- every other step (evaluations, figures, the comparison: the evaluation tail) is priced from the
  steps of its own function measured so far, per unit of the forward work of the model it reads
  (parameters outside the embedding tables: a 2-layer student's evaluation costs about a third of
  its 6-layer teacher's), else at the median of every such step;
- every measured step counts at the load it ended at and every price is at the load of the line: one
  thread gets cores / load of a core ([`JobProgress.slowdown`][]).

Before any job is measured (the first line; a run whose teacher came from the store), a job is priced at the
recorded CPU runs' pace, [`TEACHER_PACE`][bert_kd.experiment.job_costs.TEACHER_PACE] thread-seconds per unit of
work per training row, over the run's threads, at its cost; a job whose work is not known yet at the work of
the largest job known, an evaluation at its cost per unit of its size; the line says so (``from recorded
runs``). Without a pace (a GPU run, the rows or threads unknown) no estimate exists before the first job
finishes. Each progress line is kept with the time it
was shown ([`EtaCheck`][]); at the end of the run
[`JobProgress.checks`][] sets each estimate against the
time that was actually left, and [`replay`][] computes the same lines from a recorded
[`JobProgress.timeline`][] without running anything. The line says when the machine is busy
(load average above the cores): then every estimate is the busy machine's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from statistics import fmean, median
from typing import Any, Callable, Mapping, Sequence

from bert_kd.core.machine import busy_note, machine_load
from bert_kd.experiment.job_costs import JOB_COSTS, TEACHER_PACE, slowdown

#: How many of the latest measured steps set a price: the machine's speed drifts with the other work on
#: it, and the latest steps ran at the speed the next ones will see.
RECENT = 3

#: The price of a reused job before any was measured: loading a stored model took 0.2–0.5 s on the 2-core machine.
REUSED_PRIOR_SECONDS = 1.0


def duration_text(seconds: float) -> str:
    """``~40 s``, ``~4 min``, ``~1.6 h``."""
    if seconds < 90:
        return f"~{max(round(seconds), 1)} s"
    if seconds < 90 * 60:
        return f"~{round(seconds / 60)} min"
    return f"~{seconds / 3600:.1f} h"


@dataclass
class Step:
    """One step of the run: a training job (``job``: its kind) or another node (``kind``: its function).
    ``repeats``: the earlier job this one is the same job as; ``work``: a job's parameters × epochs,
    ``size``: the forward work of the model another node reads, each once known; ``load_start``, ``load``:
    the 1-minute load average when it started and when it ended (the load of its last minute), where measured;
    ``method``: a student job's distillation method (its recipe's ``method``), what its cost is looked up by;
    ``rows``: a job's training rows per epoch, where known."""

    name: str
    kind: str
    job: bool = False
    method: str | None = None
    repeats: str | None = None
    work: float | None = None
    size: float | None = None
    seconds: float | None = None
    reused: bool = False
    load_start: float | None = None
    load: float | None = None
    rows: float | None = None


@dataclass(frozen=True)
class EtaCheck:
    """One progress line: the job it announced, the estimate it showed and, at the end, the time actually left."""

    job: int
    name: str
    shown_at: float
    estimate: float | None
    actual: float | None = None

    @property
    def error(self) -> float | None:
        """(estimate − actual) / actual: +0.3 is 30% too long, −0.3 30% too short."""
        if self.estimate is None or not self.actual:
            return None
        return (self.estimate - self.actual) / self.actual


@dataclass
class JobProgress:
    """The steps of one run in run order, their measured seconds and the progress lines shown. ``pace``: a
    teacher's thread-seconds per unit of work per training row before any job is measured (None: no estimate
    before the first job ends); ``threads``: the run's torch threads, what ``pace`` is divided by."""

    steps: Sequence[Step]
    clock: Callable[[], float] = time.monotonic
    sample_load: bool = False
    cores: int | None = None
    shown: list[EtaCheck] = field(default_factory=list)
    began: dict[str, float] = field(default_factory=dict)
    costs: Mapping[str, float] = field(default_factory=dict)
    pace: float | None = None
    threads: int | None = None

    def __post_init__(self) -> None:
        self.steps = list(self.steps)
        self.by_name = {step.name: step for step in self.steps}
        self.jobs = [step.name for step in self.steps if step.job]
        self.now = 1.0  # the slowdown of the load now (seconds_left)

    @property
    def total(self) -> int:
        return len(self.jobs)

    def begin(self, name: str) -> None:
        """``name`` starts now."""
        self.began[name] = self.clock()
        self.by_name[name].load_start = self._sample()

    def end(self, name: str, reused: bool = False) -> None:
        """``name`` ended now (``reused``: the job's result came from the store)."""
        step = self.by_name[name]
        step.seconds = self.clock() - self.began.pop(name, self.clock())
        step.reused = bool(reused)
        step.load = self._sample()

    def _sample(self) -> float | None:
        """The load average now where ``sample_load`` (else None)."""
        if not self.sample_load:
            return None
        load, self.cores = machine_load()
        return load

    def slowdown(self, load: float | None) -> float:
        """How many times longer a step takes at ``load`` than with a core to itself: the runnable threads
        share the cores, one thread gets cores / load of a core (1 where the load or the cores are unknown)."""
        return slowdown(load, self.cores)

    def cost(self, step: Step) -> float:
        """``step``'s seconds per unit of work relative to a teacher's: its method's cost, else its kind's, else 1."""
        return float(self.costs.get(step.method or step.kind, self.costs.get(step.kind, 1.0)))

    def set_work(self, name: str, work: float | None) -> None:
        """``name``'s work (parameters × epochs), for pricing a job kind not measured yet."""
        if name in self.by_name and work:
            self.by_name[name].work = float(work)

    def set_rows(self, name: str, rows: float | None) -> None:
        """``name``'s training rows per epoch, for pricing jobs at the recorded pace before one is measured."""
        if name in self.by_name and rows:
            self.by_name[name].rows = float(rows)

    def prior_rate(self) -> float | None:
        """Seconds per unit of work of a teacher with a core to itself before any job is measured: the ``pace``
        times the run's training rows (the latest known) over its threads; None without all three."""
        rows = [s.rows for s in self.steps if s.job and s.rows]
        if not self.pace or not self.threads or not rows:
            return None
        return self.pace * rows[-1] / self.threads

    def _prior_work(self, step: Step) -> float | None:
        """``step``'s work, else the largest job's known (a student's start is built after its teacher trains)."""
        known = [s.work for s in self.steps if s.job and s.work and s.repeats is None]
        return step.work or (max(known) if known else None)

    def _priced_from_pace(self) -> bool:
        """Whether the prices come from the recorded pace: no job trained yet, and a pace to price with."""
        trained = [s for s in self._done(job=True) if not s.reused and s.repeats is None]
        return not trained and self.prior_rate() is not None

    def set_size(self, name: str, size: float | None) -> None:
        """The forward work of the model ``name`` reads, for pricing it from its function's other steps."""
        if name in self.by_name and size:
            self.by_name[name].size = float(size)

    def _done(self, job: bool) -> list[Step]:
        return [s for s in self.steps if s.seconds is not None and s.job == job]

    def job_price(self, step: Step) -> float | None:
        """The estimated seconds of the job ``step`` (None when nothing is measured yet)."""
        done = self._done(job=True)
        reused = [s.seconds for s in done if s.reused]
        reuse_price = median(reused) if reused else REUSED_PRIOR_SECONDS
        if step.repeats is not None:
            return reuse_price
        trained = [s for s in done if not s.reused]
        own = [s for s in done if s.kind == step.kind and s.repeats is None]
        if own:
            own_trained = [s for s in own if not s.reused]
            share = sum(s.reused for s in own) / len(own)
            trained_price = self._scaled(own_trained, step, "work") if own_trained else 0.0
            return share * reuse_price + (1 - share) * trained_price
        if trained:
            return self._scaled(trained, step, "work")
        rate, work = self.prior_rate(), self._prior_work(step)
        if rate is not None and work:  # nothing trained yet: the recorded runs' pace
            return rate * work * self.cost(step) * self.now
        return reuse_price if done else None

    def node_price(self, step: Step) -> float:
        """The estimated seconds of a step that is no job: from its function's steps so far (per unit of
        the model's forward work where known); before any, from the trained jobs' seconds per unit of work at
        its function's cost per unit of its size (an evaluation: ``costs["evaluate_model"]``); else the median
        of every such step."""
        done = self._done(job=False)
        own = [s for s in done if s.kind == step.kind]
        if own:
            return self._scaled(own, step, "size")
        trained = [s for s in self._done(job=True) if not s.reused and s.repeats is None and s.work]
        if step.size and step.kind in self.costs and trained:  # not measured yet: at its cost per unit of size
            rate = median(s.seconds / self.slowdown(s.load) / self.cost(s) / s.work for s in trained[-RECENT:])
            return rate * step.size * self.costs[step.kind] * self.now
        prior = self.prior_rate()
        if step.size and step.kind in self.costs and not trained and prior is not None:
            return prior * step.size * self.costs[step.kind] * self.now
        return median(s.seconds / self.slowdown(s.load) for s in done) * self.now if done else 0.0

    def _scaled(self, done: Sequence[Step], step: Step, measure: str) -> float:
        """[`scaled_price`][] of ``done``'s seconds each at its own load and cost, at the load now."""
        cost = self.cost if measure == "work" else None
        return scaled_price(done, step, measure, self.slowdown, cost) * self.now

    def seconds_left(self, load: float | None = None) -> float | None:
        """The estimated seconds of the steps not finished yet at ``load`` (the load average now; None: every
        step at the load it ran), None before any job finished unless the recorded pace prices them."""
        if not self._done(job=True) and self.prior_rate() is None:
            return None
        self.now = self.slowdown(load)
        pending = [s for s in self.steps if s.seconds is None]
        return sum((self.job_price(s) or 0.0) if s.job else self.node_price(s) for s in pending)

    def line(self, load: float | None = None, cores: int | None = None) -> str:
        """``job 3 of 9, ~4 min left, machine busy: load 3.1 on 2 cores`` for the next job to run
        (``load``/``cores``: default this machine's now)."""
        if load is None and cores is None:
            load, cores = machine_load()
        number = min(len(self._done(job=True)) + 1, self.total)
        parts = [f"job {number} of {self.total}"]
        left = self.seconds_left(load)
        if left is None:
            parts.append("time left known after the first job")
        else:
            parts.append(f"{duration_text(left)} left" + (" from recorded runs" if self._priced_from_pace() else ""))
        busy = busy_note(load, cores)
        if busy:
            parts.append(busy)
        return ", ".join(parts)

    def announce(self, name: str, load: float | None = None, cores: int | None = None) -> str:
        """The progress line before job ``name``, kept for [`checks`][]."""
        if load is None and cores is None:
            load, cores = machine_load()
        text = self.line(load, cores)
        number = self.jobs.index(name) + 1 if name in self.jobs else len(self.shown) + 1
        self.shown.append(EtaCheck(number, name, self.clock(), self.seconds_left(load)))
        return text

    def checks(self) -> list[EtaCheck]:
        """Every progress line shown, with the time actually left from it to now (the end of the run)."""
        now = self.clock()
        return [EtaCheck(c.job, c.name, c.shown_at, c.estimate, now - c.shown_at) for c in self.shown]

    def timeline(self) -> dict[str, Any]:
        """The cores and every step in run order with what pricing reads (kind, repeats, work, size, loads)
        and what it took, for [`replay`][]."""
        return {
            "cores": self.cores,
            "threads": self.threads,
            "train_rows": next((s.rows for s in reversed(self.steps) if s.job and s.rows), None),
            "steps": [{key: getattr(step, key) for key in TIMELINE_KEYS} for step in self.steps],
        }


#: What [`JobProgress.timeline`][] keeps of each step.
TIMELINE_KEYS = (
    "name", "kind", "job", "method", "repeats", "work", "size", "seconds", "reused", "load_start", "load", "rows"
)  # fmt: skip


def scaled_price(
    done: Sequence[Step],
    step: Step,
    measure: str,
    slowdown: Callable[[float | None], float],
    cost: Callable[[Step], float] | None = None,
) -> float:
    """The median seconds per unit of ``measure`` (``work`` or ``size``) of the [`RECENT`][] latest of
    ``done``, each divided by the ``slowdown`` of the load it ran at and by its ``cost``, times ``step``'s
    measure and cost, where both are known; else their median seconds so divided, times ``step``'s cost."""
    done = list(done)[-RECENT:]
    cost = cost or (lambda _step: 1.0)
    own = getattr(step, measure)
    rates = [s.seconds / slowdown(s.load) / cost(s) / getattr(s, measure) for s in done if getattr(s, measure)]
    if own and rates:
        return median(rates) * own * cost(step)
    return median(s.seconds / slowdown(s.load) / cost(s) for s in done) * cost(step)


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def load_ahead(records: Sequence[Mapping[str, Any]]) -> float | None:
    """The mean load over ``records`` (each step's mean of its start and end load, weighted by its seconds):
    the load a line would price at if it knew the load to come. None where no load was recorded."""
    loads = [(float(r["seconds"]), r.get("load_start"), r.get("load")) for r in records]
    loads = [(seconds, (start + end) / 2) for seconds, start, end in loads if start is not None and end is not None]
    total = sum(seconds for seconds, _ in loads)
    return sum(seconds * load for seconds, load in loads) / total if total else None


def replay(
    timeline: Mapping[str, Any],
    costs: Mapping[str, float] | None = None,
    ahead: bool = False,
    pace: float | None = TEACHER_PACE,
) -> list[EtaCheck]:
    """The progress lines a run with this [`timeline`][JobProgress.timeline] showed, each checked
    against the time that was left, computed without running anything: each line at the load its job
    started at (``ahead``: at the [`load_ahead`][] of the steps left, which no run knows: what the pricing
    gives when the load is foreseen), jobs at ``costs`` (default
    [`JOB_COSTS`][bert_kd.experiment.job_costs.JOB_COSTS]), before the first job measured at ``pace`` (default
    [`TEACHER_PACE`][bert_kd.experiment.job_costs.TEACHER_PACE]) where the timeline says its ``threads`` and
    ``train_rows``. Each step's work and size are known from the start (in a run they are once the models are
    built, before the second job)."""
    clock, records = _Clock(), timeline["steps"]
    fields = ("name", "kind", "method", "repeats", "work", "size")
    steps = [Step(job=bool(r.get("job")), **{key: r.get(key) for key in fields}) for r in records]
    costs = JOB_COSTS if costs is None else costs
    rows = timeline.get("train_rows")
    for step in steps:
        step.rows = rows if step.job else None
    progress = JobProgress(
        steps, clock, cores=timeline.get("cores"), costs=costs, pace=pace, threads=timeline.get("threads")
    )
    for index, (record, step) in enumerate(zip(records, steps)):
        if step.job:
            load = load_ahead(records[index:]) if ahead else record.get("load_start")
            progress.announce(step.name, load=load, cores=progress.cores or 1)
        progress.begin(step.name)
        clock.now += float(record["seconds"])
        progress.end(step.name, reused=bool(record.get("reused")))
        step.load = record.get("load")
    return progress.checks()


def check_table(checks: Sequence[EtaCheck]) -> str:
    """The estimates against the time actually left, as a Markdown table."""
    rows = ["| job | step | estimated left | actually left | off by |", "|---|---|---|---|---|"]
    for c in checks:
        estimate = f"{c.estimate:.0f} s" if c.estimate is not None else "none yet"
        off = f"{c.error:+.0%}" if c.error is not None else ""
        rows.append(f"| {c.job} | {c.name} | {estimate} | {c.actual or 0:.0f} s | {off} |")
    return "\n".join(rows)


def check_metrics(checks: Sequence[EtaCheck]) -> dict[str, float]:
    """``eta/max_abs_error`` and ``eta/mean_abs_error`` (fractions of the time actually left) over the lines with an estimate."""
    errors = [abs(c.error) for c in checks if c.error is not None]
    if not errors:
        return {}
    return {"eta/max_abs_error": max(errors), "eta/mean_abs_error": fmean(errors), "eta/lines": float(len(errors))}
