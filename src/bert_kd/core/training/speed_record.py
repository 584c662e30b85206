"""The recorded GPU rates behind ``mixed_precision: auto`` and ``compile: auto``: which precision trains
fastest eager and compiled, and after how many steps compiling pays. Plain data and arithmetic (no torch),
read by [`bert_kd.core.training.precision`][] and
[`bert_kd.core.training.compiled_step`][]."""

from __future__ import annotations

import math
from typing import Mapping

#: Rates of BERT-base 12→4 at batch 32, length 128, random weights, on one NVIDIA H200 (2026-11-27), from
#: ``benchmarks/results/gpu_run_h200_compile_gpu_check.json`` (one timed run each, not medians; the
#: ``reduce-overhead`` rows with the live teacher compiled). ``live_distill`` is ALP-KD's main work.
#: ``examples_per_s[compiled][precision]``; ``first_step_s``: the compiled row's first step (the
#: compilation). ``tests/core/training/test_compiled_step.py`` checks these against that file.
GPU_SPEED_RECORD: dict = {
    "source": "benchmarks/results/gpu_run_h200_compile_gpu_check.json",
    "device": "NVIDIA H200",
    "work": "live_distill",
    "batch_size": 32,
    "examples_per_s": {
        "eager": {"no": 1671.6902700627145, "bf16": 878.0283007452531},
        "compiled": {"bf16": 2671.5330868120154},
    },
    "first_step_s": 63.036683138,
}


def fastest_precision(compiled: bool, record: Mapping = GPU_SPEED_RECORD) -> str:
    """The precision ``mixed_precision: auto`` resolves to on a CUDA GPU with bf16: the fastest one the
    record measured for an eager (``compiled`` false) or a compiled step. Every option in the record trains
    to fp32's dev metrics within the noise (bf16 autocast keeps fp32 master weights; docs/gpu.md), so speed
    alone decides. A mode the record has no rate for falls back to bf16."""
    rates = record["examples_per_s"].get("compiled" if compiled else "eager") or {}
    return max(rates, key=rates.get) if rates else "bf16"


def compile_break_even_steps(record: Mapping = GPU_SPEED_RECORD) -> int:
    """The optimizer steps after which a compiled run has made up its compilation: the first compiled
    step's seconds over what a compiled step saves against the fastest eager step, at the record's batch."""
    rates = record["examples_per_s"]
    eager_step = record["batch_size"] / max(rates["eager"].values())
    compiled_step = record["batch_size"] / max(rates["compiled"].values())
    saved = eager_step - compiled_step
    return math.ceil(record["first_step_s"] / saved) if saved > 0 else math.inf


#: The compile setting ``compile: auto`` turns on where compiling pays: the recorded fastest (CUDA graphs).
AUTO_COMPILE = "reduce-overhead"
