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

from paired_trials import (  # noqa: E402
    FLOOR,
    ROOT,
    load_trials,
    paired,
    rebuild_table,
    run_missing,
    run_pipeline,
    select,
    teacher_of,
    teachers,
)

RESULTS = ROOT / "results" / "general_ablation"
ARMS = ("general", "truncated")
#: The task stage's training rows per task by default (a shortened CPU protocol; the teacher's 64 tokens).
TRAIN_ROWS = 2000
TASKS = ("sst2", "mrpc", "rte")


def train_rows(items: list[str]) -> dict[str, int | None]:
    """``--train-rows`` as rows per task (None: the whole training split). Each item is ``ROWS`` or ``all`` for
    every task, or ``TASK=ROWS`` / ``TASK=all`` for one (later items win): ``2000 mrpc=all rte=all``."""
    rows: dict[str, int | None] = dict.fromkeys(TASKS, TRAIN_ROWS)
    for item in items:
        task, _, value = item.rpartition("=")
        if task and task not in TASKS:
            raise ValueError(f"--train-rows {item!r}: {task!r} is not one of {', '.join(TASKS)}")
        if value != "all" and not (value.isdigit() and int(value) > 0):
            raise ValueError(f"--train-rows {item!r}: give a positive number of rows or 'all' (e.g. mrpc=all)")
        for name in [task] if task else TASKS:
            rows[name] = None if value == "all" else int(value)
    return rows


def rows_label(rows: int | str | None) -> str:
    return "all" if rows is None else str(rows)


def recorded_rows(trial: dict) -> int | str | None:
    """The training rows a trial records (None: the whole split); "unrecorded" where it does not say."""
    if "train_rows" in trial:
        return trial["train_rows"]
    return trial["evaluation"].get("info", {}).get("train_examples", "unrecorded")


def arm_params(arm: str, general: str) -> dict:
    if arm == "general":
        return {"student.model": general}
    return {"student.init": "pretrained"}


def settings(pairs: list[str]) -> dict:
    """``--set KEY=VALUE`` pairs as dotted Kedro parameters (values parsed as YAML: 5 is an int)."""
    import yaml

    return {key: yaml.safe_load(value) for key, _, value in (pair.partition("=") for pair in pairs)}


def mismatched(trials: list[dict], args) -> str | None:
    """Why the trials already in the results folder are of another table than ``args`` asks for (None if not):
    a finished trial is skipped by name, so trials of other rows or settings must not share a folder."""
    wanted_rows, wanted_settings = args.rows, settings(args.set)
    for trial in trials:
        rows = recorded_rows(trial)
        wanted = wanted_rows.get(trial["task"])
        if (rows, trial.get("settings", {})) != (wanted, wanted_settings):
            name = f"{trial['task']}-{trial['arm']}-{trial['seed']}.json"
            return (
                f"{args.results / 'trials' / name} was run with {rows_label(rows)} training rows and settings "
                f"{trial.get('settings', {})}, not {rows_label(wanted)} (--train-rows) and {wanted_settings}: a "
                "different table. Give it its own folder (--results results/<name>)."
            )
    return None


def run_trial(task: str, arm: str, seed: int, args) -> dict:
    """One ``distill_tinybert`` run in a Kedro session; its student's dev metrics and per-example correctness."""
    extra, rows = settings(args.set), args.rows[task]
    params = {
        "task": task,
        "seed": seed,
        "glue_dir": args.glue_dir,
        "max_train_samples": rows,
        "runtime.progress_bar": False,
        "tracking.enabled": False,
        **extra,
        **arm_params(arm, args.general),
    }
    evaluation = run_pipeline("distill_tinybert", params, "tinybert")
    return {
        "task": task,
        "arm": arm,
        "seed": seed,
        "general_student": args.general if arm == "general" else None,
        "train_rows": rows,
        "settings": extra,
        "evaluation": evaluation,
        "teacher": teacher_of(evaluation),
    }


def table(trials: list[dict]) -> str:
    """Mean dev accuracy per arm and the paired reading (bootstrap over dev examples, seed × example variance), the
    majority class's share beside them, and a sentence per task."""
    lines = [
        "| task | seeds | training rows | fine-tuned teacher | from the general student | from the truncated teacher | "
        "majority class | gain (points) | 95% interval | bootstrap p | p (seed + example) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    sentences = []
    for task in TASKS:
        general, truncated = select(trials, task=task, arm="general"), select(trials, task=task, arm="truncated")
        reading = paired(general, truncated)
        if reading is None:
            continue
        test = reading.test
        seeds = sorted(set(general) & set(truncated))
        rows = ", ".join(sorted({rows_label(recorded_rows(general[s])) for s in seeds}))
        lines.append(
            f"| {task} | {reading.seeds} | {rows} | {teachers(general, truncated).cell} | {100 * reading.better:.2f} | {100 * reading.worse:.2f} | "
            f"{100 * reading.majority:.2f} | {100 * test.gain:+.2f} | [{100 * test.low:+.2f}, {100 * test.high:+.2f}] | "
            f"{test.p:.3f} | {reading.seed_example_cell} |"
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
        f"{head} ({reading.seeds_text}): the general student's gain is {100 * test.gain:+.2f} points, 95% interval "
        f"[{100 * test.low:+.2f}, {100 * test.high:+.2f}]; {verdict}."
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--glue-dir", default="../shared/glue")
    parser.add_argument("--general", help="the general student's store folder (distill_general's general_student.json)")
    parser.add_argument("--tasks", nargs="+", default=["sst2", "mrpc", "rte"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument(
        "--train-rows",
        nargs="+",
        default=[str(TRAIN_ROWS)],
        metavar="[TASK=]ROWS",
        help="training rows (teacher and student), 'all' for the whole split; per task with TASK=: 2000 mrpc=all",
    )
    parser.add_argument(
        "--set", nargs="*", default=[], metavar="KEY=VALUE", help="more dotted parameters, e.g. training.epochs=5"
    )
    parser.add_argument("--results", type=Path, default=RESULTS, help="the table's folder (trials/ and table.md)")
    parser.add_argument("--table-only", action="store_true")
    args = parser.parse_args(argv)
    (args.results / "trials").mkdir(parents=True, exist_ok=True)
    if not args.table_only:
        if not args.general or not Path(args.general, "config.json").is_file():
            print(f"--general {args.general!r}: not a stored general student (no config.json)", file=sys.stderr)
            return 2
        bad = [pair for pair in args.set if "=" not in pair]
        why = f"--set {bad[0]!r}: not KEY=VALUE (e.g. --set training.epochs=5)" if bad else None
        try:
            args.rows = train_rows(args.train_rows)  # rows per task, parsed once
        except ValueError as error:
            why = why or str(error)
        why = why or mismatched(load_trials(args.results), args)
        if why:
            print(f"general_ablation: {why}", file=sys.stderr)
            return 2
        keys = ((task, arm, seed) for task in args.tasks for seed in args.seeds for arm in ARMS)
        run_missing(
            args.results, keys, lambda task, arm, seed: run_trial(task, arm, seed, args)
        )  # a task's seeds first
    return rebuild_table(args.results, table)


if __name__ == "__main__":
    sys.exit(main())
