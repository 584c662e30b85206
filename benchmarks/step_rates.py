"""The training loop's own step rate per precision and compile setting, with the compile cost and a profile.

Every row is one :func:`bert_kd.core.training.fit` of BERT-base 12→4 work (random weights, batch 32, every
row padded to length 128: one batch shape) run for ``--warmup`` + ``--repeats`` × ``--steps`` optimizer
steps; a log call every ``--steps`` steps syncs the device, so the wall time between two log calls is the
time of ``--steps`` loop steps (data loading, forward, backward, clipping, AdamW, the schedule).
The first window holds the compilation (``first_window_s``); each rate is the median of the ``--repeats``
later windows, with their min and max: medians of repeats in one process. Options (``--options``):

- ``eager-tf32``: fp32 weights and math with TF32 matmuls, eager (``mixed_precision: no``);
- ``eager-bf16``: bf16 autocast over fp32 weights (Accelerate's ``bf16``), eager;
- ``compiled-bf16`` / ``compiled-tf32``: the same under ``runtime.compile`` (``--compile``, default
  ``reduce-overhead``): the model (forward and backward) and the parameter update (clip and AdamW) compiled;
- ``compiled-bf16-model-only``: the model compiled, the update eager (the loop before the compiled update);
- ``bf16-weights``: the model's weights in bf16, AdamW on fp32 master copies (one step outside the loop:
  the loop keeps fp32 weights; measured to see whether the layout pays).

``--profile`` also profiles one window of live ALP eager and compiled (``torch.profiler``: wall, host and
device-busy ms and kernel launches per step): the profile before and after compiling the whole step.
Then the compile break-even (:func:`bert_kd.core.training.speed_record.compile_break_even_steps` on the
measured rates) and the ``auto`` choices (:func:`bert_kd.core.training.speed_record.fastest_precision`).

    PYTHONPATH=src python benchmarks/step_rates.py --json step_rates.json          # a GPU: ≈ 6 min on an H100
    PYTHONPATH=src python benchmarks/step_rates.py --tiny --json /tmp/rates.json   # the same code on a CPU
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent / "gpu"))  # gpu_check.py, beside the GPU runs it times

from gpu_check import BERT_BASE, TINY, build_pair, objectives  # noqa: E402

OPTIONS = {  # name: (mixed_precision, compile on, update compiled)
    "eager-tf32": ("no", False, False),
    "eager-bf16": ("bf16", False, False),
    "compiled-bf16": ("bf16", True, True),
    "compiled-tf32": ("no", True, True),
    "compiled-bf16-model-only": ("bf16", True, False),
}
WORKS = ("teacher_finetune", "live_distill")


def rows_of(count: int, length: int, vocab: int) -> list[dict]:
    """``count`` random training rows of exactly ``length`` tokens (one batch shape)."""
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(5, vocab, (count, length), generator=generator)
    return [
        {"input_ids": row.tolist(), "attention_mask": [1] * length, "labels": i % 2, "idx": i}
        for i, row in enumerate(ids)
    ]


def window_stats(times: list[float], steps: int, batch_size: int, warmup_windows: int) -> dict:
    """Rates of the windows after the first ``warmup_windows``: median examples/s with min and max; the first
    window's seconds (the compilation, when compiled)."""
    windows = [b - a for a, b in zip(times, times[1:])]
    later = windows[warmup_windows:]
    rates = [steps * batch_size / w for w in later]
    return {
        "first_window_s": windows[0] if windows else None,
        "step_ms": 1e3 * statistics.median(later) / steps if later else None,
        "examples_per_s": statistics.median(rates) if rates else None,
        "examples_per_s_min": min(rates) if rates else None,
        "examples_per_s_max": max(rates) if rates else None,
        "repeats": len(rates),
    }


def fit_row(objective, option: str, args, device: torch.device, profile: bool = False) -> dict:
    """One fit of ``objective`` under ``option``; the log calls' wall times (and a profile of one window)."""
    from bert_kd.core.training import TrainingConfig, fit, loop
    from bert_kd.core.training import compiled_step as cs

    precision, compiled, update = OPTIONS[option]
    windows = 1 + args.repeats + (1 if profile else 0)
    config = TrainingConfig.from_dict(
        {
            "batch_size": args.batch_size,
            "max_steps": windows * args.steps,
            "log_every_steps": args.steps,
            "mixed_precision": precision,
            "compile": args.compile if compiled else False,
            "progress_bar": False,
            "cpu": device.type == "cpu",
            "warmup_ratio": 0.0,
        }
    )
    times, profiled = [], {}

    def log_fn(metrics, step):
        if "train/loss" not in metrics:
            return
        times.append(time.perf_counter())
        if profile and len(times) == windows - 1:  # the last window runs under the profiler
            profiled["profiler"] = start_profiler(device)
        elif profile and len(times) == windows:
            profiled.update(stop_profiler(profiled.pop("profiler"), device, args.steps))

    real_update = cs.compiled_update
    if not update:
        loop.compiled_update = lambda setting: None
    try:
        start = time.perf_counter()
        times.append(start)
        result = fit(
            objective,
            rows_of(windows * args.steps * args.batch_size, args.length, args.vocab),
            None,
            config,
            log_fn=log_fn,
        )
    finally:
        loop.compiled_update = real_update
    if profile:
        times = times[:-1]  # the profiled window is slower: not a rate
    stats = window_stats(times, args.steps, args.batch_size, 1)
    return {
        "option": option,
        "mixed_precision": result.mixed_precision,
        "compile": result.compile,
        **stats,
        **result.compile_counts,
        **({"profile": profiled} if profile else {}),
    }


def start_profiler(device):
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    profiler = profile(activities=activities)
    profiler.__enter__()
    return profiler, time.perf_counter()


def stop_profiler(started, device, steps: int) -> dict:
    """Wall, host and device-busy milliseconds and kernel launches per step of the profiled window."""
    profiler, start = started
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    wall = time.perf_counter() - start
    profiler.__exit__(None, None, None)
    events = profiler.key_averages()
    launches = sum(
        e.count
        for e in events
        if e.key in ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cudaGraphLaunch")
    )
    device_us = sum(getattr(e, "self_device_time_total", 0) for e in events if e.device_type.name == "CUDA")
    return {
        "wall_ms": 1e3 * wall / steps,
        "host_ms": sum(e.self_cpu_time_total for e in events) / 1e3 / steps,
        "device_ms": device_us / 1e3 / steps,
        "launches": launches / steps,
    }


def bf16_weights_row(objective, args, device) -> dict:
    """bf16 weights with fp32 master copies: forward and backward in bf16 weights, AdamW on the fp32
    copies, the result copied back; ``--repeats`` windows of ``--steps`` steps after one warm-up window."""
    objective.to(device)
    trained = [p for p in objective.parameters() if p.requires_grad]
    masters = [p.detach().float().clone().requires_grad_(True) for p in trained]
    objective.to(torch.bfloat16)
    optimizer = torch.optim.AdamW(masters, lr=2e-5, foreach=device.type == "cuda")
    batch = {
        "input_ids": torch.randint(5, args.vocab, (args.batch_size, args.length), device=device),
        "attention_mask": torch.ones(args.batch_size, args.length, dtype=torch.long, device=device),
        "labels": torch.randint(0, 2, (args.batch_size,), device=device),
        "idx": torch.arange(args.batch_size, device=device),
    }

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    times = []
    for _window in range(1 + args.repeats):
        sync()
        times.append(time.perf_counter())
        for _ in range(args.steps):
            loss = objective(batch)["loss"]
            loss.backward()
            for master, p in zip(masters, trained):
                master.grad = p.grad.float()
                p.grad = None
            torch.nn.utils.clip_grad_norm_(masters, 1.0)
            optimizer.step()
            optimizer.zero_grad()
            with torch.no_grad():
                torch._foreach_copy_(trained, masters)
    sync()
    times.append(time.perf_counter())
    return {
        "option": "bf16-weights",
        "mixed_precision": "bf16 weights",
        "compile": False,
        **window_stats(times, args.steps, args.batch_size, 1),
    }


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--options", nargs="+", default=[*OPTIONS, "bf16-weights"])
    parser.add_argument("--works", nargs="+", default=list(WORKS))
    parser.add_argument("--compile", default="reduce-overhead")
    parser.add_argument("--steps", type=int, default=40, help="optimizer steps per timed window")
    parser.add_argument("--repeats", type=int, default=3, help="timed windows after the first")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--profile", action="store_true", help="profile live ALP eager-tf32 and compiled-bf16")
    parser.add_argument("--tiny", action="store_true", help="tiny shapes on the CPU (the code path only)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    device = torch.device("cuda" if torch.cuda.is_available() and not args.tiny else "cpu")
    shape, student_layers, args.length = (TINY, 2, 16) if args.tiny else (BERT_BASE, 4, 128)
    args.vocab = shape.vocab
    if args.tiny and args.compile == "reduce-overhead":
        args.compile = "eager"  # TorchDynamo capture alone: inductor's CPU build takes minutes
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    report = {
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "batch_size": args.batch_size,
        "length": args.length,
        "steps_per_window": args.steps,
        "compile_setting": args.compile,
        "rows": [],
    }

    def save():
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(report, indent=1, default=str))

    teacher, student = build_pair(shape, student_layers, device)
    works = objectives(teacher, student, shape, args.batch_size, device)
    for work in args.works:
        for option in args.options:
            profile = args.profile and work == "live_distill" and option in ("eager-tf32", "compiled-bf16")
            try:
                if option == "bf16-weights":
                    row = bf16_weights_row(works[work](), args, device)
                else:
                    row = fit_row(works[work](), option, args, device, profile=profile)
            except Exception as error:  # one failing option leaves the others measured
                row = {"option": option, "error": f"{type(error).__name__}: {error}"[:500]}
            row["work"] = work
            report["rows"].append(row)
            print(json.dumps(row, default=str), flush=True)
            save()
    report["decision"] = decide(report["rows"])
    print(json.dumps(report["decision"], indent=1))
    save()
    return report


def decide(rows: list[dict], work: str = "live_distill") -> dict:
    """The ``auto`` rules on these measurements: the fastest eager and compiled precision of ``work`` and the
    optimizer steps after which compiling pays (first window's extra seconds over the per-step saving)."""
    rates = {r["option"]: r for r in rows if r.get("work") == work and r.get("examples_per_s")}
    eager = {o: r["examples_per_s"] for o, r in rates.items() if o.startswith("eager-")}
    compiled = {o: r["examples_per_s"] for o, r in rates.items() if o in ("compiled-bf16", "compiled-tf32")}
    decision = {
        "work": work,
        "fastest_eager": max(eager, key=eager.get) if eager else None,
        "fastest_compiled": max(compiled, key=compiled.get) if compiled else None,
    }
    if eager and compiled:
        best_eager, best_compiled = rates[decision["fastest_eager"]], rates[decision["fastest_compiled"]]
        saved_s = (best_eager["step_ms"] - best_compiled["step_ms"]) / 1e3
        extra_s = best_compiled["first_window_s"] - best_eager["first_window_s"]  # the compilation
        decision["compile_extra_s"] = extra_s
        decision["saved_per_step_s"] = saved_s
        decision["break_even_steps"] = extra_s / saved_s if saved_s > 0 else None
        decision["compiled_over_eager"] = best_compiled["examples_per_s"] / best_eager["examples_per_s"]
    return decision


if __name__ == "__main__":
    main()
