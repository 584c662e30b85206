"""Per-stage seconds of one main-job run, read from its timestamped log (scripts/main_job.sh writes it).

The log carries the process's start and end (``start:`` / ``end:`` lines, seconds since the epoch, written by
main_job.sh), Kedro's ``Running node`` / ``Completed node`` lines and the loop's ``<job> epoch k`` lines, all
stamped ``HH:MM:SS.mmm`` by ``scripts/main_job_logging.yml``. A stage is the time between two of those
marks, so the stages add up to the wall time:

    python benchmarks/stage_times.py data/08_reporting/main_job/<name>.log [other.log ...]

prints one column per log (and ``--json`` the same as JSON).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import datetime, timedelta
from pathlib import Path

STAMP = re.compile(r"^(\d\d:\d\d:\d\d\.\d{3}) (\S+) \w+ (.*)$")
RUNNING = re.compile(r"Running node: (\w+):")
COMPLETED = re.compile(r"Completed node: (\S+)")
EPOCH = re.compile(r"(\w+) \w+ epoch (\d+):")
EDGE = re.compile(r"^(start|end): (\d+(?:\.\d+)?)$")

#: Nodes grouped into the stages the main job's time is read in (a node not named here is its own stage).
STAGE_OF_NODE = {
    "gather_data_source": "ingest",
    "build_run_settings": "ingest",
    "ingest_glue": "ingest",
    "tokenize_for_teacher": "tokenise",
    "build_student": "student set-up",
    "prepare_student_data": "student set-up",
    "cache_teacher_outputs": "teacher cache",
    "evaluate_teacher": "teacher evaluation",
    "evaluate_student": "student evaluation",
    "alp_attention_figure": "figures",
}


def stage_seconds(lines: list[str]) -> dict[str, float]:
    """Seconds per stage of one log, in the order the stages ran; ``wall`` is their sum."""
    edges: dict[str, datetime] = {}
    marks: list[tuple[datetime, str]] = []  # (time, the stage that ENDS at this mark)
    day = None
    last_clock = None
    for line in lines:
        edge = EDGE.match(line.strip())
        if edge:
            edges[edge.group(1)] = datetime.fromtimestamp(float(edge.group(2)))
            day = day or edges[edge.group(1)].date()
            continue
        stamp = STAMP.match(line)
        if not stamp or day is None:
            continue
        clock = datetime.strptime(stamp.group(1), "%H:%M:%S.%f").time()
        if last_clock is not None and clock < last_clock:
            day += timedelta(days=1)  # the run went past midnight
        last_clock = clock
        when = datetime.combine(day, clock)
        message = stamp.group(3)
        if RUNNING.search(message):
            marks.append((when, "between nodes"))
        elif m := EPOCH.search(message):
            marks.append((when, f"{m.group(1)} epoch {m.group(2)}"))
        elif m := COMPLETED.search(message):
            name = m.group(1).rsplit(".", 1)[-1]
            after_epochs = marks and " epoch " in marks[-1][1] and name in ("train_teacher", "distill")
            label = f"{name}: save and log" if after_epochs else STAGE_OF_NODE.get(name, name)
            marks.append((when, label))
    if "start" not in edges or "end" not in edges or not marks:
        raise ValueError("the log has no start:/end: lines or no timestamped Kedro lines: run it with main_job.sh")
    seconds: dict[str, float] = {}
    previous = edges["start"]
    first = True
    for when, label in marks:
        label = "start-up (imports, catalog, hooks)" if first else label
        first = False
        seconds[label] = seconds.get(label, 0.0) + (when - previous).total_seconds()
        previous = when
    seconds["end (hooks, MLflow parent run, exit)"] = (edges["end"] - previous).total_seconds()
    seconds["wall"] = (edges["end"] - edges["start"]).total_seconds()
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="+", type=Path)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a Markdown table")
    args = parser.parse_args(argv)
    tables = {}
    for log in args.logs:
        try:
            tables[log.stem] = stage_seconds(log.read_text(encoding="utf-8", errors="replace").splitlines())
        except (OSError, ValueError) as error:
            print(f"stage_times: {log}: {error}", file=sys.stderr)
            return 2
    if args.json:
        print(json.dumps(tables, indent=2))
        return 0
    stages = list(dict.fromkeys(stage for table in tables.values() for stage in table))
    print("| stage | " + " | ".join(tables) + " |")
    print("|---|" + "---|" * len(tables))
    for stage in stages:
        print(f"| {stage} | " + " | ".join(f"{table.get(stage, 0.0):.1f}" for table in tables.values()) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
