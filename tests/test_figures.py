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
MAIN_JOB = "benchmarks/results/main_job.md"
V2_TABLES = "results/cpu_protocol_v2/tables"
IDLE_RUN = ("2ee7f8b, idle AVX-512 machine",)
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


def compiled(work: str) -> Callable[[dict], float]:
    """examples/s of a compiled BERT-base 12→4 row of the H200 run."""
    compile_label = "reduce-overhead+teacher" if work == "live_distill" else "reduce-overhead"
    return lambda r: follow(
        r, ("timings", {"work": work, "precision": "bf16", "compile": compile_label}, "examples_per_s")
    )


def speedup(work: str) -> Callable[[dict], float]:
    """Compiled / eager bf16 examples/s of the same work in the same process."""

    def ratio(r: dict) -> float:
        eager = [
            t["examples_per_s"]
            for t in r["timings"]
            if t["work"] == work and t["precision"] == "bf16" and t["compile"] is None and t["pair"] == "bert-base 12→4"
        ]
        return compiled(work)(r) / eager[0]

    return ratio


TABLE1_COMPILED = ("compiled_estimates", "reduce-overhead+teacher", "alp_kd_table1", "total_hours")
TED_LWD = (("TED > LWD", "SST-2"), "gain, points")

FIGURES = [
    # README: the main job (benchmarks/results/main_job.md, the idle run after the seeding fix)
    Figure(
        "README.md",
        r"MiniLM-L6, 6 layers, 22\.7 M parameters \| \*\*([\d.]+)\*\*",
        MAIN_JOB,
        (IDLE_RUN, "teacher dev acc after each epoch", 2),
    ),
    Figure(
        "README.md",
        r"2 layers, 15\.6 M parameters \| \*\*([\d.]+)\*\*",
        MAIN_JOB,
        (IDLE_RUN, "ALP student dev acc after each epoch", 3),
    ),
    Figure("README.md", r"\*\*(\d+) s \([\d.]+ min\)\*\*", MAIN_JOB, (IDLE_RUN, "wall s")),
    Figure(
        "README.md",
        r"\*\*\d+ s \(([\d.]+) min\)\*\*",
        MAIN_JOB,
        (IDLE_RUN, "wall s"),
        DECIMALS["minutes"],
        scale=1 / 60,
    ),
    Figure("README.md", r"min\)\*\*, (\d+) s CPU", MAIN_JOB, (IDLE_RUN, "CPU s")),
    Figure("README.md", r"s CPU, ([\d.]+) GB peak memory", MAIN_JOB, (IDLE_RUN, "peak RSS")),
    # README and docs/gpu.md: the compiled H200 rows and ALP-KD Table 1's GPU-hours
    Figure(
        "README.md",
        r"teacher fine-tuning at ([\d,]+) examples/s",
        H200_COMPILE,
        compiled("teacher_finetune"),
        DECIMALS["examples/s"],
    ),
    Figure(
        "README.md",
        r"and live ALP at ([\d,]+), [\d.]+× and",
        H200_COMPILE,
        compiled("live_distill"),
        DECIMALS["examples/s"],
    ),
    Figure(
        "README.md",
        r"live ALP at [\d,]+, ([\d.]+)× and [\d.]+× eager",
        H200_COMPILE,
        speedup("teacher_finetune"),
        DECIMALS["speed-up"],
    ),
    Figure(
        "README.md",
        r"live ALP at [\d,]+, [\d.]+× and ([\d.]+)× eager",
        H200_COMPILE,
        speedup("live_distill"),
        DECIMALS["speed-up"],
    ),
    Figure(
        "README.md", r"puts ALP-KD Table 1 at ([\d.]+) GPU-hours", H200_COMPILE, TABLE1_COMPILED, DECIMALS["GPU-hours"]
    ),
    Figure(
        "docs/gpu.md",
        r"ALP-KD Table 1 at those rates: ([\d.]+) GPU-hours, one worker per GPU \([\d.]+ eager\): the goal",
        H200_COMPILE,
        TABLE1_COMPILED,
        DECIMALS["GPU-hours"],
    ),
    Figure(
        "docs/gpu.md",
        r"fine-tuning runs at ([\d,]+) examples/s and live ALP \(student and teacher compiled\) at [\d,]+, against [\d,]+ and [\d,]+ eager bf16 in the same process: both",
        H200_COMPILE,
        compiled("teacher_finetune"),
        DECIMALS["examples/s"],
    ),
    Figure(
        "docs/changelog.md",
        r"ALP-KD Table 1 at those rates ([\d.]+) GPU-hours, within the goal",
        H200_COMPILE,
        TABLE1_COMPILED,
        DECIMALS["GPU-hours"],
    ),
    Figure(
        "docs/decisions.md",
        r"Table 1 at the compiled rates came to ([\d.]+) GPU-hours",
        H200_COMPILE,
        TABLE1_COMPILED,
        DECIMALS["GPU-hours"],
    ),
    Figure(
        "docs/gpu.md",
        r"Four eager sweep workers per GPU give ([\d.]+)× one worker's BERT-base",
        H200_COMPILE,
        ("sweep_throughput", {"workers": 4}, "speedup"),
        DECIMALS["workers' speed-up"],
    ),
    # README, docs/sweeps.md and results/cpu_protocol_v2/README.md: the CPU protocol v2 reading
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
    Figure("README.md", r"TED > LWD holds on SST-2 \(([+\d.]+) points", f"{V2_TABLES}/summary.md", TED_LWD),
    Figure(
        "README.md",
        r"TED > LWD holds on SST-2 \([+\d.]+ points, Holm p = ([\d.]+)",
        f"{V2_TABLES}/summary.md",
        (("TED > LWD", "SST-2"), "Holm p"),
        DECIMALS["p"],
    ),
    Figure(
        "README.md",
        r"the paper's ([+\d.]+) lies inside our intervals",
        f"{V2_TABLES}/paper_gap.md",
        (("TED > LWD (TED Table 4)", "SST-2"), "the paper's gain, z"),
    ),
    Figure(
        "README.md",
        r"Two teachers against one on MRPC: ([+\d.]+) points",
        f"{V2_TABLES}/summary.md",
        (("two teachers > one", "MRPC"), "gain, points"),
    ),
    Figure("docs/sweeps.md", r"TED > LWD on SST-2\*\* \(([+\d.]+) points, Holm p", f"{V2_TABLES}/summary.md", TED_LWD),
    Figure(
        "docs/sweeps.md",
        r"TED > LWD on SST-2\*\* \([+\d.]+ points, Holm p = ([\d.]+)\)",
        f"{V2_TABLES}/summary.md",
        (("TED > LWD", "SST-2"), "Holm p"),
        DECIMALS["p"],
    ),
    Figure(
        "docs/sweeps.md",
        r"the paper's gain \(([+\d.]+)\) lies within our intervals",
        f"{V2_TABLES}/paper_gap.md",
        (("TED > LWD (TED Table 4)", "SST-2"), "the paper's gain, z"),
    ),
    Figure(
        "docs/sweeps.md",
        r"\*\*Two teachers against one\*\* \(MRPC, a stand-in for the paper's heterogeneous teachers\): ([+\d.]+),",
        f"{V2_TABLES}/summary.md",
        (("two teachers > one", "MRPC"), "gain, points"),
    ),
    Figure(
        "results/cpu_protocol_v2/README.md",
        r"TED > LWD on SST-2\*\*, ([+\d.]+) points, p =",
        f"{V2_TABLES}/summary.md",
        TED_LWD,
    ),
    Figure(
        "results/cpu_protocol_v2/README.md",
        r"points, p = ([\d.]+) ± [\d.]+, Holm p = [\d.]+ ± [\d.]+ \(10⁶",
        f"{V2_TABLES}/summary.md",
        (("TED > LWD", "SST-2"), "p"),
    ),
    Figure(
        "results/cpu_protocol_v2/README.md",
        r"Holm p = ([\d.]+) ± [\d.]+ \(10⁶ resamples",
        f"{V2_TABLES}/summary.md",
        (("TED > LWD", "SST-2"), "Holm p"),
    ),
    Figure(
        "results/cpu_protocol_v2/README.md",
        r"model gives Holm p = ([\d.]+)\.",
        f"{V2_TABLES}/paper_gap.md",
        (("TED > LWD", "SST-2"), "model p, Holm p", 1),
    ),
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
