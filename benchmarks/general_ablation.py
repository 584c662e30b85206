"""What general distillation is worth here: TinyBERT's task stage started from the general student against the
same from the truncated pre-trained teacher (``student.init: pretrained``, TinyBERT's "without general
distillation" ablation), on SST-2, MRPC and RTE, several seeds. Resumable: each trial is one JSON under
``results/general_ablation/trials/`` (skipped when present); the table is rebuilt from them.

    nice -n 10 .venv/bin/python benchmarks/general_ablation.py --glue-dir ../shared/glue \
        --general data/06_models/store/general_student/<key> [--tasks sst2 mrpc rte] [--seeds 0 1 2]
    .venv/bin/python benchmarks/general_ablation.py --table-only     # the table from the committed trials
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from paired_trials import FLOOR, ROOT, paired, rebuild_table, run_missing, run_pipeline, select  # noqa: E402

RESULTS = ROOT / "results" / "general_ablation"
ARMS = ("general", "truncated")
#: The task stage's training rows per task by default (a shortened CPU protocol; the teacher's 64 tokens).
TRAIN_ROWS = 2000


def arm_params(arm: str, general: str) -> dict:
    if arm == "general":
        return {"student.model": general}
    return {"student.init": "pretrained"}


def run_trial(task: str, arm: str, seed: int, args) -> dict:
    """One ``distill_tinybert`` run in a Kedro session; its student's dev metrics and per-example correctness."""
    params = {
        "task": task,
        "seed": seed,
        "glue_dir": args.glue_dir,
        "max_train_samples": args.train_rows,
        "runtime.progress_bar": False,
        "tracking.enabled": False,
        **arm_params(arm, args.general),
    }
    return {
        "task": task,
        "arm": arm,
        "seed": seed,
        "general_student": args.general if arm == "general" else None,
        "evaluation": run_pipeline("distill_tinybert", params, "tinybert"),
    }


def table(trials: list[dict]) -> str:
    """Mean dev accuracy per arm and the paired reading (bootstrap over dev examples, seed × example variance), the
    majority class's share beside them, and a sentence per task."""
    lines = [
        "| task | seeds | general student | truncated teacher | majority class | gain (points) | 95% interval | "
        "bootstrap p | p (seed + example) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    sentences = []
    for task in ("sst2", "mrpc", "rte"):
        reading = paired(select(trials, task=task, arm="general"), select(trials, task=task, arm="truncated"))
        if reading is None:
            continue
        test = reading.test
        lines.append(
            f"| {task} | {reading.seeds} | {100 * reading.better:.2f} | {100 * reading.worse:.2f} | "
            f"{100 * reading.majority:.2f} | {100 * test.gain:+.2f} | [{100 * test.low:+.2f}, {100 * test.high:+.2f}] | "
            f"{test.p:.3f} | {reading.seed_example_p:.3f} |"
        )
        sentences.append(sentence(task, reading))
    return "\n".join(lines) + "\n\n" + "\n".join(sentences) + ("\n" if sentences else "")


def sentence(task: str, reading) -> str:
    """One task's reading in words: the floor first, else the gain and whether its interval holds 0."""
    test = reading.test
    head = f"- {task}: general student {100 * reading.better:.2f}, truncated teacher {100 * reading.worse:.2f}"
    if reading.at_floor:
        return (
            f"{head}, both within {100 * FLOOR:.0f} point of answering the majority class always "
            f"({100 * reading.majority:.2f}): at this size the students sit at the floor, and this row says nothing "
            "about general distillation."
        )
    verdict = "its interval holds 0: no effect resolved" if test.low <= 0 <= test.high else "its interval excludes 0"
    return (
        f"{head} ({reading.seeds} seeds): the general student's gain is {100 * test.gain:+.2f} points, 95% interval "
        f"[{100 * test.low:+.2f}, {100 * test.high:+.2f}]; {verdict}."
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--glue-dir", default="../shared/glue")
    parser.add_argument("--general", help="the general student's store folder (distill_general's general_student.json)")
    parser.add_argument("--tasks", nargs="+", default=["sst2", "mrpc", "rte"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--train-rows", type=int, default=TRAIN_ROWS)
    parser.add_argument("--table-only", action="store_true")
    args = parser.parse_args(argv)
    (RESULTS / "trials").mkdir(parents=True, exist_ok=True)
    if not args.table_only:
        if not args.general or not Path(args.general, "config.json").is_file():
            print(f"--general {args.general!r}: not a stored general student (no config.json)", file=sys.stderr)
            return 2
        keys = ((task, arm, seed) for task in args.tasks for seed in args.seeds for arm in ARMS)
        run_missing(RESULTS, keys, lambda task, arm, seed: run_trial(task, arm, seed, args))  # a task's seeds first
    return rebuild_table(RESULTS, table)


if __name__ == "__main__":
    sys.exit(main())
