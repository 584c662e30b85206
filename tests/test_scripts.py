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


def _ci_checkout(tmp_path: Path) -> tuple[Path, Path]:
    """A checkout holding the real ``.ci/run`` and stand-ins for everything it calls (set-up, linters, pytest,
    the docs build), each appending its command line to ``calls.txt``; also a committed-looking record claiming
    the slow tier passed (which CI must not believe)."""
    root, calls = tmp_path / "checkout", tmp_path / "calls.txt"
    (root / ".ci").mkdir(parents=True)
    (root / ".ci" / "run").write_text((REPO_ROOT / ".ci" / "run").read_text())
    record = f'echo "$(basename "$0") $*" >> {calls}\n'
    (root / "scripts").mkdir()
    (root / "scripts" / "setup.sh").write_text(record)
    (root / "scripts" / "pytest_tier.sh").write_text(f'tier() {{ echo "tier $*" >> {calls}; }}\n')
    (root / ".venv" / "bin").mkdir(parents=True)
    for tool in ("ruff", "lint-imports", "mkdocs", "python"):
        (root / ".venv" / "bin" / tool).write_text(f"#!/usr/bin/env bash\n{record}")
        (root / ".venv" / "bin" / tool).chmod(0o755)
    (root / "benchmarks" / "results").mkdir(parents=True)
    (root / "benchmarks" / "results" / "slow_tier.json").write_text(
        '{"commit": "HEAD", "clean": true, "tests": {"tests.x::test_a": "passed"}}'
    )
    return root, calls


def test_ci_runs_every_tier_whatever_a_committed_file_claims(tmp_path):
    root, calls = _ci_checkout(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    done = subprocess.run(["bash", ".ci/run"], cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    ran = calls.read_text().splitlines()
    tiers = [line.split()[1] for line in ran if line.startswith("tier ")]
    assert tiers == ["readme", "slow"], ran
    assert any(line.startswith("mkdocs build --strict") for line in ran), ran
    assert [line for line in ran if line.startswith("ruff ")] == ["ruff check .", "ruff format --check ."]
