"""The shell scripts of ``scripts/`` stop with a non-zero status and print the reason on the terminal when a
step fails (bad-input corpus, scripts). Each runs with a stand-in ``PYTHON`` so that no model loads."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest import REPO_ROOT

USER_ERROR = """#!/usr/bin/env bash
echo "some Kedro logging" >&2
printf 'bert-kd: invalid parameters (1):\\n  - reproduce.table: unknown table %s\\n  fix:   correct it\\n' "$*" >&2
exit 2
"""


def _stand_in(tmp_path: Path, script: str) -> Path:
    path = tmp_path / "python"
    path.write_text(script)
    path.chmod(0o755)
    return path


def _sweep(tmp_path: Path, python: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": str(python), "LOGS": str(tmp_path / "worker")}
    return subprocess.run(
        ["bash", str(REPO_ROOT / "scripts" / "sweep.sh"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_sweep_stops_with_the_workers_reason_when_its_workers_fail(tmp_path):
    done = _sweep(tmp_path, _stand_in(tmp_path, USER_ERROR), "nonexistent_table")
    assert done.returncode == 2, done
    assert "done" not in done.stdout
    assert "bert-kd: invalid parameters" in done.stderr and "reproduce.table=nonexistent_table" in done.stderr
    assert "worker 1" in done.stderr and str(tmp_path / "worker1.log") in done.stderr
    assert "some Kedro logging" not in done.stderr  # the block, not the whole log
    assert "results_only" not in (tmp_path / "worker1.log").read_text()  # the table step never ran


def test_sweep_says_done_when_every_step_succeeds(tmp_path):
    done = _sweep(tmp_path, _stand_in(tmp_path, '#!/usr/bin/env bash\necho "$@"\n'), "cpu_protocol")
    assert done.returncode == 0, done
    assert done.stdout.rstrip().endswith("done") and not done.stderr
    log = (tmp_path / "worker1.log").read_text()
    assert "reproduce.results_only=true" in log  # the table step ran after the round


def test_sweep_without_a_table_prints_its_usage(tmp_path):
    done = _sweep(tmp_path, _stand_in(tmp_path, USER_ERROR))
    assert done.returncode != 0 and "usage: bash scripts/sweep.sh <table>" in done.stderr
