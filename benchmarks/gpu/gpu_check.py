"""What the papers' set-ups cost on the GPU this runs on (Kedro-free; random weights, no downloads).

Builds randomly initialised teachers and students of the papers' shapes — BERT-base (12 × 768)
→ 4 and 6 layers (ALP-KD Tables 1/2, TED), MiniLM-L6 (6 × 384) → 2 layers (the CPU protocol) —
and times, in fp32 and bf16 (autocast, where the device has it):

- teacher fine-tuning steps (forward, backward, fused AdamW),
- ALP distillation steps with a live teacher (the teacher's forward with all hidden states),
- distillation steps with a cached teacher (logits and [CLS] states looked up, KD + CE),

printing examples/s (of a step timed alone, and of steps run back to back as the training loop runs
them), peak memory, the achieved TFLOP/s (:func:`step_flops`) and its share of the
device's dense peak for that precision (:data:`DENSE_PEAK_TFLOPS`; "unknown" for other devices, a CPU
included); with ``--compile BACKEND …``, the same for every work of BERT-base
12→4 with the trained model compiled as ``runtime.compile: BACKEND`` compiles it; checks that fused and per-tensor AdamW (``fused_optimizer``)
train the same ALP student to float rounding on this device; then estimates the GPU-hours of every table of
``conf/base/parameters_reproduce.yml`` (trials from the sweep definitions, GLUE training-set
sizes, each trial's epochs) from those rates. ``--tiny`` runs tiny shapes on the CPU (CI).

    PYTHONPATH=src python benchmarks/gpu/gpu_check.py [--tiny] [--compile inductor cudagraphs] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Mapping

import torch

REPO = Path(__file__).resolve().parents[2]

#: GLUE training-set sizes (examples), as the GLUE distribution ships them.
GLUE_TRAIN_SIZES = {
    "cola": 8551,
    "sst2": 67349,
    "mrpc": 3668,
    "stsb": 5749,
    "qqp": 363846,
    "mnli": 392702,
    "qnli": 104743,
    "rte": 2490,
    "wnli": 635,
}


@dataclass(frozen=True)
class Shape:
    """An encoder shape (BERT layout)."""

    layers: int
    hidden: int
    heads: int
    intermediate: int
    vocab: int = 30522


BERT_BASE = Shape(12, 768, 12, 3072)
MINILM_L6 = Shape(6, 384, 12, 1536)
TINY = Shape(4, 32, 4, 64, vocab=200)

#: (name, teacher shape, student layers, max length) — the papers' pairs; tiny: one CPU pair.
PAIRS = {
    "bert-base 12→4": (BERT_BASE, 4, 128),
    "bert-base 12→6": (BERT_BASE, 6, 128),
    "minilm-l6 6→2": (MINILM_L6, 2, 64),
}
TINY_PAIRS = {"tiny 4→2": (TINY, 2, 16)}


@dataclass
class Timing:
    """One kind of step on one pair in one precision."""

    pair: str
    work: str  # teacher_finetune | live_distill | cached_distill
    precision: str  # fp32 | bf16
    examples_per_s: float
    peak_memory_GiB: float | None  # None on CPU
    tflops: float = 0.0  # achieved: step_flops per example × examples/s
    share_of_peak: float | None = None  # of the device's dense peak for this precision; None = unknown
    compile: str | None = None  # the torch.compile backend of the trained model (runtime.compile); None = eager
    pipelined_examples_per_s: float | None = None  # steps back to back, one sync at the end (as the loop runs)
    first_step_s: float | None = None  # the first step's seconds (with compile: the compilation)


#: Dense (no structured sparsity) tensor-core peaks in TFLOP/s from the vendors' data sheets, per
#: precision: ``fp32`` (CUDA cores), ``tf32`` (fp32 matmuls on tensor cores), ``bf16``.
DENSE_PEAK_TFLOPS = {
    "A100": {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0},  # SXM and PCIe alike
    "H100 SXM": {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4},
    "H100 PCIe": {"fp32": 51.2, "tf32": 378.0, "bf16": 756.0},
    "H200": {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4},  # SXM; the H100 SXM's compute
    "L40S": {"fp32": 91.6, "tf32": 183.0, "bf16": 362.0},
    "L4": {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0},
    "A10": {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0},
}


def device_family(name: str) -> str | None:
    """The :data:`DENSE_PEAK_TFLOPS` entry of a device name (``torch.cuda.get_device_name``), or None."""
    upper = name.upper()
    if "H200" in upper and "NVL" not in upper:
        return "H200"
    if "H100" in upper:
        return None if "NVL" in upper else ("H100 PCIe" if "PCIE" in upper else "H100 SXM")
    if "A100" in upper:
        return "A100"
    if "L40S" in upper:
        return "L40S"
    if upper.replace("NVIDIA", "").strip() in ("L4", "A10"):
        return upper.replace("NVIDIA", "").strip()
    return None


def peak_tflops(device_name: str, precision: str) -> float | None:
    """Dense peak of ``device_name`` for ``precision`` (``fp32``/``tf32``/``bf16``); None when unknown."""
    family = device_family(device_name)
    return DENSE_PEAK_TFLOPS[family].get(precision) if family else None


def forward_flops(shape: Shape, layers: int, length: int) -> float:
    """FLOPs of one example's encoder forward: per layer and token 2·(4h² + 2h·i) for the Q, K, V, output
    and feed-forward matmuls and 4·L·h for QKᵀ and the attention-weighted values (embeddings, layer
    norms, softmax and the classifier are left out: < 1% at these shapes)."""
    h, i = shape.hidden, shape.intermediate
    return layers * length * (2 * (4 * h * h + 2 * h * i) + 4 * length * h)


def step_flops(work: str, shape: Shape, student_layers: int, length: int) -> float:
    """FLOPs per example of a training step (backward = 2 × forward): teacher fine-tuning 3·F_teacher,
    live distillation F_teacher (no grad) + 3·F_student, cached distillation 3·F_student."""
    teacher, student = forward_flops(shape, shape.layers, length), forward_flops(shape, student_layers, length)
    return {"teacher_finetune": 3 * teacher, "live_distill": teacher + 3 * student, "cached_distill": 3 * student}[work]


# --------------------------------------------------------------------------- models and steps


def build_pair(shape: Shape, student_layers: int, device: torch.device):
    """A random BERT classifier of ``shape`` and a student of its first ``student_layers`` layers."""
    from transformers import BertConfig, BertForSequenceClassification

    from bert_kd.core.models import build_student, prefer_fused_attention

    config = BertConfig(
        vocab_size=shape.vocab,
        hidden_size=shape.hidden,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        intermediate_size=shape.intermediate,
        num_labels=2,
        attn_implementation="eager",
    )
    teacher = prefer_fused_attention(BertForSequenceClassification(config)).to(device)  # SDPA, as load_classifier
    student, _ = build_student(teacher, student_layers)
    return teacher, student.to(device)


def random_batch(shape: Shape, batch_size: int, length: int, device: torch.device) -> dict:
    return {
        "input_ids": torch.randint(5, shape.vocab, (batch_size, length), device=device),
        "attention_mask": torch.ones(batch_size, length, dtype=torch.long, device=device),
        "token_type_ids": torch.zeros(batch_size, length, dtype=torch.long, device=device),
        "labels": torch.randint(0, 2, (batch_size,), device=device),
        "idx": torch.arange(batch_size, device=device),
    }


def objectives(teacher, student, shape: Shape, batch_size: int, device: torch.device) -> dict:
    """The three kinds of work as :class:`bert_kd.core.training.Objective` s (the project's own code)."""
    import copy

    from bert_kd.core.distill.methods import build_method
    from bert_kd.core.distill.objective import DistillationObjective, Teacher, TeacherCache
    from bert_kd.core.training import SupervisedObjective

    cache = TeacherCache(
        logits=torch.randn(batch_size, 2),
        cls=torch.randn(batch_size, shape.layers + 1, shape.hidden),
        row_of_idx=torch.arange(batch_size),
        key="gpu_check",
    )

    def live():
        fresh = copy.deepcopy(student)
        method = build_method({"method": "alp"}, fresh, [teacher])
        return DistillationObjective(fresh, [Teacher(teacher)], method, method.weights)

    def cached():
        fresh = copy.deepcopy(student)
        method = build_method({"method": "rkd"}, fresh, [teacher])  # logits only: served from the cache
        return DistillationObjective(fresh, [Teacher(teacher, cache=cache)], method, method.weights)

    return {
        "teacher_finetune": lambda: SupervisedObjective(copy.deepcopy(teacher).requires_grad_(True).train()),
        "live_distill": live,
        "cached_distill": cached,
    }


def time_steps(
    objective,
    batch: dict,
    device: torch.device,
    precision: str,
    steps: int,
    compile: str | None = None,
    warmup: int = 2,
) -> dict:
    """One ``objective``'s step timings: the median seconds of a step timed alone (a device sync before
    and after), the seconds per step of ``steps`` steps run back to back with one sync at the end (the
    host queues the next step while the device computes, as in the training loop), the first step's
    seconds (a compiled model compiles there) and the peak memory (GiB, CUDA only)."""
    from bert_kd.core.training.precision import compiled_for_the_run

    with compiled_for_the_run([objective.model], compile):  # for this row only, as the loop compiles for a run
        step = make_step(objective, device, precision, compile)

        def sync() -> None:
            if device.type == "cuda":
                torch.cuda.synchronize(device)

        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        seconds = []
        for _ in range(warmup + steps):
            sync()
            start = time.perf_counter()
            step(batch)
            sync()
            seconds.append(time.perf_counter() - start)
        start = time.perf_counter()
        for _ in range(steps):
            step(batch)
        sync()
        pipelined = (time.perf_counter() - start) / steps
        peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None
        return {
            "median": statistics.median(seconds[warmup:]),
            "pipelined": pipelined,
            "first": seconds[0],
            "peak": peak,
        }


def make_step(objective, device: torch.device, precision: str, compile: str | None = None):
    """One training step of ``objective`` (forward under autocast for bf16, backward, clipping, fused
    AdamW); with a ``compile`` setting that replays CUDA graphs, each step marked as the loop marks it (the
    caller compiles the model: :func:`time_steps`)."""
    from bert_kd.core.training import TrainingConfig, make_optimizer
    from bert_kd.core.training.precision import uses_cuda_graphs

    objective = objective.to(device).train()
    optimizer = make_optimizer(objective, TrainingConfig(), device)
    trained = [p for p in objective.parameters() if p.requires_grad]
    mark_step = uses_cuda_graphs(compile)

    def step(batch: dict) -> None:
        if mark_step:  # as the loop does: the last step's graph outputs may be overwritten
            torch.compiler.cudagraph_mark_step_begin()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = objective.training_step(batch)["loss"]
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trained, 1.0)
        optimizer.step()
        optimizer.zero_grad()

    return step


def precisions(device: torch.device) -> list[str]:
    """``tf32`` (fp32 work with TF32 matmuls, the project's CUDA default) and ``bf16`` on a GPU; ``fp32``
    (and ``bf16`` where the CPU has it) on a CPU."""
    if device.type == "cuda":
        return ["tf32", "bf16"] if torch.cuda.is_bf16_supported() else ["tf32"]
    from bert_kd.core.training import cpu_has_bf16

    return ["fp32", "bf16"] if cpu_has_bf16() else ["fp32"]


def share_text(share: float | None) -> str:
    return "unknown" if share is None else f"{100 * share:.1f}%"


TABLE_HEADER = (
    "| pair | work | precision | compile | examples/s | pipelined examples/s | TFLOP/s | share of dense peak "
    "| first step s | peak memory GiB |\n|---|---|---|---|---|---|---|---|---|---|"
)


def timing_of(
    name: str, work: str, precision: str, pair: tuple, measured: Mapping, batch_size: int, device_name: str, compile
) -> Timing:
    """A :class:`Timing` from :func:`time_steps`' numbers (rates from the median step; TFLOP/s from the rate)."""
    shape, student_layers, length = pair
    rate = batch_size / measured["median"]
    tflops = rate * step_flops(work, shape, student_layers, length) / 1e12
    top = peak_tflops(device_name, precision)
    return Timing(
        name,
        work,
        precision,
        rate,
        measured["peak"],
        tflops,
        tflops / top if top else None,
        compile,
        batch_size / measured["pipelined"],
        measured["first"],
    )


def print_timing(t: Timing) -> None:
    memory = f"{t.peak_memory_GiB:.2f}" if t.peak_memory_GiB is not None else "–"
    print(
        f"| {t.pair} | {t.work} | {t.precision} | {t.compile or 'no'} | {t.examples_per_s:.1f} | "
        f"{t.pipelined_examples_per_s:.1f} | {t.tflops:.3g} | {share_text(t.share_of_peak)} | {t.first_step_s:.2f} | "
        f"{memory} |",
        flush=True,
    )


def measure(
    pairs: Mapping,
    device: torch.device,
    batch_size: int,
    steps: int,
    compile_backends: Iterable[str] = (),
    failures: list | None = None,
    compile_teacher: bool = False,
    on_row=None,
) -> list[Timing]:
    """Every work of every pair in every precision, eager; then, for each of ``compile_backends``, every
    work of the first pair in the precision of the estimates, compiled (a backend that
    fails prints its error in the table and is left out; ``failures`` collects those errors); with
    ``compile_teacher``, live ALP once more with its frozen teacher compiled too (``BACKEND+teacher``);
    ``on_row(timings)`` after every row."""
    from bert_kd.core.training.precision import compiled_for_the_run, set_tf32

    timings, failures = [], failures if failures is not None else []
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(TABLE_HEADER, flush=True)
    for name, pair in pairs.items():
        shape, student_layers, length = pair
        teacher, student = build_pair(shape, student_layers, device)
        batch = random_batch(shape, batch_size, length, device)
        runs = [(precision, None, None) for precision in precisions(device)]
        if name == next(iter(pairs)):
            compiled_works = ("teacher_finetune", "live_distill", "cached_distill")
            for backend in compile_backends:  # the teacher-compiled row first: the loop's own way since 2026-11-27
                if compile_teacher:
                    runs.append((estimate_precision(device), f"{backend}+teacher", ("live_distill",)))
                runs.append((estimate_precision(device), backend, compiled_works))
        for precision, backend, works in runs:
            if device.type == "cuda":
                set_tf32(precision == "tf32")  # bf16 rows: autocast; their fp32 leftovers without TF32
            for work, make in objectives(teacher, student, shape, batch_size, device).items():
                if works is not None and work not in works:
                    continue
                compiled, _, also = (backend or "").partition("+")  # BACKEND+teacher: the teacher as the loop does
                try:
                    with compiled_for_the_run([teacher] if also == "teacher" else [], compiled):
                        measured = time_steps(make(), batch, device, precision, steps, compiled or None)
                except Exception as error:  # a backend this machine cannot compile: its row says so, the rest runs
                    if not backend:
                        raise
                    message = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:160]
                    print(f"| {name} | {work} | {precision} | {backend} | failed: {message} |", flush=True)
                    failures.append({"pair": name, "work": work, "compile": backend, "error": message})
                    continue
                timing = timing_of(name, work, precision, pair, measured, batch_size, device_name, backend)
                timings.append(timing)
                print_timing(timing)
                if on_row:
                    on_row(timings)
            if backend:
                torch._dynamo.reset()  # the next backend compiles afresh
        del teacher, student
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return timings


def estimate_precision(device: torch.device) -> str:
    """The precision the GPU-hour estimates use: bf16 where the device has it, else its first."""
    return "bf16" if "bf16" in precisions(device) else precisions(device)[0]


def fused_adamw_agreement(pairs: Mapping, device: torch.device, batch_size: int, steps: int = 5) -> dict:
    """Largest parameter difference between ALP students trained ``steps`` steps with fused and with
    per-tensor (foreach) AdamW from the same start on the same batch, in fp32 (``auto`` picks fused
    on CPU and CUDA; the setting is kept out of job keys because the two agree to rounding)."""
    from bert_kd.core.training import TrainingConfig, make_optimizer

    name, (shape, student_layers, length) = next(iter(pairs.items()))
    torch.manual_seed(0)
    teacher, student = build_pair(shape, student_layers, device)
    batch = random_batch(shape, batch_size, length, device)
    trained = {}
    for fused in (True, False):
        torch.manual_seed(1)  # the same method modules and dropout masks in both runs
        objective = objectives(teacher, student, shape, batch_size, device)["live_distill"]().to(device).train()
        optimizer = make_optimizer(objective, TrainingConfig(fused_optimizer=fused), device)
        for _ in range(steps):
            objective.training_step(batch)["loss"].backward()
            optimizer.step()
            optimizer.zero_grad()
        trained[fused] = [p.detach().float().cpu() for p in objective.parameters() if p.requires_grad]
    difference = max((a - b).abs().max().item() for a, b in zip(trained[True], trained[False]))
    scale = max(p.abs().max().item() for p in trained[False])
    print(
        f"fused vs per-tensor AdamW ({name}, {steps} ALP steps, fp32): max |Δparam| {difference:.2e} "
        f"(largest |param| {scale:.2f})",
        flush=True,
    )
    return {"pair": name, "steps": steps, "max_abs_difference": difference, "max_abs_parameter": scale}


def profile_step(
    pairs: Mapping, device: torch.device, batch_size: int, work: str = "live_distill", steps: int = 5
) -> dict:
    """Where one eager step of ``work`` on the first pair (the estimates' precision) spends its time, from
    ``torch.profiler`` over ``steps`` steps: wall, host (CPU) and device milliseconds per step, kernel
    launches per step, and the operators that cost the host most. Host time near the wall time and far
    above the device's means the step is bound by launching kernels, not by arithmetic."""
    from torch.profiler import ProfilerActivity, profile

    name, (shape, student_layers, length) = next(iter(pairs.items()))
    precision = estimate_precision(device)
    if device.type == "cuda":
        from bert_kd.core.training.precision import set_tf32

        set_tf32(precision == "tf32")
    teacher, student = build_pair(shape, student_layers, device)
    batch = random_batch(shape, batch_size, length, device)
    step = make_step(objectives(teacher, student, shape, batch_size, device)[work](), device, precision)
    for _ in range(3):
        step(batch)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    with profile(activities=activities) as profiler:
        for _ in range(steps):
            step(batch)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    wall = (time.perf_counter() - start) / steps
    events = profiler.key_averages()
    launches = sum(e.count for e in events if e.key in ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel"))
    device_us = sum(getattr(e, "self_device_time_total", 0) for e in events if e.device_type.name == "CUDA")
    top = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:12]
    result = {
        "pair": name,
        "work": work,
        "precision": precision,
        "steps": steps,
        "wall_ms": 1e3 * wall,
        "host_ms": sum(e.self_cpu_time_total for e in events) / 1e3 / steps,
        "device_ms": device_us / 1e3 / steps,
        "kernel_launches": launches / steps,
        "top_host_ops": [
            {"op": e.key, "calls": e.count / steps, "self_ms": e.self_cpu_time_total / 1e3 / steps} for e in top
        ],
    }
    print(
        f"\nProfile of one {name} {work} step ({precision}, {steps} steps under torch.profiler, which slows the "
        f"host): wall {result['wall_ms']:.1f} ms, host {result['host_ms']:.1f} ms, device busy "
        f"{result['device_ms']:.1f} ms, {result['kernel_launches']:.0f} kernel launches per step"
    )
    print("| operator | calls/step | host ms/step |\n|---|---|---|")
    for row in result["top_host_ops"]:
        print(f"| {row['op']} | {row['calls']:.0f} | {row['self_ms']:.2f} |")
    return result


# --------------------------------------------------------------------------- GPU-hours


#: Methods whose teacher terms read only logits (and [CLS] states): served from the teacher cache.
CACHED_METHODS = {"nkd", "rkd", "kd", "logits_mse"}


def pair_for(table_settings: Mapping, pairs: Mapping) -> str:
    """The measured pair closest to a table's teacher and student (12 → 2 / 3 use 12 → 4: an upper bound)."""
    teacher = str((table_settings.get("teacher") or {}).get("model", ""))
    layers = int((table_settings.get("student") or {}).get("num_layers", 4))
    if len(pairs) == 1:
        return next(iter(pairs))
    if "minilm" in teacher:
        return "minilm-l6 6→2"
    return "bert-base 12→6" if layers >= 6 else "bert-base 12→4"


def trial_hours(examples: int, epochs: float, examples_per_s: float) -> float:
    return examples * epochs / examples_per_s / 3600.0


def train_rows(task: str, table_settings: Mapping, train_sizes: Mapping[str, int] = GLUE_TRAIN_SIZES) -> int:
    """Training rows of ``task`` in a table: its ``data.<task>.max_train_samples``, else the whole set."""
    sizes = table_settings.get("data") or {}
    return int((sizes.get(task) or {}).get("max_train_samples") or train_sizes[task])


def sweep_tables(only: str | None = None) -> dict[str, tuple[dict, list]]:
    """Every table of ``conf/base/parameters_reproduce.yml`` (or ``only`` that one): its settings (the
    definition and the sweep's own) and its trials."""
    import yaml

    from bert_kd.sweeps.spec import RECIPE_NAMESPACES, build_sweep

    params: dict = {}
    for path in sorted((REPO / "conf" / "base").glob("parameters*.yml")):
        params.update(yaml.safe_load(path.read_text()) or {})
    recipes = {namespace: params.get(namespace) or {} for namespace in RECIPE_NAMESPACES}
    reproduce = params["reproduce"]
    tables = {}
    for table, definition in reproduce["tables"].items():
        if only in (None, table):
            sweep = build_sweep({**reproduce, "table": table}, recipes)
            tables[table] = ({**definition, **sweep.settings}, sweep.trials())
    return tables


def estimate_table(
    trials: Iterable,
    table_settings: Mapping,
    rates: Mapping[tuple[str, str], float],
    pairs: Mapping,
    teacher_epochs: float = 3.0,
    default_epochs: float = 3.0,
    train_sizes: Mapping[str, int] = GLUE_TRAIN_SIZES,
) -> dict:
    """GPU-hours of one table: every trial's student training (live or cached rate by method,
    its epochs × the task's training set) plus one teacher fine-tuning per task. ``rates`` maps
    (pair, work) to examples/s."""
    pair = pair_for(table_settings, pairs)
    student_hours, tasks, n_trials = 0.0, set(), 0
    for trial in trials:
        n_trials += 1
        tasks.add(trial.task)
        epochs = float(trial.training.get("epochs", default_epochs))
        work = "cached_distill" if trial.recipe.get("method") in CACHED_METHODS else "live_distill"
        student_hours += trial_hours(train_rows(trial.task, table_settings, train_sizes), epochs, rates[(pair, work)])
    teacher_hours = sum(
        trial_hours(train_rows(t, table_settings, train_sizes), teacher_epochs, rates[(pair, "teacher_finetune")])
        for t in tasks
    )
    return {
        "pair": pair,
        "trials": n_trials,
        "teacher_hours": teacher_hours,
        "student_hours": student_hours,
        "total_hours": teacher_hours + student_hours,
    }


def estimate_paper_tables(
    timings: list[Timing], pairs: Mapping, precision: str, compile: str | None = None
) -> dict[str, dict]:
    """:func:`estimate_table` for every table of ``conf/base/parameters_reproduce.yml`` at the eager rates
    of ``precision``; with ``compile``, that backend's rates wherever they were measured (``BACKEND+teacher``:
    those rows over ``BACKEND``'s)."""
    rates = {(t.pair, t.work): t.examples_per_s for t in timings if t.precision == precision and t.compile is None}
    backend = (compile or "").partition("+")[0]
    for label in dict.fromkeys(label for label in (backend, compile) if label):  # BACKEND, then BACKEND+teacher
        rates |= {
            (t.pair, t.work): t.examples_per_s for t in timings if t.precision == precision and t.compile == label
        }
    return {
        table: estimate_table(trials, settings, rates, pairs) for table, (settings, trials) in sweep_tables().items()
    }


# --------------------------------------------------------------------------- sweep throughput

#: The sweep's student shapes and the table each stands for: the CPU protocol's (MiniLM-L6 → 2 layers,
#: length 64) and ALP-KD Table 1's (BERT-base → 4 layers, length 128).
SWEEP_TABLES = {"minilm-l6 6→2": "cpu_protocol_v2", "bert-base 12→4": "alp_kd_table1"}
SWEEP_PAIR, SWEEP_TABLE = "minilm-l6 6→2", "cpu_protocol_v2"


def sweep_worker(pair: str, seconds: float, ready_dir: Path, index: int, count: int, tiny: bool) -> dict:
    """One of ``count`` concurrent workers: ALP steps with a live teacher (bf16 where the device has it)
    for ``seconds``, started together once every worker has built its models and warmed up."""
    device = torch.device("cuda" if torch.cuda.is_available() and not tiny else "cpu")
    shape, student_layers, length = (TINY_PAIRS if tiny else PAIRS)[pair]
    batch_size = 4 if tiny else 32
    teacher, student = build_pair(shape, student_layers, device)
    batch = random_batch(shape, batch_size, length, device)
    precision = "bf16" if "bf16" in precisions(device) and device.type == "cuda" else "fp32"
    step = make_step(objectives(teacher, student, shape, batch_size, device)["live_distill"](), device, precision)
    for _ in range(3):
        step(batch)
    (ready_dir / f"ready.{index}").touch()
    deadline = time.monotonic() + 300
    while len(list(ready_dir.glob("ready.*"))) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step(batch)
        done += batch_size
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return {"examples": done, "seconds": time.perf_counter() - start}


def sweep_throughput(workers: Iterable[int], seconds: float, tiny: bool, pair: str = SWEEP_PAIR) -> list[dict]:
    """Student examples/s of 1, 2, 4 … concurrent sweep workers training ``pair``'s ALP students on this
    device (one process each, as ``scripts/sweep.sh`` starts them), the speed-up over one worker, and the
    trials per hour of the pair's table (:data:`SWEEP_TABLES`) that gives."""
    import subprocess
    import sys
    import tempfile

    table = SWEEP_TABLES.get(pair, SWEEP_TABLE)
    per_trial = examples_per_trial(table)
    rows = []
    for count in workers:
        with tempfile.TemporaryDirectory() as ready:
            command = [sys.executable, __file__, "--sweep-worker", pair, str(seconds), ready, str(count)]
            processes = [
                subprocess.Popen([*command, str(i)] + (["--tiny"] if tiny else []), stdout=subprocess.PIPE, text=True)
                for i in range(count)
            ]
            results = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in processes]
        if any(p.returncode for p in processes):
            raise RuntimeError(f"a sweep worker failed ({count} workers): see its traceback above")
        rate = sum(r["examples"] / r["seconds"] for r in results)
        rows.append(
            {
                "pair": pair,
                "table": table,
                "workers": count,
                "examples_per_s": rate,
                "speedup": rate / rows[0]["examples_per_s"] if rows else 1.0,
                "trials_per_hour": 3600 * rate / per_trial,
            }
        )
    return rows


def hours_with_workers(estimate: Mapping, speedup: float) -> float:
    """A table's GPU-hours when its students train ``speedup`` times faster together (several sweep workers
    sharing each GPU); the one teacher fine-tuning per task keeps its hours."""
    return estimate["teacher_hours"] + estimate["student_hours"] / speedup


def examples_per_trial(table: str, default_epochs: float = 3.0) -> float:
    """Mean student examples (rows × epochs) per trial of ``table`` in ``conf/base/parameters_reproduce.yml``."""
    settings, trials = sweep_tables(only=table)[table]
    totals = [train_rows(t.task, settings) * float(t.training.get("epochs", default_epochs)) for t in trials]
    return sum(totals) / len(totals)


# --------------------------------------------------------------------------- main


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="tiny shapes on the CPU (CI): checks the code path only")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--json", type=Path, help="write timings and estimates here")
    parser.add_argument(
        "--workers", type=int, nargs="*", help="sweep workers sharing the device (default 1 2 4 on a GPU, 1 2 tiny)"
    )
    parser.add_argument("--worker-seconds", type=float, default=15.0, help="timed seconds per sweep-worker count")
    parser.add_argument(
        "--compile",
        nargs="*",
        default=[],
        metavar="BACKEND",
        help="also time every work of the first pair compiled with each torch.compile "
        "backend (runtime.compile: inductor, cudagraphs, aot_eager …), and estimate the tables at those rates",
    )
    parser.add_argument(
        "--sweep-pairs",
        nargs="*",
        choices=list(SWEEP_TABLES),
        help=f"student shapes of the sweep-throughput check (default: {' and '.join(SWEEP_TABLES)}; tiny: the tiny pair)",
    )
    parser.add_argument(
        "--compile-teacher",
        action="store_true",
        help="with --compile: live ALP once more with its frozen teacher compiled too (rows BACKEND+teacher)",
    )
    parser.add_argument(
        "--pairs", nargs="*", choices=list(PAIRS), help="the pairs to time (default: all; the estimates need all)"
    )
    parser.add_argument(
        "--profile", action="store_true", help="profile one eager live-ALP step of the first pair: host vs device time"
    )
    parser.add_argument(
        "--merge",
        nargs="+",
        type=Path,
        metavar="JSON",
        help="measure nothing: estimate the tables from the timings of these --json files (a later file's row "
        "replaces an earlier one's of the same pair, work, precision and compile)",
    )
    parser.add_argument("--sweep-worker", nargs=5, help=argparse.SUPPRESS)  # PAIR SECONDS READY_DIR COUNT INDEX
    args = parser.parse_args(argv)
    if args.sweep_worker:
        pair, seconds, ready, count, index = args.sweep_worker
        print(json.dumps(sweep_worker(pair, float(seconds), Path(ready), int(index), int(count), args.tiny)))
        return {}
    if args.merge:
        return merge_reports(args.merge, args.json)
    device = torch.device("cuda" if torch.cuda.is_available() and not args.tiny else "cpu")
    pairs = TINY_PAIRS if args.tiny else {pair: PAIRS[pair] for pair in args.pairs or PAIRS}
    batch_size, steps = (4, 2) if args.tiny else (args.batch_size, args.steps)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    precision = estimate_precision(device)
    report: dict = {"device": name, "tiny": args.tiny, "precision_for_estimate": precision, "complete": False}

    def save(**entries) -> None:  # after every part, so a run stopped at its time limit keeps what it measured
        report.update(entries)
        if args.json:
            args.json.write_text(json.dumps(report, indent=2))

    print(f"device: {name}; batch {batch_size}; {steps} timed steps after 2 warm-up steps")
    if args.profile:
        try:
            save(profile=profile_step(pairs, device, batch_size))
        except Exception as error:  # a diagnosis only: the timings below still run
            print(f"profile failed: {type(error).__name__}: {error}", flush=True)
            save(profile={"error": f"{type(error).__name__}: {error}"})
    compile_failures: list[dict] = []
    timings = measure(
        pairs,
        device,
        batch_size,
        steps,
        args.compile,
        compile_failures,
        args.compile_teacher,
        on_row=lambda rows: save(timings=[asdict(t) for t in rows], compile_failures=compile_failures),
    )
    agreement = fused_adamw_agreement(pairs, device, batch_size)
    estimates, compiled_estimates = print_estimates(timings, pairs, precision, name, args.tiny)
    save(fused_adamw_agreement=agreement, estimates=estimates, compiled_estimates=compiled_estimates)
    workers = args.workers if args.workers is not None else ([1, 2] if args.tiny else [1, 2, 4])
    sweep_pairs = [next(iter(TINY_PAIRS))] if args.tiny else (args.sweep_pairs or list(SWEEP_TABLES))
    sweep: list[dict] = []
    for pair in sweep_pairs if workers else []:
        rows = sweep_throughput(workers, 1.0 if args.tiny else args.worker_seconds, args.tiny, pair)
        sweep += rows
        print_sweep(rows, estimates, name, precision)
        save(sweep_throughput=sweep)
    save(sweep_throughput=sweep, complete=True)
    return report


def print_estimates(timings: list[Timing], pairs: Mapping, precision: str, name: str, tiny: bool):
    """Print and return the GPU-hours of every table at the eager rates and at each compiled label's
    (``None, {}`` when a pair the tables need was not timed)."""
    measured = {t.pair for t in timings if t.compile is None}
    if (set(pairs) if tiny else set(PAIRS)) - measured:
        print(f"\nGPU-hours per paper table: not estimated (timed {sorted(measured)}; the tables need every pair)")
        return None, {}
    estimates = estimate_paper_tables(timings, pairs, precision)
    labels = list(dict.fromkeys(t.compile for t in timings if t.compile and t.precision == precision))
    compiled_estimates = {label: estimate_paper_tables(timings, pairs, precision, label) for label in labels}
    print(f"\nGPU-hours per paper table ({precision}, one {name}{'; tiny shapes: not an estimate' if tiny else ''}):")
    print("| table | pair | trials | teacher h | students h | total h |\n|---|---|---|---|---|---|")
    for table, e in estimates.items():
        print(
            f"| {table} | {e['pair']} | {e['trials']} | {e['teacher_hours']:.1f} | {e['student_hours']:.1f} | "
            f"{e['total_hours']:.1f} |"
        )
    if compiled_estimates:
        print(
            f"\nGPU-hours per paper table with the trained model compiled ({precision}; {next(iter(pairs))}'s "
            "compiled rates where measured, other work eager):"
        )
        print("| table | eager h | " + " | ".join(f"{b} h" for b in labels) + " |")
        print("|---|---|" + "---|" * len(labels))
        for table, e in estimates.items():
            cells = " | ".join(f"{compiled_estimates[b][table]['total_hours']:.1f}" for b in labels)
            print(f"| {table} | {e['total_hours']:.1f} | {cells} |")
    return estimates, compiled_estimates


def print_sweep(rows: list[dict], estimates: Mapping | None, name: str, precision: str) -> None:
    table = rows[0]["table"]
    print(
        f"\nSweep throughput on one {name} ({rows[0]['pair']} ALP students, live teacher; trials of {table}):\n"
        f"| workers | student examples/s | vs one worker | trials/hour | {table} GPU-hours ({precision}) |\n"
        "|---|---|---|---|---|"
    )
    for row in rows:
        # with an estimate, trials/hour and GPU-hours both come from it (its rates × the workers' speed-up); the
        # workers' own examples/s are a rate of live ALP alone, another baseline, so they give only the speed-up
        hours = hours_with_workers(estimates[table], row["speedup"]) if estimates else None
        per_hour = estimates[table]["trials"] / hours if hours else row["trials_per_hour"]
        print(
            f"| {row['workers']} | {row['examples_per_s']:.0f} | {row['speedup']:.2f}× | "
            f"{per_hour:.1f} | {'–' if hours is None else f'{hours:.1f}'} |"
        )


def merge_reports(paths: list[Path], out: Path | None) -> dict:
    """The estimates from the timings of several ``--json`` reports of one device (two calls on a machine
    lent for minutes, say): rows of a later file replace an earlier file's of the same pair, work, precision
    and compile; sweep rows and profiles are carried over as they are."""
    reports = [json.loads(path.read_text()) for path in paths]
    if len({r["device"] for r in reports}) > 1:
        raise SystemExit(f"--merge: the reports are of different devices ({sorted({r['device'] for r in reports})})")
    rows: dict[tuple, Timing] = {}
    for report in reports:
        for row in report.get("timings", []):
            timing = Timing(**row)
            rows[(timing.pair, timing.work, timing.precision, timing.compile)] = timing
    timings, first = list(rows.values()), reports[0]
    pairs = TINY_PAIRS if first["tiny"] else PAIRS
    precision = first["precision_for_estimate"]
    print(f"device: {first['device']}; timings merged from {', '.join(str(p) for p in paths)}")
    print(TABLE_HEADER)
    for timing in timings:
        print_timing(timing)
    estimates, compiled_estimates = print_estimates(timings, pairs, precision, first["device"], first["tiny"])
    sweep = [row for report in reports for row in report.get("sweep_throughput", [])]
    for pair in dict.fromkeys(row["pair"] for row in sweep):
        print_sweep([row for row in sweep if row["pair"] == pair], estimates, first["device"], precision)
    merged = {
        "device": first["device"],
        "tiny": first["tiny"],
        "precision_for_estimate": precision,
        "merged_from": [str(p) for p in paths],
        "timings": [asdict(t) for t in timings],
        "estimates": estimates,
        "compiled_estimates": compiled_estimates,
        "sweep_throughput": sweep,
        "profiles": [r["profile"] for r in reports if r.get("profile")],
        "compile_failures": [f for r in reports for f in r.get("compile_failures", [])],
        "complete": all(r.get("complete", True) for r in reports),
    }
    if out:
        out.write_text(json.dumps(merged, indent=2))
    return merged


if __name__ == "__main__":
    main()
