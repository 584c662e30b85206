"""The README's main job at two commits, run alternately on one machine, each with its own defaults.

Each run is the README's command, ``kedro run --pipelines=distill_alp``, with only the GLUE folder, a
retrain of every job (``runtime.recompute=true``: the same work on every repeat) and no progress bar given,
and no ``OMP_NUM_THREADS``: each side's code chooses its threads as a new user gets them. The other
commit is unpacked with ``git archive`` into a temporary folder and runs from there with the same Python.
``--burst S`` spins every core for S seconds before each run, stopped as it starts: the state a newcomer's
``bash scripts/setup.sh && kedro run`` starts in (the machine idle, the load average about the core count).
The sides alternate (A B B A A B …), and the record holds each run's wall time, dev accuracies, the
``threads:`` line its code printed and the B/A ratio of the median wall times.

    PYTHONPATH=src python benchmarks/main_job_ab.py --base 3771b6c --repeats 2 --burst 60 \\
        --out benchmarks/results/main_job_ab.json
    PYTHONPATH=src python benchmarks/main_job_ab.py --repeats 1 --burst 2 \
        --params "max_train_samples=64,max_eval_samples=64,training.epochs=1"   # a check that it runs
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "scripts"))  # run_record.py: the main job's record from its log
from run_record import main_job  # noqa: E402

THREADS_LINE = re.compile(r"(threads: .*)$")


def unpack(commit: str, into: Path) -> Path:
    """The tree of ``commit`` in ``into`` (``git archive``: no worktree, nothing left in the repository)."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "archive", commit], cwd=REPO, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def burst(seconds: float) -> None:
    """Every usable core spinning for ``seconds``, then stopped."""
    if seconds <= 0:
        return
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True:\n    pass\n"]) for _ in range(len(os.sched_getaffinity(0)))
    ]
    time.sleep(seconds)
    for spinner in spinners:
        spinner.kill()
        spinner.wait()


def run(name: str, tree: Path, glue_dir: str, logs: Path, index: int, extra: str = "") -> dict:
    """One main job in ``tree``, logged as ``scripts/main_job.sh`` logs it; its record."""
    params = f"glue_dir={glue_dir},runtime.progress_bar=false,runtime.recompute=true" + (f",{extra}" if extra else "")
    log = logs / f"{index:02d}_{name}.log"
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")},
        "COLUMNS": "240",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "KEDRO_DISABLE_TELEMETRY": "1",
        "PYTHONPATH": str(tree / "src"),
        "KEDRO_LOGGING_CONFIG": str(REPO / "scripts" / "main_job_logging.yml"),
    }
    with log.open("w") as out:
        uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
        out.write(f"candidate: {name}\nthreads: 0\nparams: {params}\nnice: {os.nice(0)}\nload before: {uptime}\n")
        out.write(f"start: {time.time()}\n")
        out.flush()
        subprocess.run(
            [
                "/usr/bin/time",
                "-v",
                sys.executable,
                "-m",
                "kedro",
                "run",
                "--pipelines=distill_alp",
                "--params",
                params,
            ],
            cwd=tree,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=True,
        )
        out.write(f"end: {time.time()}\n")
        out.write(f"load after: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}\n")
    record = main_job(log)
    chosen = [m[1] for line in log.read_text().splitlines() if (m := THREADS_LINE.search(line)) and "torch" in line]
    record.update(side=name, threads_line=chosen[0] if chosen else None, log=str(log))
    print(json.dumps({k: record[k] for k in ("side", "wall_s", "teacher_dev_accuracy", "student_dev_accuracy")}))
    print(f"  {record['threads_line']}", flush=True)
    return record


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="3771b6c", help="the commit to compare with (side A)")
    parser.add_argument("--head", default="HEAD", help="side B: HEAD runs this checkout's committed tree")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each side")
    parser.add_argument("--burst", type=float, default=60.0, help="seconds every core spins before each run")
    parser.add_argument("--glue-dir", default=str(REPO.parent / "shared" / "glue"))
    parser.add_argument("--params", default="", help="more --params for both sides (a shortened check)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="main_job_ab_"))
    trees = {"A": unpack(args.base, root / "a"), "B": unpack(args.head, root / "b")}
    logs = root / "logs"
    logs.mkdir()
    print(f"trees and logs under {root}", flush=True)
    order = [("A", "B") if i % 2 == 0 else ("B", "A") for i in range(args.repeats)]
    records = []
    for pair in order:
        for side in pair:
            burst(args.burst)
            records.append(run(side, trees[side], args.glue_dir, logs, len(records), args.params))
    walls = {side: statistics.median(r["wall_s"] for r in records if r["side"] == side) for side in "AB"}
    summary = {
        "base": args.base,
        "head": args.head,
        "burst_s": args.burst,
        "params": args.params,
        "median_wall_s": walls,
        "b_over_a": round(walls["B"] / walls["A"], 3),
        "accuracy": {
            side: {
                "teacher": [r["teacher_dev_accuracy"] for r in records if r["side"] == side],
                "student": [r["student_dev_accuracy"] for r in records if r["side"] == side],
            }
            for side in "AB"
        },
    }
    print(json.dumps(summary, indent=1))
    if args.out:
        args.out.write_text(json.dumps({"summary": summary, "runs": records}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
