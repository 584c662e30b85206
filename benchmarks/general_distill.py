"""General distillation's throughput on this machine: tokens/s of TinyBERT's general stage (MiniLM-L6 teacher,
2-layer student, the stand-in corpus) and the share of the CPU's peak FLOP/s it reaches. One run.

    nice -n 10 .venv/bin/python benchmarks/general_distill.py --glue-dir ../shared/glue [--steps 10] [--json out.json]

FLOPs are counted, not estimated: PyTorch's FlopCounterMode over one full step (teacher forward, student forward
and backward, matrix products and attention). The peak is cores × clock × FLOP per cycle (32 fp32 FLOP/cycle/core
with AVX2 and two FMA pipes, 64 with AVX-512 and two FMA units), a nominal figure; the 1-minute load average is
recorded with the run, since this machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path


def peak_flops() -> tuple[float, str]:
    """(nominal fp32 peak FLOP/s of this CPU, how it was computed)."""
    text = Path("/proc/cpuinfo").read_text()
    flags = set(next(line for line in text.splitlines() if line.startswith("flags")).split(":")[1].split())
    mhz = max(float(line.split(":")[1]) for line in text.splitlines() if line.startswith("cpu MHz"))
    cores = len(os.sched_getaffinity(0))
    per_cycle = 64 if "avx512f" in flags else 32 if {"avx2", "fma"} <= flags else 8
    return cores * mhz * 1e6 * per_cycle, f"{cores} cores × {mhz:.0f} MHz × {per_cycle} FLOP/cycle"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--glue-dir", default="../shared/glue")
    parser.add_argument("--teacher", default="minilm-l6")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-seq-length", type=int, default=64)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--json")
    args = parser.parse_args(argv)

    import itertools

    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from bert_kd.core.data.glue_corpus import glue_training_sentences
    from bert_kd.core.data.shards import open_shards, write_shards
    from bert_kd.core.distill.general import GeneralDistillation
    from bert_kd.core.machine import machine_load
    from bert_kd.core.models import build_student, load_classifier, load_tokenizer
    from bert_kd.core.training import Collator, make_loader

    torch.manual_seed(0)
    tokenizer = load_tokenizer(args.teacher)
    passages = itertools.islice(glue_training_sentences(args.glue_dir), args.batch_size * (args.steps + 3))
    shards = write_shards(passages, tokenizer, Path(tempfile.mkdtemp()) / "shards", max_seq_length=args.max_seq_length)
    teacher = load_classifier(args.teacher, 2)
    student, _ = build_student(teacher, 2)
    objective = GeneralDistillation(student, teacher, "tinybert")
    optimizer = torch.optim.AdamW([p for p in objective.parameters() if p.requires_grad], lr=1e-4)
    loader = iter(
        make_loader(open_shards(shards), args.batch_size, Collator(tokenizers={"": tokenizer}), shuffle=True, seed=0)
    )

    def step(batch):
        objective(batch)["loss"].backward()
        optimizer.step()
        optimizer.zero_grad()

    step(next(loader))  # warm-up
    batches = [next(loader) for _ in range(args.steps)]
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    for batch in batches:
        step(batch)
    seconds = time.perf_counter() - start
    with FlopCounterMode(display=False) as counter:  # the same batches again, counted (not timed)
        for batch in batches:
            step(batch)
    flops = float(counter.get_total_flops())
    tokens = sum(int(b["attention_mask"].sum()) for b in batches)
    padded = sum(b["attention_mask"].numel() for b in batches)
    peak, how = peak_flops()
    load, cores = machine_load()
    record = {
        "teacher": args.teacher,
        "student_layers": 2,
        "loss": "tinybert",
        "batch_size": args.batch_size,
        "max_seq_length": args.max_seq_length,
        "steps": args.steps,
        "seconds": round(seconds, 2),
        "real_tokens_per_s": round(tokens / seconds, 1),
        "padded_tokens_per_s": round(padded / seconds, 1),
        "counted_gflops": round(flops / 1e9, 1),
        "achieved_gflops": round(flops / seconds / 1e9, 2),
        "peak_gflops": round(peak / 1e9, 1),
        "peak_from": how,
        "share_of_peak": round(flops / seconds / peak, 4),
        "load_average_1min": [round(load_before, 2), load],
        "cores": cores,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }
    print(json.dumps(record, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
