"""MLflow runs end FAILED on a node error and KILLED on SIGTERM, nested and parent alike."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from tests.conftest import REPO_ROOT


def _status(uri, run_id):
    import mlflow

    return mlflow.MlflowClient(uri).get_run(run_id).info.status


def test_pipeline_error_marks_parent_and_nested_runs_failed(tmp_path):
    import mlflow

    from bert_kd.run_status import RunStatusHook

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    mlflow.tracking.fluent._active_experiment_id = None  # other tests leave another store's experiment active
    mlflow.set_experiment("run_status")
    parent = mlflow.start_run(run_name="kedro run")
    nested = mlflow.start_run(run_name="train_teacher:rte", nested=True)
    hook = RunStatusHook()
    hook.install_signal_handlers()
    hook.on_pipeline_error(error=RuntimeError("boom"), run_params={}, pipeline=None, catalog=None)
    assert mlflow.active_run() is None
    assert (_status(uri, parent.info.run_id), _status(uri, nested.info.run_id)) == ("FAILED", "FAILED")
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handlers restored


SCRIPT = r"""
import sys, time, mlflow
from bert_kd.run_status import RunStatusHook
mlflow.set_tracking_uri(sys.argv[1])
parent = mlflow.start_run(run_name="kedro run")
nested = mlflow.start_run(run_name="train", nested=True)
RunStatusHook().install_signal_handlers()
print(parent.info.run_id, nested.info.run_id, flush=True)
time.sleep(120)
"""


def test_sigterm_marks_parent_and_nested_runs_killed(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env["PYTHONPATH"] = str(REPO_ROOT / "src")
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, uri], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    parent_id, nested_id = proc.stdout.readline().split()
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, stderr[-2000:]
    assert (_status(uri, parent_id), _status(uri, nested_id)) == ("KILLED", "KILLED")
