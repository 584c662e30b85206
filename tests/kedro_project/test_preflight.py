"""Start-of-run checks: an unreachable tracking server and damaged SQLite files fail in seconds."""

from __future__ import annotations

import socket
import sqlite3
import time

import pytest

from bert_kd.config.errors import StorageError, TrackingUnreachableError
from bert_kd.kedro_project.preflight import check_sweep_storage, check_tracking, sqlite_path, sqlite_problem
from bert_kd.tracking import tracking_server_problem
from tests.conftest import make_damaged_sqlite


def _closed_local_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_server_is_named_with_the_way_to_turn_tracking_off():
    uri = f"http://127.0.0.1:{_closed_local_port()}"
    started = time.monotonic()
    with pytest.raises(TrackingUnreachableError) as caught:
        check_tracking(uri)
    assert time.monotonic() - started < 15  # the bound; MLflow's own retries took 252 s
    block = caught.value.block()
    assert uri in block and "tracking.enabled=false" in block and "MLFLOW_TRACKING_URI" in block


def test_a_server_that_never_answers_is_given_up_after_the_timeout():
    with socket.socket() as listener:  # accepts the connection, never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        started = time.monotonic()
        problem = tracking_server_problem(f"http://127.0.0.1:{port}", timeout=0.5)
    assert problem is not None and time.monotonic() - started < 5


def test_local_stores_and_answering_servers_pass(tmp_path):
    assert tracking_server_problem(f"sqlite:///{tmp_path / 'mlflow.db'}") is None
    assert tracking_server_problem("databricks") is None
    check_tracking(f"sqlite:///{tmp_path / 'absent.db'}")  # SQLite creates it


def test_sqlite_urls_name_their_files():
    assert str(sqlite_path("sqlite:///data/09_sweeps/optuna.db")) == "data/09_sweeps/optuna.db"
    assert str(sqlite_path("sqlite:////abs/mlflow.db")) == "/abs/mlflow.db"
    assert sqlite_path("sqlite:///:memory:") is None and sqlite_path("postgresql://h/db") is None


def test_a_damaged_database_is_found_and_a_sound_one_passes(tmp_path):
    sound = tmp_path / "sound.db"
    with sqlite3.connect(sound) as connection:
        connection.execute("CREATE TABLE t (x)")
    connection.close()
    assert sqlite_problem(sound) is None
    damaged = make_damaged_sqlite(tmp_path / "optuna.db")
    assert "malformed" in sqlite_problem(damaged)
    with pytest.raises(StorageError) as caught:
        check_sweep_storage({"storage": f"sqlite:///{damaged}"})
    assert str(damaged) in caught.value.block() and f"mv {damaged}" in caught.value.block()
    (tmp_path / "garbage.db").write_bytes(b"not a database at all" * 100)
    assert "not a database" in sqlite_problem(tmp_path / "garbage.db")


@pytest.mark.parametrize("uri", ["file:./mlruns", "./mlruns", "mlruns", "/tmp/somewhere/mlruns"])
def test_a_file_store_is_refused_before_mlflow_says_so_in_a_traceback(uri, monkeypatch):
    """MLflow 3 refuses its file store (maintenance mode) with a long traceback mid-run."""
    from bert_kd.config.errors import UserError

    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    with pytest.raises(UserError) as caught:
        check_tracking(uri)
    block = caught.value.block()
    assert uri in block and "sqlite:///mlflow.db" in block and "MLFLOW_TRACKING_URI" in block
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow's own opt-out is honoured
    check_tracking(uri)
