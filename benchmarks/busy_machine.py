"""Wall and CPU seconds of a fixed small training job on a quiet and on a busy machine, with the old
fixed thread count (every core) and with the thread choice a ``kedro run`` now makes at start
(``bert_kd.core.machine.thread_choice``: the cores free, cores less the 1-minute load average).

The job: a 2-layer student copied from MiniLM-L6 (15.6 M parameters), ``--steps`` AdamW steps
(fused) on random SST-2-sized batches (32 × 64 tokens), in a child process so that its CPU seconds
are its own (the whole child, imports and model loading included; and its training steps alone). The busy machine: ``--busy`` processes spinning in a Python loop, started here and
given a minute so the load average sees them before the choice is made. One run per row; the load
average before each run is recorded, since on a shared machine other work adds to it.

    PYTHONPATH=src nice -n 10 python benchmarks/busy_machine.py --steps 40 --busy 2 \\
        --out benchmarks/results/busy_machine.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

SPIN = "while True:\n    pass\n"


def job(steps: int, threads: int) -> None:
    """The fixed training job (run in a child process)."""
    import torch

    from bert_kd.core.models import build_student, load_classifier
    from bert_kd.core.training import SupervisedObjective, TrainingConfig, make_optimizer

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    student, _ = build_student(load_classifier("minilm-l6", 2), 2)
    objective = SupervisedObjective(student)
    optimizer = make_optimizer(objective, TrainingConfig(learning_rate=1e-4), torch.device("cpu"))
    generator = torch.Generator().manual_seed(0)
    began, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        batch = {
            "input_ids": torch.randint(1000, 30000, (32, 64), generator=generator),
            "attention_mask": torch.ones(32, 64, dtype=torch.long),
            "labels": torch.randint(0, 2, (32,), generator=generator),
        }
        objective.training_step(batch)["loss"].backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    print(json.dumps({"steps_wall_s": time.perf_counter() - began, "steps_cpu_s": time.process_time() - cpu}))


def timed_job(steps: int, threads: int) -> dict:
    """Wall and CPU seconds (user + system) of one child running the job."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    child = subprocess.run(
        [sys.executable, __file__, "--job", "--steps", str(steps), "--threads", str(threads)],
        check=True,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    steps_only = json.loads(child.stdout.strip().splitlines()[-1])
    return {
        "threads": threads,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        **{key: round(value, 2) for key, value in steps_only.items()},
    }


def condition(busy: int, steps: int, settle_s: float) -> list[dict]:
    """The job with the old thread count and with the new choice while ``busy`` loops spin."""
    from bert_kd.core.machine import machine_load, thread_choice

    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(busy)]
    try:
        time.sleep(settle_s if busy else 0)
        rows = []
        for policy in ("old: every core", "new: cores free at start"):
            load, cores = machine_load()
            threads = cores if policy.startswith("old") else thread_choice(None, {}, load, cores)[0]
            row = {"busy_loops": busy, "policy": policy, "load_before": round(load or 0.0, 2), "cores": cores}
            rows.append({**row, **timed_job(steps, threads)})
            print(json.dumps(rows[-1]), flush=True)
        return rows
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--busy", type=int, default=2)
    parser.add_argument("--settle", type=float, default=60.0, help="seconds the busy loops run before the choice")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--job", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.job:
        job(args.steps, args.threads)
        return
    rows = condition(0, args.steps, args.settle) + condition(args.busy, args.steps, args.settle)
    record = {
        "machine": {"processor": platform.processor() or platform.machine(), "nice": os.nice(0)},
        "steps": args.steps,
        "settle_s": args.settle,
        "rows": rows,
    }
    if args.out:
        args.out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
