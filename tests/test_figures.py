"""Every key figure of the README and the docs is its committed record's, at the record's own precision.

One row of :data:`FIGURES` per figure: the text file, a pattern whose one group is the figure as written,
the record (a JSON file, or a committed Markdown table: ``results/<table>/tables/*.md``, which
tests/analysis checks against the trial JSONs, ``benchmarks/results/*.md``) and where in it the value is.
**The rounding rule, once:** a figure is its record's value rounded to the precision the project states
that kind of figure with — a Markdown record's cell as it stands unless the row gives ``decimals``; a JSON
value (× ``scale``) to the row's ``decimals``: :data:`DECIMALS` (GPU-hours 1, so "218" beside a record of
217.59 fails); thousands commas, a leading ``+`` and bold marks are ignored. Add a figure by adding a row;
docs/reproducibility.md ("Every figure has a record") says so.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

ROOT = Path(__file__).resolve().parents[1]
H200_COMPILE = "benchmarks/results/gpu_run_h200_compile_gpu_check.json"
H200_FIRST = "benchmarks/results/gpu_check_h200.json"  # 2026-11-26, fp32 and bf16, before TF32
H100 = "benchmarks/results/gpu_run_h100_estimates.json"  # 2026-11-27, both H100 calls merged
MAIN_JOB = "benchmarks/results/main_job.md"  # hand-kept candidates of the recipe, before records were machine-made
RECORD = "benchmarks/results/main_job_readme.json"  # the README's main job, written by scripts/main_job.sh
V2_TABLES = "results/cpu_protocol_v2/tables"
IDLE_RUN = ("fe3cefd, idle AVX-512 machine, default kernels",)
AVX2_RUN = ("fe3cefd, idle AVX-512 machine, AVX2 kernels",)
#: decimals by kind of figure: accuracies and gains in points 2, p in prose 3 (4 beside its Monte Carlo error)
DECIMALS = {"examples/s": 0, "GPU-hours": 1, "speed-up": 1, "workers' speed-up": 2, "minutes": 1, "p": 3}


@dataclass(frozen=True)
class Figure:
    """A figure in ``text`` (the group of ``pattern``) and where its record keeps it."""

    text: str
    pattern: str
    record: str
    where: tuple | Callable[[Any], float]  # a JSON path (a dict picks the list item it matches) or a function
    decimals: int | None = None  # how the record shows it: required for a JSON value or a scaled one
    scale: float = 1.0

    def written(self) -> str:
        found = re.findall(self.pattern, " ".join((ROOT / self.text).read_text(encoding="utf-8").split()))
        assert len(found) == 1, f"{self.text}: the pattern {self.pattern!r} matches {len(found)} times, not once"
        return found[0]

    def value(self) -> tuple[float, int]:
        """The record's value × ``scale`` and the decimals the record shows it with."""
        record = load(self.record)
        found = self.where(record) if callable(self.where) else follow(record, self.where)
        if isinstance(found, str):  # a Markdown cell's number, as the record shows it
            shown = found.replace(",", "").lstrip("+")
            decimals = len(shown.split(".")[1]) if "." in shown else 0
            found = float(shown)
        else:
            decimals = None
        decimals = self.decimals if self.decimals is not None else decimals
        assert decimals is not None and (self.scale == 1.0 or self.decimals is not None), f"{self}: give decimals"
        return float(found) * self.scale, decimals


@functools.cache
def load(record: str):
    path = ROOT / record
    if path.suffix == ".json":
        return json.loads(path.read_text(encoding="utf-8"))
    return markdown_tables(path.read_text(encoding="utf-8"))


def markdown_tables(text: str) -> list[list[list[str]]]:
    """Every Markdown table of ``text`` as rows of cells (header first, the --- row left out, bold marks off)."""
    tables, rows = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            cells = [cell.strip().replace("**", "") for cell in line.strip().strip("|").split("|")]
            if not all(set(cell) <= set("-: ") for cell in cells):
                rows.append(cells)
        elif rows:
            tables.append(rows)
            rows = []
    return tables


def follow(record, path: tuple):
    """A JSON path, or for a Markdown record (row's leading cells, column header[, n-th number in the cell])."""
    if isinstance(record, list) and record and isinstance(record[0], list):
        return cell(record, *path)
    for step in path:
        if isinstance(step, dict):
            matches = [item for item in record if all(item.get(k) == v for k, v in step.items())]
            assert len(matches) == 1, f"{step} matches {len(matches)} items"
            record = matches[0]
        else:
            record = record[step]
    return record


def cell(tables, row: tuple, column: str, nth: int = 0) -> str:
    """The ``nth`` number, as written, in the cell of ``column`` in the one table row that starts with ``row``."""
    found = [
        r[t[0].index(column)] for t in tables if column in t[0] for r in t[1:] if tuple(r[: len(row)]) == tuple(row)
    ]
    assert len(found) == 1, f"row {row} × column {column!r}: {len(found)} cells"
    return re.findall(r"[-+−]?\d[\d,]*\.?\d*", found[0])[nth].replace("−", "-")


def column_values(tables, column: str) -> list[str]:
    """Every cell of ``column`` in the tables that have it."""
    return [r[t[0].index(column)] for t in tables if column in t[0] for r in t[1:]]


SCORES = "results/alp_alpha/scores.md"


def scores_cell(tables, score_prefix: str, column: str) -> str:
    """The cell of ``column`` in the one row of scores.md whose score starts with ``score_prefix``."""
    head = next(t[0] for t in tables if column in t[0])
    found = [r for t in tables if t[0] == head for r in t[1:] if r[0].startswith(score_prefix)]
    assert len(found) == 1, f"{score_prefix!r}: {len(found)} rows"
    return found[0][head.index(column)]


def layer_values(tables, row: str, layers=range(2, 6)) -> list[float]:
    """scores.md's per-layer table: the values of ``row`` at teacher ``layers`` (default 2–5)."""
    return [float(cell(tables, (row,), str(k))) for k in layers]


PAIRED = "results/alp_alpha/paired.md"
PAIRED_GAIN, PAIRED_INTERVAL = "gain scaled − one-hot (points)", "95% interval"
#: (task row, column, n-th number in the cell) of the six figures each text quotes, in its order
PAIRED_CELLS = [
    (task, column, nth)
    for task in ("sst2", "mrpc")
    for column, nth in ((PAIRED_GAIN, 0), (PAIRED_INTERVAL, 0), (PAIRED_INTERVAL, 1))
]
PAIRED_TEXTS = {
    "README.md": r"gains \+{} points on SST-2 \[−{}, \+{}\] and −{} on MRPC \[−{}, \+{}\]",
    "docs/cpu-protocol-v2.md": r"same seeds: SST-2 \+{} points \[−{}, \+{}\], MRPC −{} \[−{}, \+{}\]",
    "docs/fidelity.md": r"SST-2 \+{} points \[−{}, \+{}\] over 10 seeds, MRPC −{} \[−{}, \+{}\]",
}


def rate(work: str, compile: str | None = None, precision: str = "bf16", pair: str = "bert-base 12→4"):
    """examples/s of one timed row of a gpu_check record."""
    return lambda r: follow(
        r, ("timings", {"pair": pair, "work": work, "precision": precision, "compile": compile}, "examples_per_s")
    )


def speedup(work: str, compile: str) -> Callable[[dict], float]:
    """A compiled row's examples/s over the eager bf16 row of the same work in the same process."""
    return lambda r: rate(work, compile)(r) / rate(work)(r)


def compiled(work: str) -> Callable[[dict], float]:
    """The compiled row the docs quote: live ALP with its teacher compiled too, fine-tuning compiled."""
    return rate(work, "reduce-overhead+teacher" if work == "live_distill" else "reduce-overhead")


def with_workers(workers: int, what: str = "hours") -> Callable[[dict], float]:
    """ALP-KD Table 1 with ``workers`` eager sweep workers per GPU: the estimate's GPU-hours over the workers'
    speed-up (the teacher's hours kept), or the trials per hour they give — one baseline for both."""

    def figure(r: dict) -> float:
        estimate = r["estimates"]["alp_kd_table1"]
        speed = follow(r, ("sweep_throughput", {"workers": workers}, "speedup"))
        hours = estimate["teacher_hours"] + estimate["student_hours"] / speed
        return hours if what == "hours" else estimate["trials"] / hours

    return figure


TABLE1_COMPILED = ("compiled_estimates", "reduce-overhead+teacher", "alp_kd_table1", "total_hours")

FIGURES = [
    # docs/reliability.md: the chaos soak's three seeded schedules, each sweep's seconds from its record
    *(
        Figure(
            "docs/reliability.md",
            rf"\| {seed} \| (\d+) s \|",
            f"benchmarks/results/chaos_sweep_seed{seed}.json",
            ("sweep_s",),
            0,
        )
        for seed in (1, 2, 3)
    ),
    # docs/decisions.md: the two tiers' walls that moved the slow tier out of CI where its record covers the tree
    *(
        Figure("docs/decisions.md", pattern, "benchmarks/results/suite_time.json", (tier, "wall_s"), 0)
        for pattern, tier in (
            (r"README's command at (\d+) s of pytest wall", "readme_command"),
            (r"the slow tier at (\d+) s for 39 tests", "slow_tier"),
        )
    ),
    # README, docs/index.md, docs/getting-started.md: the main job as scripts/main_job.sh recorded it
    Figure(
        "README.md",
        r"MiniLM-L6, 6 layers, 22\.7 M parameters \| \*\*([\d.]+)\*\*",
        RECORD,
        ("teacher_dev_accuracy",),
        2,
    ),
    Figure(
        "docs/reproducibility.md",
        r"record has (\d+) of \d+ passing",
        "benchmarks/results/docs_builds.json",
        ("passed",),
        0,
    ),
    Figure(
        "docs/reproducibility.md",
        r"record has \d+ of (\d+) passing",
        "benchmarks/results/docs_builds.json",
        lambda r: len(r["builds"]),
        0,
    ),
    Figure(
        "docs/reproducibility.md",
        r"passing \((\d+)–\d+ s",
        "benchmarks/results/docs_builds.json",
        lambda r: min(b["seconds"] for b in r["builds"]),
        0,
    ),
    Figure(
        "docs/reproducibility.md",
        r"passing \(\d+–(\d+) s",
        "benchmarks/results/docs_builds.json",
        lambda r: max(b["seconds"] for b in r["builds"]),
        0,
    ),
    Figure("README.md", r"2 layers, 15\.6 M parameters \| \*\*([\d.]+)\*\*", RECORD, ("student_dev_accuracy",), 2),
    Figure("README.md", r"\*\*(\d+) s \([\d.]+ min\)\*\*", RECORD, ("wall_s",), 0),
    Figure("README.md", r"\*\*\d+ s \(([\d.]+) min\)\*\*", RECORD, ("wall_s",), DECIMALS["minutes"], scale=1 / 60),
    Figure("README.md", r"min\)\*\*, (\d+) s CPU", RECORD, ("cpu_s",), 0),
    Figure("README.md", r"s CPU, ([\d.]+) GB peak memory", RECORD, ("peak_rss_gb",), 1),
    Figure("README.md", r"peak memory \(load ([\d.]+) at the start\)", RECORD, ("load_before",), 1),
    # docs/benchmarks-main-job.md: the run the README quotes, as its record holds it
    *[
        Figure("docs/benchmarks-main-job.md", pattern, RECORD, (key,), decimals)
        for pattern, key, decimals in (
            (r"teacher ([\d.]+), student [\d.]+, \d+ s wall", "teacher_dev_accuracy", 2),
            (r"teacher [\d.]+, student ([\d.]+), \d+ s wall", "student_dev_accuracy", 2),
            (r"(\d+) s wall, \d+ s CPU, load", "wall_s", 0),
            (r"s wall, (\d+) s CPU, load", "cpu_s", 0),
            (r"s CPU, load ([\d.]+) at the start", "load_before", 1),
        )
    ],
    Figure("docs/index.md", r"teacher to ([\d.]+) and distils", RECORD, ("teacher_dev_accuracy",), 2),
    Figure("docs/index.md", r"student to ([\d.]+) SST-2 dev", RECORD, ("student_dev_accuracy",), 2),
    Figure("docs/index.md", r"dev accuracy in (\d+) s:", RECORD, ("wall_s",), 0),
    Figure(
        "docs/getting-started.md",
        r"22\.7 M parameters\) \| ([\d.]+), [\d.]+ \|",
        RECORD,
        ("teacher_dev_accuracy_each_epoch", 0),
        2,
    ),
    Figure(
        "docs/getting-started.md",
        r"22\.7 M parameters\) \| [\d., ]+ \| \*\*([\d.]+)\*\*",
        RECORD,
        ("teacher_dev_accuracy",),
        2,
    ),
    Figure(
        "docs/getting-started.md",
        r"embeddings\) \| ([\d.]+), [\d.]+, [\d.]+ \|",
        RECORD,
        ("student_dev_accuracy_each_epoch", 0),
        2,
    ),
    Figure(
        "docs/getting-started.md",
        r"embeddings\) \| [\d.]+, ([\d.]+), [\d.]+ \|",
        RECORD,
        ("student_dev_accuracy_each_epoch", 1),
        2,
    ),
    Figure(
        "docs/getting-started.md", r"embeddings\) \| [\d., ]+ \| \*\*([\d.]+)\*\*", RECORD, ("student_dev_accuracy",), 2
    ),
    Figure("docs/getting-started.md", r"\*\*(\d+) s wall\*\*", RECORD, ("wall_s",), 0),
    Figure("docs/getting-started.md", r"s wall\*\*, (\d+) s CPU", RECORD, ("cpu_s",), 0),
    Figure("docs/getting-started.md", r"s CPU, ([\d.]+) GB peak memory\. The load", RECORD, ("peak_rss_gb",), 1),
    Figure("docs/getting-started.md", r"load average was ([\d.]+) at the start", RECORD, ("load_before",), 1),
    Figure("docs/getting-started.md", r"at the start and ([\d.]+) at the end", RECORD, ("load_after",), 1),
    # the idle Intel machine's timings, before the records were machine-made (benchmarks/results/main_job.md)
    Figure("docs/getting-started.md", r"AVX-512 and AMX took (\d+) s with the same", MAIN_JOB, (IDLE_RUN, "wall s")),
    Figure("docs/getting-started.md", r"every epoch, and (\d+) s with PyTorch", MAIN_JOB, (AVX2_RUN, "wall s")),
    Figure("docs/benchmarks-main-job.md", r"took (\d+) s, with the same accuracies", MAIN_JOB, (AVX2_RUN, "wall s")),
    # README and docs/gpu.md: the compiled H200 rows and ALP-KD Table 1's GPU-hours
    Figure(
        "docs/benchmarks-main-job.md",
        r"teacher fine-tuning at ([\d,]+) examples/s",
        H200_COMPILE,
        compiled("teacher_finetune"),
        DECIMALS["examples/s"],
    ),
    Figure(
        "docs/benchmarks-main-job.md",
        r"and live ALP at ([\d,]+): [\d.]+× and",
        H200_COMPILE,
        compiled("live_distill"),
        DECIMALS["examples/s"],
    ),
    Figure(
        "docs/benchmarks-main-job.md",
        r"TF32; ([\d.]+)× and [\d.]+× eager bf16",
        H200_COMPILE,
        speedup("teacher_finetune", "reduce-overhead"),
        DECIMALS["speed-up"],
    ),
    Figure(
        "docs/benchmarks-main-job.md",
        r"TF32; [\d.]+× and ([\d.]+)× eager bf16",
        H200_COMPILE,
        speedup("live_distill", "reduce-overhead+teacher"),
        DECIMALS["speed-up"],
    ),
    Figure(
        "docs/benchmarks-main-job.md",
        r"ALP-KD Table 1 is ([\d.]+) GPU-hours of training steps",
        H200_COMPILE,
        TABLE1_COMPILED,
        DECIMALS["GPU-hours"],
    ),
    Figure(
        "docs/gpu.md",
        r"ALP-KD Table 1 at those rates: ([\d.]+) GPU-hours of training steps, one worker per GPU, compilation",
        H200_COMPILE,
        TABLE1_COMPILED,
        DECIMALS["GPU-hours"],
    ),
    Figure(
        "docs/gpu.md",
        r"fine-tuning ran at ([\d,]+) examples/s and live ALP \(student and teacher compiled\) at [\d,]+ \(steps alone",
        H200_COMPILE,
        compiled("teacher_finetune"),
        DECIMALS["examples/s"],
    ),
    Figure(
        "docs/changelog-detail.md",
        r"ALP-KD Table 1 at those rates ([\d.]+) GPU-hours, within the goal",
        H200_COMPILE,
        TABLE1_COMPILED,
        DECIMALS["GPU-hours"],
    ),
    Figure(
        "docs/decisions.md",
        r"Table 1 at the compiled step rates came to ([\d.]+) GPU-hours",
        H200_COMPILE,
        TABLE1_COMPILED,
        DECIMALS["GPU-hours"],
    ),
    Figure(
        "docs/gpu.md",
        r"3,298 with four \(([\d.]+)×\)",
        H200_COMPILE,
        ("sweep_throughput", {"workers": 4}, "speedup"),
        DECIMALS["workers' speed-up"],
    ),
    # docs/scaling.md and docs/benchmarks.md: the GPU rates and GPU-hours
    *[
        Figure(text, pattern, H200_FIRST, rate(work, precision=precision), DECIMALS["examples/s"])
        for text in ("docs/scaling.md", "docs/benchmarks.md")
        for pattern, work, precision in (
            (r"12 → 4 fine-tuning ([\d,]+) / [\d,]+ examples/s \(fp32 / bf16\)", "teacher_finetune", "fp32"),
            (r"12 → 4 fine-tuning [\d,]+ / ([\d,]+) examples/s \(fp32 / bf16\)", "teacher_finetune", "bf16"),
        )
    ],
    Figure(
        "docs/scaling.md",
        r"with a live teacher ([\d,]+) / [\d,]+, with the",
        H200_FIRST,
        rate("live_distill", precision="fp32"),
        DECIMALS["examples/s"],
    ),
    Figure(
        "docs/scaling.md",
        r"with a live teacher [\d,]+ / ([\d,]+), with the",
        H200_FIRST,
        rate("live_distill"),
        DECIMALS["examples/s"],
    ),
    Figure(
        "docs/scaling.md",
        r"cached teacher ([\d,]+) / [\d,]+; from these",
        H200_FIRST,
        rate("cached_distill", precision="fp32"),
        DECIMALS["examples/s"],
    ),
    Figure(
        "docs/scaling.md",
        r"cached teacher [\d,]+ / ([\d,]+); from these",
        H200_FIRST,
        rate("cached_distill"),
        DECIMALS["examples/s"],
    ),
    *[
        Figure(
            text,
            r"ALP-KD Table 1 is ([\d.]+) GPU-hours and CPU protocol v2",
            H200_FIRST,
            ("estimates", "alp_kd_table1", "total_hours"),
            DECIMALS["GPU-hours"],
        )
        for text in ("docs/scaling.md", "docs/benchmarks.md")
    ],
    *[
        Figure(
            text,
            r"GPU-hours and CPU protocol v2 (\d+\.\d)",
            H200_FIRST,
            ("estimates", "cpu_protocol_v2", "total_hours"),
            DECIMALS["GPU-hours"],
        )
        for text in ("docs/scaling.md", "docs/benchmarks.md")
    ],
    Figure(
        "docs/scaling.md",
        r"ran fine-tuning at ([\d,]+) and live ALP at [\d,]+ examples/s on an H100",
        H100,
        compiled("teacher_finetune"),
        DECIMALS["examples/s"],
    ),
    Figure(
        "docs/scaling.md",
        r"and live ALP at ([\d,]+) examples/s on an H100",
        H100,
        compiled("live_distill"),
        DECIMALS["examples/s"],
    ),
    Figure(
        "docs/scaling.md",
        r"examples/s on an H100 and ([\d,]+) / [\d,]+ on an H200",
        H200_COMPILE,
        compiled("teacher_finetune"),
        DECIMALS["examples/s"],
    ),
    Figure(
        "docs/scaling.md",
        r"on an H100 and [\d,]+ / ([\d,]+) on an H200",
        H200_COMPILE,
        compiled("live_distill"),
        DECIMALS["examples/s"],
    ),
    Figure(
        "docs/scaling.md",
        r"ALP-KD Table 1 at ([\d.]+) GPU-hours of training steps at the H200's compiled rates",
        H200_COMPILE,
        TABLE1_COMPILED,
        DECIMALS["GPU-hours"],
    ),
    Figure(
        "docs/scaling.md",
        r"four workers per GPU: ([\d.]+)× one worker's BERT-base",
        H200_COMPILE,
        ("sweep_throughput", {"workers": 4}, "speedup"),
        DECIMALS["workers' speed-up"],
    ),
    Figure(
        "docs/scaling.md",
        r"([\d.]+)× MiniLM-L6's on an H100",
        H100,
        ("sweep_throughput", {"workers": 4}, "speedup"),
        DECIMALS["workers' speed-up"],
    ),
    # docs/gpu.md: the compiled H200 and H100 runs of 2026-11-27
    Figure(
        "docs/gpu.md",
        r"eager bf16 ran ([\d,]+) and [\d,]+ and eager fp32",
        H200_COMPILE,
        rate("teacher_finetune"),
        DECIMALS["examples/s"],
    ),
    Figure(
        "docs/gpu.md",
        r"eager bf16 ran [\d,]+ and ([\d,]+) and eager fp32",
        H200_COMPILE,
        rate("live_distill"),
        DECIMALS["examples/s"],
    ),
    Figure(
        "docs/gpu.md",
        r"Cached distillation: ([\d,]+) compiled",
        H200_COMPILE,
        rate("cached_distill", "reduce-overhead"),
        DECIMALS["examples/s"],
    ),
    Figure(
        "docs/gpu.md",
        r"Cached distillation: [\d,]+ compiled, ([\d,]+) eager bf16",
        H200_COMPILE,
        rate("cached_distill"),
        DECIMALS["examples/s"],
    ),
    Figure(
        "docs/gpu.md",
        r"evaluation left out \(([\d.]+) at eager bf16\)",
        H200_COMPILE,
        ("estimates", "alp_kd_table1", "total_hours"),
        DECIMALS["GPU-hours"],
    ),
    Figure(
        "docs/gpu.md",
        r"fine-tuning runs at ([\d,]+) examples/s and live ALP \(student and teacher compiled\) at [\d,]+, against [\d,]+ and [\d,]+ eager bf16 in the same process\. Compiling",
        H100,
        compiled("teacher_finetune"),
        DECIMALS["examples/s"],
    ),
    Figure(
        "docs/gpu.md",
        r"compiled\) at ([\d,]+), against [\d,]+ and [\d,]+ eager bf16 in the same process\. Compiling",
        H100,
        compiled("live_distill"),
        DECIMALS["examples/s"],
    ),
    Figure(
        "docs/gpu.md",
        r"against ([\d,]+) and [\d,]+ eager bf16 in the same process\. Compiling",
        H100,
        rate("teacher_finetune"),
        DECIMALS["examples/s"],
    ),
    Figure(
        "docs/gpu.md",
        r"against [\d,]+ and ([\d,]+) eager bf16 in the same process\. Compiling",
        H100,
        rate("live_distill"),
        DECIMALS["examples/s"],
    ),
    Figure(
        "docs/gpu.md",
        r"Compiling the student alone gave live ALP ([\d,]+)\.",
        H100,
        rate("live_distill", "reduce-overhead"),
        DECIMALS["examples/s"],
    ),
    Figure(
        "docs/gpu.md",
        r"\(no inductor kernels\): ([\d,]+) and [\d,]+\.",
        H100,
        rate("teacher_finetune", "cudagraphs"),
        DECIMALS["examples/s"],
    ),
    Figure(
        "docs/gpu.md",
        r"\(no inductor kernels\): [\d,]+ and ([\d,]+)\.",
        H100,
        rate("live_distill", "cudagraphs"),
        DECIMALS["examples/s"],
    ),
    Figure(
        "docs/gpu.md",
        r"ALP-KD Table 1 at those rates: ([\d.]+) GPU-hours, one worker per GPU \([\d.]+ eager\); its cached",
        H100,
        ("compiled_estimates", "reduce-overhead+teacher", "alp_kd_table1", "total_hours"),
        DECIMALS["GPU-hours"],
    ),
    Figure(
        "docs/gpu.md",
        r"one worker per GPU \(([\d.]+) eager\); its cached",
        H100,
        ("estimates", "alp_kd_table1", "total_hours"),
        DECIMALS["GPU-hours"],
    ),
    Figure(
        "docs/gpu.md",
        r"Four MiniLM-L6 sweep workers: ([\d.]+)× one worker's",
        H100,
        ("sweep_throughput", {"workers": 4}, "speedup"),
        DECIMALS["workers' speed-up"],
    ),
    Figure(
        "docs/gpu.md",
        r"Table 1 at ([\d.]+) GPU-hours of steps with four workers",
        H200_COMPILE,
        with_workers(4),
        DECIMALS["GPU-hours"],
    ),
    *[
        Figure(
            "benchmarks/results/gpu_run_h200_compile.md",
            rf"\| {workers} \| [\d,]+ \| [\d.]+× \| {cells} \|",
            H200_COMPILE,
            with_workers(workers, what),
            DECIMALS["GPU-hours"],
        )
        for workers in (1, 2, 4)
        for what, cells in (("trials", r"([\d.]+) \| [\d.]+"), ("hours", r"[\d.]+ \| ([\d.]+)"))
    ],
    # README, docs/cpu-protocol-v2.md and results/cpu_protocol_v2/README.md: the CPU protocol v2 reading
    Figure(
        "README.md",
        r"\(([\d.]+) MRPC / [\d.]+ SST-2 dev accuracy",
        f"{V2_TABLES}/paper_gap.md",
        (("teacher",), "ours MRPC"),
    ),
    Figure(
        "README.md",
        r"\([\d.]+ MRPC / ([\d.]+) SST-2 dev accuracy",
        f"{V2_TABLES}/paper_gap.md",
        (("teacher",), "ours SST-2"),
    ),
    Figure(
        "README.md",
        r"Two teachers against one on MRPC: ([+\d.]+) points",
        f"{V2_TABLES}/summary.md",
        (("two teachers > one", "MRPC"), "gain, points"),
    ),
    Figure(
        "docs/cpu-protocol-v2.md",
        r"\*\*Two teachers against one\*\* \(MRPC, a stand-in for the paper's heterogeneous teachers\): ([+\d.]+),",
        f"{V2_TABLES}/summary.md",
        (("two teachers > one", "MRPC"), "gain, points"),
    ),
    Figure(
        "results/cpu_protocol_v2/README.md",
        r"0\.17 over the table; p = ([\d.]+) ± [\d.]+ at 10⁶ resamples",
        f"{V2_TABLES}/summary.md",
        (("TED > LWD", "SST-2"), "p"),
    ),
    # results/cpu_protocol_v2/README.md: pooled power (tables/power.md), resolvable gain alone / after Holm
    *[
        Figure(
            "results/cpu_protocol_v2/README.md",
            pattern,
            f"{V2_TABLES}/power.md",
            ((paper, task), "resolvable: alone / after Holm", nth),
        )
        for pattern, paper, task, nth in (
            (r"SST-2 resolves ([\d.]+) points alone and [\d.]+ after Holm's ×16", "ALP-KD", "SST-2", 0),
            (r"SST-2 resolves [\d.]+ points alone and ([\d.]+) after Holm's ×16", "ALP-KD", "SST-2", 1),
            (r"MRPC ([\d.]+) / [\d.]+ \([\d.]+ / [\d.]+\); TED's claims", "ALP-KD", "MRPC", 0),
            (r"MRPC [\d.]+ / ([\d.]+) \([\d.]+ / [\d.]+\); TED's claims", "ALP-KD", "MRPC", 1),
            (r"resolve ([\d.]+) / [\d.]+ on SST-2 and", "TED", "SST-2", 0),
            (r"resolve [\d.]+ / ([\d.]+) on SST-2 and", "TED", "SST-2", 1),
            (r"on SST-2 and ([\d.]+) / [\d.]+ on MRPC", "TED", "MRPC", 0),
            (r"on SST-2 and [\d.]+ / ([\d.]+) on MRPC", "TED", "MRPC", 1),
        )
    ],
    # README: the general stage's gain on SST-2 and MRPC (results/general_ablation_6000/tables/paired.md, rendered by
    # bert-kd results render), sign written apart
    *[
        Figure(
            "README.md",
            pattern,
            "results/general_ablation_6000/tables/paired.md",
            lambda tables, task=task: cell(tables, (task,), "gain (points)").lstrip("+-"),
        )
        for pattern, task in (
            (r"moves its task stage by −(\d+\.\d+) points on SST-2", "SST-2"),
            (r"points on SST-2 and \+(\d+\.\d+) on MRPC against", "MRPC"),
        )
    ],
    # ALP's α spread against one-hot on the same seeds (results/alp_alpha/paired.md), signs written apart
    *[
        Figure(
            text,
            template.format(*["([\\d.]+)" if i == n else "[\\d.]+" for i in range(6)]),
            PAIRED,
            lambda tables, task=task, column=column, nth=nth: cell(tables, (task,), column, nth).lstrip("+-"),
        )
        for text, template in PAIRED_TEXTS.items()
        for n, (task, column, nth) in enumerate(PAIRED_CELLS)
    ],
    # docs/methods.md: α's largest SD across examples over every Figure 3 run (results/alp_alpha/variants.md)
    Figure(
        "docs/methods.md",
        r"largest SD across examples ([\d.]+)\)",
        "results/alp_alpha/variants.md",
        lambda tables: max(float(value) for value in column_values(tables, "α's largest SD across examples")),
        3,
    ),
    # docs/fidelity.md: ALP's α per score at the student's initialisation (results/alp_alpha/scores.md)
    *[
        Figure("docs/fidelity.md", pattern, SCORES, where, decimals)
        for pattern, where, decimals in (
            (
                r"normalised entropy ([\d.]+) at the student's initialisation",
                lambda tables: float(scores_cell(tables, "ln_scaled_dot (layer-normed", "H / log n")),
                2,
            ),
            (
                r"near-uniform \(([\d.]+)\)\. It also passes",
                lambda tables: scores_cell(tables, "cosine, τ 1", "H / log n"),
                None,
            ),
            (
                r"largest standard deviation across sentences is at most ([\d.]+),",
                lambda tables: max(float(v) for v in column_values(tables, "α's largest SD across sentences")),
                2,
            ),
            (
                r"2–5 is ([\d.]+)–[\d.]+ with an SD",
                lambda tables: min(layer_values(tables, "cosine with layer 1, mean")),
                2,
            ),
            (
                r"2–5 is [\d.]+–([\d.]+) with an SD",
                lambda tables: max(layer_values(tables, "cosine with layer 1, mean")),
                2,
            ),
            (
                r"with an SD across sentences of at most ([\d.]+), and even",
                lambda tables: max(layer_values(tables, "cosine with layer 1, SD across sentences")),
                3,
            ),
            (
                r"sentences of at most ([\d.]+), while its correlation",
                lambda tables: max(
                    layer_values(
                        tables, "the same, states centred over the sentences, SD across sentences", range(2, 7)
                    )
                ),
                2,
            ),
        )
    ],
    Figure(
        "docs/fidelity.md",
        r"largest SD across 10 examples at most ([\d.]+)\)",
        "results/alp_alpha/variants.md",
        lambda tables: max(float(value) for value in column_values(tables, "α's largest SD across examples")),
        3,
    ),
    # docs/benchmarks.md: the whole ×20 SST-2 transfer set (benchmarks/augment.py)
    *[
        Figure("docs/benchmarks.md", pattern, "benchmarks/results/augment.json", where, 1 if decimals else 0)
        for pattern, where, decimals in (
            (r"× 20 rewrites, [^:]*: ([\d,]+) rows after duplicates", ("augmented_rows",), False),
            (r"written as ([\d.]+) MiB of shards", ("shards_mib",), True),
            (r"stayed under ([\d.]+) MiB", ("peak_mib_after_augment",), True),
            (r"raised its peak to ([\d.]+) MiB", ("peak_mib_after_label",), True),
            (r"batch, ([\d.]+) MiB of `\.npy` files", ("cache_mib",), True),
            (
                r"the whole set would take about ([\d.]+) h here",
                lambda record: record["augmented_rows"] / record["label_rows_per_s"] / 3600,
                True,
            ),
        )
    ],
]


def agrees(written: str, value: float, decimals: int) -> bool:
    """The rounding rule: ``value`` printed with the record's ``decimals`` is ``written`` (commas, + aside)."""
    return f"{value:.{decimals}f}" == written.replace(",", "").lstrip("+")


@pytest.mark.parametrize("figure", FIGURES, ids=lambda f: f"{f.text}: {f.pattern[:40]}")
def test_the_figure_in_the_text_is_its_records(figure: Figure):
    written, (value, decimals) = figure.written(), figure.value()
    assert agrees(written, value, decimals), f"{figure.text} says {written}; {figure.record} gives {value:.{decimals}f}"


def test_the_rounding_rule_catches_a_figure_rounded_by_hand():
    hours = follow(load(H200_COMPILE), TABLE1_COMPILED)
    assert agrees("217.6", hours, 1) and not agrees("218", hours, 1)  # the record's table shows 217.6
    assert agrees("3,030", 3030.3, 0) and agrees("+1.00", 1.0035, 2) and not agrees("0.045", 0.0457, 3)
    assert cell(markdown_tables("| a | b |\n|---|---|\n| x | **+1.50 (±0.2)** |\n"), ("x",), "b") == "+1.50"


# ------------------------------------------------------------ figures without a record, listed
#: The figures of README.md and docs/ that no FIGURES row checks, one ``file<TAB>figure`` a line: each is
#: either without a record (a citation, an example, a setting) or still waiting for its row. The list may only
#: shrink: a new figure gets a row, and a covered or deleted one leaves the list.
UNCOVERED = ROOT / "tests" / "uncovered_figures.txt"
#: A figure: a decimal, a number with thousands commas, or a count with its unit.
NUMBER = re.compile(
    r"(?<![\w.#/-])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d+|\d+(?= ?(?:s|min|%|×|GB|MB|points|examples/s|GPU-hours)\b))"
)
#: Not prose: code blocks and spans (commands, settings), link targets, HTML tags, snippet lines.
NOT_PROSE = re.compile(r"```.*?```|`[^`]*`|\]\([^)]*\)|<[^>]+>|--8<-- \"[^\"]*\"")


def prose_texts() -> list[str]:
    return ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]


def uncovered_figures() -> list[tuple[str, str]]:
    """(file, figure as written) of every figure in the prose that no FIGURES row reads."""
    found = []
    for text in prose_texts():
        flat = " ".join((ROOT / text).read_text(encoding="utf-8").split())
        skipped = [m.span() for m in NOT_PROSE.finditer(flat)]
        covered = {m.span(1) for figure in FIGURES if figure.text == text for m in re.finditer(figure.pattern, flat)}
        for m in NUMBER.finditer(flat):
            inside = any(a <= m.start(1) < b for a, b in skipped)
            if not inside and not any(a <= m.start(1) < b for a, b in covered):
                found.append((text, m.group(1)))
    return found


def test_every_figure_is_checked_against_its_record_or_listed_and_the_list_only_shrinks():
    from collections import Counter

    now = Counter(uncovered_figures())
    listed = Counter(tuple(line.split("\t")) for line in UNCOVERED.read_text(encoding="utf-8").splitlines() if line)
    new, gone = sorted((now - listed).elements()), sorted((listed - now).elements())
    assert not new, (
        f"figures with neither a FIGURES row nor a line in {UNCOVERED.name}: give each a row that reads its record "
        f"(a figure without any record, a citation or an example, may be listed): {new[:20]}"
    )
    assert not gone, f"covered or deleted now: remove these lines from {UNCOVERED.name} (it only shrinks): {gone[:20]}"


if __name__ == "__main__":  # the list as it stands: python tests/test_figures.py > tests/uncovered_figures.txt
    print("\n".join(f"{text}\t{figure}" for text, figure in uncovered_figures()))
