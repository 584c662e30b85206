"""A paired table on many machines: two arms by two seeds on a few dozen RTE rows, swept by two workers on the
project's PostgreSQL (``scripts/start_postgres.sh``), one of them killed with SIGKILL in the middle of a trial, gives
the trials and the paired reading ([`bert_kd.analysis.paired`][]) that one worker alone gives.

The database's port and folder: ``BERT_KD_TEST_PGPORT`` / ``BERT_KD_TEST_PGROOT`` where set (a machine shared by
several people), else a free port and a temporary folder.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import make_tiny_bert, migrated_mlflow_db
from tests.sweeps.test_many_machines import Services, finished, glue_rows, project_copy, succeeded, worker

TINY_PAIRED = """
task: rte
glue_dir: {glue}
teacher:
  model: {teacher}
  max_seq_length: 32
  training: {{epochs: 1, batch_size: 8, eval_batch_size: 16, learning_rate: 1.0e-3, warmup_ratio: 0.0}}
student:
  num_layers: 2
  training: {{epochs: 1, batch_size: 8, eval_batch_size: 16}}
runtime: {{progress_bar: false, checkpoint_every_steps: 1}}
tracking: {{enabled: false}}
reproduce:
  table: pair
  storage: {storage}
  results_dir: results
  heartbeat_interval: 1
  grace_period: 10
  bootstrap: {{resamples: 50, seed: 0, alpha: 0.05}}
  tables:
    pair:
      paper: two arms by two seeds on a few dozen RTE rows
      paired: {{arms: [plain, tuned]}}
      tasks: [rte]
      seeds: [1, 2]
      grid: {{training.learning_rate: [1.0e-3]}}
      methods:
        plain: {{recipe: distill_methods.nkd, arm: plain, cell: nkd, label: "NKD, plain"}}
        tuned: {{recipe: distill_methods.nkd, arm: tuned, cell: nkd, label: "NKD, 3 layers",
                overrides: {{student.num_layers: 3}}}}
"""


@pytest.fixture(scope="module")
def postgres():
    """The project's PostgreSQL on its own folder and port (no MLflow server: the table tracks nothing)."""
    root = Path(os.environ.get("BERT_KD_TEST_PGROOT") or tempfile.mkdtemp(prefix="bert_kd_paired_"))
    root.mkdir(parents=True, exist_ok=True)
    running = Services(root)
    if os.environ.get("BERT_KD_TEST_PGPORT"):
        running.pg_port = int(os.environ["BERT_KD_TEST_PGPORT"])
        running.env["PGPORT"] = str(running.pg_port)
        running.database = f"postgresql+psycopg://bert_kd@127.0.0.1:{running.pg_port}"
        running.optuna = f"{running.database}/bert_kd_optuna"
    running.postgres()
    try:
        yield running
    finally:
        running.close()


def records(project: Path) -> dict[str, dict]:
    """The results folder's trial files: trial key → record."""
    files = (project / "results" / "pair").rglob("*.json")
    return {record["trial"]: record for record in (json.loads(path.read_text()) for path in files)}


def paired_reading(project: Path) -> str:
    """The paired reading of the checkout's trial files, for the table its conf/local defines."""
    from bert_kd.analysis import paired
    from bert_kd.sweeps.spec import build_sweep

    conf = yaml.safe_load((project / "conf" / "local" / "parameters_many_machines.yml").read_text())
    sweep = build_sweep(conf["reproduce"], {"distill_methods": {"nkd": {"method": "nkd"}}})
    rows = [{"name": m.name, "arm": m.arm, "cell": m.cell, "label": m.label} for m in sweep.methods]
    cells = paired.cells_of(list(records(project).values()), rows, sweep.arms, sweep.tasks, 2_000)
    return paired.reading(cells, sweep.arms)


@pytest.mark.slow
def test_a_paired_table_on_two_workers_one_killed_is_the_one_worker_table(tmp_path, postgres):
    started = time.monotonic()
    teacher = make_tiny_bert(tmp_path / "teacher")
    glue = glue_rows(tmp_path / "glue")

    def conf(storage: str) -> str:
        return TINY_PAIRED.format(glue=glue, teacher=teacher, storage=storage)

    single = project_copy(tmp_path / "single", conf("sqlite:///data/09_sweeps/optuna.db"), None)
    reference = worker(single, migrated_mlflow_db(single / "mlflow.db"), tmp_path / "single.log")
    store = tmp_path / "nfs" / "store"
    store.mkdir(parents=True)
    a = project_copy(tmp_path / "machine_a", conf(postgres.optuna), store)
    b = project_copy(tmp_path / "machine_b", conf(postgres.optuna), store)
    tracking = {p: migrated_mlflow_db(p / "mlflow.db") for p in (a, b)}  # nothing is tracked; a store all the same
    killed = worker(a, tracking[a], tmp_path / "a_killed.log", fault="step:2")  # SIGKILL at its first fit's step 2
    b_worker = worker(b, tracking[b], tmp_path / "b.log")
    assert finished(killed, tmp_path / "a_killed.log") == -signal.SIGKILL, (tmp_path / "a_killed.log").read_text()
    succeeded(b_worker, tmp_path / "b.log")
    succeeded(worker(a, tracking[a], tmp_path / "a_restarted.log"), tmp_path / "a_restarted.log")
    succeeded(reference, tmp_path / "single.log")
    print(f"\npaired table on two workers: {time.monotonic() - started:.0f} s")

    expected = records(single)
    assert len(expected) == 4 and set(records(a)) == set(records(b)) == set(expected)
    for project in (a, b):
        for key, record in records(project).items():
            assert record["key"] == expected[key]["key"]  # the same content keys: the overrides in both
            for name in ("dev_metric", "teacher_dev_metric", "dev_predictions"):
                assert record["result"].get(name) == expected[key]["result"].get(name), (key, name)
    reading = paired_reading(single)
    assert "| RTE | NKD | 2 |" in reading
    assert paired_reading(a) == paired_reading(b) == reading
    assert len([p for p in (store / "student").iterdir() if not p.name.startswith(".")]) == 4
