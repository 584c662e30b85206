"""benchmarks/gpu_run.sh: the prepared GPU run's dry run on the CPU, and its usage line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "benchmarks" / "gpu_run.sh"
STEPS = ("gpu_check", "distill_alp", "distill_baselines", "reproduce")


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env, cwd=REPO_ROOT)


def test_dry_run_writes_summary_with_every_step_and_mlflow_db(tmp_path):
    result = _run("--dry-run", str(tmp_path / "out"))
    assert result.returncode == 0, result.stdout + result.stderr
    summary = (tmp_path / "out" / "summary.md").read_text()
    for step in STEPS:
        assert f"| {step} | 0 |" in summary, summary
    assert "GPU: " in summary
    assert "eval/accuracy" in summary
    assert (tmp_path / "out" / "mlflow.db").exists()


def test_missing_outdir_exits_2_with_usage():
    for args in ((), ("--dry-run",)):
        result = _run(*args)
        assert result.returncode == 2
        assert "usage: bash benchmarks/gpu_run.sh [--dry-run] OUTDIR" in result.stderr
