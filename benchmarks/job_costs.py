"""What each training job costs per unit of work relative to its teacher, from recorded runs' timelines, and
the progress lines those runs would show with these costs.

Every ``kedro run`` of several training jobs logs ``eta_timeline.json`` (each step's kind, method, work,
seconds and load) on its MLflow run; the progress line prices a job not run yet by these costs
(``bert_kd.experiment.job_costs``). This prints each timeline's costs and their geometric mean (the
values ``JOB_COSTS`` holds when given the timelines it was made from), then each timeline's lines replayed:
at the load of each line with the mean costs, and told the load to come with the other timelines' costs
alone (what the pricing gives a run it has measured nothing of):

    python benchmarks/job_costs.py tests/experiment/fixtures/eta_timelines/*.json \
        --replay tests/experiment/fixtures/eta_timelines/main_job/*.json --out benchmarks/results/job_costs.md

``--replay`` timelines are replayed with the costs, not measured (the README's main job, reconstructed from its
record); every line before a job is measured is priced at ``TEACHER_PACE``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "src"))

from bert_kd.experiment.job_costs import JOB_COSTS, measured_costs, timeline_costs  # noqa: E402
from bert_kd.experiment.progress import replay  # noqa: E402

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


def _off(estimate: float | None, actual: float) -> tuple[str, str]:
    if estimate is None:
        return "none yet", ""
    return f"{estimate:.0f} s", f"{(estimate - actual) / actual:+.0%}"


def replay_table(timeline: dict, costs: dict, others: dict) -> str:
    """``timeline``'s lines: as logged (where it kept them), replayed at each line's load with ``costs``, and
    told the load to come with ``others`` (costs measured without this timeline)."""
    logged = timeline.get("logged") or {}
    header = "| job | step | actually left | logged | off by | replayed | off by | load foreseen | off by |"
    lines = [header, "|---|---|---|---|---|---|---|---|---|"]
    for at_line, foreseen in zip(replay(timeline, costs), replay(timeline, others, ahead=True)):
        shown = logged.get(str(at_line.job))
        cells = [str(at_line.job), at_line.name, f"{at_line.actual:.0f} s"]
        cells += [*_off(shown, at_line.actual), *_off(at_line.estimate, at_line.actual)]
        cells += _off(foreseen.estimate, foreseen.actual)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def record(paths: list[Path], replayed: list[Path] = ()) -> str:
    """The costs table, then each timeline's replay table under its name and how it was recorded; then each of
    ``replayed`` priced with the costs of every measured timeline."""
    timelines = {path.stem: json.loads(path.read_text()) for path in paths}
    costs = measured_costs(timelines.values(), STUDENT_METHODS)
    parts = [cost_table(paths)]
    for name, timeline in timelines.items():
        others = measured_costs([t for n, t in timelines.items() if n != name], STUDENT_METHODS)
        parts.append(f"**{name}**: {timeline.get('run', '')}\n\n{replay_table(timeline, costs, others)}")
    for path in replayed:
        timeline = json.loads(path.read_text())
        title = f"{path.parent.name}/{path.stem}"
        parts.append(
            f"**{title}** (replayed only): {timeline.get('run', '')}\n\n{replay_table(timeline, costs, costs)}"
        )
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("timelines", nargs="+", type=Path, help="eta_timeline.json files (a run's MLflow artifact)")
    parser.add_argument("--replay", nargs="*", type=Path, default=[], help="timelines replayed, not measured")
    parser.add_argument("--out", type=Path, help="also write the table (with the command) to this Markdown file")
    args = parser.parse_args(argv)
    table = record(args.timelines, args.replay)
    print(table)
    if args.out:

        def shown(paths):
            return " ".join(
                str(p.resolve().relative_to(REPO_ROOT) if p.resolve().is_relative_to(REPO_ROOT) else p) for p in paths
            )

        command = "python benchmarks/job_costs.py " + shown(args.timelines)
        if args.replay:
            command += " --replay " + shown(args.replay)
        args.out.write_text(f"Made by `{command}` (machine-made).\n\n{table}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
