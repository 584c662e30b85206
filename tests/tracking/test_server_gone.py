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


def test_a_failing_request_is_retried_for_at_most_about_15_seconds():
    """The bound that lets a block come within 30 s: urllib3 sleeps backoff * 2**(n-1) before retry n (plus up to
    1 s of MLflow's jitter); MLflow's own backoff of 2 with later requests retried in turn gave 180-221 s."""
    retries = int(REQUEST_LIMITS["MLFLOW_HTTP_REQUEST_MAX_RETRIES"])
    backoff = float(REQUEST_LIMITS["MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"])
    assert sum(backoff * 2**n + 1 for n in range(retries)) <= 20


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


class _Gone(http.server.BaseHTTPRequestHandler):
    """An MLflow server whose database went down mid-run: /health answers, every API request (GET or POST) is a
    500 naming the database."""

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        if self.path == "/health":
            body, code = b"OK", 200
        else:
            message = "(psycopg.OperationalError) connection to server at 127.0.0.1, port 5445 failed: refused"
            body, code = json.dumps({"error_code": "INTERNAL_ERROR", "message": message}).encode(), 500
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("gone", ["database", "server"])
def test_a_run_whose_database_or_server_goes_away_is_one_block_that_says_which(tmp_path, monkeypatch, caplog, gone):
    """A live server whose database is down and a dead server are told apart (the block named the server when its
    PostgreSQL was down); urllib3's warning per retry (888 lines) is one line; later requests are tried once."""
    import mlflow

    from bert_kd.tracking.runs import tracked_run

    for name, value in {**REQUEST_LIMITS, "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "0.05"}.items():
        monkeypatch.setenv(name, value)  # the real bound is checked above; here its shape, in seconds
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_BACKOFF_JITTER", "0")
    mlflow.set_tracking_uri(migrated_mlflow_db(tmp_path / "mlflow.db"))
    mlflow.tracking.fluent._active_experiment_id = None
    mlflow.set_experiment("gone")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Gone)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    uri = f"http://127.0.0.1:{server.server_address[1]}" if gone == "database" else dead_server()
    began = time.monotonic()
    try:
        with caplog.at_level("WARNING"), pytest.raises(TrackingUnreachableError) as raised, tracked_run("job") as run:
            limit_requests(uri)
            mlflow.set_tracking_uri(uri)  # the server (or its database) went away mid-run
            run.log_metrics({"loss": 1.0}, step=1)
    finally:
        server.shutdown()
        mlflow.set_tracking_uri(migrated_mlflow_db(tmp_path / "mlflow.db"))
        while mlflow.active_run():
            mlflow.end_run()
    assert time.monotonic() - began < 15
    block = raised.value.block()
    if gone == "database":
        assert "answers, but the database it keeps its runs in" in block and "port 5445" in block
        assert "--backend-store-uri" in block and "stopped answering" not in block
    else:
        assert "stopped answering" in block and "database it keeps" not in block
    assert caplog.text.count("Retrying") == 0 and caplog.text.count("retrying for up to") <= 1
    assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == STOPPING_LIMITS["MLFLOW_HTTP_REQUEST_MAX_RETRIES"]


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


@pytest.mark.slow
def test_real_services_a_dead_server_and_a_live_server_whose_postgresql_is_down_are_told_apart_within_30_s(
    monkeypatch,
):
    """PostgreSQL (scripts/start_postgres.sh; PGPORT when set) and an MLflow server on it, with the project's real
    retry bound: PostgreSQL stopped mid-run is named as the database within 30 s, the server killed as the server."""
    import tempfile
    from pathlib import Path

    import mlflow

    from bert_kd.tracking.runs import tracked_run, tracking_store_problem
    from tests.sweeps.test_many_machines import Services, answers, wait_for

    for name in (*REQUEST_LIMITS, "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER"):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    root = Path(tempfile.mkdtemp(prefix="bert_kd_services_"))
    services = Services(root)
    if os.environ.get("PGPORT"):
        services.pg_port = int(os.environ["PGPORT"])
        services.env["PGPORT"] = os.environ["PGPORT"]
        services.database = f"postgresql+psycopg://bert_kd@127.0.0.1:{services.pg_port}"
    try:
        services.postgres()
        services.start_mlflow()
        uri = services.tracking
        wait_for(lambda: answers(f"{uri}/health"), "the MLflow server", 90, services.server)
        limit_requests(uri)
        mlflow.set_tracking_uri(uri)
        mlflow.tracking.fluent._active_experiment_id = None
        mlflow.set_experiment("services_gone")
        blocks = {}
        for gone in ("database", "server"):
            limit_requests(uri, force=True)
            with pytest.raises(TrackingUnreachableError) as raised, tracked_run(f"job-{gone}") as run:
                run.log_metrics({"loss": 1.0}, step=0)
                if gone == "database":
                    services.postgres("stop", "immediate")
                else:
                    services.kill_mlflow()
                began = time.monotonic()
                run.log_metrics({"loss": 0.5}, step=1)
            blocks[gone] = (raised.value.block(), time.monotonic() - began)
            if gone == "database":
                services.postgres()
                wait_for(lambda: tracking_store_problem(uri, timeout=5) is None, "the server reads again", 60)
        assert "answers, but the database it keeps its runs in" in blocks["database"][0], blocks
        assert "stopped answering" in blocks["server"][0], blocks
        assert blocks["database"][1] < 30 and blocks["server"][1] < 30, blocks
    finally:
        while mlflow.active_run():
            try:
                mlflow.end_run()
            except Exception:  # noqa: BLE001 - the server is gone by design
                break
        mlflow.set_tracking_uri("")
        services.close()


def test_urllib3s_retry_warnings_are_one_line_naming_the_bound():
    import logging

    from bert_kd.tracking.runs import RetryNotice

    notice, kept = RetryNotice(every_s=60.0), []
    for total in (3, 2, 1, 0):
        record = logging.LogRecord(
            "urllib3.connectionpool", logging.WARNING, __file__, 1,
            "Retrying (%r) after connection broken by '%r': %s",
            (f"Retry(total={total})", "NewConnectionError(refused)", "/api/2.0/mlflow/runs/log-batch"), None,
        )  # fmt: skip
        if notice.filter(record):
            kept.append(record.getMessage())
    assert len(kept) == 1 and "/api/2.0/mlflow/runs/log-batch" in kept[0] and "retrying for up to" in kept[0]
    other = logging.LogRecord(
        "urllib3.connectionpool", logging.WARNING, __file__, 1, "Connection pool is full", (), None
    )
    assert notice.filter(other)
