from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from bert_kd.sweeps.claims import TrialClaims
from bert_kd.sweeps.dead_owners import fail_trials_of_dead_owners, owner_of_this_process
from bert_kd.sweeps.objective import SweepTrialError, check_result
from bert_kd.sweeps.scheduler import SweepOptions, collect_results, run_sweep, study_name_for
from bert_kd.sweeps.spec import build_sweep
from bert_kd.sweeps.storage import make_storage
from tests.sweeps.conftest import RECIPES, fake_run_trial, hanging_worker, tiny_reproduce

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _sweep(**restrict):
    return build_sweep(tiny_reproduce(**restrict), RECIPES)


def test_sweep_runs_every_trial_once_and_a_rerun_reuses_all(tmp_path):
    storage = f"sqlite:///{tmp_path}/optuna.db"
    calls = []

    def run_trial(spec):
        calls.append(spec.key)
        return fake_run_trial(spec)

    results = run_sweep(_sweep(), run_trial, storage)
    keys = {t.key for t in _sweep().trials()}
    assert sorted(calls) == sorted(keys) and set(results) == keys
    assert results[calls[0]]["run_id"] == calls[0]

    def must_not_run(spec):
        raise AssertionError(f"re-ran {spec.key}")

    again = run_sweep(_sweep(), must_not_run, storage)
    assert again == results


def test_restricted_rerun_reuses_the_trials_of_a_full_run(tmp_path):
    storage = f"sqlite:///{tmp_path}/optuna.db"
    run_sweep(_sweep(methods="nkd"), fake_run_trial, storage)
    calls = []

    def run_trial(spec):
        calls.append(spec.key)
        return fake_run_trial(spec)

    results = run_sweep(_sweep(), run_trial, storage)
    assert len(results) == 16 and len(calls) == 8 and all(k.startswith("alp|") for k in calls)


def test_a_queued_trial_outside_the_restriction_is_left_to_a_run_that_includes_it(tmp_path):
    storage = f"sqlite:///{tmp_path}/optuna.db"
    full = _sweep()
    other = next(t.key for t in full.trials() if t.method == "alp")
    study = optuna.create_study(study_name=study_name_for(full), storage=make_storage(storage), direction="maximize")
    study.enqueue_trial({"trial": other})  # e.g. a heartbeat retry of another worker's trial
    calls = []

    def run_trial(spec):
        calls.append(spec.key)
        return fake_run_trial(spec)

    results = run_sweep(
        _sweep(methods="nkd"), run_trial, storage, SweepOptions(catch_errors=False)
    )  # no failure either
    assert len(results) == 8 and other not in calls and all(k.startswith("nkd|") for k in calls)
    assert run_sweep(_sweep(methods="alp"), run_trial, storage)[other]["dev_metric"] is not None


def test_a_run_takes_its_own_queued_retry_even_after_pruning_another_runs_queued_trial(tmp_path):
    """Seen in the CPU protocol: a run whose grid was otherwise done popped another run's queued
    retry first (pruned: outside its restriction), GridSampler then stopped the study, and the run
    ended with its own retry still queued, which the other run later popped and pruned."""
    storage = f"sqlite:///{tmp_path}/optuna.db"
    ours = _sweep(methods="nkd")
    lost = sorted(t.key for t in ours.trials())[0]

    def fails_on_lost(spec):
        if spec.key == lost:
            raise RuntimeError("killed")
        return fake_run_trial(spec)

    assert lost not in run_sweep(ours, fails_on_lost, storage)  # its grid is now visited
    study = optuna.load_study(study_name=study_name_for(ours), storage=storage)
    other = next(t.key for t in _sweep().trials() if t.method == "alp")
    study.enqueue_trial({"trial": other})  # queued first: another restriction's heartbeat retry
    study.enqueue_trial({"trial": lost})  # then our own retry
    calls = []

    def run_trial(spec):
        calls.append(spec.key)
        return fake_run_trial(spec)

    results = run_sweep(ours, run_trial, storage)
    assert calls == [lost] and len(results) == 8


def test_a_retry_pruned_by_another_runs_restriction_is_queued_again(tmp_path):
    storage = f"sqlite:///{tmp_path}/optuna.db"
    ours = _sweep(methods="nkd")
    lost = sorted(t.key for t in ours.trials())[0]
    run_sweep(ours, lambda spec: fake_run_trial(spec) if spec.key != lost else 1 / 0, storage)
    study = optuna.load_study(study_name=study_name_for(ours), storage=storage)
    study.enqueue_trial({"trial": lost})
    run_sweep(_sweep(methods="alp"), fake_run_trial, storage)  # pops our retry first and prunes it
    assert [t.state for t in study.get_trials() if t.user_attrs.get("key") == lost][-1] == TrialState.PRUNED
    assert lost in run_sweep(ours, fake_run_trial, storage)


def test_a_queued_retry_finishing_with_one_grid_point_left_does_not_end_the_run(tmp_path):
    """Seen in the CPU protocol: Optuna's GridSampler raised KeyError('grid_id') when a queued
    trial (which has no grid id) finished while exactly one grid point was unvisited."""
    storage = f"sqlite:///{tmp_path}/optuna.db"
    sweep = _sweep(methods="alp", tasks="rte", seeds="1")  # two grid points

    def killed(spec):
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):  # the run dies in its first trial: one point failed, one unvisited
        run_sweep(sweep, killed, storage, SweepOptions(catch_errors=False))
    calls = []

    def run_trial(spec):
        calls.append(spec.key)
        return fake_run_trial(spec)

    results = run_sweep(
        sweep, run_trial, storage, SweepOptions(catch_errors=False)
    )  # the retry is queued and runs first
    assert len(calls) == 2 and set(results) == {t.key for t in sweep.trials()}


def test_failed_trial_is_recorded_and_retried_on_the_next_run(tmp_path):
    storage = f"sqlite:///{tmp_path}/optuna.db"
    sweep = _sweep(methods="alp", tasks="rte", seeds="1")

    def flaky(spec):
        raise RuntimeError("out of memory")

    failures = {}
    assert run_sweep(sweep, flaky, storage, failures=failures) == {}
    assert failures == {t.key: "RuntimeError: out of memory" for t in sweep.trials()}
    study = optuna.load_study(study_name=study_name_for(sweep), storage=storage)
    assert {t.state for t in study.trials} == {optuna.trial.TrialState.FAIL}
    failures = {}
    results = run_sweep(sweep, fake_run_trial, storage, failures=failures)
    assert len(results) == 2 and failures == {}  # retried and finished: no failure left to report


def _worker(storage: str, log_dir: str, name: str) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    log = Path(log_dir) / f"{name}.txt"
    (Path(log_dir) / f"{name}.ready").touch()
    deadline = time.monotonic() + 120
    while len(list(Path(log_dir).glob("*.ready"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)  # start together: a fast machine would otherwise finish before the other worker starts

    def run_trial(spec):
        with log.open("a") as f:
            f.write(spec.key + "\n")
        time.sleep(0.1)  # let the other worker interleave
        return fake_run_trial(spec)

    run_sweep(
        build_sweep(tiny_reproduce(), RECIPES), run_trial, storage, SweepOptions(heartbeat_interval=5, grace_period=30)
    )


@pytest.mark.slow  # two worker processes, ~25 s each
@pytest.mark.parametrize("each_point_queued_twice", [False, True], ids=["grid", "duplicates_queued"])
def test_two_worker_processes_run_disjoint_trials(tmp_path, each_point_queued_twice):
    storage = f"sqlite:///{tmp_path}/optuna.db"
    make_storage(storage)  # create the schema once, before two processes race for it
    if each_point_queued_twice:  # both workers are handed the same grid point at the same moment
        study = optuna.create_study(study_name=study_name_for(_sweep()), storage=storage, direction="maximize")
        for key in sorted(t.key for t in _sweep().trials()):
            study.enqueue_trial({"trial": key}, skip_if_exists=False)
            study.enqueue_trial({"trial": key}, skip_if_exists=False)
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_worker, args=(storage, str(tmp_path), f"w{i}")) for i in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=300)
        assert w.exitcode == 0
    ran = [set(p.read_text().split()) if p.exists() else set() for p in (tmp_path / "w0.txt", tmp_path / "w1.txt")]
    lines = sum(len(p.read_text().split()) for p in tmp_path.glob("w*.txt"))
    keys = {t.key for t in _sweep().trials()}
    assert ran[0] | ran[1] == keys
    study = optuna.load_study(study_name=study_name_for(_sweep()), storage=storage)
    twice = ran[0] & ran[1]
    history = [
        (
            t.number,
            t.state.name,
            t.system_attrs.get("grid_id"),
            sorted(t.system_attrs),
            t.user_attrs.get("reused_from"),
            str(t.datetime_start),
        )
        for t in study.trials
        if t.params.get("trial") in twice
    ]
    assert not twice and lines == len(keys), history  # no trial ran twice
    assert ran[0] and ran[1]  # both workers took part
    study = optuna.load_study(study_name=study_name_for(_sweep()), storage=storage)
    assert set(collect_results(study)) == keys


def _pop_queued_trials(storage: str, log: str, start_at: float) -> None:
    study = optuna.load_study(study_name="queue", storage=make_storage(storage))
    while time.time() < start_at:
        time.sleep(0.001)
    popped = []
    while (trial_id := study._pop_waiting_trial_id()) is not None:  # what study.ask() does first
        popped.append(trial_id)
    Path(log).write_text(" ".join(map(str, popped)))


@pytest.mark.slow  # two processes, ~30 s
def test_two_processes_never_take_the_same_queued_trial(tmp_path):
    """SQLite ignores Optuna's SELECT … FOR UPDATE; make_storage's BEGIN IMMEDIATE stands in for it."""
    storage = f"sqlite:///{tmp_path}/optuna.db"
    study = optuna.create_study(study_name="queue", storage=make_storage(storage))
    for i in range(200):
        study.enqueue_trial({"x": i})
    start_at = time.time() + 8  # both processes imported and connected by then
    context = multiprocessing.get_context("spawn")
    workers = [
        context.Process(target=_pop_queued_trials, args=(storage, str(tmp_path / f"p{i}.txt"), start_at))
        for i in range(2)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
        assert w.exitcode == 0
    popped = [[int(x) for x in (tmp_path / f"p{i}.txt").read_text().split()] for i in range(2)]
    assert sorted(popped[0] + popped[1]) == sorted(t._trial_id for t in study.trials)  # each once, none twice


@pytest.mark.parametrize("database", [True, False], ids=["rdb", "in_memory"])
def test_a_grid_point_is_claimed_by_exactly_one_trial(tmp_path, database):
    storage = make_storage(f"sqlite:///{tmp_path}/optuna.db") if database else optuna.storages.InMemoryStorage()
    study = optuna.create_study(study_name="s", storage=storage)
    a, b, c = (study.ask()._trial_id for _ in range(3))
    worker_1 = TrialClaims(storage, "s")
    worker_2 = TrialClaims(storage, "s") if database else worker_1  # in memory: one process
    assert worker_1.claim("k", a) is None and worker_1.claim("k", a) is None  # ours, and still ours
    assert worker_2.claim("k", b) == a  # running elsewhere: not ours
    study.tell(study.trials[0].number, state=TrialState.FAIL)
    assert worker_2.claim("k", b) is None  # the holder failed: taken over
    assert worker_1._swap("k", a, c) is False  # a second take-over of a's claim loses (compare-and-swap)
    assert worker_1.claim("k", c) == b
    assert worker_1.claim("other", c) is None
    if database:
        assert TrialClaims(storage, "another_study").claim("k", c) is None  # claims are per study


def test_a_worker_that_loses_the_race_to_create_the_claims_table_goes_on(tmp_path, monkeypatch):
    import sqlalchemy as sa

    storage = make_storage(f"sqlite:///{tmp_path}/optuna.db")
    trial = optuna.create_study(study_name="s", storage=storage).ask()._trial_id
    TrialClaims(storage, "s")  # the other worker created the table ...
    create = sa.Table.create
    # ... after this one had checked that it was missing: its CREATE TABLE runs anyway and fails.
    monkeypatch.setattr(sa.Table, "create", lambda table, bind, checkfirst=True: create(table, bind, checkfirst=False))
    loser = TrialClaims.__new__(TrialClaims)
    loser.storage, loser.study_name, loser.engine = storage, "s", storage.engine
    loser.table = sa.Table(TrialClaims.TABLE, sa.MetaData(), sa.Column("study_name", sa.String(512), primary_key=True))
    with pytest.raises(sa.exc.OperationalError, match="already exists"):
        loser.table.create(storage.engine)  # the race, as it was
    assert TrialClaims(storage, "s").claim("k", trial) is None  # and as it is now


def test_result_contract_is_checked():
    spec = _sweep().trials()[0]
    with pytest.raises(SweepTrialError, match="no dev_metric"):
        check_result({"heldout_metric": 0.5}, spec)
    with pytest.raises(SweepTrialError, match="3 dev_predictions but 2 dev_labels"):
        check_result({"dev_metric": 0.5, "dev_predictions": [0, 1, 1], "dev_labels": [0, 1]}, spec)
    with pytest.raises(SweepTrialError, match="both dev_predictions and dev_labels"):
        check_result({"dev_metric": 0.5, "dev_predictions": [0, 1]}, spec)


def _sigkilled_worker_trial(tmp_path) -> tuple[str, str]:
    """(storage, trial key) after a worker process took a trial and was SIGKILLed: no cleanup, the
    trial stays RUNNING with its heartbeat going stale."""
    storage = f"sqlite:///{tmp_path}/optuna.db"
    make_storage(storage)
    started = tmp_path / "started.txt"
    worker = multiprocessing.get_context("spawn").Process(target=hanging_worker, args=(storage, str(started)))
    worker.start()
    while not started.exists() and worker.is_alive():
        time.sleep(0.2)
    worker.kill()
    worker.join()
    return storage, started.read_text()


def _rerun_alp_rte(storage: str, **timing) -> tuple[list, dict]:
    """The keys a new run trains (in order) and its results."""
    sweep = build_sweep(tiny_reproduce(methods="alp", tasks="rte", seeds="1"), RECIPES)
    calls = []

    def run_trial(spec):
        calls.append(spec.key)
        return fake_run_trial(spec)

    return calls, run_sweep(sweep, run_trial, storage, SweepOptions(**timing))


def test_a_killed_workers_trial_is_retried(tmp_path):
    storage, killed_key = _sigkilled_worker_trial(tmp_path)
    time.sleep(3)  # let the heartbeat go stale (grace period 2 s)
    calls, results = _rerun_alp_rte(storage, heartbeat_interval=1, grace_period=2)
    sweep = build_sweep(tiny_reproduce(methods="alp", tasks="rte", seeds="1"), RECIPES)
    assert len(results) == 2 and killed_key in calls
    study = optuna.load_study(study_name=study_name_for(sweep), storage=storage)
    states = sorted(t.state.name for t in study.trials)
    assert "FAIL" in states and "RUNNING" not in states


def test_per_example_predictions_round_trip_through_the_study(tmp_path):
    import numpy as np

    sweep = _sweep(methods="nkd", tasks="rte", seeds="1")

    def run_trial(spec):
        result = fake_run_trial(spec)
        result["dev_predictions"] = np.asarray(result["dev_predictions"])  # numpy is accepted too
        return result

    results = run_sweep(sweep, run_trial, f"sqlite:///{tmp_path}/optuna.db")
    for key, result in results.items():
        expected = fake_run_trial(next(t for t in sweep.trials() if t.key == key))
        assert (
            result["dev_predictions"] == expected["dev_predictions"] and result["dev_labels"] == expected["dev_labels"]
        )


def test_a_trial_finished_under_another_identity_is_recomputed_not_reused(tmp_path, caplog):
    """Finding 1: a sweep at other data sizes must not hand back the trials of a resized run."""
    storage = f"sqlite:///{tmp_path}/optuna.db"
    sweep = _sweep(methods="nkd", tasks="rte")
    small = run_sweep(sweep, fake_run_trial, storage, SweepOptions(identity=lambda spec: f"64 examples|{spec.key}"))
    calls = []

    def full_size(spec):
        calls.append(spec.key)
        return {**fake_run_trial(spec), "dev_metric": 0.123}

    with caplog.at_level("WARNING"):
        full = run_sweep(sweep, full_size, storage, SweepOptions(identity=lambda spec: f"all examples|{spec.key}"))
    assert sorted(calls) == sorted(small) and {r["dev_metric"] for r in full.values()} == {0.123}
    assert sum("made under another identity" in r.message for r in caplog.records) == 1
    again = run_sweep(
        sweep,
        lambda spec: pytest.fail(f"re-ran {spec.key}"),
        storage,
        SweepOptions(identity=lambda spec: f"all examples|{spec.key}"),
    )
    assert again == full
    back = run_sweep(
        sweep,
        lambda spec: pytest.fail(f"re-ran {spec.key}"),
        storage,
        SweepOptions(identity=lambda spec: f"64 examples|{spec.key}"),
    )
    assert back == small  # both sizes stay in the study, each under its own identity


def test_with_a_results_folder_a_trial_without_its_file_is_recomputed(tmp_path):
    """Finding 2: the study still holds the trial, but its results file was deleted."""
    storage = f"sqlite:///{tmp_path}/optuna.db"
    sweep = _sweep(methods="nkd", tasks="rte", seeds="1")
    folder: dict[str, dict] = {}
    calls = []

    def run_trial(spec):
        calls.append(spec.key)
        folder[spec.key] = fake_run_trial(spec)
        return folder[spec.key]

    run_sweep(sweep, run_trial, storage, SweepOptions(stored=lambda spec: folder.get(spec.key)))
    deleted = sorted(folder)[0]
    del folder[deleted]
    calls.clear()
    results = run_sweep(sweep, run_trial, storage, SweepOptions(stored=lambda spec: folder.get(spec.key)))
    assert calls == [deleted] and deleted in folder and len(results) == 2


def test_a_dead_owners_trial_is_retried_at_once(tmp_path):
    """Finding 10: the owner (host, pid, start time) of the running trial is gone from this host,
    so the next run fails and retries its trial without waiting for the grace period."""
    storage, killed_key = _sigkilled_worker_trial(tmp_path)
    calls, results = _rerun_alp_rte(storage, heartbeat_interval=60, grace_period=3600)
    sweep = build_sweep(tiny_reproduce(methods="alp", tasks="rte", seeds="1"), RECIPES)
    assert len(results) == 2 and killed_key in calls
    study = optuna.load_study(study_name=study_name_for(sweep), storage=storage)
    assert "RUNNING" not in {t.state.name for t in study.trials}


def test_a_live_owners_trial_is_left_running(tmp_path):
    storage = make_storage(f"sqlite:///{tmp_path}/optuna.db")
    study = optuna.create_study(study_name="s", storage=storage)
    trial = study.ask()
    trial.set_user_attr("key", "k")
    trial.set_user_attr("owner", owner_of_this_process())  # this very process: alive
    other_host = study.ask()
    other_host.set_user_attr("owner", {**owner_of_this_process(), "host": "another-host", "pid": 999999})
    assert fail_trials_of_dead_owners(study) == []
    dead = study.ask()
    dead.set_user_attr("key", "d")
    dead.set_user_attr("owner", {**owner_of_this_process(), "started": 0.0})  # same pid, another start time: pid reused
    assert fail_trials_of_dead_owners(study) == ["d"]
