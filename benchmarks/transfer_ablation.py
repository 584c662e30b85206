"""What the transfer set is worth here: three students, each distilled without and with the task's transfer set
(``augment_glue``), on SST-2, MRPC and RTE, several seeds: Tang et al.'s BiLSTM and a 2-layer BERT with logits-MSE
(Tang et al.'s three rules), and TinyBERT's task stage (TinyBERT's word replacement). Resumable: each trial is one
JSON under ``results/transfer_ablation/trials/`` (skipped when present); ``table.md`` is rebuilt from them with the
gain of the transfer set per student and task, its interval, Holm's correction over the cells and the sentences
of the reading (results/transfer_ablation/README.md).

    nice -n 10 .venv/bin/python benchmarks/transfer_ablation.py --glue-dir ../shared/glue [--tasks rte mrpc sst2]
    .venv/bin/python benchmarks/transfer_ablation.py --table-only     # the table from the committed trials

``--plain-epochs N --results results/<name>`` is the step-matched control: the arm without the set trains N epochs
(the transfer arm's row passes: 3 epochs × (1 + copies)), so a gain left is the teacher-labelled rows', not the
extra optimizer steps' (results/transfer_ablation_steps/README.md).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from paired_trials import (  # noqa: E402
    FLOOR,
    ROOT,
    Paired,
    Teachers,
    load_trials,
    paired,
    rebuild_table,
    run_missing,
    run_pipeline,
    select,
    teacher_of,
    teachers,
    trial_path,
)

RESULTS = ROOT / "results" / "transfer_ablation"
TASKS = ("sst2", "mrpc", "rte")
TASK_LABELS = {"sst2": "SST-2", "mrpc": "MRPC", "rte": "RTE"}
ARMS = ("plain", "transfer")
#: The CPU shortening (results/transfer_ablation/README.md): training rows per task and rewrites per row.
TRAIN_ROWS = 1000
COPIES = 4
ALPHA = 0.05


@dataclass(frozen=True)
class Row:
    """A student of the table: its pipelines without and with the transfer set, its metrics dataset, its rules."""

    label: str
    plain: str
    transfer: str
    metrics: str
    rules: tuple[str, ...]


ROWS = {
    "bilstm": Row(
        "BiLSTM, logits-MSE", "distill_bilstm", "distill_bilstm_transfer", "logits_mse", ("mask", "pos", "ngram")
    ),
    "bert2": Row(
        "2-layer BERT, logits-MSE",
        "distill_logits_mse",
        "distill_logits_mse_transfer",
        "logits_mse",
        ("mask", "pos", "ngram"),
    ),
    "tinybert": Row("TinyBERT task stage", "distill_tinybert", "distill_tinybert_transfer", "tinybert", ("tinybert",)),
}


def recorded_settings(arm: str, settings: dict) -> dict:
    """What a trial of ``arm`` records of the table's settings: ``run_trial`` writes it, and a folder's trials are
    checked against it (the plain arm has no rewrites; ``plain_epochs`` only where the step-matched control sets it)."""
    epochs = settings.get("plain_epochs") if arm == "plain" else None
    return {
        "train_rows": settings["train_rows"],
        "copies": settings["copies"] if arm == "transfer" else 0,
        **({"plain_epochs": epochs} if epochs else {}),
    }


def trial_params(task: str, row: str, arm: str, seed: int, settings: dict) -> dict:
    """The dotted parameters of one trial: the task, seed and shortening, the row's rules (both arms carry them so
    that the transfer arm's set is the one the row's paper uses; the plain arm builds none), and the plain arm's
    epochs where the step-matched control sets them (``student`` and ``tang_student``: whichever the row trains)."""
    epochs = recorded_settings(arm, settings).get("plain_epochs")
    return {
        "task": task,
        "seed": seed,
        "glue_dir": settings["glue_dir"],
        "max_train_samples": settings["train_rows"],
        "augment.copies": settings["copies"],
        "augment.seed": seed,
        "augment.rules": list(ROWS[row].rules),
        "runtime.progress_bar": False,
        "tracking.enabled": False,
        **({"student.training.epochs": epochs, "tang_student.training.epochs": epochs} if epochs else {}),
        **settings.get("extra", {}),
    }


def run_trial(task: str, row: str, arm: str, seed: int, settings: dict, root: Path = ROOT) -> dict:
    """One arm of one student on one task and seed: a ``kedro run`` of its pipeline; the student's evaluation."""
    spec = ROWS[row]
    pipeline = spec.transfer if arm == "transfer" else spec.plain
    params = trial_params(task, row, arm, seed, settings)
    evaluation = run_pipeline(pipeline, params, spec.metrics, root)
    return {
        "task": task,
        "row": row,
        "arm": arm,
        "seed": seed,
        "pipeline": pipeline,
        **recorded_settings(arm, settings),
        "evaluation": evaluation,
        "teacher": teacher_of(evaluation, root),  # its dev metrics: a teacher at the floor teaches one class
    }


def readings(trials: list[dict]) -> dict[tuple[str, str], Paired | None]:
    """The paired reading (transfer set against none) of every student and task, None where no pair has finished."""
    return {
        (task, row): paired(
            select(trials, task=task, row=row, arm="transfer"), select(trials, task=task, row=row, arm="plain")
        )
        for task in TASKS
        for row in ROWS
    }


def holm_by_cell(cells: dict) -> dict[tuple[str, str], tuple[float, float]]:
    """Holm's step-down correction of the one-sided bootstrap p (gain > 0) over the cells that have a reading."""
    from bert_kd.analysis.statistics import holm

    keys = [key for key, reading in cells.items() if reading is not None]
    adjusted = holm([cells[k].test.p for k in keys], [cells[k].test.mc_error for k in keys])
    return dict(zip(keys, adjusted))


def header(plain_epochs: int | None = None) -> str:
    """The table's head; the step-matched control names its plain arm's epochs."""
    plain = f"no transfer set, {plain_epochs} epochs" if plain_epochs else "no transfer set"
    return (
        f"| task | student | seeds | teacher | {plain} | transfer set | gain (points) | 95% interval | bootstrap p "
        "| Holm p | p (seed + example) |\n|---|---|---|---|---|---|---|---|---|---|---|"
    )


def plain_epochs_of(trials: list[dict]) -> int | None:
    """The plain arm's epochs of a folder's trials (None: conf's, the main table); refused when they differ."""
    found = {trial.get("plain_epochs") for trial in trials if trial.get("arm") == "plain"}
    if len(found) > 1:
        raise ValueError(f"plain-arm trials of several epochs in one folder: {sorted(found, key=str)}")
    return next(iter(found), None)


def cell_teachers(trials: list[dict], task: str, row: str) -> Teachers:
    """A cell's teachers (those of its seeds with both arms), from each trial's ``teacher`` record."""
    return teachers(select(trials, task=task, row=row, arm="plain"), select(trials, task=task, row=row, arm="transfer"))


def table_line(
    task: str, row: str, reading: Paired | None, adjusted: tuple[float, float] | None, teacher: Teachers
) -> str:
    head = f"| {TASK_LABELS[task]} | {ROWS[row].label} |"
    if reading is None:
        return head + " 0 | | not run yet | not run yet | | | | | |"
    t = reading.test
    return (
        f"{head} {reading.seeds} | {teacher.cell} | {100 * reading.worse:.2f} | {100 * reading.better:.2f} | "
        f"{100 * t.gain:+.2f} | "
        f"[{100 * t.low:+.2f}, {100 * t.high:+.2f}] | {t.p:.3f} | {adjusted[0]:.3f} | {reading.seed_example_cell} |"
    )


def sentence(task: str, row: str, reading: Paired, adjusted: float, cells: int, teacher: Teachers) -> str:
    """One cell's reading in words, and the seeds whose teacher sits at the majority-class floor."""
    t = reading.test
    verb = "raises" if t.gain > 0 else "lowers" if t.gain < 0 else "leaves"
    if reading.at_floor:
        verdict = (
            f"both arms are within {100 * FLOOR:.0f} point of answering the majority class always "
            f"({100 * reading.majority:.2f}): a floor, not a reading of the transfer set"
        )
    elif adjusted < ALPHA and t.gain > 0:
        verdict = f"a gain that holds after Holm's correction over the {cells} cells read"
    elif t.low <= 0 <= t.high:
        verdict = "its interval holds 0: no effect resolved at this size"
    else:
        verdict = f"not a gain after Holm's correction over the {cells} cells read"
    floor = ""
    if teacher.at_floor:
        which = ", ".join(str(s) for s in teacher.at_floor)
        floor = (
            f" The teacher of seed{'s' if len(teacher.at_floor) > 1 else ''} {which} is within {100 * FLOOR:.0f} point "
            "of the majority class's share: its labels carry little of the task."
        )
    return (
        f"- {ROWS[row].label}, {TASK_LABELS[task]}: the transfer set {verb} dev accuracy "
        f"{'unchanged' if verb == 'leaves' else f'by {abs(100 * t.gain):.2f} points'} ({100 * reading.worse:.2f} → {100 * reading.better:.2f}, {reading.seeds_text}; 95% interval "
        f"[{100 * t.low:+.2f}, {100 * t.high:+.2f}], Holm p = {adjusted:.3f}): {verdict}.{floor}"
    )


def reading_text(cells: dict, adjusted: dict, teacher: dict) -> str:
    """The sentences: one per cell read, then the count of gains that hold."""
    if not adjusted:
        return "No trial pair has finished yet: rerun the command in README.md and this reading is rebuilt.\n"
    lines = [
        sentence(task, row, cells[(task, row)], adjusted[(task, row)][0], len(adjusted), teacher[(task, row)])
        for task, row in adjusted
    ]
    held = [k for k in adjusted if adjusted[k][0] < ALPHA and cells[k].test.gain > 0 and not cells[k].at_floor]
    missing = sum(reading is None for reading in cells.values())
    summary = f"{len(held)} of the {len(adjusted)} cells read show a gain from the transfer set that holds after Holm's correction"
    floor = sum(cells[key].at_floor for key in adjusted)
    summary += (
        f"; {floor} of the {len(adjusted)} sit at the majority-class floor, where no gain is read" if floor else ""
    )
    summary += f"; {missing} of {len(cells)} cells are not run yet." if missing else "."
    return "\n".join(lines) + "\n\n" + summary + "\n"


def table(trials: list[dict]) -> str:
    """The table (every student × task, "not run yet" where no pair has finished) and its reading."""
    cells = readings(trials)
    adjusted = holm_by_cell(cells)
    teacher = {key: cell_teachers(trials, *key) for key in cells}
    lines = [header(plain_epochs_of(trials))] + [
        table_line(*key, cells[key], adjusted.get(key), teacher[key]) for key in cells
    ]
    return "\n".join(lines) + "\n\n## Reading\n\n" + reading_text(cells, adjusted, teacher)


def table_settings(args) -> dict:
    """The trials' settings from the command line (the plain arm's epochs only where given)."""
    settings = {"glue_dir": args.glue_dir, "train_rows": args.train_rows, "copies": args.copies}
    if args.plain_epochs:
        settings["plain_epochs"] = args.plain_epochs
    return settings


def run_trials(args, settings: dict) -> None:
    """Every missing trial, a task's seeds first (a finished task is a finished row), both arms of a pair together."""
    keys = ((t, r, a, s) for t in args.tasks for s in args.seeds for r in args.rows for a in ARMS)
    run_missing(args.results, keys, lambda task, row, arm, seed: run_trial(task, row, arm, seed, settings))


SETTINGS_RECORDED = ("train_rows", "copies", "plain_epochs")


def foreign_trial(results: Path, settings: dict) -> str | None:
    """Why a trial in the folder is not of this command's settings (a present trial is skipped by name, so a table
    of other training rows, rewrites or plain-arm epochs needs a folder of its own), or None."""
    for trial in load_trials(results):
        if trial.get("row") not in ROWS:
            continue  # not a trial of this table's (a file of another kind is no reason to stop)
        have = [trial.get(key) for key in SETTINGS_RECORDED]
        wanted = {"plain_epochs": None, **recorded_settings(trial.get("arm"), settings)}
        want = [wanted[key] for key in SETTINGS_RECORDED]
        if have != want:
            path = trial_path(results, trial["task"], trial["row"], trial["arm"], trial["seed"])
            return (
                f"{path} was run with --train-rows {have[0]}, --copies {have[1]} and --plain-epochs {have[2]}, not "
                f"{want[0]}, {want[1]} and {want[2]}: give its settings, or a fresh --results results/<name> for a "
                "table of other settings"
            )
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--glue-dir", default="../shared/glue")
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=["rte", "mrpc", "sst2"])
    parser.add_argument("--rows", nargs="+", choices=tuple(ROWS), default=list(ROWS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--train-rows", type=int, default=TRAIN_ROWS)
    parser.add_argument("--copies", type=int, default=COPIES)
    parser.add_argument(
        "--plain-epochs",
        type=int,
        default=None,
        help="the step-matched control: the arm without the set trains this many epochs (conf's 3 when absent)",
    )
    parser.add_argument("--results", type=Path, default=RESULTS, help="the table's folder (trials/, table.md)")
    parser.add_argument("--table-only", action="store_true")
    args = parser.parse_args(argv)
    if args.plain_epochs is not None and args.plain_epochs < 1:
        print(f"--plain-epochs {args.plain_epochs}: a positive number of epochs", file=sys.stderr)
        return 2
    if not args.table_only and not Path(args.glue_dir).is_dir():
        print(
            f"--glue-dir {args.glue_dir!r}: no such folder (a local copy of GLUE, e.g. ../shared/glue)", file=sys.stderr
        )
        return 2
    (args.results / "trials").mkdir(parents=True, exist_ok=True)
    if not args.table_only:
        settings = table_settings(args)
        why = foreign_trial(args.results, settings)
        if why:
            print(f"transfer_ablation: {why}", file=sys.stderr)
            return 2
        run_trials(args, settings)
    return rebuild_table(args.results, table)


if __name__ == "__main__":
    sys.exit(main())
