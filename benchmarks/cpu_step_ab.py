"""Paired A/B of the main job's CPU work, step by step: what each choice costs at a given thread count.

Each pair runs the same batch through A and B one right after the other (the order alternating every
repeat), so a machine whose load drifts slows both alike; printed are A/B of the summed wall seconds,
the median of the per-batch ratios, and A/B of this process's CPU seconds. Real SST-2 rows
(``../shared/glue``) and the offline MiniLM-L6 teacher, as in the main job:

- ``cache``: the teacher-output cache's forwards (eval mode, batch 64, [CLS] of every layer) with rows
  in dataset order (A, before 2026-11-28) against longest first (B, ``build_teacher_cache`` today);
- ``attention``: PyTorch's fused attention (SDPA, A) against the eager kernel (B) in a teacher fine-tuning
  step (6 layers, batch 32), an ALP student step with the cached teacher (2 layers) and the cache forward;
- ``embeddings``: the ALP student step with the cached teacher (the main job's distillation step) with its
  word-embedding matrix trained (A, the default) against frozen (B, ``training.word_embeddings: frozen``:
  11.7 M of the student's 15.6 M parameters without gradient or AdamW state).

    PYTHONPATH=src python benchmarks/cpu_step_ab.py --threads 2 --batches 40 --repeats 2

Speed targets live here, not in tests: the cache's longest-first order must stay ≥ 1.5× faster than
dataset order on SST-2 (6,000 rows: 1.03 padded tokens per real one instead of 3.24).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from teacher_cache import TEACHER, load_rows  # noqa: E402  (the same SST-2 rows)

from bert_kd.core.data.tokenize import tokenize_frame  # noqa: E402
from bert_kd.core.distill.methods import build_method  # noqa: E402
from bert_kd.core.distill.objective import DistillationObjective, Teacher, build_teacher_cache  # noqa: E402
from bert_kd.core.distill.outputs import forward_features  # noqa: E402
from bert_kd.core.models import attention_implementation, build_student, load_classifier, load_tokenizer  # noqa: E402
from bert_kd.core.training import (  # noqa: E402
    Collator,
    SupervisedObjective,
    TrainingConfig,
    make_loader,
    make_optimizer,
    padding_ratio,
    sequence_lengths,
)
from bert_kd.core.training.config import freeze_word_embeddings  # noqa: E402


def paired(name: str, step_a, step_b, batches, repeats: int) -> dict[str, float]:
    """Run ``step_a(batch)`` and ``step_b(batch)`` on every batch, ``repeats`` times, alternating which goes
    first; print and return A/B (summed wall, median per-batch wall, CPU)."""
    step_a(batches[0]), step_b(batches[0])  # one-off start-up costs hit neither
    wall, cpu, ratios = {"a": 0.0, "b": 0.0}, {"a": 0.0, "b": 0.0}, []
    for repeat in range(repeats):
        for batch in batches:
            seconds = {}
            for side in ("a", "b") if repeat % 2 == 0 else ("b", "a"):
                step = step_a if side == "a" else step_b
                begin, begin_cpu = time.perf_counter(), time.process_time()
                step(batch)
                seconds[side] = time.perf_counter() - begin
                wall[side] += seconds[side]
                cpu[side] += time.process_time() - begin_cpu
            ratios.append(seconds["a"] / seconds["b"])
    result = {"wall": wall["a"] / wall["b"], "median": statistics.median(ratios), "cpu": cpu["a"] / cpu["b"]}
    print(
        f"| {name} | {wall['a']:.1f} | {wall['b']:.1f} | {result['wall']:.2f} | {result['median']:.2f} | "
        f"{result['cpu']:.2f} | {len(ratios)} |",
        flush=True,
    )
    return result


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batches", type=int, default=40, help="training batches of 32 (the rows used)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--only", choices=("cache", "attention", "embeddings"), default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    frame, _ = load_rows(args.batches * 32)
    tokenizer = load_tokenizer(TEACHER)
    dataset = tokenize_frame(frame, tokenizer, 64)
    collator = Collator({"": tokenizer.pad_token_id})
    lengths = sequence_lengths(dataset)
    teacher = load_classifier(TEACHER, 2)
    dataset_order = list(make_loader(dataset, 64, collator, shuffle=False))
    longest_first = list(make_loader(dataset, 64, collator, shuffle=False, group_by_length=True, lengths=lengths))
    train_batches = list(make_loader(dataset, 32, collator, True, 42, True, lengths))
    print(
        f"{len(dataset)} SST-2 rows, torch threads {torch.get_num_threads()}, {args.repeats} repeats; padded/real "
        f"tokens of the cache's batches: {padding_ratio(dataset_order):.2f} dataset order, "
        f"{padding_ratio(longest_first):.2f} longest first"
    )
    print(
        "\n| A against B | A s | B s | A/B wall | A/B median batch | A/B cpu | pairs |\n|---|---|---|---|---|---|---|"
    )

    @torch.no_grad()
    def cache_forward(batch, kernel: str = "sdpa"):
        teacher.eval()
        with attention_implementation(teacher, kernel):
            forward_features(teacher, batch, hidden_states=True).cls()

    if args.only in (None, "cache"):
        # one pair = one pass over all rows in each order (their batches differ, so they pair as whole passes)
        paired(
            "cache forward, all rows: dataset order / longest first",
            lambda _: [cache_forward(batch) for batch in dataset_order],
            lambda _: [cache_forward(batch) for batch in longest_first],
            [None, None],
            args.repeats,
        )
    cache = build_teacher_cache(teacher, dataset, batch_size=64, collator=collator, progress=False, key="ab")
    config = TrainingConfig(epochs=1, batch_size=32, learning_rate=1e-4, progress_bar=False, cpu=True, seed=42)

    def alp_student():
        student = build_student(teacher, 2)[0]
        method = build_method({"method": "alp"}, student, [teacher])
        return DistillationObjective(student, [Teacher(teacher, cache=cache)], method, method.weights)

    if args.only in (None, "embeddings"):
        steps = {}
        for setting in ("train", "frozen"):
            objective = alp_student().train()
            freeze_word_embeddings(objective.model, setting)
            optimizer = make_optimizer(objective, config, torch.device("cpu"))
            trained = [p for p in objective.parameters() if p.requires_grad]
            steps[setting] = _train_step(objective, optimizer, trained, "sdpa")
        paired(
            "ALP student step, cached teacher: word embeddings trained / frozen",
            steps["train"],
            steps["frozen"],
            train_batches,
            args.repeats,
        )
    if args.only in (None, "attention"):

        def trainable_teacher():
            return SupervisedObjective(copy.deepcopy(teacher).requires_grad_(True))

        for name, make in (("teacher step", trainable_teacher), ("ALP student step, cached teacher", alp_student)):
            steps = {}
            for kernel in ("sdpa", "eager"):
                objective = make().train()
                optimizer = make_optimizer(objective, config, torch.device("cpu"))
                trained = [p for p in objective.parameters() if p.requires_grad]
                steps[kernel] = _train_step(objective, optimizer, trained, kernel)
            paired(f"{name}: SDPA / eager", steps["sdpa"], steps["eager"], train_batches, args.repeats)
        paired(
            "cache forward: SDPA / eager",
            lambda batch: cache_forward(batch, "sdpa"),
            lambda batch: cache_forward(batch, "eager"),
            longest_first,
            args.repeats,
        )


def _train_step(objective, optimizer, trained, kernel: str):
    """One training step of ``objective`` (forward, backward, clipping, AdamW) with attention ``kernel``."""

    def step(batch) -> None:
        with attention_implementation(objective.model, kernel), _student_kernel(objective, kernel):
            objective(batch)["loss"].backward()
        torch.nn.utils.clip_grad_norm_(trained, 1.0)
        optimizer.step()
        optimizer.zero_grad()

    return step


@contextlib.contextmanager
def _student_kernel(objective, kernel: str):
    """A distillation objective picks its student's kernel per forward (``Method.student_attention``):
    pin it to ``kernel`` inside the block."""
    method = getattr(objective, "method", None)
    if method is None:
        yield
        return
    cls = type(method)
    saved = cls.__dict__.get("student_attention")
    cls.student_attention = property(lambda _self: kernel)
    try:
        yield
    finally:
        if saved is None:
            del cls.student_attention
        else:
            cls.student_attention = saved


if __name__ == "__main__":
    main()
