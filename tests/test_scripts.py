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


def _slurm(tmp_path: Path, python: Path, **env: str) -> subprocess.CompletedProcess:
    environment = {
        **os.environ,
        "PYTHON": str(python),
        "SLURM_SUBMIT_DIR": str(tmp_path),
        "SLURM_ARRAY_JOB_ID": "9",
        "SLURM_ARRAY_TASK_ID": "1",
        "WORKERS_PER_GPU": "2",
        "BERT_KD_STORAGE": "postgresql+psycopg://bert_kd:s3cret@db-host:5433/bert_kd_optuna",
        "MLFLOW_TRACKING_URI": "http://alice:t0ken@mlflow-host:5000",
        **env,
    }
    if "PGPASSWORD" not in env:
        environment.pop("PGPASSWORD", None)
    script = REPO_ROOT / "scripts" / "slurm_reproduce.sbatch"
    return subprocess.run(["bash", str(script), "alp_kd_table1"], env=environment, capture_output=True, text=True)


def test_the_slurm_script_fails_when_a_worker_fails(tmp_path):
    """A worker's non-zero exit fails the array task (it exited 0 before), naming the worker's log."""
    done = _slurm(tmp_path, _stand_in(tmp_path, "#!/usr/bin/env bash\nexit 3\n"))
    assert done.returncode == 1
    assert "worker 1 failed" in done.stderr and "worker 2 failed" in done.stderr
    passed = _slurm(tmp_path, _stand_in(tmp_path, "#!/usr/bin/env bash\nexit 0\n"))
    assert passed.returncode == 0, passed.stderr


def test_the_slurm_script_keeps_the_password_off_command_lines_and_output(tmp_path):
    """The study URL's password goes to PGPASSWORD for the workers; the dry run shows neither password."""
    record = _stand_in(tmp_path, '#!/usr/bin/env bash\necho "$PGPASSWORD $*" >> "$SLURM_SUBMIT_DIR/seen"\n')
    done = _slurm(tmp_path, record)
    assert done.returncode == 0, done.stderr
    seen = (tmp_path / "seen").read_text().splitlines()
    assert len(seen) == 2
    assert all(line.startswith("s3cret ") and "s3cret@" not in line for line in seen)
    assert all("postgresql+psycopg://bert_kd@db-host:5433/bert_kd_optuna" in line for line in seen)
    dry = _slurm(tmp_path, record, DRY_RUN="1")
    assert dry.returncode == 0 and "s3cret" not in dry.stdout and "t0ken" not in dry.stdout
    assert "alice:***@mlflow-host" in dry.stdout
    clash = _slurm(tmp_path, record, PGPASSWORD="other")
    assert clash.returncode == 2 and "PGPASSWORD" in clash.stderr
