"""Whether a comparison table has a best student, which rows tie at its top, and why there may be none.

A short run where every student predicts the majority class gives identical rows; naming one of
them "best" misleads, and so does crowning the top scorer of rows that one dev-set run cannot tell
apart. Every comparison table therefore carries the majority-class row (every dev example given
the most frequent dev label, the floor a student must beat), and [`comparison_verdict`][]
crowns the top row only when it beats the runner-up by more than the table's noise, or when an
exact McNemar test on the two rows' dev predictions separates them; otherwise it names the tied
rows. When the teacher itself sits at the floor, the verdict says so: the students had nothing to
learn.

The noise of a one-seed table on ``n`` dev examples is taken as the largest standard error of a
proportion measured on ``n`` examples, ``0.5 / √n`` (872 SST-2 dev examples: ±1.7 points; 408
MRPC: ±2.5): two scores closer than that cannot be told apart by one run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from bert_kd.core.data.glue import get_task
from bert_kd.core.metrics import glue_metrics

#: The ``method`` of the majority-class row in every comparison table.
MAJORITY_METHOD = "majority class"
#: Significance level of the paired test that may separate two rows within the noise band.
PAIRED_TEST_ALPHA = 0.05

#: ``Verdict.kind`` values: one clear winner; a tie at the top; every student at the majority class;
#: the teacher itself at the majority class; no student scored.
WINNER, TIE, FLOOR, TEACHER_FLOOR, EMPTY = "winner", "tie", "floor", "teacher_floor", "empty"


def majority_class_metrics(task: str, labels: Sequence) -> dict[str, float] | None:
    """GLUE metrics of predicting the most frequent label for every example (None for
    regression, where a constant prediction has no correlation)."""
    spec = get_task(task)
    y = np.asarray(labels)
    if spec.is_regression or y.size == 0:
        return None
    majority = np.bincount(y.astype(int), minlength=spec.num_labels).argmax()
    return {k: float(v) for k, v in glue_metrics(spec.name, np.full(len(y), majority), y).items()}


def noise_tolerance(n_examples: int | None) -> float:
    """``0.5 / √n``: the largest standard error of a proportion on ``n`` dev examples (0 when unknown)."""
    return 0.5 / math.sqrt(n_examples) if n_examples else 0.0


def mcnemar_exact(correct_a: Sequence[int] | str, correct_b: Sequence[int] | str) -> float:
    """Two-sided exact McNemar p-value of two models scored on the same examples (``1``/``0`` per
    example, or a string of ``"1"``/``"0"``): a binomial test of the discordant pairs at ½."""
    from scipy.stats import binomtest

    a, b = (np.asarray([int(c) for c in v], dtype=int) for v in (correct_a, correct_b))
    if a.shape != b.shape:
        raise ValueError(f"mcnemar_exact: {a.size} and {b.size} examples; a paired test needs the same examples")
    only_a, only_b = int(((a == 1) & (b == 0)).sum()), int(((a == 0) & (b == 1)).sum())
    return 1.0 if only_a + only_b == 0 else float(binomtest(only_a, only_a + only_b, 0.5).pvalue)


@dataclass(frozen=True)
class Verdict:
    """The verdict on a comparison table (plain data the table, the parent run and the registry read).

    ``kind``: `WINNER`, `TIE`, `FLOOR`, `TEACHER_FLOOR` or `EMPTY`.
    ``best``: the crowned row (only for a winner). ``top``: the highest-scoring row (what a tie
    registers, tagged as such). ``tied``: the rows tied at the top, ``top`` first, rows that are
    the same job included (empty unless a tie). ``same_as``: row → the row whose job it is (rows
    that connect the same layers with the same weights are trained once). ``warning``: the
    sentence for the table, the parent run and the log when no row is crowned. ``tolerance``: the
    noise band. ``p_runner_up``: the exact McNemar p-value of ``top`` against the runner-up (None
    without predictions)."""

    best: str | None
    warning: str | None
    tolerance: float
    kind: str = WINNER
    top: str | None = None
    tied: tuple[str, ...] = ()
    same_as: Mapping[str, str] = field(default_factory=dict)
    p_runner_up: float | None = None

    def tags(self) -> dict[str, str]:
        """Registry/run tags: ``bert_kd.verdict`` (the kind) and, for a tie, ``bert_kd.tied`` (the rows)."""
        tags = {"bert_kd.verdict": self.kind}
        if self.tied:
            tags["bert_kd.tied"] = ", ".join(self.tied)
        return tags


def comparison_verdict(
    scores: Mapping[str, float],
    majority: float | None,
    tolerance: float,
    metric: str = "score",
    *,
    teacher: float | None = None,
    same_as: Mapping[str, str] | None = None,
    correct: Mapping[str, Sequence[int] | str] | None = None,
    alpha: float = PAIRED_TEST_ALPHA,
) -> Verdict:
    """``scores``: each student row's primary metric; ``teacher``: the teacher's; ``same_as``: row →
    the earlier row that is the same job (its score is not a second opinion); ``correct``: per-row
    dev correctness for the paired test.

    No best student when the teacher is within ``tolerance`` of the majority class, when every
    student is, or when the top row is within ``tolerance`` of another row that an exact McNemar
    test (``p < alpha``, where both rows have predictions) does not separate from it: those rows tie."""
    finite = {name: float(s) for name, s in scores.items() if s is not None and math.isfinite(float(s))}
    same_as = {
        row: first for row, first in (same_as or {}).items() if row in finite and first in finite and row != first
    }
    if not finite:
        return Verdict(None, "no student has a score", tolerance, kind=EMPTY, same_as=same_as)
    band = f"±{tolerance:.4f}" if tolerance else "exactly"
    floor_known = majority is not None and math.isfinite(majority)
    if floor_known and teacher is not None and math.isfinite(teacher) and teacher - majority <= tolerance:
        return Verdict(
            None,
            f"the teacher itself ties with the majority class ({metric} {teacher:.4f} against "
            f"{majority:.4f}, {band}): it learned nothing to distil, so the students cannot be "
            "compared; train the teacher on more rows or for more epochs; no best student",
            tolerance,
            kind=TEACHER_FLOOR,
            same_as=same_as,
        )
    if floor_known and all(abs(s - majority) <= tolerance for s in finite.values()):
        return Verdict(
            None,
            f"every student ties with the majority class ({metric} {majority:.4f}, {band}): "
            "no student learned more than the label prior; no best student",
            tolerance,
            kind=FLOOR,
            same_as=same_as,
        )
    jobs = sorted((row for row in finite if row not in same_as), key=lambda row: -finite[row])
    top = jobs[0]
    correct = correct or {}

    def paired_p(row: str) -> float | None:
        return mcnemar_exact(correct[top], correct[row]) if top in correct and row in correct else None

    p_runner_up = paired_p(jobs[1]) if len(jobs) > 1 else None
    tied_jobs = [
        row
        for row in jobs[1:]
        if finite[top] - finite[row] <= tolerance and not ((p := paired_p(row)) is not None and p < alpha)
    ]
    if not tied_jobs:
        return Verdict(top, None, tolerance, kind=WINNER, top=top, same_as=same_as, p_runner_up=p_runner_up)
    tied = tuple(r for job in (top, *tied_jobs) for r in (job, *[d for d, first in same_as.items() if first == job]))
    names = ", ".join(with_duplicates(job, same_as) for job in (top, *tied_jobs))
    low = min(finite[row] for row in tied_jobs)
    test = "; no exact McNemar test on the dev predictions separates them" if correct else ""
    return Verdict(
        None,
        f"tied: {names} ({metric} {low:.4f}–{finite[top]:.4f}, within {band} of the top score, the "
        f"noise of one dev-set run{test}): no best student",
        tolerance,
        kind=TIE,
        top=top,
        tied=tied,
        same_as=same_as,
        p_runner_up=p_runner_up,
    )


#: Seeds that [`deciding_command`][] adds to a one-seed table's seed.
MORE_SEEDS = (43, 44, 45, 46)


def deciding_command(
    pipeline: str | None,
    seeds: Sequence[int] = MORE_SEEDS,
    env: str | None = None,
    params: Mapping[str, object] | None = None,
) -> str:
    """The command that can decide a tie, runnable as printed: the same table trained again with more
    seeds (each seed is one more dev-set run of every tied row; rows separate once their gap outgrows
    the spread over seeds, as in the sweeps' seeded tables), with the run's ``--env`` and ``--params``
    (``params``: dotted keys as ``--params`` takes them; the loop sets ``seed``)."""
    given = [_escaped(f"{key}={_param_text(value)}") for key, value in (params or {}).items() if key != "seed"]
    quoted = ",".join([*given, "seed=$seed"])
    env_option = f" --env {env}" if env else ""
    return (
        f"for seed in {' '.join(map(str, seeds))}; do kedro run{env_option} --pipelines={pipeline or '<pipeline>'} "
        f'--params "{quoted}"; done'
    )


def _escaped(text: str) -> str:
    """``text`` as it must stand between double quotes in a shell."""
    for char in '\\"$`':
        text = text.replace(char, "\\" + char)
    return text


def _param_text(value: object) -> str:
    """A parameter's value as ``--params`` reads it back (``true``, ``null``, ``0.0001``, ``1 2``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


def tied_alias(row: str) -> str:
    """The registry alias of one tied row's version (``tied-alp_no``; ``tied-okd-a-b`` for ``okd[a+b]``):
    letters, digits, ``_`` and ``-`` only, as MLflow's aliases."""
    import re

    return "tied-" + (re.sub(r"[^A-Za-z0-9_-]+", "-", row).strip("-") or "row")


def tied_name(name: str, row: str, verdict: Verdict) -> str:
    """A figure's ``name`` for ``row``, marked ``(tied)`` when the verdict names the row among those tied at the top."""
    return f"{name} (tied)" if row in verdict.tied else name


def with_duplicates(row: str, same_as: Mapping[str, str]) -> str:
    """``alp (= alp_no, alp_po)``: a row with the rows that are the same job."""
    duplicates = [d for d, first in same_as.items() if first == row]
    return f"{row} (= {', '.join(duplicates)})" if duplicates else row


def duplicate_rows(keys: Mapping[str, str | None], preferred=()) -> dict[str, str]:
    """Row → the row with the same job key that stands for it: the first of its group in
    ``preferred`` (e.g. the rows named after their method), else the first in order. Rows without a
    key are never duplicates."""
    groups: dict[str, list[str]] = {}
    for row, key in keys.items():
        if key is not None:
            groups.setdefault(key, []).append(row)
    same: dict[str, str] = {}
    for rows in groups.values():
        first = next((r for r in rows if r in preferred), rows[0])
        same.update({row: first for row in rows if row != first})
    return same
