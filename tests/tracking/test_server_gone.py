"""An MLflow server that goes away, or whose database does: the wait is bounded and a stopping process stops."""

from __future__ import annotations

import http.server
import json
import os
import signal
import socket
import threading
import time

import pytest

from bert_kd.config.errors import TrackingUnreachableError
from bert_kd.tracking.runs import REQUEST_LIMITS, STOPPING_LIMITS, limit_requests
from tests.conftest import migrated_mlflow_db


def dead_server() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"  # nothing listens there once closed


def test_a_process_told_to_stop_stops_within_seconds_when_the_server_is_gone(tmp_path, monkeypatch):
    import mlflow

    from bert_kd.tracking.run_status import RunStatusHook

    for name in STOPPING_LIMITS:
        monkeypatch.setenv(name, "7")  # MLflow's patience, as a user may have set it; restored after the test
    mlflow.set_tracking_uri(migrated_mlflow_db(tmp_path / "mlflow.db"))
    mlflow.tracking.fluent._active_experiment_id = None
    mlflow.set_experiment("server_gone")
    mlflow.start_run(run_name="kedro run")
    mlflow.start_run(run_name="trial", nested=True)
    mlflow.set_tracking_uri(dead_server())  # the server was killed mid-trial
    from bert_kd.tracking import run_status

    exits = []  # the real one would end this test process (pytest's worker) 10 s later
    monkeypatch.setattr(run_status, "exit_within", lambda seconds, status: exits.append(status))
    hook = RunStatusHook()
    hook._owner_pid = os.getpid()
    began = time.monotonic()
    with pytest.raises(SystemExit) as stopped:
        hook._on_signal(signal.SIGTERM, None)
    assert stopped.value.code == 128 + signal.SIGTERM and exits == [128 + signal.SIGTERM]
    assert time.monotonic() - began < 10  # MLflow's own retries took minutes
    assert mlflow.active_run() is None  # nothing left for MLflow's exit handler to retry


def test_mlflows_retries_are_bounded_on_a_server_and_the_users_settings_win(monkeypatch):
    for name in REQUEST_LIMITS:
        monkeypatch.setenv(name, "")  # recorded, so that the test's values are undone after it
        monkeypatch.delenv(name)
    assert limit_requests("sqlite:///mlflow.db") == {}
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "300")
    chosen = limit_requests("http://mlflow-host:5000")
    assert chosen == {k: v for k, v in REQUEST_LIMITS.items() if k != "MLFLOW_HTTP_REQUEST_TIMEOUT"}
    assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "4" and os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "300"


class _DatabaseDown(http.server.BaseHTTPRequestHandler):
    """An MLflow server whose backend database is down: /health answers, every API request is a 500."""

    def do_GET(self):
        if self.path == "/health":
            body, code = b"OK", 200
        else:
            message = "(psycopg.OperationalError) connection to postgresql://bert_kd:s3cret@127.0.0.1:5433 refused"
            body, code = json.dumps({"error_code": "INTERNAL_ERROR", "message": message}).encode(), 500
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_server_whose_database_is_down_is_one_block_within_seconds():
    from bert_kd.kedro_project.preflight import check_tracking

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _DatabaseDown)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    uri = f"http://127.0.0.1:{server.server_address[1]}"
    began = time.monotonic()
    try:
        with pytest.raises(TrackingUnreachableError) as raised:
            check_tracking(uri)  # MLflow's client retried its 500s for 400 s of silence
    finally:
        server.shutdown()
    assert time.monotonic() - began < 5
    block = raised.value.block()
    assert "cannot read its runs" in block and "connection to postgresql://bert_kd:***@127.0.0.1:5433" in block
    assert "s3cret" not in block and "scripts/start_postgres.sh" in block


class _Answering(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


def test_a_request_that_never_reached_the_server_is_one_block_even_once_the_server_is_back(monkeypatch):
    # The MLflow server was restarted while kedro-mlflow asked for its experiment: the request's retries ran out
    # (a 160-line traceback, exit 1); by the time anyone looks, the server answers again.
    import mlflow
    from mlflow.exceptions import MlflowException

    from bert_kd.cli import tracking_down_error

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answering)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    uri = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setattr(mlflow, "get_tracking_uri", lambda: uri)
    refused = MlflowException(
        f"API request to {uri}/api/2.0/mlflow/experiments/get-by-name failed with exception HTTPConnectionPool("
        "host='127.0.0.1'): Max retries exceeded with url: (Caused by NewConnectionError(... Connection refused))"
    )
    try:
        error = tracking_down_error(refused)
        unrelated = tracking_down_error(RuntimeError("Connection refused"))  # not MLflow's: left as it is
    finally:
        server.shutdown()
    assert isinstance(error, TrackingUnreachableError) and "Max retries exceeded" in error.block()
    assert "run the same command" in error.block() and unrelated is None
