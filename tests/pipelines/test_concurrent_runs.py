"""Two real ``kedro run`` processes at once in one project folder: each reports its own model;
identical runs train once.

Both processes of a pair are started with the same Kedro timestamp (a ``sitecustomize`` on their
path pins ``generate_timestamp``): two runs started in the same millisecond, every time, not only
when the race happens to be lost. Before versions got a per-run part, the second run failed with
"Save path … must not exist if versioning is enabled"."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT, migrated_mlflow_db
from tests.pipelines.conftest import TINY_TRAINING, mlflow_runs


def _params(glue_dir, model_dir, learning_rate: float) -> dict:
    return {
        "task": "rte",
        "glue_dir": str(glue_dir),
        "max_train_samples": None,
        "teacher": {
            "model": str(model_dir),
            "max_seq_length": 32,
            "retrain": False,
            "training": {**TINY_TRAINING, "learning_rate": learning_rate},
        },
        "tracking": {"enabled": True, "log_models": False},
        "runtime": {"progress_bar": False, "checkpoint_every_steps": 0},
    }


PIN_TIMESTAMP = """
import os

stamp = os.environ.get("PINNED_KEDRO_TIMESTAMP")
if stamp:  # every run started with this variable draws the same Kedro version timestamp
    import kedro.framework.session.session as session
    import kedro.io.core as core

    core.generate_timestamp = session.generate_timestamp = lambda: stamp
"""


def _run_together(project, uri, envs, timestamp):
    pin = project.parent / "pin_timestamp"
    pin.mkdir(exist_ok=True)
    (pin / "sitecustomize.py").write_text(PIN_TIMESTAMP)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(pin), str(REPO_ROOT / "src")]),
        "MLFLOW_TRACKING_URI": uri,
        "OMP_NUM_THREADS": "1",
        "PINNED_KEDRO_TIMESTAMP": timestamp,
    }
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "kedro", "run", "--pipelines", "train_teacher", "--env", name],
            cwd=project,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name in envs
    ]
    for proc in procs:
        output, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, output[-4000:]


def _reports(project) -> list[dict]:
    folder = project / "data/08_reporting/teacher_metrics.json"
    return [json.loads((v / "teacher_metrics.json").read_text()) for v in sorted(folder.iterdir())]


@pytest.mark.slow
def test_two_kedro_runs_at_once_report_their_own_models(tmp_path, tiny_teacher_dir, tiny_glue_dir):
    import mlflow

    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "pyproject.toml", project / "pyproject.toml")
    shutil.copytree(REPO_ROOT / "conf" / "base", project / "conf" / "base")
    (project / "conf" / "local").mkdir()
    for name, lr in (("run_a", 1e-4), ("run_b", 3e-4), ("run_c", 2e-4)):
        (project / "conf" / name).mkdir()
        (project / "conf" / name / "parameters.yml").write_text(
            json.dumps(_params(tiny_glue_dir, tiny_teacher_dir, lr))
        )
    uri = migrated_mlflow_db(tmp_path / "mlflow.db")
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment("bert_kd")  # create the database once, before two processes race for it

    _run_together(project, uri, ["run_a", "run_b"], "2026-01-01T00.00.00.000Z")  # different parameters
    first = _reports(project)
    versions = sorted(p.name for p in (project / "data/08_reporting/teacher_metrics.json").iterdir())
    assert all(v.startswith("2026-01-01T00.00.00.000Z") for v in versions)  # the pin worked: same instant
    assert len(first) == 2 and first[0]["info"]["key"] != first[1]["info"]["key"]
    runs = mlflow_runs(uri).set_index("run_id")
    for report in first:
        run = runs.loc[report["info"]["mlflow_run_id"]]
        assert run["params.key"] == report["info"]["key"]  # the run that trained this very model
        assert run["metrics.final/score"] == pytest.approx(report["score"], rel=5e-4)  # 4 significant digits
    assert {runs.loc[r["info"]["mlflow_run_id"], "params.training.learning_rate"] for r in first} == {
        "0.0001",
        "0.0003",
    }

    _run_together(project, uri, ["run_c", "run_c"], "2026-01-01T00.00.01.000Z")  # identical parameters
    second = _reports(project)[2:]
    assert len(second) == 2
    assert second[0]["info"]["key"] == second[1]["info"]["key"]
    trained_in = {r["info"].get("trained_in_run_id") or r["info"]["mlflow_run_id"] for r in second}
    assert len(trained_in) == 1  # one trained, the other reused it (in its own run, linked to that one)
    assert second[0]["metrics"] == second[1]["metrics"]
    runs = mlflow_runs(uri)
    reused = runs["tags.bert_kd.reused"] if "tags.bert_kd.reused" in runs else None
    trained = runs[(runs["params.key"] == second[0]["info"]["key"]) & (reused.isna() if reused is not None else True)]
    assert len(trained) == 1  # one training for the identical pair
    assert len(list((project / "data/06_models/store/teacher").iterdir())) == 3
