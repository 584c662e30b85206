"""What each training job costs per unit of work relative to its teacher, from recorded runs' timelines.

Every ``kedro run`` of several training jobs logs ``eta_timeline.json`` (each step's kind, method, work,
seconds and load) on its MLflow run; the progress line prices a job not run yet by these costs
(``bert_kd.experiment.job_costs``). This prints each timeline's costs and their geometric mean, the
values ``JOB_COSTS`` holds when given the timelines it was made from:

    python benchmarks/job_costs.py tests/experiment/fixtures/eta_timelines/*.json --out benchmarks/results/job_costs.md
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "src"))

from bert_kd.experiment.job_costs import JOB_COSTS, measured_costs, timeline_costs  # noqa: E402

#: The students' methods whose median is the price of a method no timeline measured.
STUDENT_METHODS = ("alp", "ckd", "logits_mse", "nkd", "pkd", "rkd", "tinybert")


def cost_table(paths: list[Path]) -> str:
    """A Markdown table: one column per timeline, then their geometric mean and ``JOB_COSTS``."""
    timelines = [json.loads(path.read_text()) for path in paths]
    each = [timeline_costs(t) for t in timelines]
    combined = measured_costs(timelines, STUDENT_METHODS)
    header = ["cost (s per unit of work / teacher's)", *(p.stem for p in paths), "geometric mean", "JOB_COSTS"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for key in sorted(set(combined) | set(JOB_COSTS)):
        cells = [f"{c[key]:.2f}" if key in c else "" for c in each]
        cells += [f"{combined[key]:.2f}" if key in combined else "", f"{JOB_COSTS.get(key, '')}"]
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("timelines", nargs="+", type=Path, help="eta_timeline.json files (a run's MLflow artifact)")
    parser.add_argument("--out", type=Path, help="also write the table (with the command) to this Markdown file")
    args = parser.parse_args(argv)
    table = cost_table(args.timelines)
    print(table)
    if args.out:
        shown = [
            p.resolve().relative_to(REPO_ROOT) if p.resolve().is_relative_to(REPO_ROOT) else p for p in args.timelines
        ]
        command = "python benchmarks/job_costs.py " + " ".join(map(str, shown))
        args.out.write_text(f"# Job costs from recorded timelines\n\nMade by `{command}` (machine-made).\n\n{table}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
