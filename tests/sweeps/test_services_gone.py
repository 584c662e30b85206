"""A sweep worker whose database goes away, or refuses it, mid-sweep: one block naming the storage (its password
masked) and the fix, never a traceback; a worker told to stop (SIGTERM) fails its trial so that another takes it.
The database is faked: its storage raises the driver's error as PostgreSQL's would."""

from __future__ import annotations

import optuna
import pytest
from optuna.trial import TrialState
from sqlalchemy.exc import OperationalError, ProgrammingError

from bert_kd.config.errors import UserError
from bert_kd.sweeps.scheduler import SweepOptions, run_sweep
from bert_kd.sweeps.spec import build_sweep
from bert_kd.sweeps.storage import make_storage, storage_error
from tests.sweeps.conftest import RECIPES, fake_run_trial, tiny_reproduce

URL = "postgresql+psycopg://bert_kd:s3cret@db-host:5433/bert_kd_optuna"
GONE = OperationalError("SELECT 1", {}, Exception("server closed the connection unexpectedly"))
DENIED = ProgrammingError("INSERT INTO studies", {}, Exception("permission denied for table studies"))


def one_trial():
    return build_sweep(
        tiny_reproduce(methods="alp", tasks="rte", seeds="1", grid="training.learning_rate=1.0e-5"), RECIPES
    )


def storage_that_fails(tmp_path, method: str, error: Exception, after_calls: int = 0):
    """A SQLite storage standing for ``URL`` whose ``method`` raises ``error`` from its call ``after_calls + 1``
    on (``get_trial`` too, once it has: the database is gone for every later question)."""
    storage = make_storage(f"sqlite:///{tmp_path / 'optuna.db'}", heartbeat_interval=1, grace_period=2)
    storage.url = URL
    calls = {"n": 0}
    original, get_trial = getattr(storage, method), storage.get_trial

    def failing(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] > after_calls:
            storage.get_trial = lambda *a, **k: (_ for _ in ()).throw(error)
            raise error
        return original(*args, **kwargs)

    setattr(storage, method, failing)
    storage.get_trial = get_trial
    return storage


def sweep_block(storage) -> str:
    """The one block a sweep of one trial on ``storage`` stops with."""
    with pytest.raises(UserError) as raised:
        run_sweep(one_trial(), fake_run_trial, storage, SweepOptions(heartbeat_interval=1, grace_period=2))
    return raised.value.block()


def test_a_database_gone_mid_trial_is_one_block_not_an_unbound_local_error(tmp_path):
    # Telling the finished trial fails, and so does Optuna's recovery (it asks the same database):
    # Optuna 5.0.0 raised UnboundLocalError there, above 1,667 lines of traceback.
    block = sweep_block(storage_that_fails(tmp_path, "set_trial_state_values", GONE))
    assert "stopped answering during the sweep" in block and "server closed the connection" in block
    assert "db-host:5433/bert_kd_optuna" in block and "s3cret" not in block
    assert "run the same command" in block


def test_a_user_who_may_connect_but_not_write_the_tables_is_one_block(tmp_path):
    block = sweep_block(storage_that_fails(tmp_path, "create_new_study", DENIED))
    assert "refuses this user" in block and "permission denied for table studies" in block
    assert "GRANT" in block and "s3cret" not in block
    # ... and when opening the storage already reads a table it may not
    opened = storage_error(URL, DENIED)
    assert isinstance(opened, UserError) and "GRANT" in opened.block() and "s3cret" not in opened.block()


def test_a_worker_stopped_by_sigterm_fails_its_trial_so_that_another_takes_it(tmp_path):
    storage = make_storage(f"sqlite:///{tmp_path / 'optuna.db'}", heartbeat_interval=1, grace_period=60)

    def stopped(spec):
        raise SystemExit(143)  # what the SIGTERM handler raises in the middle of a trial

    with pytest.raises(SystemExit):
        run_sweep(one_trial(), stopped, storage, SweepOptions(heartbeat_interval=1, grace_period=60))
    (study,) = optuna.get_all_study_summaries(storage)
    trials = optuna.load_study(study_name=study.study_name, storage=storage).get_trials()
    assert [t.state for t in trials] == [TrialState.FAIL]  # not RUNNING until its heartbeat goes stale
    # the next worker takes the point back at once
    results = run_sweep(one_trial(), fake_run_trial, storage, SweepOptions(heartbeat_interval=1, grace_period=60))
    assert len(results) == 1
