"""MLflow runs end FAILED on a node error and KILLED on SIGTERM, nested and parent alike."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from tests.conftest import REPO_ROOT, migrated_mlflow_db


def _status(uri, run_id):
    import mlflow

    return mlflow.MlflowClient(uri).get_run(run_id).info.status


def test_pipeline_error_marks_parent_and_nested_runs_failed(tmp_path):
    import mlflow

    from bert_kd.tracking.run_status import RunStatusHook

    uri = migrated_mlflow_db(tmp_path / "mlflow.db")
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
from bert_kd.tracking.run_status import RunStatusHook
mlflow.set_tracking_uri(sys.argv[1])
parent = mlflow.start_run(run_name="kedro run")
nested = mlflow.start_run(run_name="train", nested=True)
RunStatusHook().install_signal_handlers()
print(parent.info.run_id, nested.info.run_id, flush=True)
time.sleep(120)
"""


def test_sigterm_marks_parent_and_nested_runs_killed(tmp_path):
    uri = migrated_mlflow_db(tmp_path / "mlflow.db")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env["PYTHONPATH"] = str(REPO_ROOT / "src")
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, uri], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    parent_id, nested_id = proc.stdout.readline().split()
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, stderr[-2000:]
    assert (_status(uri, parent_id), _status(uri, nested_id)) == ("KILLED", "KILLED")


ORPHAN_SCRIPT = r"""
import sys, mlflow
from bert_kd.tracking import owner_tags, tracked_run
mlflow.set_tracking_uri(sys.argv[1])
mlflow.set_experiment("orphans")
with mlflow.start_run(run_name="kedro run", tags=owner_tags()) as parent:
    with tracked_run("train_student:mrpc") as child:
        print(parent.info.run_id, child.run_id, flush=True)
        sys.stdin.readline()  # wait to be killed
"""


def _sigkilled_orphans(uri: str) -> tuple[str, str]:
    """The ids of a parent and a nested run left RUNNING in ``uri`` by a process killed with SIGKILL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env["PYTHONPATH"] = str(REPO_ROOT / "src")
    proc = subprocess.Popen(
        [sys.executable, "-c", ORPHAN_SCRIPT, uri],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    parent_id, child_id = proc.stdout.readline().split()
    proc.kill()  # SIGKILL: no handler runs
    proc.communicate(timeout=60)
    return parent_id, child_id


def _next_kedro_run() -> None:
    """What the next ``kedro run`` does with the orphans: kedro-mlflow opens its run (left active here), then
    the run-status hook's wrapper resumes around a pipeline that succeeds."""
    import mlflow

    from bert_kd.tracking.run_status import RunStatusHook

    mlflow.start_run(run_name="next kedro run")
    wrapper = RunStatusHook().before_pipeline_run(run_params={}, pipeline=None, catalog=None)
    next(wrapper)
    try:
        wrapper.send(type("Outcome", (), {"excinfo": None})())
    except StopIteration:
        pass


def test_the_next_kedro_run_ends_the_runs_of_a_sigkilled_process_as_killed(tmp_path):
    import mlflow

    from bert_kd.tracking import HOST_TAG, PID_TAG, STARTED_TAG

    uri = migrated_mlflow_db(tmp_path / "mlflow.db")
    parent_id, child_id = _sigkilled_orphans(uri)
    assert (_status(uri, parent_id), _status(uri, child_id)) == ("RUNNING", "RUNNING")

    mlflow.set_tracking_uri(uri)
    mlflow.tracking.fluent._active_experiment_id = None
    mlflow.set_experiment("orphans")
    other_host = (
        mlflow.MlflowClient()
        .create_run(
            mlflow.get_experiment_by_name("orphans").experiment_id,
            tags={HOST_TAG: "another-machine", PID_TAG: "1", STARTED_TAG: "0.00"},
        )
        .info.run_id
    )
    _next_kedro_run()
    current = mlflow.active_run().info.run_id
    mlflow.end_run()
    assert (_status(uri, parent_id), _status(uri, child_id)) == ("KILLED", "KILLED")
    assert _status(uri, other_host) == "RUNNING"  # another host's process: not ours to judge
    assert mlflow.MlflowClient(uri).get_run(current).data.tags[PID_TAG] == str(os.getpid())
    assert "was gone" in mlflow.MlflowClient(uri).get_run(child_id).data.tags["bert_kd.ended_by"]


def test_ctrl_c_is_reported_once_and_never_by_a_forked_worker(tmp_path, monkeypatch, caplog):
    """Ctrl-C reaches every process of the group: DataLoader workers forked with the handler
    installed must not end (and report) the parent's runs again, and a second signal says nothing."""
    import logging

    import pytest

    from bert_kd.tracking import run_status

    ended: list[str] = []
    monkeypatch.setattr(run_status, "end_active_runs", lambda status: ended.append(status) or ["r1"])
    hook = run_status.RunStatusHook()
    hook.install_signal_handlers()
    real_pid = os.getpid()
    caplog.set_level(logging.WARNING, logger="bert_kd.tracking.run_status")
    try:
        monkeypatch.setattr(run_status.os, "getpid", lambda: real_pid + 1)  # a forked worker
        with pytest.raises(KeyboardInterrupt):
            hook._on_signal(signal.SIGINT, None)
        assert ended == [] and not caplog.records
        monkeypatch.setattr(run_status.os, "getpid", lambda: real_pid)
        for _ in range(3):
            with pytest.raises(KeyboardInterrupt):
                hook._on_signal(signal.SIGINT, None)
    finally:
        hook._restore()
    assert ended == ["KILLED"]
    assert [r.getMessage() for r in caplog.records] == ["SIGINT: MLflow run(s) r1 marked KILLED"]


def test_the_next_kedro_run_ends_a_sigkilled_run_of_another_experiment(tmp_path):
    """The killed process logged to another experiment than the next run's (a sweep's, a renamed one):
    its runs are ended too, and a nested run carries its owner from the moment it is opened."""
    import mlflow

    uri = migrated_mlflow_db(tmp_path / "mlflow.db")
    parent_id, child_id = _sigkilled_orphans(uri)
    mlflow.set_tracking_uri(uri)
    mlflow.tracking.fluent._active_experiment_id = None
    mlflow.set_experiment("the next run's")
    _next_kedro_run()
    mlflow.end_run()
    assert (_status(uri, parent_id), _status(uri, child_id)) == ("KILLED", "KILLED")


STUCK_SCRIPT = r"""
import threading, time
from bert_kd.tracking import run_status
run_status.STOP_GRACE_S = 1.0
run_status.RunStatusHook().install_signal_handlers()
threading.Thread(target=time.sleep, args=(120,)).start()  # an upload in flight: Python waits for it at exit
print("ready", flush=True)
time.sleep(120)
"""


def test_sigterm_ends_the_process_even_when_a_thread_would_keep_it():
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env["PYTHONPATH"] = str(REPO_ROOT / "src")
    proc = subprocess.Popen([sys.executable, "-c", STUCK_SCRIPT], stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM  # it waited for the thread's 120 s


def test_sigterm_skips_the_interpreters_teardown_once_unwound(monkeypatch):
    import atexit

    from bert_kd.tracking import run_status

    registered = []
    monkeypatch.setattr(atexit, "register", lambda *args: registered.append(args))
    monkeypatch.setattr(run_status.threading, "Timer", lambda *a, **k: type("T", (), {"start": lambda self: None})())
    run_status.exit_within(10.0, 143)
    assert registered == [(run_status._end_now, 143)]  # garbage-collecting torch's heap at exit took over 20 s
