"""A study shared by machines (bert_kd.sweeps.scheduler and its storage): results adopted from other checkouts,
the model store's identity, a dead machine's trial taken back after the grace period, storage errors."""

from __future__ import annotations

import multiprocessing
import socket
import sys
import time

import optuna
import pytest
from sqlalchemy.exc import OperationalError

from bert_kd.config.errors import UserError
from bert_kd.sweeps.scheduler import SweepOptions, UnsharedModelStore, check_model_store, run_sweep
from bert_kd.sweeps.spec import build_sweep
from bert_kd.sweeps.storage import make_storage, storage_error
from tests.sweeps.conftest import RECIPES, fake_run_trial, hanging_worker, tiny_reproduce

optuna.logging.set_verbosity(optuna.logging.WARNING)


class Checkout:
    """One machine's worker: its results folder (a dict) and the keys it trained."""

    def __init__(self, name: str):
        self.origin, self.folder, self.trained = f"host-{name}:/{name}/results", {}, []

    def run_trial(self, spec):
        self.trained.append(spec.key)
        self.folder[spec.key] = fake_run_trial(spec)
        return self.folder[spec.key]

    def adopt(self, spec, result, made_in):
        assert made_in != self.origin
        self.folder[spec.key] = result

    def sweep(self, storage, **restrict):
        sweep = build_sweep(tiny_reproduce(methods="alp", tasks="rte", **restrict), RECIPES)
        return run_sweep(
            sweep,
            self.run_trial,
            storage,
            SweepOptions(stored=lambda spec: self.folder.get(spec.key), origin=self.origin, adopt=self.adopt),
        )


def test_a_trial_trained_on_another_machine_is_adopted_not_trained_again(tmp_path):
    storage = f"sqlite:///{tmp_path}/optuna.db"
    one, two = Checkout("one"), Checkout("two")
    one.sweep(storage, seeds="1")
    results = two.sweep(storage)  # seeds 1 and 2: seed 1's trials come from machine one
    assert len(one.trained) == 2 and len(two.trained) == 2 and not set(one.trained) & set(two.trained)
    assert sorted(two.folder) == sorted(results) and len(results) == 4
    assert all(two.folder[key] == one.folder[key] for key in one.trained)
    deleted = one.trained[0]
    del one.folder[deleted]  # deleted in the checkout that trained it: recomputed there
    one.trained.clear()
    one.sweep(storage, seeds="1")
    assert one.trained == [deleted]


def test_the_study_names_its_model_store_and_refuses_another():
    study = optuna.create_study(study_name="s")
    check_model_store(study, "store-of-the-cluster")  # the first worker records its store
    check_model_store(study, "store-of-the-cluster")
    with pytest.raises(UnsharedModelStore) as raised:
        check_model_store(study, "a-machine-of-its-own")
    assert "mount the shared model store" in raised.value.fix and "store-of-the-cluster" in raised.value.fix
    assert "reproduce.shared_store=false" in raised.value.fix


def _hanging_worker_on_another_machine(storage: str, started: str) -> None:
    """Takes one trial and hangs in it, as a process of another host (killed with SIGKILL mid-trial)."""
    socket.gethostname = lambda: "another-machine"
    hanging_worker(storage, started)


def test_a_dead_machines_trial_is_taken_back_after_the_grace_period(tmp_path):
    storage = f"sqlite:///{tmp_path}/optuna.db"
    make_storage(storage)
    started = tmp_path / "started.txt"
    args = (storage, str(started))
    other = multiprocessing.get_context("spawn").Process(target=_hanging_worker_on_another_machine, args=args)
    other.start()
    while not started.exists() and other.is_alive():
        time.sleep(0.2)
    other.kill()
    other.join()
    killed = started.read_text()
    sweep = build_sweep(tiny_reproduce(methods="alp", tasks="rte", seeds="1"), RECIPES)
    calls = []

    def run_trial(spec):
        calls.append(spec.key)
        return fake_run_trial(spec)

    results = run_sweep(sweep, run_trial, storage, SweepOptions(heartbeat_interval=1, grace_period=3600))
    assert killed not in results and killed not in calls  # within the grace period: still the other machine's
    time.sleep(3)
    results = run_sweep(sweep, run_trial, storage, SweepOptions(heartbeat_interval=1, grace_period=2))
    assert killed in results and calls.count(killed) == 1  # silent for longer: taken back, trained once


def test_a_missing_driver_is_one_block_with_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg raises ImportError
    with pytest.raises(UserError) as raised:
        make_storage("postgresql+psycopg://bert_kd:s3cret@127.0.0.1:5433/bert_kd_optuna")
    assert "driver is not installed" in raised.value.what and 'pip install -e ".[postgres]"' in raised.value.fix
    assert "s3cret" not in str(raised.value) and "bert_kd:***@127.0.0.1:5433" in raised.value.where


def test_an_unreachable_server_is_one_block_without_the_password():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there
    with pytest.raises(UserError) as raised:
        make_storage(f"postgresql+psycopg://bert_kd:s3cret@127.0.0.1:{port}/bert_kd_optuna")
    assert "cannot be opened" in raised.value.what and "scripts/start_postgres.sh" in raised.value.fix
    assert "s3cret" not in str(raised.value)


def test_a_wrong_password_is_named_with_its_fix():
    refused = OperationalError("connect", None, Exception('password authentication failed for user "bert_kd"'))
    error = storage_error("postgresql+psycopg://bert_kd:wrong@db-host:5433/bert_kd_optuna", refused)
    assert isinstance(error, UserError) and "password" in error.fix and "wrong" not in str(error)
    other = RuntimeError("something else")
    assert storage_error("postgresql+psycopg://db-host/x", other) is other


def test_the_tracking_server_going_down_stops_the_worker_at_once(tmp_path):
    from bert_kd.config.errors import TrackingUnreachableError

    calls = []

    def run_trial(spec):
        calls.append(spec.key)
        raise TrackingUnreachableError(
            "the MLflow tracking server stopped answering", "MLFLOW_TRACKING_URI", "start it"
        )

    sweep = build_sweep(tiny_reproduce(methods="alp", tasks="rte"), RECIPES)
    with pytest.raises(TrackingUnreachableError):
        run_sweep(sweep, run_trial, f"sqlite:///{tmp_path}/optuna.db")
    assert len(calls) == 1  # not once more per trial, each after minutes of MLflow's retries


def test_workers_that_create_a_new_databases_tables_together_retry_instead_of_failing():
    """Two workers starting at once on a new PostgreSQL database both create Optuna's tables; the loser's
    duplicate-type error is a lost race (retried), a refused connection is not."""
    from sqlalchemy.exc import IntegrityError, OperationalError

    from bert_kd.sweeps.storage import lost_schema_race

    duplicate = IntegrityError(
        "CREATE TYPE studydirection", {}, Exception("duplicate key value: (studydirection, 2200) already exists")
    )
    refused = OperationalError("connect", {}, Exception("connection refused"))
    assert lost_schema_race(duplicate) and not lost_schema_race(refused)
    assert not lost_schema_race(ValueError("already exists"))  # only the database's own errors
