"""Epoch time of student-only fine-tuning vs. ALP-KD with a live teacher vs. ALP-KD with the cache.

One run measures, with the real offline MiniLM-L6 teacher (``load_classifier("minilm-l6", 2)``)
and a shallow student copied from it (``build_student``), the time of one training epoch of
``--batches`` batches through :func:`bert_kd.core.training.fit`:

(a) student-only fine-tuning (method ``nkd``: the teacher is never run),
(b) distillation with method ``alp`` and a live (frozen, eval-mode) teacher,
(c) ``alp`` with a :class:`~bert_kd.core.distill.objective.TeacherCache` (its build time is
    reported separately and not counted in the epoch).

Data: rows of ``../shared/glue/SST-2/train.tsv`` next to the repository when present,
otherwise synthetic sentences. Everything runs offline on the CPU.

    /work/venv/bin/python benchmarks/teacher_cache.py --batches 20 --batch-size 32 --max-length 64
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import pandas as pd  # noqa: E402
import torch  # noqa: E402

from bert_kd.core.data.tokenize import tokenize_frame  # noqa: E402
from bert_kd.core.distill.methods import build_method  # noqa: E402
from bert_kd.core.distill.objective import DistillationObjective, Teacher, build_teacher_cache  # noqa: E402
from bert_kd.core.models import build_student, count_parameters, load_classifier, load_tokenizer  # noqa: E402
from bert_kd.core.training import Collator, TrainingConfig, fit  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SST2_TRAIN = REPO.parent / "shared" / "glue" / "SST-2" / "train.tsv"
TEACHER = "minilm-l6"
WORDS = [
    "the",
    "a",
    "movie",
    "film",
    "story",
    "plot",
    "actor",
    "director",
    "scene",
    "was",
    "is",
    "feels",
    "remains",
    "great",
    "good",
    "bad",
    "dull",
    "funny",
    "boring",
    "moving",
    "clever",
    "tired",
    "fresh",
    "not",
    "very",
    "quite",
    "really",
    "and",
    "but",
    "with",
    "without",
    "its",
    "this",
    "that",
    "one",
    "of",
    "to",
    "in",
    "by",
    "for",
    "an",
    "every",
]


def load_rows(n: int, seed: int = 0) -> tuple[pd.DataFrame, str]:
    """``n`` labelled sentences: a seeded sample of real SST-2 train rows, else synthetic text."""
    if SST2_TRAIN.exists():
        from bert_kd.core.data.glue import read_glue_tsv

        frame = read_glue_tsv(SST2_TRAIN, "sst2", "train")
        if len(frame) >= n:
            return frame.sample(n=n, random_state=seed).reset_index(drop=True).assign(idx=range(n)), str(SST2_TRAIN)
    rng = random.Random(seed)
    sentences = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 40))) for _ in range(n)]
    frame = pd.DataFrame(
        {"idx": range(n), "sentence1": sentences, "sentence2": None, "label": [rng.randint(0, 1) for _ in range(n)]}
    )
    return frame, "synthetic"


def run_epoch(teacher, n_student: int, method_name: str, dataset, collator, config, cache=None) -> float:
    """Wall time of one ``fit`` epoch (fresh student, optimizer and schedule every time)."""
    student, _ = build_student(teacher, n_student)
    method = build_method({"method": method_name}, student, [teacher])
    objective = DistillationObjective(student, [Teacher(teacher, cache=cache)], method, method.weights)
    start = time.perf_counter()
    result = fit(objective, dataset, None, config, collator=collator, description=method_name)
    elapsed = time.perf_counter() - start
    assert result.global_step == config.max_steps, result
    return elapsed


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=20, help="batches per epoch (default 20)")
    parser.add_argument("--batch-size", type=int, default=32, help="training batch size (default 32)")
    parser.add_argument("--max-length", type=int, default=64, help="max tokens per example (default 64)")
    parser.add_argument("--student-layers", type=int, default=2, help="student depth (default 2)")
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="epochs timed per variant, interleaved; the median is reported (default 1)",
    )
    parser.add_argument(
        "--warmup-batches",
        type=int,
        default=2,
        help="untimed batches run first so one-off start-up costs hit no variant (default 2)",
    )
    args = parser.parse_args(argv)

    n_rows = args.batches * args.batch_size
    frame, source = load_rows(n_rows)
    tokenizer = load_tokenizer(TEACHER)
    dataset = tokenize_frame(frame, tokenizer, args.max_length)
    collator = Collator({"": tokenizer.pad_token_id})
    lengths = [len(ids) for ids in dataset["input_ids"]]
    teacher = load_classifier(TEACHER, 2)
    config = TrainingConfig(
        epochs=1,
        max_steps=args.batches,
        batch_size=args.batch_size,
        learning_rate=5e-5,
        progress_bar=False,
        cpu=True,
        log_every_steps=max(1, args.batches),
    )

    student, kept = build_student(teacher, args.student_layers)
    print(
        f"teacher {TEACHER}: {count_parameters(teacher) / 1e6:.1f} M parameters, "
        f"{teacher.config.num_hidden_layers} layers; student: {count_parameters(student) / 1e6:.1f} M, "
        f"layers {kept}"
    )
    print(
        f"data: {source}: {n_rows} rows, {args.batches} batches x {args.batch_size}, "
        f"max_length {args.max_length} (mean {sum(lengths) / len(lengths):.1f} tokens); "
        f"torch threads {torch.get_num_threads()}"
    )

    if args.warmup_batches:
        warm = TrainingConfig(**{**config.__dict__, "max_steps": args.warmup_batches})
        run_epoch(teacher, args.student_layers, "alp", dataset, collator, warm)

    start = time.perf_counter()
    cache = build_teacher_cache(teacher, dataset, batch_size=64, collator=collator, progress=False, key="bench")
    cache_seconds = time.perf_counter() - start

    variants = {
        "student only (nkd)": dict(method_name="nkd"),
        "alp, live teacher": dict(method_name="alp"),
        "alp, cached teacher": dict(method_name="alp", cache=cache),
    }
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.repeats):
        for name, kwargs in variants.items():
            times[name].append(
                run_epoch(teacher, args.student_layers, dataset=dataset, collator=collator, config=config, **kwargs)
            )

    epoch = {name: statistics.median(values) for name, values in times.items()}
    best = {name: min(values) for name, values in times.items()}
    base, base_best = epoch["student only (nkd)"], best["student only (nkd)"]
    print()
    header = f"{'variant':<22} {'epoch s':>8} {'ms/batch':>9} {'x student-only':>15}"
    if args.repeats > 1:  # the minimum is the least disturbed by other processes on the machine
        header += f" {'best s':>7} {'best x':>7}"
    print(header)
    print("-" * len(header))
    for name, seconds in epoch.items():
        line = f"{name:<22} {seconds:>8.2f} {1000 * seconds / args.batches:>9.0f} {seconds / base:>14.2f}x"
        if args.repeats > 1:
            line += f" {best[name]:>7.2f} {best[name] / base_best:>6.2f}x"
        print(line)
    print("-" * len(header))
    print(f"teacher cache build (not in the epoch): {cache_seconds:.2f} s for {n_rows} examples")
    if args.repeats > 1:
        print(
            f"epoch times are medians of {args.repeats} interleaved runs; all: "
            + "; ".join(f"{k}: {', '.join(f'{v:.2f}' for v in vs)}" for k, vs in times.items())
        )
    live_ratio, cached_ratio = epoch["alp, live teacher"] / base, epoch["alp, cached teacher"] / base
    verdict = "OK" if cached_ratio <= 1.10 else "MISSED"
    print(
        f"live/student-only = {live_ratio:.2f}x; cached/student-only = {cached_ratio:.2f}x (target <= 1.10x: {verdict})"
    )


if __name__ == "__main__":
    main()
