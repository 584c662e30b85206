"""Does the dev metric hold with length-grouped batches? Fine-tuning of MiniLM-L6 (model ``teacher``)
and of the 2-layer student copied from it (``student``: its first 2 layers, embeddings and head) on
``--rows`` training rows of each ``--tasks`` task, scored on the whole dev set after the last epoch,
for every seed and batching variant. Runs are paired per seed: the same seed gives the same
initial head, dropout stream and example set; only the batch order differs.

Resumable: every finished (task, model, seed, variant) run is appended to ``--csv``; a rerun skips
the rows already there. ``--summary`` prints the paired table from the CSV without training.

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/dev_metric_check.py \\
        --tasks sst2,mrpc --models student,teacher --rows 3000 --epochs 3 --seeds 1,2,3,4,5 \\
        --csv benchmarks/results/grouping_check.csv
    PYTHONPATH=src python benchmarks/dev_metric_check.py --summary --csv benchmarks/results/grouping_check.csv
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

VARIANTS = {
    "grouped": dict(mixed_precision="no", group_by_length=True),
    "random": dict(mixed_precision="no", group_by_length=False),
    "bf16 grouped": dict(mixed_precision="bf16", group_by_length=True),
}
MAX_LENGTH = {"sst2": 64, "mrpc": 128, "rte": 128, "qnli": 128}  # SST-2: the main job's length
LEARNING_RATE = {"teacher": 5e-5, "student": 1e-4}  # the CPU protocol's (results/cpu_protocol)
METRIC = {"sst2": "accuracy", "mrpc": "accuracy", "rte": "accuracy", "qnli": "accuracy"}
FIELDS = [
    "task",
    "model",
    "seed",
    "variant",
    "rows",
    "epochs",
    "max_length",
    "learning_rate",
    "accuracy",
    "f1",
    "seconds",
    "padded_per_real",
    "threads",
]
# t quantiles (two-sided 95%) for df = 1..30
T975 = [
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
]


def run_key(row: dict) -> tuple:
    return (
        row["task"],
        row["model"],
        int(row["seed"]),
        row["variant"],
        int(row["rows"]),
        float(row["epochs"]),
        int(row["max_length"]),
        float(row["learning_rate"]),
    )


def read_rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def append_row(path: Path, row: dict) -> None:
    new = not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        if new:
            writer.writeheader()
        writer.writerow(row)
        handle.flush()
        os.fsync(handle.fileno())


def claim(path: Path, row: dict) -> bool:
    """Mark ``row`` as running by this process (a file next to the CSV holding its pid); False when a
    live process holds it. Lets several workers share one CSV without running a pair twice."""
    folder = path.parent / f".{path.stem}.running"
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / "_".join(str(part) for part in run_key(row))
    try:
        holder = int(marker.read_text())
        os.kill(holder, 0)  # raises when that process is gone
        return holder == os.getpid()
    except (FileNotFoundError, ValueError, ProcessLookupError):
        marker.write_text(str(os.getpid()))
        return True


def paired_summary(rows: list[dict], treated: str = "grouped", control: str = "random") -> str:
    """Markdown: per (task, model) the mean dev accuracy of each variant and the paired difference
    (treated − control, same seed) with a 95% t interval over seeds."""
    cells: dict[tuple, dict[str, dict[int, dict]]] = {}
    for row in rows:
        cells.setdefault((row["task"], row["model"], row["rows"], row["epochs"]), {}).setdefault(row["variant"], {})[
            int(row["seed"])
        ] = row
    lines = [
        f"| task | model | rows × epochs | n pairs | {control} acc | {treated} acc | "
        f"paired diff ({treated} − {control}), mean [95% CI] | per-seed diffs | s {control} / {treated} "
        f"| padded/real {control} / {treated} |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (task, model, n_rows, epochs), variants in sorted(cells.items()):
        a, b = variants.get(control, {}), variants.get(treated, {})
        seeds = sorted(set(a) & set(b))
        if not seeds:
            continue
        diffs = [100 * (float(b[s]["accuracy"]) - float(a[s]["accuracy"])) for s in seeds]
        mean = statistics.mean(diffs)
        if len(diffs) > 1:
            half = T975[min(len(diffs) - 2, len(T975) - 1)] * statistics.stdev(diffs) / math.sqrt(len(diffs))
            interval = f"{mean:+.2f} [{mean - half:+.2f}, {mean + half:+.2f}]"
        else:
            interval = f"{mean:+.2f} [n = 1]"
        acc = lambda v: statistics.mean(100 * float(v[s]["accuracy"]) for s in seeds)  # noqa: E731, B023 (called in this iteration)
        sec = lambda v: statistics.median(float(v[s]["seconds"]) for s in seeds)  # noqa: E731, B023 (called in this iteration)
        pad = lambda v: statistics.mean(float(v[s]["padded_per_real"]) for s in seeds)  # noqa: E731, B023 (called in this iteration)
        lines.append(
            f"| {task} | {model} | {n_rows} × {epochs} | {len(seeds)} | {acc(a):.2f} | {acc(b):.2f} | "
            f"{interval} | {', '.join(f'{d:+.1f}' for d in diffs)} | {sec(a):.0f} / {sec(b):.0f} | "
            f"{pad(a):.2f} / {pad(b):.2f} |"
        )
    pooled = pooled_difference(rows, treated, control)
    if pooled is not None:
        mean, low, high, n = pooled
        lines += [
            "",
            f"All {n} pairs pooled: mean {mean:+.2f} points, bootstrap 95% CI [{low:+.2f}, {high:+.2f}] "
            f"({POOLED_RESAMPLES:,} resamples of the pairs, seed 0).",
        ]
    return "\n".join(lines)


POOLED_RESAMPLES = 10_000


def pooled_difference(
    rows: list[dict], treated: str = "grouped", control: str = "random", resamples: int = POOLED_RESAMPLES
) -> tuple[float, float, float, int] | None:
    """Every (task, model, rows, epochs, seed) pair pooled: mean of treated − control in points and a
    percentile-bootstrap 95% CI over the pairs (numpy generator, seed 0); None without pairs."""
    import numpy as np

    runs = {
        (r["task"], r["model"], r["rows"], r["epochs"], int(r["seed"]), r["variant"]): float(r["accuracy"])
        for r in rows
    }
    diffs = np.array(
        [
            100 * (runs[key[:-1] + (treated,)] - value)
            for key, value in runs.items()
            if key[-1] == control and key[:-1] + (treated,) in runs
        ]
    )
    if not len(diffs):
        return None
    means = np.random.default_rng(0).choice(diffs, (resamples, len(diffs))).mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(diffs.mean()), float(low), float(high), len(diffs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--glue", default="../shared/glue")
    parser.add_argument("--tasks", default="sst2")
    parser.add_argument("--models", default="student,teacher", help="student (2 layers) and/or teacher (6)")
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--epochs", type=float, default=3)
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--variants", default="grouped,random")
    parser.add_argument("--csv", default="benchmarks/results/grouping_check.csv")
    parser.add_argument("--summary", action="store_true", help="print the paired table from --csv and stop")
    parser.add_argument("--markdown", default=None, help="with --summary: also write the table to this file")
    args = parser.parse_args()
    path = Path(args.csv)
    if args.summary:
        table = paired_summary(read_rows(path))
        print(table)
        if args.markdown:
            Path(args.markdown).write_text(
                f"Made by `python benchmarks/dev_metric_check.py --summary --csv {args.csv} --markdown {args.markdown}`"
                f" from the runs in `{args.csv}`.\n\n{table}\n",
                encoding="utf-8",
            )
        return

    import torch

    from bert_kd.core.data.glue import load_glue_task
    from bert_kd.core.data.tokenize import tokenize_frame
    from bert_kd.core.metrics import glue_metrics
    from bert_kd.core.models import build_student, load_classifier, load_tokenizer
    from bert_kd.core.training import Collator, SupervisedObjective, TrainingConfig, fit, make_loader, predict_logits

    done = {run_key(row) for row in read_rows(path)}
    tokenizer = load_tokenizer("minilm-l6")
    collator = Collator({"": tokenizer.pad_token_id})
    seeds = [int(s) for s in args.seeds.split(",")]
    # students first (≈ 3× cheaper), then tasks, seeds, variants: each pair finishes together
    for model in args.models.split(","):
        for task in args.tasks.split(","):
            splits = load_glue_task(task, args.glue, allow_download=False)
            max_length = MAX_LENGTH[task]
            n_rows = min(args.rows, len(splits["train"]))
            train = tokenize_frame(splits["train"].sample(n=n_rows, random_state=0), tokenizer, max_length)
            dev = tokenize_frame(splits["validation"], tokenizer, max_length)
            dev_loader = make_loader(dev, 128, collator, shuffle=False, group_by_length=True)
            for seed in seeds:
                for variant in args.variants.split(","):
                    row = dict(
                        task=task,
                        model=model,
                        seed=seed,
                        variant=variant,
                        rows=n_rows,
                        epochs=args.epochs,
                        max_length=max_length,
                        learning_rate=LEARNING_RATE[model],
                    )
                    if run_key(row) in done or run_key(row) in {run_key(r) for r in read_rows(path)}:
                        continue  # (re-read: another worker on the same CSV may have finished it)
                    if not claim(path, row):
                        continue  # another live worker is running it
                    torch.manual_seed(seed)  # the same head initialisation for both variants of a seed
                    network = load_classifier("minilm-l6", 2)
                    if model == "student":
                        network = build_student(network, 2)[0]
                    config = TrainingConfig(
                        epochs=args.epochs,
                        batch_size=32,
                        eval_batch_size=128,
                        learning_rate=LEARNING_RATE[model],
                        seed=seed,
                        progress_bar=False,
                        cpu=True,
                        **VARIANTS[variant],
                    )
                    objective = SupervisedObjective(network)
                    start = time.perf_counter()
                    result = fit(objective, train, None, config, collator=collator)
                    seconds = time.perf_counter() - start
                    predictions, labels = predict_logits(objective, dev_loader)
                    metrics = glue_metrics(task, predictions, labels)
                    row.update(
                        accuracy=f"{metrics['accuracy']:.6f}",
                        f1=f"{metrics.get('f1', float('nan')):.6f}",
                        seconds=f"{seconds:.1f}",
                        padded_per_real=f"{result.padded_per_real_token:.3f}",
                        threads=torch.get_num_threads(),
                    )
                    append_row(path, row)
                    print(
                        f"{task} {model} seed {seed} {variant}: dev accuracy {metrics['accuracy']:.4f}, "
                        f"train {seconds:.1f} s, padded/real {result.padded_per_real_token:.2f}",
                        flush=True,
                    )
    print(paired_summary(read_rows(path)))


if __name__ == "__main__":
    sys.exit(main())
