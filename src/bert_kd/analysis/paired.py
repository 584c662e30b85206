"""The paired reading of a table whose rows are arms (``paired: {arms: [reference, compared]}`` in
``parameters_reproduce.yml``): per cell (a student, a task) the compared arm against the reference arm on the seeds
both have, each seed's two students distilled from one teacher.

Statistics (``bert_kd.analysis.statistics``): the one-sided paired bootstrap over dev examples with the seeds
pooled, the seed × example variance model where there are ≥ 2 seeds, and Holm's step-down correction across the
table's cells read. The floor is read per student, not per mean:

- a student is **one-class** when its most common predicted class covers ≥ [`ONE_CLASS`][] of the dev examples
  (either class: a student answering the minority class always is one-class too); every cell says how many of each
  arm's students are;
- a teacher at or below its task's majority share is named per seed;
- a cell with a teacher within [`TEACHER_MARGIN`][] of the majority share (or below it) **cannot be read**: its
  students learned from labels that carry little of the task, and no gain there says anything about the arms.

Kedro-free: the records are the trial files' dicts (``spec.trial``, ``result``).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from bert_kd.analysis import statistics as st
from bert_kd.analysis.table import task_label

#: A student answering one class on at least this share of the dev examples is one-class.
ONE_CLASS = 0.95
#: A teacher less than this (accuracy, not points) above its task's majority share makes its cell unreadable.
TEACHER_MARGIN = 0.02
ALPHA = 0.05


@dataclass(frozen=True)
class Arm:
    """One arm of a cell: seed → the trial's result."""

    name: str
    results: Mapping[int, Mapping]


@dataclass(frozen=True)
class Cell:
    """The paired reading of one (row, task): ``compared`` against ``reference`` on ``seeds``."""

    task: str
    row: str
    label: str
    seeds: tuple[int, ...]
    reference: float  # mean dev accuracy of the reference arm on the shared seeds
    compared: float
    test: st.TestResult | None
    seed_example_p: float  # nan with one seed
    majority: float  # the majority class's share of dev (answering it always)
    one_class: tuple[int, int]  # one-class students among the reference arm's and the compared arm's seeds
    teachers: Mapping[int, float]  # seed → the teacher's dev accuracy
    holm_p: float = math.nan

    @property
    def read(self) -> bool:
        return self.test is not None

    @property
    def teachers_at_majority(self) -> tuple[int, ...]:
        """Seeds whose teacher is at or below the majority share."""
        return tuple(s for s, a in self.teachers.items() if a <= self.majority + 1e-12)

    @property
    def unreadable(self) -> bool:
        """A teacher within [`TEACHER_MARGIN`][] of the majority share (or below it)."""
        return any(a < self.majority + TEACHER_MARGIN for a in self.teachers.values())

    @property
    def teacher_mean(self) -> float:
        return float(np.mean(list(self.teachers.values()))) if self.teachers else math.nan


def correctness(result: Mapping) -> np.ndarray:
    return (np.asarray(result["dev_predictions"]) == np.asarray(result["dev_labels"])).astype(np.int8)


def top_share(values: Sequence) -> float:
    """The share of the most common value (a student's most common predicted class; the majority label)."""
    return Counter(values).most_common(1)[0][1] / len(values) if len(values) else math.nan


def one_class(result: Mapping) -> bool:
    return top_share(result["dev_predictions"]) >= ONE_CLASS


def teacher_accuracy(result: Mapping) -> float | None:
    metrics = result.get("teacher_dev_metrics") or {}
    value = metrics.get("accuracy")
    return None if value is None else float(value)


def read_cell(task: str, row: str, label: str, reference: Arm, compared: Arm, resamples: int) -> Cell:
    """The paired reading of one cell (no test where the arms share no seed)."""
    seeds = tuple(sorted(set(reference.results) & set(compared.results)))
    if not seeds:
        return Cell(task, row, label, (), math.nan, math.nan, None, math.nan, math.nan, (0, 0), {})
    b = np.stack([correctness(reference.results[s]) for s in seeds])
    a = np.stack([correctness(compared.results[s]) for s in seeds])
    test = st.bootstrap_test(a, b, resamples=resamples)
    components = st.variance_components(a, b) if len(seeds) > 1 else None
    p2 = st.analytic_p(test.gain, components.gain_variance() ** 0.5) if components else math.nan
    majority = float(np.mean([top_share(reference.results[s]["dev_labels"]) for s in seeds]))
    teachers = {s: t for s in seeds if (t := teacher_accuracy(reference.results[s])) is not None}
    counts = (
        sum(one_class(reference.results[s]) for s in seeds),
        sum(one_class(compared.results[s]) for s in seeds),
    )
    return Cell(task, row, label, seeds, float(b.mean()), float(a.mean()), test, p2, majority, counts, teachers)


def with_holm(cells: list[Cell]) -> list[Cell]:
    """Holm's correction of the one-sided p (gain > 0) across the cells read."""
    import dataclasses

    read = [c for c in cells if c.read]
    adjusted = st.holm([c.test.p for c in read], [c.test.mc_error for c in read]) if read else []
    by_id = {id(c): p for c, (p, _) in zip(read, adjusted)}
    return [dataclasses.replace(c, holm_p=by_id[id(c)]) if id(c) in by_id else c for c in cells]


def cells_of(
    records: Sequence[Mapping], rows: Sequence[Mapping], arms: Sequence[str], tasks: Sequence[str], resamples: int
):
    """Every (task, cell) of the table: ``rows`` are the table's method rows (``name``, ``arm``, ``cell``,
    ``label``), ``records`` its trial files' dicts."""
    by_row: dict[tuple[str, str], dict[int, Mapping]] = {}
    for record in records:
        trial = record["spec"]["trial"]
        by_row.setdefault((trial["method"], trial["task"]), {})[int(trial["seed"])] = record["result"]
    cells = []
    names = list(dict.fromkeys(r["cell"] for r in rows))
    for task in tasks:
        for cell in names:
            members = {r["arm"]: r for r in rows if r["cell"] == cell}
            if not all(arm in members for arm in arms):
                continue
            ref, cmp_ = members[arms[0]], members[arms[1]]
            cells.append(
                read_cell(
                    task,
                    cell,
                    cell_label(ref["label"], cmp_["label"], cell),
                    Arm(arms[0], by_row.get((ref["name"], task), {})),
                    Arm(arms[1], by_row.get((cmp_["name"], task), {})),
                    resamples,
                )
            )
    return with_holm(cells)


def folder_cells(folder, resamples: int = st.RESAMPLES) -> tuple[list[Cell], tuple[str, ...]]:
    """The cells of a paired table's folder (``results/<table>``: its trial files, its table in conf/base), and
    the table's arms."""
    from bert_kd.analysis.table import read_trial, table_spec, trial_files

    sweep = table_spec(folder)
    rows = [{"name": m.name, "arm": m.arm, "cell": m.cell, "label": m.label} for m in sweep.methods]
    records = [read_trial(path) for path in trial_files(folder)]
    return cells_of(records, rows, sweep.arms, sweep.tasks, resamples), sweep.arms


def cell_label(reference: str, compared: str, cell: str) -> str:
    """The words both arms' labels share ("BiLSTM, logits-MSE" of "BiLSTM, logits-MSE, plain"), else the cell's name."""
    common = [a for a, b in zip(reference.split(", "), compared.split(", ")) if a == b]
    return ", ".join(common) or cell


def pct(value: float) -> str:
    return "–" if value is None or math.isnan(value) else f"{100 * value:.2f}"


def header(arms: Sequence[str]) -> str:
    return (
        f"| task | student | seeds | teacher | majority class | {arms[0]} | {arms[1]} | gain (points) | 95% interval "
        "| bootstrap p | Holm p | p (seed + example) | one-class students "
        f"({arms[0]} / {arms[1]}) | teachers at or below the majority (seed) |\n" + "|---" * 14 + "|"
    )


def table_line(cell: Cell) -> str:
    head = f"| {task_label(cell.task)} | {cell.label} |"
    if not cell.read:
        return head + " 0 | | | | | not run yet | | | | | | | |"
    t = cell.test
    at = ", ".join(map(str, cell.teachers_at_majority)) or "none"
    return (
        f"{head} {len(cell.seeds)} | {pct(cell.teacher_mean)} | {pct(cell.majority)} | {pct(cell.reference)} | "
        f"{pct(cell.compared)} | {100 * t.gain:+.2f} | [{100 * t.low:+.2f}, {100 * t.high:+.2f}] | {t.p:.3f} | "
        f"{cell.holm_p:.3f} | {'–' if math.isnan(cell.seed_example_p) else f'{cell.seed_example_p:.3f}'} | "
        f"{cell.one_class[0]} of {len(cell.seeds)} / {cell.one_class[1]} of {len(cell.seeds)} | {at} |"
    )


def sentence(cell: Cell, arms: Sequence[str], family: int) -> str:
    """One cell in words: whether it can be read (its teachers), its students at one class, then its gain."""
    t = cell.test
    n = len(cell.seeds)
    head = (
        f"- {cell.label}, {task_label(cell.task)}: {arms[1]} {pct(cell.compared)} against {arms[0]} {pct(cell.reference)} "
        f"({n} seed{'s' if n != 1 else ''}; gain {100 * t.gain:+.2f} points, 95% interval "
        f"[{100 * t.low:+.2f}, {100 * t.high:+.2f}], Holm p = {cell.holm_p:.3f})"
    )
    teachers = ", ".join(f"{pct(a)} (seed {s})" for s, a in sorted(cell.teachers.items()))
    if cell.unreadable:
        verdict = (
            f"cannot be read: its teachers score {teachers} against a majority share of {pct(cell.majority)}, a "
            f"teacher within {100 * TEACHER_MARGIN:.0f} points of it or below, so their labels carry little of the "
            "task (give the table's teacher more rows: data.<task>.teacher_train_samples)"
        )
    elif cell.holm_p < ALPHA and t.gain > 0:
        verdict = f"a gain that holds after Holm's correction across the {family} cells read"
    elif t.low <= 0 <= t.high:
        verdict = "its interval holds 0: no effect resolved at this size"
    else:
        verdict = f"not a gain after Holm's correction across the {family} cells read"
    floor = ""
    if any(cell.one_class):
        floor = (
            f" One-class students (≥ {100 * ONE_CLASS:.0f}% of dev on one class): {cell.one_class[0]} of {n} "
            f"{arms[0]}, {cell.one_class[1]} of {n} {arms[1]}."
        )
    if cell.teachers_at_majority:
        seeds = cell.teachers_at_majority
        which = f"seed {seeds[0]} is" if len(seeds) == 1 else f"seeds {', '.join(map(str, seeds))} are"
        floor += f" The teacher of {which} at or below the majority share."
    return f"{head}: {verdict}.{floor}"


def reading(cells: Sequence[Cell], arms: Sequence[str]) -> str:
    """The table and one sentence per cell read, then the count of gains that hold on readable cells."""
    lines = [header(arms), *(table_line(c) for c in cells)]
    read = [c for c in cells if c.read]
    text = "\n".join(lines) + "\n\n## Reading\n\n"
    if not read:
        return text + "No pair of trials has finished yet.\n"
    text += "\n".join(sentence(c, arms, len(read)) for c in read)
    held = [c for c in read if not c.unreadable and c.holm_p < ALPHA and c.test.gain > 0]
    unreadable = sum(c.unreadable for c in read)
    students = sum(2 * len(c.seeds) for c in read)
    single = sum(sum(c.one_class) for c in read)
    missing = len(cells) - len(read)
    summary = (
        f"\n\n{len(held)} of the {len(read)} cells read show a gain of {arms[1]} over {arms[0]} that holds after "
        f"Holm's correction; {unreadable} cannot be read (a teacher within {100 * TEACHER_MARGIN:.0f} points of the "
        f"majority share); {single} of the {students} students answer one class on ≥ {100 * ONE_CLASS:.0f}% of dev"
    )
    summary += f"; {missing} of {len(cells)} cells are not run yet.\n" if missing else ".\n"
    return text + summary
