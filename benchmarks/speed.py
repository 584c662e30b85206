"""Where the training time goes: ``bert_kd.core.training.fit`` vs. a plain PyTorch loop, on the same work.

Four kinds of work, each timed through ``fit`` and through :func:`plain_loop` (AdamW, linear
schedule, clipping, the same length-grouped batches; no tracking, no Accelerate), alternating,
``--repeats`` times; medians are printed:

- teacher fine-tuning (MiniLM-L6, all layers trained),
- student-only fine-tuning (the 2-layer student copied from the teacher),
- ALP distillation with a live teacher,
- ALP distillation with the teacher-output cache (its build time is reported apart),
- ALP with a live teacher in bf16 (``runtime.teacher_mixed_precision: auto``) where the CPU has
  bf16 natively (AVX-512-BF16 / AMX).

Each run is timed by the wall clock and by this process's CPU time (``time.process_time``): on a
shared machine the CPU time is the steadier measure of the work done (other processes' load
stretches the wall clock, not the CPU seconds).

Then the student step with PyTorch's fused attention (SDPA, what every forward that reads no attention
map runs) against the eager kernel: the 2-layer student's fine-tuning through ``fit``, alternating,
medians and their ratio (``--attention-only`` runs this part alone).

Also printed: padded/real tokens (grouped vs. random batches), examples/s and the plain loop's
share of time in data/forward/backward/optimizer. Goals: fit <= 1.05x the plain loop,
cached <= 1.10x student-only, live <= 1.40x student-only.

    PYTHONPATH=src python benchmarks/speed.py --batches 20 --batch-size 32 --max-length 64 --repeats 2
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from teacher_cache import SST2_TRAIN, TEACHER, load_rows  # noqa: E402  (same rows as that benchmark)
from transformers import get_linear_schedule_with_warmup  # noqa: E402

from bert_kd.core.data.tokenize import tokenize_frame  # noqa: E402
from bert_kd.core.distill.methods import build_method  # noqa: E402
from bert_kd.core.distill.objective import DistillationObjective, Teacher, build_teacher_cache  # noqa: E402
from bert_kd.core.models import build_student, count_parameters, load_classifier, load_tokenizer  # noqa: E402
from bert_kd.core.training import (  # noqa: E402
    Collator,
    SupervisedObjective,
    TrainingConfig,
    cpu_has_bf16,
    fit,
    make_loader,
    make_optimizer,
    padding_ratio,
    resolve_mixed_precision,
    sequence_lengths,
)

PHASES = ("data", "forward", "backward", "optimizer")


def plain_loop(objective, dataset, collator, config: TrainingConfig, lengths) -> dict[str, float]:
    """The reference: one epoch of ``objective.training_step`` with AdamW, nothing else.
    Returns seconds per phase (data = fetching and collating the next batch)."""
    torch.manual_seed(config.seed)
    optimizer = make_optimizer(objective, config, torch.device("cpu"))  # the same AdamW as fit's
    total = len(dataset) // config.batch_size
    scheduler = get_linear_schedule_with_warmup(optimizer, int(config.warmup_ratio * total), total)
    loader = make_loader(
        dataset,
        config.batch_size,
        collator,
        shuffle=True,
        seed=config.seed,
        group_by_length=config.group_by_length,
        lengths=lengths,
    )
    params = [p for p in objective.parameters() if p.requires_grad]
    spent = dict.fromkeys(PHASES, 0.0)
    objective.train()
    clock = time.perf_counter()
    for batch in loader:
        t_data = time.perf_counter()
        loss = objective.training_step(batch)["loss"]
        t_forward = time.perf_counter()
        loss.backward()
        t_backward = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        t_step = time.perf_counter()
        for phase, (a, b) in zip(
            PHASES, ((clock, t_data), (t_data, t_forward), (t_forward, t_backward), (t_backward, t_step))
        ):
            spent[phase] += b - a
        clock = time.perf_counter()
    return spent


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--student-layers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-teacher-finetuning", action="store_true", help="skip the (slowest) teacher work")
    parser.add_argument("--attention-only", action="store_true", help="only the SDPA-against-eager student step")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    n_rows = args.batches * args.batch_size
    frame, source = load_rows(n_rows)
    tokenizer = load_tokenizer(TEACHER)
    dataset = tokenize_frame(frame, tokenizer, args.max_length)
    collator = Collator({"": tokenizer.pad_token_id})
    lengths = sequence_lengths(dataset)
    teacher = load_classifier(TEACHER, 2)
    student, kept = build_student(teacher, args.student_layers)
    config = TrainingConfig(
        epochs=1,
        batch_size=args.batch_size,
        learning_rate=5e-5,
        progress_bar=False,
        cpu=True,
        mixed_precision="no",
        log_every_steps=10,
        seed=42,
        group_by_length=True,
    )
    grouped = padding_ratio(make_loader(dataset, args.batch_size, collator, True, 42, True, lengths))
    random_order = padding_ratio(make_loader(dataset, args.batch_size, collator, True, 42, False))
    print(
        f"data: {source if source != str(SST2_TRAIN) else 'SST-2 train'}: {n_rows} rows = {args.batches} batches "
        f"x {args.batch_size}, max length {args.max_length}; torch threads {torch.get_num_threads()}"
    )
    print(
        f"teacher {TEACHER} {count_parameters(teacher) / 1e6:.1f} M; student layers {kept} "
        f"{count_parameters(student) / 1e6:.1f} M"
    )
    print(f"padded/real tokens: {grouped:.2f} length-grouped (used here), {random_order:.2f} random batches")

    if args.attention_only:
        attention_kernels(teacher, args, dataset, collator, config)
        return
    start = time.perf_counter()
    cache = build_teacher_cache(teacher, dataset, batch_size=64, collator=collator, progress=False, key="bench")
    cache_seconds = time.perf_counter() - start

    def alp(cached: bool):
        fresh, _ = build_student(teacher, args.student_layers)
        method = build_method({"method": "alp"}, fresh, [teacher])
        return DistillationObjective(fresh, [Teacher(teacher, cache=cache if cached else None)], method, method.weights)

    def trainable_teacher():
        model = copy.deepcopy(teacher)  # the distillation objectives freeze ``teacher`` itself
        return SupervisedObjective(model.requires_grad_(True).train())

    bf16_config = TrainingConfig(**{**vars(config), "teacher_mixed_precision": "auto"})
    work = {
        "teacher fine-tuning": (trainable_teacher, config),
        "student only": (lambda: SupervisedObjective(build_student(teacher, args.student_layers)[0]), config),
        "ALP, live teacher": (lambda: alp(False), config),
        "ALP, cached teacher": (lambda: alp(True), config),
    }
    if cpu_has_bf16():
        work["ALP, live teacher bf16"] = (lambda: alp(False), bf16_config)
    if args.no_teacher_finetuning:
        del work["teacher fine-tuning"]

    def time_fit(make, run_config):
        objective = make()
        begin, begin_cpu = time.perf_counter(), time.process_time()
        result = fit(objective, dataset, None, run_config, collator=collator)
        assert result.global_step == args.batches, result
        return time.perf_counter() - begin, time.process_time() - begin_cpu, None

    def time_plain(make, run_config):
        objective = make()
        if run_config.teacher_mixed_precision != "same":
            objective.frozen_precision = resolve_mixed_precision(run_config.teacher_mixed_precision, cpu=True)
        begin, begin_cpu = time.perf_counter(), time.process_time()
        phases = plain_loop(objective, dataset, collator, run_config, lengths)
        return time.perf_counter() - begin, time.process_time() - begin_cpu, phases

    warm = TrainingConfig(**{**vars(config), "max_steps": 2})  # one-off start-up costs hit nobody
    fit(alp(False), dataset, None, warm, collator=collator)
    plain_loop(alp(False), dataset, collator, warm, lengths)

    seconds = {(name, how): [] for name in work for how in ("fit", "plain")}
    cpu_seconds = {(name, how): [] for name in work for how in ("fit", "plain")}
    phases: dict[str, list[dict]] = {name: [] for name in work}
    for repeat in range(args.repeats):
        for name, (make, run_config) in work.items():
            order = (("fit", time_fit), ("plain", time_plain))
            for how, timer in order if repeat % 2 == 0 else order[::-1]:  # alternate which goes first
                elapsed, elapsed_cpu, spent = timer(make, run_config)
                print(f"repeat {repeat + 1} {name} {how}: {elapsed:.2f} s wall, {elapsed_cpu:.2f} s cpu", flush=True)
                seconds[(name, how)].append(elapsed)
                cpu_seconds[(name, how)].append(elapsed_cpu)
                if spent:
                    phases[name].append(spent)

    median = {key: statistics.median(values) for key, values in seconds.items()}
    median_cpu = {key: statistics.median(values) for key, values in cpu_seconds.items()}
    base = median[("student only", "fit")]
    header = (
        "| work | fit s | plain s | fit / plain | fit / student-only | examples/s (fit) | "
        + " | ".join(f"{p} %" for p in PHASES)
        + " |"
    )
    print()
    print(header)
    print("|" + "---|" * header.count(" | ") + "---|")
    for name in work:
        fit_s, plain_s = median[(name, "fit")], median[(name, "plain")]
        spent = {p: statistics.median(s[p] for s in phases[name]) for p in PHASES}
        share = " | ".join(f"{100 * spent[p] / sum(spent.values()):.0f}" for p in PHASES)
        print(
            f"| {name} | {fit_s:.2f} | {plain_s:.2f} | {fit_s / plain_s:.2f} | {fit_s / base:.2f} | "
            f"{n_rows / fit_s:.0f} | {share} |"
        )
    print()
    print(f"teacher cache build (not in the epochs): {cache_seconds:.2f} s for {n_rows} examples")
    print(
        f"medians of {args.repeats} alternating repeats; all (fit / plain): "
        + "; ".join(
            f"{name}: {', '.join(f'{v:.2f}' for v in seconds[(name, 'fit')])} / "
            f"{', '.join(f'{v:.2f}' for v in seconds[(name, 'plain')])}"
            for name in work
        )
    )
    base_cpu = median_cpu[("student only", "fit")]
    print()
    print("CPU time (process_time, s): | work | fit | plain | fit / plain | fit / student-only |")
    for name in work:
        fit_s, plain_s = median_cpu[(name, "fit")], median_cpu[(name, "plain")]
        print(f"| {name} | {fit_s:.2f} | {plain_s:.2f} | {fit_s / plain_s:.2f} | {fit_s / base_cpu:.2f} |")
    print()
    live_names = [n for n in ("ALP, live teacher", "ALP, live teacher bf16") if n in work]
    for clock, med, ref in (("wall", median, base), ("cpu", median_cpu, base_cpu)):
        student_work = [n for n in work if n != "teacher fine-tuning"]
        overhead = max(med[(n, "fit")] / med[(n, "plain")] for n in student_work)
        cached = med[("ALP, cached teacher", "fit")] / ref
        checks = [("worst fit / plain (student steps)", overhead, 1.05), ("cached / student-only", cached, 1.10)]
        checks += [(f"{n} / student-only", med[(n, "fit")] / ref, 1.40) for n in live_names]
        for label, value, goal in checks:
            print(f"[{clock}] {label}: {value:.2f}x (goal <= {goal:.2f}x: {'met' if value <= goal else 'MISSED'})")
    print()
    attention_kernels(teacher, args, dataset, collator, config)


def attention_kernels(teacher, args, dataset, collator, config: TrainingConfig) -> dict[str, float]:
    """The student's fine-tuning through ``fit`` with SDPA and with eager attention, alternating; prints
    the medians (wall and CPU seconds, examples/s) and eager / SDPA. Returns the median wall seconds."""

    def student(kernel: str):
        model = build_student(teacher, args.student_layers)[0]
        model.config._attn_implementation = kernel  # BERT reads it per forward
        return SupervisedObjective(model)

    warm = TrainingConfig(**{**vars(config), "max_steps": 2})
    for kernel in ("sdpa", "eager"):
        fit(student(kernel), dataset, None, warm, collator=collator)
    wall = {"sdpa": [], "eager": []}
    cpu = {"sdpa": [], "eager": []}
    for repeat in range(args.repeats):
        for kernel in ("sdpa", "eager") if repeat % 2 == 0 else ("eager", "sdpa"):
            objective = student(kernel)
            begin, begin_cpu = time.perf_counter(), time.process_time()
            fit(objective, dataset, None, config, collator=collator)
            wall[kernel].append(time.perf_counter() - begin)
            cpu[kernel].append(time.process_time() - begin_cpu)
            print(
                f"repeat {repeat + 1} student {kernel}: {wall[kernel][-1]:.2f} s wall, {cpu[kernel][-1]:.2f} s cpu",
                flush=True,
            )
    n_rows = args.batches * args.batch_size
    med = {k: statistics.median(v) for k, v in wall.items()}
    med_cpu = {k: statistics.median(v) for k, v in cpu.items()}
    print(
        f"\nstudent step ({args.student_layers} layers, batch {args.batch_size}, max length {args.max_length}, "
        f"{args.batches} steps, {args.repeats} alternating repeats, torch threads {torch.get_num_threads()}):"
    )
    print("| attention | wall s | cpu s | examples/s (wall) |\n|---|---|---|---|")
    for kernel in ("sdpa", "eager"):
        print(f"| {kernel} | {med[kernel]:.2f} | {med_cpu[kernel]:.2f} | {n_rows / med[kernel]:.0f} |")
    print(f"eager / SDPA: {med['eager'] / med['sdpa']:.2f}x wall, {med_cpu['eager'] / med_cpu['sdpa']:.2f}x cpu")
    return med


if __name__ == "__main__":
    main()
