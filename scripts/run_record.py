"""Machine-made JSON records of timed runs: the main job (from its log) and the test suite's walls.

    python scripts/run_record.py main-job data/08_reporting/main_job/<name>.log benchmarks/results/main_job_<name>.json
    python scripts/run_record.py suite <README command's log> <slow tier's log> benchmarks/results/suite_time.json

A record holds what was measured (per-stage seconds, dev accuracy after each epoch, wall, CPU and peak memory
from ``/usr/bin/time -v``; or each tier's wall and counts), where (CPU model, cores, kernels the CPU offers),
on what (the commit, and whether the tree was clean) and under which load (the 1-minute load average before and
after, the threads). ``tests/test_figures.py`` checks the README's and the docs' figures against these records.
The file is written under a temporary name and renamed, so a record is whole or absent.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # stage_times.py
from stage_times import stage_seconds  # noqa: E402

EPOCH = re.compile(r"(teacher|student)?[^:]*? epoch (\d+): (\{.*\})$")
TIME_V = {
    "wall_s": re.compile(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)"),
    "user_s": re.compile(r"User time \(seconds\): ([\d.]+)"),
    "sys_s": re.compile(r"System time \(seconds\): ([\d.]+)"),
    "peak_rss_kb": re.compile(r"Maximum resident set size \(kbytes\): (\d+)"),
}
LOAD = re.compile(r"load averages?: ([\d.]+)")


def machine() -> dict:
    """The CPU this ran on: model, cores, the vector kernels it offers."""
    info = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace") if Path("/proc/cpuinfo").exists() else ""
    model = re.search(r"model name\s*:\s*(.+)", info)
    flags = set((re.search(r"flags\s*:\s*(.+)", info) or [None, ""])[1].split())
    return {
        "cpu": model[1].strip() if model else "unknown",
        "cores": os.cpu_count(),
        "avx512": "avx512f" in flags,
        "amx": "amx_tile" in flags,
        "avx2": "avx2" in flags,
        "gpu": None,
    }


def git(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=False, cwd=cwd)


def commit() -> dict:
    return {
        "commit": git("rev-parse", "HEAD").stdout.strip(),
        "clean": git("status", "--porcelain", "--untracked-files=no").stdout.strip() == "",
    }


def seconds(clock: str) -> float:
    """``2:44.31`` or ``1:02:44`` as seconds."""
    total = 0.0
    for part in clock.split(":"):
        total = total * 60 + float(part)
    return total


def main_job(log: Path) -> dict:
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    header = dict(line.split(": ", 1) for line in lines[:6] if ": " in line)
    accuracy: dict[str, list[float]] = {"teacher": [], "student": []}
    for line in lines:
        if (found := EPOCH.search(line)) and "accuracy" in found[3]:
            kind = "teacher" if "teacher" in line.split(" epoch ")[0] else "student"
            accuracy[kind].append(round(100 * float(ast.literal_eval(found[3])["accuracy"]), 2))
    measured = {key: pattern.search("\n".join(lines)) for key, pattern in TIME_V.items()}
    if not all(measured.values()) or not accuracy["teacher"] or not accuracy["student"]:
        raise ValueError(f"{log}: no /usr/bin/time -v block or no epoch accuracies: run it with main_job.sh")
    loads = [float(m[1]) for line in lines if line.startswith("load ") and (m := LOAD.search(line))]
    return {
        "what": "kedro run --pipelines=distill_alp (scripts/main_job.sh)",
        "params": header.get("params"),
        "threads": int(header.get("threads", 0)),
        "niceness": int(header.get("nice", 0)),
        "teacher_dev_accuracy_each_epoch": accuracy["teacher"],
        "student_dev_accuracy_each_epoch": accuracy["student"],
        "teacher_dev_accuracy": max(accuracy["teacher"]),  # training keeps the best epoch on dev
        "student_dev_accuracy": max(accuracy["student"]),
        "wall_s": round(seconds(measured["wall_s"][1]), 1),
        "cpu_s": round(float(measured["user_s"][1]) + float(measured["sys_s"][1]), 1),
        "peak_rss_gb": round(int(measured["peak_rss_kb"][1]) / 1024**2, 2),
        "stage_seconds": {k: round(v, 1) for k, v in stage_seconds(lines).items()},
        "load_before": loads[0] if loads else None,
        "load_after": loads[-1] if len(loads) > 1 else None,
    }


SUMMARY = re.compile(r"^=*\s*((?:\d+ [a-z]+(?:, )?)+) in ([\d.]+)s", re.M)
#: one line of pytest's ``--durations`` list: ``335.90s call     tests/x.py::test_y``
DURATION = re.compile(r"^([\d.]+)s (call|setup|teardown)\s+(\S+)$", re.M)


def tier(log: Path) -> dict | None:
    """One pytest tier's wall and counts, from its log's last line (``1341 passed, 2 skipped in 270.1s``), and its
    slowest tests where the log has ``--durations``' list; None for a tier not run."""
    if not log.exists():
        return None
    text = log.read_text(encoding="utf-8", errors="replace")
    header = dict(line.split(": ", 1) for line in text.splitlines()[:4] if ": " in line)
    found = SUMMARY.findall(text)
    if not found:
        raise ValueError(f"{log}: no pytest summary line")
    counts = {name: int(n) for n, name in re.findall(r"(\d+) (\w+)", found[-1][0])}
    loads = [float(m[1]) for line in text.splitlines() if line.startswith("load ") and (m := LOAD.search(line))]
    return {
        "command": header.get("command"),
        "wall_s": round(float(found[-1][1]), 1),
        "counts": counts,
        "load_before": loads[0] if loads else None,
        "load_after": loads[-1] if len(loads) > 1 else None,
        "slowest": [{"s": float(s), "phase": phase, "test": test} for s, phase, test in DURATION.findall(text)],
    }


def reference_row(name: str, table: Path = Path("benchmarks/results/main_job.md")) -> dict:
    """The row of ``table`` whose first cell is ``name``, by column: an earlier measurement (the idle machine's)
    carried into a record taken under load, so the record holds both and says where each came from."""
    for line in table.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip().replace("**", "") for cell in line.strip().strip("|").split("|")]
        if cells and cells[0] == name:
            header = next(
                [c.strip() for c in previous.strip().strip("|").split("|")]
                for previous in reversed(table.read_text(encoding="utf-8").split(line)[0].splitlines())
                if previous.startswith("| ") and "---" not in previous
            )
            return {"source": f"{table} ({name})", **dict(zip(header[1:], cells[1:]))}
    raise ValueError(f"{table}: no row {name!r}")


def write(record: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["main-job", "suite"])
    parser.add_argument("paths", nargs="+", type=Path, help="the log(s), then the record to write")
    parser.add_argument("--reference", help="main-job: a row of benchmarks/results/main_job.md to carry along")
    args = parser.parse_args(argv)
    *logs, out = args.paths
    try:
        if args.kind == "main-job":
            measured = main_job(logs[0])
            if args.reference:
                measured["idle_reference"] = reference_row(args.reference)
        else:
            measured = {"readme_command": tier(logs[0]), "slow_tier": tier(logs[1])}
    except (OSError, ValueError, IndexError) as error:
        print(f"run_record: {error}", file=sys.stderr)
        return 2
    when = datetime.now(UTC).isoformat(timespec="seconds")
    record = {**measured, "machine": machine(), **commit(), "recorded": when}
    write(record, out)
    print(f"record: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
