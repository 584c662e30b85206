"""The multi-node launch of general distillation (scripts/general_multinode.sh), dry run: the torchrun line it would run."""

from __future__ import annotations

import os
import subprocess

from tests.conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "general_multinode.sh"


def dry_run(env: dict, *args: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("NNODES", "RDZV_ENDPOINT", "NPROC_PER_NODE", "RDZV_ID")}
    return subprocess.run(
        ["bash", str(SCRIPT), "--dry-run", *args], env={**clean, **env}, capture_output=True, text=True, cwd=REPO_ROOT
    )


def test_every_node_joins_one_c10d_rendezvous_and_runs_distill_general():
    done = dry_run(
        {"NNODES": "4", "NPROC_PER_NODE": "8", "RDZV_ENDPOINT": "node0:29400", "GLUE_DIR": "/data/glue"},
        "general.training.max_steps=100",
    )
    assert done.returncode == 0, done.stderr
    words = done.stdout.split()
    assert words[:5] == [".venv/bin/torchrun", "--nnodes", "4", "--nproc_per_node", "8"]
    assert "--rdzv_backend c10d --rdzv_endpoint node0:29400 --rdzv_id bert-kd-general" in done.stdout
    assert "--pipelines=distill_general" in words
    assert words[-1] == "glue_dir=/data/glue\\,general.training.max_steps=100"


def test_a_missing_rendezvous_endpoint_is_one_line_not_a_launch():
    done = dry_run({"NNODES": "2"})
    assert done.returncode != 0 and "RDZV_ENDPOINT" in done.stderr and not done.stdout
