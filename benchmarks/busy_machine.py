"""The threads a ``kedro run`` chooses at start, and the examples/s they give, in four states of the
machine, beside fixed 1 and 2 threads, in one run.

The job: the main job's first steps, teacher fine-tuning (the offline MiniLM-L6, 22.7 M parameters,
batch 32, length 64, length-grouped batches of real SST-2 rows, fused AdamW, ``fit``), ``--steps``
steps in a child process. A child started with ``auto`` chooses its threads exactly as the
``kedro run`` hook does (``bert_kd.core.machine``: other processes' CPU use over 0.3 s at start); it
also records what the 1-minute load-average rule it replaced would have chosen. The states, each
made by this script for every row:

- ``idle``: nothing else of the benchmark's;
- ``after burst``: every core spun for ``--burst`` seconds, stopped right before the child starts
  (the load average is then about the core count, the machine idle);
- ``1 busy`` / ``2 busy``: one / two Python loops spinning throughout the row.

Printed for each state: examples/s of the chosen threads over the best fixed count's (the ratio a
right choice keeps near 1), and each fixed count's. The rows run in the same order in every state,
so drift of the background load shows as drift, not as a difference of policies; the header records
other processes' CPU use before the run (a number above a few tenths of a core means the machine was
not idle, and the record says so).

    PYTHONPATH=src python benchmarks/busy_machine.py --steps 200 --burst 60 \\
        --out benchmarks/results/busy_machine.json --md benchmarks/results/busy_machine.md
    PYTHONPATH=src python benchmarks/busy_machine.py --steps 5 --burst 3   # a check that it runs
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

SPIN = "while True:\n    pass\n"
STATES = ("idle", "after burst", "1 busy", "2 busy")
POLICIES = ("auto", "1", "2")


def job(steps: int, threads: str) -> None:
    """The main job's first ``steps`` teacher fine-tuning steps (run in a child process); prints one JSON line."""
    from bert_kd.core.machine import cpu_use_now, machine_load, thread_choice

    use = cpu_use_now()  # first, before this process's own imports load the machine
    load, cores = machine_load()
    import torch
    from teacher_cache import TEACHER, load_rows

    from bert_kd.core.data.tokenize import tokenize_frame
    from bert_kd.core.models import load_classifier, load_tokenizer
    from bert_kd.core.training import Collator, SupervisedObjective, TrainingConfig, fit

    chosen, line, _ = thread_choice(None, {}, use, cores) if threads == "auto" else (int(threads), "fixed", None)
    torch.set_num_threads(chosen)
    frame, source = load_rows(steps * 32)
    tokenizer = load_tokenizer(TEACHER)
    dataset = tokenize_frame(frame, tokenizer, 64)
    config = TrainingConfig(
        epochs=1, batch_size=32, learning_rate=5e-5, progress_bar=False, cpu=True, mixed_precision="no", seed=42
    )
    objective = SupervisedObjective(load_classifier(TEACHER, 2))
    began, cpu = time.perf_counter(), time.process_time()
    result = fit(objective, dataset, None, config, collator=Collator({"": tokenizer.pad_token_id}))
    wall = time.perf_counter() - began
    load_rule = max(1, min(cores, int(cores - (load or 0.0) + 0.5)))
    print(
        json.dumps(
            {
                "threads": chosen,
                "line": line,
                "other_cores_at_start": None if use.other_cores is None else round(use.other_cores, 2),
                "load_at_start": None if load is None else round(load, 2),
                "load_rule_threads": load_rule,
                "steps": result.global_step,
                "examples_per_s": round(len(frame) / wall, 2),
                "steps_wall_s": round(wall, 2),
                "steps_cpu_s": round(time.process_time() - cpu, 2),
                "data": "SST-2 train" if source.endswith("train.tsv") else source,
            }
        )
    )


def run_child(steps: int, threads: str) -> dict:
    """One child running the job; its JSON line."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    env.pop("OMP_NUM_THREADS", None)
    child = subprocess.run(
        [sys.executable, __file__, "--job", "--steps", str(steps), "--threads", threads],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    return json.loads(child.stdout.strip().splitlines()[-1])


def spin(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(count)]


def stop(spinners: list[subprocess.Popen]) -> None:
    for spinner in spinners:
        spinner.kill()
        spinner.wait()


def row(state: str, policy: str, steps: int, burst_s: float, cores: int) -> dict:
    """One child in ``state`` with ``policy`` threads (the state made afresh for it)."""
    if state == "after burst":
        stop_at = time.monotonic() + burst_s
        spinners = spin(cores)
        time.sleep(max(0.0, stop_at - time.monotonic()))
        stop(spinners)
        spinners = []
    else:
        spinners = spin({"idle": 0, "1 busy": 1, "2 busy": 2}[state])
        time.sleep(1.0 if spinners else 0.0)  # the loops running before the child reads the machine
    try:
        return {"state": state, "policy": policy, **run_child(steps, policy)}
    finally:
        stop(spinners)


def ratios(rows: list[dict]) -> list[dict]:
    """Per state: the chosen threads and their examples/s over the best fixed count's and each fixed count's."""
    summary = []
    for state in STATES:
        by = {r["policy"]: r for r in rows if r["state"] == state}
        if len(by) < len(POLICIES):
            continue
        best = max(by[p]["examples_per_s"] for p in POLICIES[1:])
        auto = by["auto"]
        summary.append(
            {
                "state": state,
                "chosen_threads": auto["threads"],
                "load_rule_threads": auto["load_rule_threads"],
                "other_cores_at_start": auto["other_cores_at_start"],
                "load_at_start": auto["load_at_start"],
                "chosen_over_best_fixed": round(auto["examples_per_s"] / best, 3),
                **{f"examples_per_s_{p}": by[p]["examples_per_s"] for p in POLICIES},
            }
        )
    return summary


def markdown(record: dict) -> str:
    head = record["machine"]
    lines = [
        "# Threads chosen at start, four states of the machine",
        "",
        f"`{record['command']}`, {record['date']}, {head['processor']}, {head['cores']} cores. The job: the main",
        f"job's first {record['steps']} teacher fine-tuning steps (MiniLM-L6, batch 32, length 64, real SST-2",
        "rows) in a child process; `auto` chooses as a `kedro run` does (other processes' CPU use over 0.3 s at",
        "start), and the load-average rule it replaced is shown for comparison. One child per cell, each state made",
        f"afresh for it (the burst: every core spun for {record['burst_s']:.0f} s, stopped as the child starts).",
        "",
        f"Other processes' CPU use before the run: {head['other_cores_before']} cores (load average "
        f"{head['load_before']}).",
    ]
    if (head["other_cores_before"] or 0) > 0.3:
        lines += [
            "",
            "**The machine was not idle**: other work used the cores above before the run, so the rows measure",
            "this benchmark's states on top of it.",
        ]
    lines += [
        "",
        "| state | threads chosen (load-average rule) | others' cores at start | load at start | examples/s auto | 1 thread | 2 threads | auto / best fixed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in record["summary"]:
        lines.append(
            f"| {s['state']} | {s['chosen_threads']} ({s['load_rule_threads']}) | {s['other_cores_at_start']} | "
            f"{s['load_at_start']} | {s['examples_per_s_auto']} | {s['examples_per_s_1']} | {s['examples_per_s_2']} | "
            f"{s['chosen_over_best_fixed']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def processor() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what the platform says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--burst", type=float, default=60.0, help="seconds every core spins before 'after burst'")
    parser.add_argument("--states", default=",".join(STATES), help="comma-separated subset of " + ", ".join(STATES))
    parser.add_argument("--threads", default="auto")
    parser.add_argument("--job", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--md", type=Path)
    args = parser.parse_args(argv)
    if args.job:
        job(args.steps, args.threads)
        return
    from bert_kd.core.machine import cpu_use_now, machine_load

    before, (load, cores) = cpu_use_now(window_s=1.0), machine_load()
    states = [s.strip() for s in args.states.split(",")]
    unknown = sorted(set(states) - set(STATES))
    if unknown:
        parser.error(f"--states: unknown {unknown}; choose from {', '.join(STATES)}")
    rows = []
    for state in states:
        for policy in POLICIES:
            rows.append(row(state, policy, args.steps, args.burst, cores))
            print(json.dumps(rows[-1]), flush=True)
    summary = ratios(rows)
    for s in summary:
        print(
            f"{s['state']:>11}: chose {s['chosen_threads']} (load rule {s['load_rule_threads']}), "
            f"auto/best fixed {s['chosen_over_best_fixed']:.2f}; examples/s auto {s['examples_per_s_auto']}, "
            f"1 thread {s['examples_per_s_1']}, 2 threads {s['examples_per_s_2']}"
        )
    record = {
        "command": "python benchmarks/busy_machine.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": {
            "processor": processor(),
            "cores": cores,
            "other_cores_before": None if before.other_cores is None else round(before.other_cores, 2),
            "load_before": None if load is None else round(load, 2),
        },
        "steps": args.steps,
        "burst_s": args.burst,
        "rows": rows,
        "summary": summary,
    }
    if args.out:
        args.out.write_text(json.dumps(record, indent=1) + "\n")
    if args.md:
        args.md.write_text(markdown(record))


if __name__ == "__main__":
    main()
