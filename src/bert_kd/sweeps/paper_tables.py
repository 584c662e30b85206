"""Tables shaped like the papers' (task columns + Average, a teacher row, % of the teacher kept),
each cell ``mean ± std (n)`` over seeds of the selected grid point, with a marker when the
method's gain over the plain baseline is significant; written as CSV + Markdown + PNG.

Every number is in the papers' metric for the task ([`bert_kd.core.metrics.paper_metric`][]: MCC
for CoLA, Pearson for STS-B, accuracy elsewhere); the long CSV adds the GLUE ``combined`` score
((acc + F1)/2 for MRPC/QQP, (Pearson + Spearman)/2 for STS-B) and MNLI's mismatched score.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from bert_kd.core.data.glue import TASKS  # noqa: E402
from bert_kd.core.files import write_file_atomically  # noqa: E402
from bert_kd.core.metrics import glue_metrics, metric_label, paper_metric, primary_metric  # noqa: E402
from bert_kd.core.reports.markdown_tables import markdown_table  # noqa: E402
from bert_kd.sweeps.selection import per_method_task, select_best, summarize  # noqa: E402
from bert_kd.sweeps.significance import paired_bootstrap  # noqa: E402
from bert_kd.sweeps.spec import SweepSpec  # noqa: E402

AVERAGE = "Average"
MARKER = "*"
SIGNIFICANT, NOT_SIGNIFICANT, UNTESTED = "#C44E52", "#4C72B0", "#AAAAAA"
MAJORITY = "Majority class"
NOT_RUN = "·"  # the table does not run this method on this task ("–" = run, but no finished trial)


@dataclass(frozen=True)
class SweepReport:
    """Long table (one row per method × task, plus Average) and the paper-shaped wide table."""

    long: pd.DataFrame
    wide: pd.DataFrame
    caption: str
    provenance: str = ""  # the command and commit that wrote the tables (a line under the caption)
    warnings: tuple[str, ...] = ()  # per task: every method ties (bert_kd.core.reports.verdict); not part of the tables
    mixed_teachers: tuple[str, ...] = ()  # rows whose seeds were distilled from different teachers (teacher_mismatches)


def _task_label(task: str) -> str:
    return TASKS[task].dir_name


def _cell(mean: float, std: float, n: int, marker: str = "") -> str:
    if n == 0 or math.isnan(mean):
        return "–"
    spread = "–" if math.isnan(std) else f"{100 * std:.2f}"
    return f"{100 * mean:.2f} ± {spread} ({n}){marker}"


def build_report(
    sweep: SweepSpec, results: Mapping[str, dict], *, resamples: int = 1000, seed: int = 0, alpha: float = 0.05
) -> SweepReport:
    """Select, aggregate over seeds and test every method against ``sweep.baseline``."""
    chosen = select_best(sweep, results)
    grouped = per_method_task(chosen)
    rows = []
    teacher = {}
    for task in sweep.tasks:  # the teacher's dev score as reported by the trials of this task
        scores = [
            teacher_score(s.result, task) for (_, t), seeds in grouped.items() if t == task for s in seeds.values()
        ]
        scores = [v for v in scores if v is not None]
        teacher[task] = float(np.mean(scores)) if scores else float("nan")
    for method in sweep.methods:
        per_seed_task: dict[int, dict[str, float]] = {}
        method_tasks = sweep.tasks_of(method)
        for task in method_tasks:
            seeds = grouped.get((method.name, task), {})
            summary = summarize([seeds[s].dev_metric for s in sorted(seeds)])
            for s, selected in seeds.items():
                per_seed_task.setdefault(s, {})[task] = selected.dev_metric
            test = _significance(sweep, grouped, method, task, resamples, seed)
            combined = summarize([seeds[s].combined_metric for s in sorted(seeds)])
            mismatched = summarize(
                [
                    seeds[s].result["dev_metrics_mismatched"][paper_metric(task)]
                    for s in sorted(seeds)
                    if "dev_metrics_mismatched" in seeds[s].result
                ]
            )
            rows.append(
                {
                    "method": method.name,
                    "label": method.label,
                    "task": task,
                    "mean": summary.mean,
                    "std": summary.std,
                    "n": summary.n,
                    "seeds": " ".join(map(str, sorted(seeds))),
                    "chosen": "; ".join(f"seed {s}: {_point(seeds[s].spec.params)}" for s in sorted(seeds)),
                    "gain": test.gain if test else float("nan"),
                    "p_value": test.p_value if test else float("nan"),
                    "significant": bool(test and test.significant(alpha)),
                    "metric": paper_metric(task),
                    "combined_metric": primary_metric(task),
                    "combined_mean": combined.mean,
                    "combined_std": combined.std,
                    "mismatched_mean": mismatched.mean,
                    "mismatched_std": mismatched.std,
                }
            )
        complete = [s for s, per_task in per_seed_task.items() if all(t in per_task for t in method_tasks)]
        average = summarize([np.mean([per_seed_task[s][t] for t in method_tasks]) for s in sorted(complete)])
        rows.append(
            {
                "method": method.name,
                "label": method.label,
                "task": AVERAGE,
                "mean": average.mean,
                "std": average.std,
                "n": average.n,
                "seeds": " ".join(map(str, sorted(complete))),
                "chosen": "",
                "gain": float("nan"),
                "p_value": float("nan"),
                "significant": False,
                "metric": "",
                "combined_metric": "",
                "combined_mean": float("nan"),
                "combined_std": float("nan"),
                "mismatched_mean": float("nan"),
                "mismatched_std": float("nan"),
            }
        )
    long = pd.DataFrame(rows)
    teacher_average = float(np.mean([teacher[t] for t in sweep.tasks])) if sweep.tasks else float("nan")
    majority = {task: majority_class_score(task, grouped) for task in sweep.tasks}
    majority_average = float(np.mean(list(majority.values()))) if majority else float("nan")
    majority_kept = 100 * majority_average / teacher_average if teacher_average else float("nan")

    columns = [_task_label(t) for t in sweep.tasks] + [AVERAGE, "% of teacher"]
    wide_rows = {
        "Teacher": [_plain(teacher[t]) for t in sweep.tasks] + [_plain(teacher_average), _kept(teacher.values())],
        MAJORITY: [_plain(majority[t]) for t in sweep.tasks]
        + [_plain(majority_average), "–" if math.isnan(majority_kept) else f"{majority_kept:.1f}"],
    }
    for method in sweep.methods:
        cells = []
        for task in sweep.tasks + (AVERAGE,):
            match = long[(long.method == method.name) & (long.task == task)]
            if match.empty:  # the table does not run this method on this task
                cells.append(NOT_RUN)
                continue
            row = match.iloc[0]
            cells.append(_cell(row["mean"], row["std"], int(row["n"]), MARKER if row["significant"] else ""))
        average = long[(long.method == method.name) & (long.task == AVERAGE)].iloc[0]["mean"]
        reference = float(np.mean([teacher[t] for t in sweep.tasks_of(method)]))
        kept = 100 * average / reference if reference and not math.isnan(reference) else float("nan")
        cells.append("–" if math.isnan(kept) else f"{kept:.1f}")
        wide_rows[method.label] = cells
    wide = pd.DataFrame.from_dict(wide_rows, orient="index", columns=columns)
    wide.index.name = "Model"
    caption = (
        f"{sweep.description or sweep.table}. Dev-set scores ×100 in the papers' metric "
        f"({_metric_sentence(sweep.tasks)}; ALP-KD Table 1, TED Table 14; the CSV adds the GLUE combined score), "
        f"mean ± std over seeds (n = seeds). {_selection_sentence(sweep, chosen)} "
        f"{NOT_RUN} = not part of this table; % of teacher = Average / the teacher's average on the same tasks; "
        f"{MAJORITY} = every dev example given the most frequent dev label (the floor a student must beat). "
        f"{MARKER} = gain over {_baselines(sweep)} "
        f"significant (paired bootstrap over dev examples, seeds pooled, {resamples} resamples, p < {alpha})."
        + (f" Note: {sweep.notes}" if sweep.notes else "")
    )
    return SweepReport(
        long=long,
        wide=wide,
        caption=caption,
        warnings=tie_warnings(sweep, long, majority, grouped),
        mixed_teachers=teacher_mismatches(grouped),
    )


def report_with_bootstrap(sweep: SweepSpec, results: Mapping[str, dict], reproduce_params: Mapping) -> SweepReport:
    """[`build_report`][] with the table's ``reproduce.bootstrap``
    settings (resamples, seed, alpha; 1000, 0 and 0.05 where unset), as the reproduce node writes a table."""
    bootstrap = dict(reproduce_params.get("bootstrap") or {})
    return build_report(
        sweep,
        results,
        resamples=int(bootstrap.get("resamples", 1000)),
        seed=int(bootstrap.get("seed", 0)),
        alpha=float(bootstrap.get("alpha", 0.05)),
    )


def teacher_mismatches(grouped: Mapping[tuple[str, str], Mapping[int, object]]) -> tuple[str, ...]:
    """One line per (row, task) whose seeds report more than one teacher dev score, e.g.
    ``SST-2, rkd: teacher 86.47 (seeds 1–5, 7, 8), 86.81 (seed 6)``. Every seed of a row distils from
    the same teacher settings (the same content key), so one score is expected; two mean the teacher was
    retrained into other weights — before 2026-11-25 with another unseeded classification head, or on other fp32
    kernels (AVX2 vs AVX-512, another GPU) — and the row's seeds, and its pairs with other rows, are not like for like.
    A multi-teacher row whose every seed recorded each teacher (``teachers_dev_metrics``) is compared slot by slot
    (``teachers 78.43 / 79.10 (seeds 1–3)``); otherwise by the best teacher its trials recorded."""
    lines = []
    for (method, task), seeds in sorted(grouped.items()):
        per_slot = all(selected.result.get("teachers_dev_metrics") for selected in seeds.values())
        by_score: dict[tuple[float, ...], list[int]] = {}
        for seed, selected in sorted(seeds.items()):
            if per_slot:  # a multi-teacher row whose every seed recorded each teacher (trials since 2026-11-25)
                scores = [
                    teacher_score({"teacher_dev_metrics": slot}, task)
                    for slot in selected.result["teachers_dev_metrics"]
                ]
            else:
                scores = [teacher_score(selected.result, task)]
            if None not in scores:
                by_score.setdefault(tuple(round(score, 6) for score in scores), []).append(seed)
        if len(by_score) > 1:
            parts = ", ".join(
                f"{' / '.join(f'{100 * score:.2f}' for score in scores)} "
                f"({'seed' if len(s) == 1 else 'seeds'} {_seed_list(s)})"
                for scores, s in sorted(by_score.items(), key=lambda item: -len(item[1]))
            )
            lines.append(f"{_task_label(task)}, {method}: {'teachers' if per_slot else 'teacher'} {parts}")
    return tuple(lines)


def _seed_list(seeds: list[int]) -> str:
    """``1–5, 7, 8``: runs of three or more consecutive seeds as a range."""
    runs: list[list[int]] = []
    for seed in sorted(seeds):
        if runs and seed == runs[-1][-1] + 1:
            runs[-1].append(seed)
        else:
            runs.append([seed])
    return ", ".join(f"{r[0]}–{r[-1]}" if len(r) >= 3 else ", ".join(map(str, r)) for r in runs)


def tie_warnings(sweep: SweepSpec, long: pd.DataFrame, majority: Mapping[str, float], grouped) -> tuple[str, ...]:
    """``<task>: every student ties …`` for each task whose methods' means all tie with the
    majority class or with each other within the dev set's noise ([`bert_kd.core.reports.verdict`][])."""
    from bert_kd.core.reports.verdict import comparison_verdict, noise_tolerance

    lines = []
    for task in sweep.tasks:
        rows = long[(long.task == task) & (long.n > 0)]
        if rows.empty:
            continue
        labels = task_dev_labels(task, grouped)
        floor = majority.get(task)
        verdict = comparison_verdict(
            dict(zip(rows["label"], rows["mean"])),
            None if floor is None or math.isnan(floor) else floor,
            noise_tolerance(len(labels) if labels is not None else None),
            primary_metric(task),
        )
        if verdict.warning:
            lines.append(f"{_task_label(task)}: {verdict.warning}")
    return tuple(lines)


def _metric_sentence(tasks) -> str:
    """``MRPC: accuracy, STS-B: Pearson``: the metric of each task of the table, selection included."""
    return ", ".join(f"{_task_label(t)}: {metric_label(paper_metric(t))}" for t in tasks) + ", also for selection"


def teacher_score(result: Mapping, task: str) -> float | None:
    """The teacher's dev score in the paper's metric from one trial result (None when the trial
    stored only the teacher's primary metric and that is another one)."""
    metrics = result.get("teacher_dev_metrics") or {}
    if paper_metric(task) in metrics:
        return float(metrics[paper_metric(task)])
    if paper_metric(task) == primary_metric(task) and result.get("teacher_dev_metric") is not None:
        return float(result["teacher_dev_metric"])
    return None


def _selection_sentence(sweep: SweepSpec, chosen: Mapping[tuple, object]) -> str:
    """Say how the reported number was chosen: the epoch (training keeps its best epoch on the
    evaluation split) and the grid point — or that there was no grid point to choose from."""
    where = (
        "the dev set itself (as the papers did)" if sweep.selection == "dev" else "a slice held out of the training set"
    )
    epoch = f"Each trial keeps its best epoch on {where}."
    most = max((selected.candidates for selected in chosen.values()), default=0)
    if most <= 1:
        return f"{epoch} Grid selection: none — one finished grid point per (method, task, seed), in the CSV's `chosen` column."
    return f"{epoch} Grid selection: the best of up to {most} grid points per (method, task, seed), on the same split."


def task_dev_labels(task: str, grouped: Mapping[tuple, Mapping[int, object]]):
    """The dev labels any finished trial of ``task`` recorded (they are the task's, whoever trained), or None."""
    return next(
        (
            selected.result["dev_labels"]
            for (_, t), seeds in grouped.items()
            if t == task
            for selected in seeds.values()
            if selected.result.get("dev_labels") is not None
        ),
        None,
    )


def majority_class_score(task: str, grouped: Mapping[tuple, Mapping[int, object]]) -> float:
    """The task's paper metric when every dev example gets the most frequent dev label (nan for
    regression tasks or when no finished trial recorded the dev labels)."""
    labels = task_dev_labels(task, grouped)
    if labels is None or TASKS[task].is_regression:
        return float("nan")
    labels = np.asarray(labels, dtype=np.int64)
    constant = np.full_like(labels, np.bincount(labels).argmax())
    return float(glue_metrics(task, constant, labels)[paper_metric(task)])


def _baselines(sweep: SweepSpec) -> str:
    labels = {m.name: m.label for m in sweep.methods}
    pairs = {}
    for m in sweep.methods:
        base = sweep.baseline_of(m)
        if base != m.name:
            pairs.setdefault(labels.get(base, base), []).append(m.label)
    if len(pairs) <= 1:
        return next(iter(pairs), labels.get(sweep.baseline, sweep.baseline))
    return "; ".join(f"{base} (for {', '.join(rows)})" for base, rows in pairs.items())


def _plain(value: float) -> str:
    return "–" if math.isnan(value) else f"{100 * value:.2f}"


def _kept(teacher_scores) -> str:
    """The teacher row's "% of teacher": 100 where a trial recorded the teacher on some task, – where none did
    (a results folder without trials has no teacher to keep 100 % of)."""
    return "100" if any(not math.isnan(score) for score in teacher_scores) else "–"


def _point(params: Mapping) -> str:
    return ", ".join(f"{k.split('.', 1)[1]}={v}" for k, v in sorted(params.items())) or "default"


def _significance(sweep, grouped, method, task, resamples, seed):
    baseline = sweep.baseline_of(method)
    if method.name == baseline:
        return None
    mine, base = grouped.get((method.name, task), {}), grouped.get((baseline, task), {})
    common = sorted(set(mine) & set(base))
    runs = [(mine[s].result, base[s].result) for s in common]
    runs = [(a, b) for a, b in runs if a.get("dev_predictions") is not None and b.get("dev_predictions") is not None]
    if not runs:
        return None
    return paired_bootstrap(
        task,
        [(a["dev_predictions"], a["dev_labels"]) for a, _ in runs],
        [(b["dev_predictions"], b["dev_labels"]) for _, b in runs],
        resamples=resamples,
        seed=seed,
        metric=paper_metric(task),
    )


def markdown(report: SweepReport) -> str:
    """The wide table (its index, ``Model``, first; score columns right-aligned), then the caption
    and the provenance line."""
    table = markdown_table(report.wide.reset_index(), align={name: "right" for name in report.wide.columns})
    footer = [report.caption, *(["", report.provenance] if report.provenance else [])]
    if report.mixed_teachers:
        footer += [
            "",
            "**Mixed teachers** (one row's seeds distilled from teachers that score differently under the same "
            "settings; not like for like): " + "; ".join(report.mixed_teachers) + ".",
        ]
    return table + "\n" + "\n".join(footer) + "\n"


def bars_figure(report: SweepReport, title: str = ""):
    """One panel per task (+ Average): methods sorted by mean, std error bars, y-axis zoomed to
    the data, the teacher as a dashed line."""
    tasks = list(dict.fromkeys(report.long.task))
    fig, axes = plt.subplots(1, len(tasks), figsize=(2.0 + 2.6 * len(tasks), 3.6), squeeze=False)
    teacher_row = report.wide.loc["Teacher"]
    majority_row = report.wide.loc[MAJORITY] if MAJORITY in report.wide.index else None
    for ax, task in zip(axes[0], tasks):
        data = report.long[(report.long.task == task) & (report.long.n > 0)].sort_values("mean")
        means, stds = 100 * data["mean"].to_numpy(), 100 * np.nan_to_num(data["std"].to_numpy())
        ax.bar(
            range(len(data)),
            means,
            yerr=stds,
            capsize=3,
            color=[
                SIGNIFICANT if s else UNTESTED if np.isnan(p) else NOT_SIGNIFICANT
                for s, p in zip(data["significant"], data["p_value"])
            ],
        )
        ax.set_xticks(range(len(data)), list(data["label"]), rotation=45, ha="right", fontsize=8)
        label = AVERAGE if task == AVERAGE else _task_label(task)
        reference = _number(teacher_row.get(label))
        low = np.min(means - stds) if len(means) else 0.0
        high = np.max(means + stds) if len(means) else 1.0
        if reference is not None:
            ax.axhline(reference, color="black", linestyle="--", linewidth=1, label="teacher")
            high = max(high, reference)
        floor = _number(majority_row.get(label)) if majority_row is not None else None
        if floor is not None:
            ax.axhline(floor, color="grey", linestyle=":", linewidth=1, label="majority class")
            low = min(low, floor)
        margin = max(0.5, 0.1 * (high - low))
        ax.set_ylim(low - margin, high + margin)
        ax.set_title(label)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("dev score ×100 (mean ± std over seeds)")
    handles = [
        Patch(color=SIGNIFICANT, label="significant gain over its baseline"),
        Patch(color=NOT_SIGNIFICANT, label="not significant"),
        Patch(color=UNTESTED, label="baseline / not tested"),
        Line2D([], [], color="black", linestyle="--", label="teacher"),
        Line2D([], [], color="grey", linestyle=":", label="majority class"),
    ]
    fig.legend(handles=handles, loc="lower center", ncol=5, fontsize=7, frameon=False)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return fig


def _number(text) -> float | None:
    try:
        return float(str(text).split()[0])
    except (TypeError, ValueError, IndexError):
        return None


def _atomic_write(path: Path, write) -> None:
    write_file_atomically(path, lambda tmp: write(str(tmp)))


def write_report(report: SweepReport, directory: str | Path, name: str) -> dict[str, Path]:
    """``<name>.csv`` (long), ``<name>.md`` (paper-shaped + caption), ``<name>.png`` (bars)."""
    directory = Path(directory)
    paths = {"csv": directory / f"{name}.csv", "md": directory / f"{name}.md", "png": directory / f"{name}.png"}
    _atomic_write(paths["csv"], lambda p: report.long.to_csv(p, index=False))
    _atomic_write(paths["md"], lambda p: Path(p).write_text(markdown(report), encoding="utf-8"))
    fig = bars_figure(report, title=name)
    try:
        _atomic_write(paths["png"], lambda p: fig.savefig(p, dpi=120, format="png"))
    finally:
        plt.close(fig)
    return paths
