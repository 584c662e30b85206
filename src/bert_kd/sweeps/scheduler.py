"""Run a sweep's trials through one Optuna study (GridSampler + RDB storage + heartbeats).

Every trial of the sweep is one value of a single categorical grid parameter ``trial`` (its
[`TrialSpec.key`][bert_kd.sweeps.spec.TrialSpec.key]), so a ``GridSampler`` covers methods × tasks × seeds × grid points even
when methods have different grids. Workers — processes here or ``kedro run`` on other machines —
call [`run_sweep`][] with the same storage URL; Optuna hands them disjoint trials, and a
worker that dies stops sending heartbeats so its trial is failed and retried
(``RetryHeartbeatStaleTrialCallback``) by the next worker that asks for a trial.

The result of each trial is stored with the trial (``user_attrs``) together with its *identity*
(the trial's content key: spec, data sizes, GLUE files, schema version — ``identity`` of
[`run_sweep`][]), so a re-run skips finished trials without calling ``run_trial`` at all — but
only those finished with the identity asked for now: a trial made on other data or by another
schema version is named in one warning line and recomputed. With a results folder (``stored``)
the folder is the first source of truth: a trial is finished when its file is there and valid,
whatever the study says (deleting a file recomputes its trial).

Each running trial records its owner process (host, pid, process start time); a run on the same
host fails at once the trials whose owner is gone (killed) and retries them, without waiting for
their heartbeat to go stale (the grace period stays for trials of other hosts).

GridSampler alone can hand one grid point to two workers that ask at the same moment (Optuna
says so). Before training, a trial therefore *claims* its grid point in a small table of the same
database ([`TrialClaims`][bert_kd.sweeps.claims.TrialClaims]): an INSERT under a primary key, or a
compare-and-swap that takes over the claim of a failed trial. Exactly one trial wins; the other is pruned and its worker moves
on. Storages without a database (in-memory) serve one process; their claims go to an in-memory
SQLite table with the same code.

The pieces live by topic: the storage URL and its errors ([`storage`][bert_kd.sweeps.storage], SQLite's
transactions in [`sqlite_transactions`][bert_kd.sweeps.sqlite_transactions]), what the study records with a
trial and which trials a run reuses ([`study_records`][bert_kd.sweeps.study_records]), dead owners
([`dead_owners`][bert_kd.sweeps.dead_owners]), the claims table ([`claims`][bert_kd.sweeps.claims]) and the
objective one trial runs ([`objective`][bert_kd.sweeps.objective]); this module runs the study.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import optuna
from optuna.trial import TrialState

from bert_kd.config.errors import UserError
from bert_kd.sweeps.claims import TrialClaims
from bert_kd.sweeps.dead_owners import fail_trials_of_dead_owners
from bert_kd.sweeps.objective import RunTrial, make_objective
from bert_kd.sweeps.spec import SweepSpec
from bert_kd.sweeps.storage import make_storage, storage_lost_error
from bert_kd.sweeps.study_records import (
    GRID_PARAM,
    RESULT_ATTR,
    STORE_ATTR,
    Adopt,
    Identity,
    Ledger,
    Stored,
    completed_trials,
    spec_identity,
    unpack_result,
)

log = logging.getLogger(__name__)


class SweepTrialsFailedError(UserError):
    """Trials this worker ran raised and have no result: the run ends with an error once the (partial)
    table is written, so a failed trial never passes as a dash in a table that exited 0."""

    kind = "sweep trials failed"

    def __init__(self, failures: Mapping[str, str], total: int, study: str, table: str | None = None) -> None:
        self.failures = dict(failures)
        key, message = next(iter(self.failures.items()))
        more = f" (and {len(self.failures) - 1} more, in the log above)" if len(self.failures) > 1 else ""
        where = f"Optuna study {study}" + (f"; the partial table, failed trials shown as –: {table}" if table else "")
        super().__init__(
            f"{len(self.failures)} of {total} trials failed in this worker: {key}: {message}{more}",
            where,
            "read each failure's traceback in the log, fix its cause and run the same command again: "
            "finished trials are reused, failed ones run again",
        )


class UnsharedModelStore(UserError):
    """A worker's model store is not the one the study's other workers use."""

    kind = "model store not shared"


def check_model_store(study: optuna.Study, store_id: str) -> None:
    """Record the model store's identity in a study that has none (its first worker); raise
    [`UnsharedModelStore`][] when the study already names another one: this machine does not
    see the shared store, and would train again every teacher the cluster has trained."""
    recorded = study.user_attrs.get(STORE_ATTR)
    if recorded is None:
        study.set_user_attr(STORE_ATTR, store_id)
    elif recorded != store_id:
        raise UnsharedModelStore(
            f"this worker's model store is {store_id}, but the study's workers use {recorded}: this machine does "
            "not see the shared store, and would train every teacher again",
            f"Optuna study {study.study_name}",
            f"mount the shared model store (the folder whose .store_id holds {recorded}) at data/06_models/store "
            "on this machine (docs/scaling.md); or train this machine's own models knowingly: "
            "--params reproduce.shared_store=false",
        )


def study_name_for(sweep: SweepSpec) -> str:
    """One study per sweep table (restricted runs share it, so their trials are reused); a
    changed table definition gets a new study (the trial parameter's choices changed)."""
    return f"reproduce-{sweep.table}-{sweep.fingerprint}"


class _KeyOf:
    """A trial's grid point (trial key), known as soon as the trial exists: from its parameter,
    its queued parameters (``enqueue_trial`` / heartbeat retries), the grid id the GridSampler
    gave it, or — in the instant between its creation and that grid id — the id it will get
    (trial number n < grid size gets grid id n). Used to tell which failed points to queue again;
    who may *run* a point is decided by [`TrialClaims`][]."""

    def __init__(self, sampler: optuna.samplers.GridSampler, keys: Sequence[str]):
        # GridSampler shuffles its grid; its (private, Optuna 5.0.0 pinned) list maps grid id -> point.
        self.by_grid_id = {i: point[0] for i, point in enumerate(sampler._all_grids)}
        self.search_space = {GRID_PARAM: list(keys)}

    def __call__(self, t: optuna.trial.FrozenTrial) -> str | None:
        if GRID_PARAM in t.params:
            return t.params[GRID_PARAM]
        fixed = t.system_attrs.get("fixed_params") or {}
        if GRID_PARAM in fixed:
            return fixed[GRID_PARAM]
        if "grid_id" in t.system_attrs:
            if t.system_attrs.get("search_space") == self.search_space:
                return self.by_grid_id.get(t.system_attrs["grid_id"])
            return None
        if t.state == TrialState.RUNNING and t.number < len(self.by_grid_id):
            # Created a moment ago, grid id not written yet: GridSampler will give trial n grid id n.
            return self.by_grid_id[t.number]
        return None


class _GridSampler(optuna.samplers.GridSampler):
    """Optuna's GridSampler, minus a crash: its ``after_trial`` reads the finished trial's
    ``grid_id``, which queued trials (``enqueue_trial``, our re-queued points) do not have, so a
    queued trial finishing while exactly one grid point is unvisited raised ``KeyError('grid_id')``
    out of ``study.optimize`` and ended the run (seen in the CPU protocol; optuna/optuna#6844)."""

    def after_trial(self, study, trial, state, values) -> None:
        unvisited = self._get_unvisited_grid_ids(study)
        if not unvisited:
            study.stop()
        elif len(unvisited) == 1:
            if study._storage.get_trial_system_attrs(trial._trial_id).get("grid_id") == unvisited[0]:
                study.stop()


# How often one run queues a grid point again: a point that *failed* once more in this run is
# left for the next run (it would likely fail again); a point *pruned* because another run's
# restriction popped it from the shared queue is queued again (bounded, so a run always ends); a
# point COMPLETE but not finished for this run (another identity, or its results file gone) is
# recomputed once.
MAX_REQUEUES = {TrialState.FAIL: 1, TrialState.PRUNED: 20, TrialState.COMPLETE: 1}


def _points_to_queue_again(
    trials: Sequence[optuna.trial.FrozenTrial], key_of: _KeyOf, missing: Sequence[str], requeued: Mapping[str, int]
) -> list[str]:
    """Missing points whose latest trial finished (failed, pruned, or completed without a result
    this run may reuse) and which no trial holds now.

    GridSampler counts such points as visited, so only the queue brings them back."""
    busy = {key_of(t) for t in trials if t.state in (TrialState.WAITING, TrialState.RUNNING)}
    latest: dict[str, TrialState] = {}
    for t in sorted(trials, key=lambda t: t.number):
        if t.state in MAX_REQUEUES:
            latest[key_of(t)] = t.state
    return [k for k in missing if k in latest and k not in busy and requeued.get(k, 0) < MAX_REQUEUES[latest[k]]]


@dataclass(frozen=True)
class SweepOptions:
    """How one worker of [`run_sweep`][] names its study, watches its
    peers and decides that a trial is finished.

    ``heartbeat_interval`` / ``grace_period``: seconds between a running trial's heartbeats, and without
    one before it counts as dead (a SQLite URL only; [`make_storage`][]).
    With ``catch_errors`` a failing trial is logged and the worker moves on (the failure stays in the study
    as a FAIL trial with its message). ``identity(spec)``: what a result must have been made under to be
    reused (default: the trial spec's hash); ``stored(spec)``: the results folder's verified result or
    ``None``; when given, a trial is finished exactly when it has one. ``origin``: this worker's results
    folder (``host:path``), recorded with each trial it trains; a trial the study has from another origin
    counts as finished and ``adopt(spec, result, origin)`` copies it into this worker's folder.
    ``store_id``: the identity of this worker's model store (or the function that makes it, called once the
    storage has opened), checked against the study's ([`check_model_store`][]).
    """

    study_name: str | None = None
    heartbeat_interval: int = 60
    grace_period: int | None = 180
    catch_errors: bool = True
    identity: Identity | None = None
    stored: Stored | None = None
    origin: str | None = None
    adopt: Adopt | None = None
    store_id: str | Callable[[], str] | None = None


def run_sweep(
    sweep: SweepSpec,
    run_trial: RunTrial,
    storage: str | optuna.storages.BaseStorage = "sqlite:///data/09_sweeps/optuna.db",
    options: SweepOptions = SweepOptions(),
    failures: dict[str, str] | None = None,
) -> dict[str, dict]:
    """Run (this worker's share of) ``sweep`` and return ``{trial key: result}`` for every
    finished trial of the sweep, whoever ran it.

    Finished trials are never re-run; trials that raised are retried on the next call. ``options``: see
    [`SweepOptions`][]. ``failures``: filled with ``{trial key: first
    line of its error}`` for every trial that raised in this call and has no result at its end (one that
    failed and then succeeded on a retry is not there).
    """
    if isinstance(storage, str):
        storage = make_storage(storage, options.heartbeat_interval, options.grace_period)
    try:
        return _run_sweep(sweep, run_trial, storage, options, failures)
    except Exception as error:
        lost = storage_lost_error(str(getattr(storage, "url", "")), error)
        if lost is None:
            raise
        raise lost from error


def _run_sweep(
    sweep: SweepSpec,
    run_trial: RunTrial,
    storage: optuna.storages.BaseStorage,
    options: SweepOptions,
    failures: dict[str, str] | None,
) -> dict[str, dict]:
    specs = {t.key: t for t in sweep.trials()}
    keys = sorted(specs)
    name = options.study_name or study_name_for(sweep)
    sampler = _GridSampler({GRID_PARAM: keys}, seed=0)
    study = optuna.create_study(
        study_name=name, storage=storage, sampler=sampler, direction="maximize", load_if_exists=True
    )
    if options.store_id is not None:
        store_id = options.store_id
        check_model_store(study, store_id() if callable(store_id) else store_id)
    key_of = _KeyOf(sampler, keys)
    ledger = Ledger(specs, options.identity or spec_identity, options.stored, options.origin, options.adopt)
    ledger.report_stale(study, name)
    raised: dict[str, str] = {}
    stopped: list[Exception] = []
    objective = make_objective(
        specs, sweep.universe or keys, run_trial, sweep.selection, TrialClaims(storage, name), ledger, raised, stopped
    )
    catch = (Exception,) if options.catch_errors else ()
    requeued: dict[str, int] = {}
    previous_missing = None
    while True:
        fail_trials_of_dead_owners(study)
        finished = ledger.results(study, keys)
        missing = [k for k in keys if k not in finished]
        if not missing:
            break
        trials = study.get_trials(deepcopy=False)
        retry = _points_to_queue_again(trials, key_of, missing, requeued)
        ours_queued = {key_of(t) for t in trials if t.state == TrialState.WAITING} & set(missing)
        if missing == previous_missing and not retry and not ours_queued:
            break  # no progress, nothing of ours queued: the rest is running elsewhere or failed again
        previous_missing = missing
        for key in retry:
            study.enqueue_trial({GRID_PARAM: key}, skip_if_exists=False)
            requeued[key] = requeued.get(key, 0) + 1
        study.optimize(objective, n_trials=None, catch=catch, gc_after_trial=False)
        if stopped:
            raise stopped[0]
    results = ledger.results(study, keys)
    if failures is not None:
        failures.update({key: message for key, message in raised.items() if key not in results})
    if len(results) < len(keys):
        unfinished = [k for k in keys if k not in results]
        log.warning(
            "%d of %d trials of %s have no result yet (failed, or running in another worker), e.g. %s; "
            "run the sweep again to retry them",
            len(unfinished),
            len(keys),
            name,
            unfinished[0],
        )
    return results


def collect_results(study: optuna.Study, keys: Sequence[str] | None = None) -> dict[str, dict]:
    """Every key's first finished result in the study, whatever identity it was made under (for
    looking into a study; [`run_sweep`][] returns only the results of the identity asked for)."""
    done = completed_trials(study)
    wanted = done if keys is None else [k for k in keys if k in done]
    return {k: unpack_result(done[k].user_attrs[RESULT_ATTR]) for k in wanted}
