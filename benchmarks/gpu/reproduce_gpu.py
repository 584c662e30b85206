"""Helpers of ``benchmarks/gpu/reproduce_gpu.sh``: the random BERT-base it trains, a tiny GLUE folder for its dry
run, and the record of a ``reproduce`` slice with ALP-KD Table 1's GPU-hours end to end.

    python benchmarks/gpu/reproduce_gpu.py random-bert OUTDIR --tokenizer DIR [--tiny]
    python benchmarks/gpu/reproduce_gpu.py tiny-glue ROOT          # tiny RTE and MRPC (the dry run)
    python benchmarks/gpu/reproduce_gpu.py summarize RESULTS_DIR --workers N --wall-s S --json OUT.json [--md OUT.md]

``summarize`` reads the slice's trial JSONs (each records its wall ``seconds``, what its fits compiled and
their wall seconds per phase) and estimates every trial of ALP-KD Table 1 from them (:func:`table1_estimate`).
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Mapping, Sequence

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "gpu"))

TABLE = "alp_kd_table1"

#: GLUE dev-set sizes (examples) as the GLUE distribution ships them (MNLI: matched).
GLUE_DEV_SIZES = {
    "cola": 1043,
    "sst2": 872,
    "mrpc": 408,
    "stsb": 1500,
    "qqp": 40430,
    "mnli": 9815,
    "qnli": 5463,
    "rte": 277,
}

#: The epochs of ALP-KD Table 1's teacher fine-tuning (the table's teacher block).
TEACHER_EPOCHS = 3.0

#: What the record's figures include, written into it.
INCLUDES = (
    "wall time of whole trials as `kedro run --pipelines=reproduce` runs them, with the workers sharing one GPU: "
    "data loading and tokenisation, model building, the teacher's fine-tuning (once per task), the teacher-cache "
    "pass, compilation, training steps, per-epoch evaluation, checkpoints, the trial's dev evaluation and its "
    "result file"
)


def make_random_bert(directory: Path, tokenizer_dir: Path | None, tiny: bool = False, seed: int = 0) -> Path:
    """A randomly initialised BERT-base classifier (12 layers, hidden 768; ``tiny``: the dry run's 4-layer
    width-32 BERT) saved with the tokenizer files of ``tokenizer_dir`` (BERT's uncased WordPiece vocabulary):
    timing needs BERT-base's shapes, not its pre-trained weights, which a machine without internet lacks."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    if tiny:
        from gpu_run_helper import make_tiny_teacher

        return make_tiny_teacher(directory)
    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    config = BertConfig(vocab_size=tokenizer.vocab_size, num_labels=2)  # BERT-base's defaults
    BertForSequenceClassification(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def write_tiny_glue(root: Path, n_train: int = 64, n_dev: int = 16) -> Path:
    """Tiny RTE- and MRPC-layout GLUE folders whose label one word carries (the dry run)."""
    rng = random.Random(0)
    for task, header in (
        ("RTE", "index\tsentence1\tsentence2\tlabel"),
        ("MRPC", "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String"),
    ):
        folder = root / task
        folder.mkdir(parents=True, exist_ok=True)
        for split, n in (("train", n_train), ("dev", n_dev)):
            lines = [header]
            for i in range(n):
                yes = rng.randint(0, 1)
                first, second = f"the {rng.choice(['movie', 'film', 'plot'])} was fine", "yes good" if yes else "no bad"
                if task == "RTE":
                    lines.append(f"{i}\t{first}\t{second}\t{'entailment' if yes else 'not_entailment'}")
                else:
                    lines.append(f"{yes}\t{i}\t{i + 1}\t{first}\t{second}")
            (folder / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def load_trials(results_dir: Path) -> list[dict]:
    """The slice's timed trial records (``<results_dir>/**/<key>.json`` with a ``result`` and its ``seconds``)."""
    trials = []
    for path in sorted(Path(results_dir).rglob("*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        # a result adopted from another worker's results folder has no timing here (seconds: null)
        if isinstance(record, dict) and "result" in record and "spec" in record and record.get("seconds") is not None:
            trials.append(record)
    return trials


def _phase(record: Mapping, name: str) -> float:
    return float((record.get("phases") or {}).get(f"{name}_s", 0.0))


def _compile(record: Mapping, name: str) -> float:
    return float((record.get("compile") or {}).get(name, 0.0))


def _epochs(record: Mapping, who: str, default: float = 3.0) -> float:
    return float(((record["spec"].get(who) or {}).get("training") or {}).get("epochs") or default)


def per_trial_costs(
    trials: Sequence[Mapping], train_sizes: Mapping[str, int], dev_sizes: Mapping[str, int] = GLUE_DEV_SIZES
) -> dict:
    """Medians over the slice's trials (a trial that also fine-tuned its task's teacher is an outlier the
    median leaves out): seconds per student training example (steps and data, compilation taken out), per
    dev example evaluated, per checkpointing and the rest of a trial (model building, the teacher cache,
    the trial's own dev evaluation); and per teacher training example, from each task's slowest trial
    over its median."""
    train, evaluate, checkpoint, other, by_task = [], [], [], [], {}
    for record in trials:
        task = record["spec"]["trial"]["task"]
        epochs = _epochs(record, "student")
        steps_s = max(0.0, _phase(record, "train") + _phase(record, "data") - _compile(record, "seconds"))
        train.append(steps_s / (train_sizes[task] * epochs))
        evaluate.append(_phase(record, "eval") / (dev_sizes[task] * epochs))
        checkpoint.append(_phase(record, "checkpoint"))
        measured = sum(_phase(record, p) for p in ("train", "data", "eval", "checkpoint"))
        other.append(max(0.0, float(record["seconds"]) - measured))
        by_task.setdefault(task, []).append(steps_s)
    teacher = []
    for task, seconds in by_task.items():
        if len(seconds) >= 3:  # with fewer the median is no baseline
            teacher_epochs = _epochs(next(r for r in trials if r["spec"]["trial"]["task"] == task), "teacher")
            teacher.append((max(seconds) - statistics.median(seconds)) / (train_sizes[task] * teacher_epochs))
    return {
        "train_s_per_example": statistics.median(train),
        "eval_s_per_example": statistics.median(evaluate),
        "checkpoint_s": statistics.median(checkpoint),
        "other_s": statistics.median(other),
        "teacher_s_per_example": statistics.median(teacher) if teacher else None,
    }


def table1_estimate(
    costs: Mapping,
    table_trials: Sequence,
    workers: int,
    compile_s_per_worker: float,
    train_sizes: Mapping[str, int],
    dev_sizes: Mapping[str, int] = GLUE_DEV_SIZES,
) -> dict:
    """GPU-hours of a table's trials (``.task``, ``.training``) on one GPU shared by ``workers`` workers, end
    to end: every trial at the slice's per-trial costs (measured with that many workers sharing the GPU, so a
    GPU runs ``workers`` trials at once), plus one teacher fine-tuning per task (alone) and one compilation per
    worker. Teacher hours are left out (and said) where the slice gave no teacher cost."""
    trial_s = 0.0
    tasks = set()
    for trial in table_trials:
        epochs = float(trial.training.get("epochs", 3.0))
        tasks.add(trial.task)
        trial_s += (
            costs["other_s"]
            + costs["checkpoint_s"]
            + costs["train_s_per_example"] * train_sizes[trial.task] * epochs
            + costs["eval_s_per_example"] * dev_sizes[trial.task] * epochs
        )
    per_example = costs.get("teacher_s_per_example")
    teacher_s = sum(per_example * train_sizes[t] * TEACHER_EPOCHS for t in tasks) if per_example else 0.0
    student_s = trial_s / workers
    total_s = student_s + teacher_s + compile_s_per_worker
    return {
        "trials": len(table_trials),
        "student_gpu_hours": student_s / 3600,
        "teacher_gpu_hours": teacher_s / 3600,
        "teacher_hours_measured": per_example is not None,
        "compile_gpu_hours": compile_s_per_worker / 3600,
        "gpu_hours": total_s / 3600,
    }


def summarize(trials: Sequence[Mapping], workers: int, wall_s: float, device: str, table_trials: Sequence) -> dict:
    """The record of a slice: its totals and Table 1's GPU-hours end to end (:func:`table1_estimate`)."""
    from gpu_check import GLUE_TRAIN_SIZES

    if not trials:
        raise ValueError("no finished trial in the slice's results: nothing to estimate from")
    totals = {name: sum(_phase(r, name) for r in trials) for name in ("train", "data", "eval", "checkpoint")}
    compile_s = sum(_compile(r, "seconds") for r in trials)
    costs = per_trial_costs(trials, GLUE_TRAIN_SIZES)
    estimate = table1_estimate(costs, table_trials, workers, compile_s / workers, GLUE_TRAIN_SIZES)
    per_task = {}
    for task in sorted({r["spec"]["trial"]["task"] for r in trials}):
        seconds = [float(r["seconds"]) for r in trials if r["spec"]["trial"]["task"] == task]
        per_task[task] = {
            "trials": len(seconds),
            "train_rows": GLUE_TRAIN_SIZES[task],
            "median_trial_s": statistics.median(seconds),
            "trials_per_gpu_hour": workers * 3600 / statistics.median(seconds),
        }
    return {
        "device": device,
        "trials": len(trials),
        "methods": sorted({r["spec"]["trial"]["method"] for r in trials}),
        "workers": workers,
        "wall_s": round(wall_s, 1),
        "compile_s": round(compile_s, 1),
        "train_s": round(totals["train"] - compile_s, 1),
        "data_s": round(totals["data"], 1),
        "eval_s": round(totals["eval"], 1),
        "checkpoint_s": round(totals["checkpoint"], 1),
        "trial_s": round(sum(float(r["seconds"]) for r in trials), 1),
        "recompiles": int(sum(_compile(r, "recompiles") for r in trials)),
        "graphs_compiled": int(sum(_compile(r, "graphs") for r in trials)),
        "per_task": per_task,
        "per_trial_costs": costs,
        "table1": estimate,
        "table1_gpu_hours_end_to_end": round(estimate["gpu_hours"], 1),
        "includes": INCLUDES,
    }


def write_record(summary: Mapping, json_path: Path, md_path: Path | None, command: str, commit: str) -> None:
    """``json_path`` (the summary, the command and the commit) and a ``.md`` beside it saying what it holds."""
    record = {**summary, "command": command, "commit": commit, "python": platform.python_version()}
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    if md_path is None:
        return
    t = summary["table1"]
    lines = [
        f"# `reproduce` slice on one {summary['device']}",
        "",
        f"Command: `{command}`  ",
        f"Commit: `{commit}`",
        "",
        f"{summary['trials']} trials ({', '.join(summary['methods'])}) with {summary['workers']} workers on one GPU: "
        f"{summary['wall_s']} s wall; summed over trials: compile {summary['compile_s']} s, training steps "
        f"{summary['train_s']} s, data loading {summary['data_s']} s, evaluation {summary['eval_s']} s, checkpoints "
        f"{summary['checkpoint_s']} s; {summary['recompiles']} recompilations, {summary['graphs_compiled']} graphs.",
        "",
        "| task | trials | median trial s | trials per GPU-hour |",
        "|---|---|---|---|",
        *(
            f"| {task} | {row['trials']} | {row['median_trial_s']:.1f} | {row['trials_per_gpu_hour']:.0f} |"
            for task, row in summary["per_task"].items()
        ),
        "",
        f"**ALP-KD Table 1 end to end: {summary['table1_gpu_hours_end_to_end']} GPU-hours** ({t['trials']} trials; "
        f"students {t['student_gpu_hours']:.1f}, teachers {t['teacher_gpu_hours']:.1f}"
        f"{'' if t['teacher_hours_measured'] else ' (not measured: left out)'}, compilation "
        f"{t['compile_gpu_hours']:.2f}), with {summary['workers']} workers per GPU.",
        "",
        f"Includes: {summary['includes']}.",
    ]
    md_path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    bert = sub.add_parser("random-bert")
    bert.add_argument("out", type=Path)
    bert.add_argument("--tokenizer", type=Path)
    bert.add_argument("--tiny", action="store_true")
    glue = sub.add_parser("tiny-glue")
    glue.add_argument("root", type=Path)
    summary = sub.add_parser("summarize")
    summary.add_argument("results", type=Path)
    summary.add_argument("--workers", type=int, required=True)
    summary.add_argument("--wall-s", type=float, required=True)
    summary.add_argument("--device", default=None)
    summary.add_argument("--command", default="")
    summary.add_argument("--json", type=Path, required=True)
    summary.add_argument("--md", type=Path)
    args = parser.parse_args(argv)
    if args.command == "random-bert":
        if args.out.exists():
            shutil.rmtree(args.out)
        make_random_bert(args.out, args.tokenizer, tiny=args.tiny)
    elif args.command == "tiny-glue":
        write_tiny_glue(args.root)
    else:
        import torch
        from gpu_check import sweep_tables

        device = args.device or (torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu")
        _, table_trials = sweep_tables(only=TABLE)[TABLE]
        result = summarize(load_trials(args.results), args.workers, args.wall_s, device, table_trials)
        write_record(result, args.json, args.md, args.command, git_commit())
        print(json.dumps({k: v for k, v in result.items() if k not in ("per_trial_costs", "includes")}, indent=1))


if __name__ == "__main__":
    main()
