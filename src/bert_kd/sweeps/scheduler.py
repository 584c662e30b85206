"""Run a sweep's trials through one Optuna study (GridSampler + RDB storage + heartbeats).

Every trial of the sweep is one value of a single categorical grid parameter ``trial`` (its
[`TrialSpec.key`][]), so a ``GridSampler`` covers methods × tasks × seeds × grid points even
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
database ([`TrialClaims`][]): an INSERT under a primary key, or a compare-and-swap that takes
over the claim of a failed trial. Exactly one trial wins; the other is pruned and its worker moves
on. Storages without a database (in-memory) serve one process; their claims go to an in-memory
SQLite table with the same code.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import socket
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import optuna
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.trial import TrialState

from bert_kd.config.errors import TrackingUnreachableError, UserError
from bert_kd.sweeps.spec import SweepSpec, TrialSpec

log = logging.getLogger(__name__)

GRID_PARAM = "trial"
RESULT_ATTR = "result"
KEY_ATTR = "key"
IDENTITY_ATTR = "identity"  # the content key the result was made under
OWNER_ATTR = "owner"  # {"host", "pid", "started"}: the process running the trial
ORIGIN_ATTR = "results_folder"  # "<host>:<folder>": the results folder of the worker that trained the trial
STORE_ATTR = "model_store"  # the identity of the model store the study's first worker used
RunTrial = Callable[[TrialSpec], Mapping[str, Any]]
Identity = Callable[[TrialSpec], str]
Stored = Callable[[TrialSpec], "dict | None"]
Adopt = Callable[[TrialSpec, dict, str], None]


#: Errors that stop the worker at the trial that raised them: a service gone (the MLflow server), not the trial.
STOPS_THE_WORKER = (TrackingUnreachableError,)


class SweepTrialError(ValueError):
    """``run_trial`` returned something the sweep cannot report."""


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


def check_result(result: Mapping[str, Any], spec: TrialSpec) -> dict:
    """Validate a ``run_trial`` result (the contract the job path implements).

    Required: ``dev_metric`` (float, the task's primary metric). Optional: ``dev_metrics``
    (dict), ``heldout_metric`` (float; required for ``selection: heldout``),
    ``dev_predictions`` + ``dev_labels`` (equal-length lists, for the paired bootstrap),
    ``teacher_dev_metric`` (float), ``run_id`` / ``model_key`` (str).
    """
    if not isinstance(result, Mapping):
        raise SweepTrialError(f"run_trial({spec.key}) returned {type(result).__name__}, expected a dict")
    result = dict(result)
    for name in ("dev_metric", "heldout_metric", "teacher_dev_metric"):
        value = result.get(name)
        if value is None:
            if name == "dev_metric":
                raise SweepTrialError(f"run_trial({spec.key}) returned no dev_metric")
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SweepTrialError(f"run_trial({spec.key}): {name} must be a number, got {value!r}")
        result[name] = float(value)
    predictions, labels = result.get("dev_predictions"), result.get("dev_labels")
    if (predictions is None) != (labels is None):
        raise SweepTrialError(f"run_trial({spec.key}): give both dev_predictions and dev_labels or neither")
    if predictions is not None:
        result["dev_predictions"], result["dev_labels"] = _plain_list(predictions), _plain_list(labels)
        if len(result["dev_predictions"]) != len(result["dev_labels"]):
            raise SweepTrialError(
                f"run_trial({spec.key}): {len(result['dev_predictions'])} dev_predictions but "
                f"{len(result['dev_labels'])} dev_labels"
            )
    return result


PER_EXAMPLE = ("dev_predictions", "dev_labels")


def _pack(result: dict) -> dict:
    """Per-example class ids 0..9 as one digit string (≈1 byte per dev example in the study)."""
    packed = dict(result)
    for name in PER_EXAMPLE:
        values = packed.get(name)
        if values is not None and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 9 for v in values):
            packed[name] = {"digits": "".join(map(str, values))}
    return packed


def _unpack(result: dict) -> dict:
    unpacked = dict(result)
    for name in PER_EXAMPLE:
        values = unpacked.get(name)
        if isinstance(values, dict) and "digits" in values:
            unpacked[name] = [int(c) for c in values["digits"]]
    return unpacked


def _plain_list(values) -> list:
    """numpy arrays / tensors -> JSON-able Python ints and floats."""
    values = values.tolist() if hasattr(values, "tolist") else list(values)
    return [v.item() if hasattr(v, "item") else v for v in values]


def make_storage(
    url: str, heartbeat_interval: int = 60, grace_period: int | None = 180, max_retry: int = 2
) -> RDBStorage:
    """RDB storage with heartbeats; a ``sqlite:///relative/path.db`` gets its folder created."""
    if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
        Path(url[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
    if url.startswith("sqlite"):
        engine_kwargs = {"connect_args": {"timeout": 60}}
    elif url.startswith("postgresql"):  # a server that does not answer is named within seconds, not minutes
        engine_kwargs = {"connect_args": {"connect_timeout": CONNECT_TIMEOUT_S}, "pool_pre_ping": True}
    else:
        engine_kwargs = {}
    with warnings.catch_warnings():  # heartbeats are "experimental" in Optuna 5.0; we rely on them knowingly
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        for attempt in range(SCHEMA_RACE_ATTEMPTS):
            try:
                storage = RDBStorage(
                    url,
                    engine_kwargs=engine_kwargs,
                    heartbeat_interval=heartbeat_interval,
                    grace_period=grace_period,
                    heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=max_retry),
                )
                break
            except Exception as error:
                if lost_schema_race(error) and attempt + 1 < SCHEMA_RACE_ATTEMPTS:
                    time.sleep(1.0 + attempt)  # another worker is creating the tables: open them once it has
                    continue
                raise storage_error(url, error) from error
    if url.startswith("sqlite"):
        _serialise_sqlite_transactions(storage.engine)
    return storage


#: Tries to open a new database's storage while other workers create its tables at the same moment.
SCHEMA_RACE_ATTEMPTS = 5
#: Seconds a worker waits for a PostgreSQL server to accept its connection before naming it in a block.
CONNECT_TIMEOUT_S = 10


def shown_url(url: str) -> str:
    """``url`` with its password masked (``***``), for a message."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url.split("@")[-1]


def lost_schema_race(error: Exception) -> bool:
    """Whether opening the storage failed because another worker created Optuna's tables (or PostgreSQL
    types) at the same moment: the workers of a sweep started together on a new database."""
    from sqlalchemy.exc import IntegrityError, ProgrammingError

    text = str(getattr(error, "orig", None) or error)
    return isinstance(error, (IntegrityError, ProgrammingError)) and "already exists" in text


def storage_error(url: str, error: Exception) -> Exception:
    """What opening the sweep storage ``url`` raised, as one [`UserError`][] block (the URL without
    its password, the fix) when it is a missing driver or a database that refuses or does not answer;
    any other error as it is."""
    from sqlalchemy.exc import OperationalError

    where = f"reproduce.storage = {shown_url(url)}"
    text = " ".join(str(getattr(error, "orig", None) or error).split())
    if isinstance(error, ImportError) or "DB access module" in text:
        missing = getattr(error, "name", None) or getattr(error.__cause__, "name", None) or "the database driver"
        return UserError(
            f"the Optuna storage's database driver is not installed ({missing})",
            where,
            'install it: pip install -e ".[postgres]" (psycopg, for postgresql+psycopg:// URLs)',
        )
    if isinstance(error, OperationalError):
        if "password authentication failed" in text or "no password supplied" in text:
            fix = "give the right password in the URL (postgresql+psycopg://user:password@host:port/db) or in ~/.pgpass"
        elif "does not exist" in text:
            fix = "create the database and user (scripts/start_postgres.sh does for a local server) or fix the URL"
        else:
            fix = (
                "start the database server (scripts/start_postgres.sh starts a local one) or fix the host and port "
                "in the URL; every worker must reach it"
            )
        return UserError(f"the Optuna storage cannot be opened: {text[:300]}", where, fix)
    if denied(error):
        return UserError(f"the Optuna storage refuses this user: {text[:300]}", where, GRANT_FIX)
    return error


#: The fix of a database user who may connect but not read or write the study's tables.
GRANT_FIX = (
    "connect as the user who owns the study's tables, or let this one write them: as their owner, GRANT SELECT, "
    "INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO <user>; GRANT USAGE, SELECT ON ALL SEQUENCES IN "
    "SCHEMA public TO <user> (docs/scaling.md)"
)


def _chain(error: BaseException | None):
    """``error`` and the errors it was raised from or during, innermost last."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


def denied(error: BaseException) -> bool:
    """Whether the database refused the user a table (PostgreSQL's ``permission denied``, SQLSTATE 42501)."""
    from sqlalchemy.exc import DBAPIError

    return any(
        isinstance(e, DBAPIError) and "permission denied" in str(getattr(e, "orig", e)).lower() for e in _chain(error)
    )


def storage_gone(error: BaseException) -> BaseException | None:
    """The database error somewhere in ``error``'s chain when the sweep's database stopped answering or cut the
    connection (SQLAlchemy's ``OperationalError``, or a connection it invalidated); None otherwise."""
    from sqlalchemy.exc import DBAPIError, OperationalError

    for e in _chain(error):
        if isinstance(e, OperationalError) or (isinstance(e, DBAPIError) and e.connection_invalidated):
            return e
    return None


class StorageLostError(UserError):
    """The sweep's database went away (or refused this user) while the worker ran."""

    kind = "sweep storage lost"


def storage_lost_error(url: str, error: BaseException) -> UserError | None:
    """One block for a database that went away or refused this user during the sweep; None for any other error.
    (Optuna 5.0.0 then raised ``UnboundLocalError`` from ``_run_trial``, whose recovery asked the same dead
    database, above hundreds of lines of traceback.)"""
    if url.startswith("sqlite"):  # one machine's file: a locked or damaged one is named by the run's own checks
        return None
    where = f"reproduce.storage = {shown_url(url)}"
    if denied(error):
        text = next(str(getattr(e, "orig", e)) for e in _chain(error) if "permission denied" in str(e).lower())
        return StorageLostError(
            f"the Optuna storage refuses this user: {' '.join(text.split())[:300]}", where, GRANT_FIX
        )
    gone = storage_gone(error)
    if gone is None:
        return None
    text = " ".join(str(getattr(gone, "orig", None) or gone).split())[:300]
    return StorageLostError(
        f"the Optuna storage stopped answering during the sweep: {text}",
        where,
        "start the database server again (scripts/start_postgres.sh for a local one) and run the same command: "
        "finished trials are reused and the trial cut off is retried",
    )


def _serialise_sqlite_transactions(engine) -> None:
    """Make every transaction ``BEGIN IMMEDIATE`` (SQLAlchemy's recipe for SQLite).

    Optuna takes a queued (WAITING) trial with read-check-write under ``SELECT … FOR UPDATE``,
    which SQLite ignores: two workers asking at once could both take the same trial, run it, and
    the second then failed on telling a finished trial (seen in the two-worker test). With
    ``BEGIN IMMEDIATE`` the write lock is taken when the transaction starts, so the check and the
    write of one worker cannot interleave with another's. PostgreSQL honours FOR UPDATE already.
    """
    from sqlalchemy import event

    @event.listens_for(engine, "connect")
    def _let_sqlalchemy_begin(dbapi_connection, connection_record):
        dbapi_connection.isolation_level = None  # pysqlite would otherwise BEGIN (deferred) by itself

    @event.listens_for(engine, "begin")
    def _begin_immediate(connection):
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    engine.dispose()  # connections opened while Optuna created its tables predate the listeners


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


def _completed(study: optuna.Study) -> dict[str, optuna.trial.FrozenTrial]:
    """Key -> first COMPLETE trial holding a result (whatever its identity)."""
    done = {}
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        key = t.user_attrs.get(KEY_ATTR)
        if key is not None and RESULT_ATTR in t.user_attrs and key not in done:
            done[key] = t
    return done


def spec_identity(spec: TrialSpec) -> str:
    """Default identity: a hash of the trial spec (its label aside), for ``run_trial``s that know no
    more about what determines a result."""
    material = {k: v for k, v in spec.as_dict().items() if k != "label"}
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()


class _Ledger:
    """Which trials of this run are finished, judged by identity: the results folder first
    (``stored``), the study second (a COMPLETE trial recorded under the same identity)."""

    def __init__(
        self,
        specs: Mapping[str, TrialSpec],
        identity: Identity,
        stored: Stored | None,
        origin: str | None = None,
        adopt: Adopt | None = None,
    ):
        self.specs, self.identity_of, self.stored = specs, identity, stored
        self.origin, self.adopt = origin, adopt  # this worker's results folder; how to copy a result into it

    def identity(self, key: str) -> str:
        return self.identity_of(self.specs[key])

    def result(self, study: optuna.Study, key: str) -> dict | None:
        return self.results(study, [key]).get(key)

    def results(self, study: optuna.Study, keys: Sequence[str]) -> dict[str, dict]:
        done: dict[str, dict] = {}
        if self.stored is not None:  # the folder decides: no valid file = not finished ...
            for key in keys:
                result = self.stored(self.specs[key])
                if result is not None:
                    done[key] = dict(result)
            if self.origin is None or len(done) == len(keys):
                return done
        # ... except for a trial trained by a worker with another results folder (another checkout or
        # machine): its result is taken from the study and copied into this folder
        wanted = {key: self.identity(key) for key in keys if key not in done}
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            key = t.user_attrs.get(KEY_ATTR)
            if (
                key in wanted
                and key not in done
                and RESULT_ATTR in t.user_attrs
                and t.user_attrs.get(IDENTITY_ATTR) == wanted[key]
            ):
                made_in = t.user_attrs.get(ORIGIN_ATTR)
                if self.stored is not None and made_in in (None, self.origin):
                    continue  # made here and its file is gone (deleted): recomputed
                done[key] = _unpack(t.user_attrs[RESULT_ATTR])
                if self.stored is not None and self.adopt is not None:
                    self.adopt(self.specs[key], done[key], made_in)
        return done

    def report_stale(self, study: optuna.Study, name: str) -> None:
        """One warning line for the study's finished trials of this run that are not reused: made
        under another identity, or (with a results folder) without their file."""
        done = self.results(study, list(self.specs))
        recorded: dict[str, set] = {}
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            key = t.user_attrs.get(KEY_ATTR)
            if key in self.specs and key not in done and RESULT_ATTR in t.user_attrs:
                recorded.setdefault(key, set()).add(t.user_attrs.get(IDENTITY_ATTR))
        no_file = sorted(k for k, identities in recorded.items() if self.identity(k) in identities)
        other = sorted(k for k in recorded if k not in no_file)
        if other:
            log.warning(
                "%d finished trial(s) of study %s were made under another identity (other data sizes, GLUE "
                "files, settings or schema version), e.g. %s: not reused, recomputed",
                len(other),
                name,
                other[0],
            )
        if no_file:
            log.warning(
                "%d finished trial(s) of study %s have no valid file in the results folder (deleted?), e.g. %s: "
                "recomputed",
                len(no_file),
                name,
                no_file[0],
            )


def owner_of_this_process() -> dict:
    """Host, pid and start time: together they name one process (a pid alone may be reused)."""
    import psutil

    process = psutil.Process()
    return {"host": socket.gethostname(), "pid": process.pid, "started": round(process.create_time(), 2)}


def _owner_is_gone(owner: Mapping | None) -> bool:
    """The trial's owner process ran on this host and no longer exists (same pid and start time)."""
    import psutil

    if not isinstance(owner, Mapping) or owner.get("host") != socket.gethostname():
        return False  # unknown, or another host: its heartbeat and grace period decide
    try:
        return round(psutil.Process(int(owner["pid"])).create_time(), 2) != owner.get("started")
    except psutil.NoSuchProcess:
        return True
    except (psutil.Error, KeyError, TypeError, ValueError):
        return False


def fail_trials_of_dead_owners(study: optuna.Study) -> list[str]:
    """Fail the RUNNING trials whose owner process is gone from this host (so they are retried
    now, not after the grace period); their keys."""
    failed = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if _owner_is_gone(t.user_attrs.get(OWNER_ATTR)):
            try:
                study._storage.set_trial_state_values(t._trial_id, state=TrialState.FAIL)
            except (RuntimeError, ValueError):  # finished meanwhile (UpdateFinishedTrialError)
                continue
            failed.append(t.user_attrs.get(KEY_ATTR) or f"trial {t.number}")
    if failed:
        log.warning(
            "%d trial(s) of study %s were running in a process of this host that is gone (killed), e.g. %s: "
            "failed now and retried",
            len(failed),
            study.study_name,
            failed[0],
        )
    return failed


class TrialClaims:
    """Who runs which grid point: one row ``(study, key) -> trial id`` per grid point.

    [`claim`][] is atomic across processes and machines that share the storage: the INSERT
    succeeds for exactly one trial, and a claim held by a trial that failed or was pruned is taken
    over with an UPDATE that names the old holder (compare-and-swap), so two retries cannot both
    win it.
    """

    TABLE = "bert_kd_trial_claims"

    def __init__(self, storage: optuna.storages.BaseStorage, study_name: str):
        import sqlalchemy as sa

        self.storage, self.study_name = storage, study_name
        self.engine = getattr(storage, "engine", None)
        if self.engine is None:  # in-memory storage (one process): one shared in-memory database
            self.engine = sa.create_engine(
                "sqlite://", poolclass=sa.pool.StaticPool, connect_args={"check_same_thread": False}
            )
        self.table = sa.Table(
            self.TABLE,
            sa.MetaData(),
            sa.Column("study_name", sa.String(512), primary_key=True),
            sa.Column("trial_key", sa.String(512), primary_key=True),
            sa.Column("trial_id", sa.Integer, nullable=False),
        )
        self._create_table()

    def _create_table(self) -> None:
        """Create the claims table unless it exists. Two workers starting together can both see it
        missing and both CREATE it (PostgreSQL then raises DuplicateTable, or a unique violation on
        its type): the loser of that race finds the table there and goes on."""
        import sqlalchemy as sa

        try:
            self.table.create(self.engine, checkfirst=True)
        except sa.exc.DBAPIError:
            if not sa.inspect(self.engine).has_table(self.TABLE):
                raise

    def claim(self, key: str, trial_id: int, redo_finished: Callable[[], bool] = lambda: False) -> int | None:
        """Claim ``key`` for ``trial_id``: ``None`` when it is ours, else the holder's trial id.

        A holder that failed or was pruned is taken over; one that COMPLETED only when
        ``redo_finished()`` says its result is not to be reused (its results file is gone)."""
        for _ in range(3):
            holder = self._insert_or_holder(key, trial_id)
            if holder is None or holder == trial_id:
                return None
            state = self.storage.get_trial(holder).state
            stale = state in (TrialState.FAIL, TrialState.PRUNED) or (state == TrialState.COMPLETE and redo_finished())
            if not stale:
                return holder  # running (or just finished) in another worker
            if self._swap(key, holder, trial_id):
                return None
        return holder

    def _insert_or_holder(self, key: str, trial_id: int) -> int | None:
        import sqlalchemy as sa

        row = {"study_name": self.study_name, "trial_key": key}
        try:
            with self.engine.begin() as connection:
                connection.execute(self.table.insert().values(**row, trial_id=trial_id))
            return None
        except sa.exc.IntegrityError:
            with self.engine.connect() as connection:
                return connection.execute(sa.select(self.table.c.trial_id).filter_by(**row)).scalar()

    def _swap(self, key: str, old: int, new: int) -> bool:
        with self.engine.begin() as connection:
            changed = connection.execute(
                self.table.update()
                .filter_by(study_name=self.study_name, trial_key=key, trial_id=old)
                .values(trial_id=new)
            )
        return changed.rowcount == 1


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


def _value(result: Mapping, key: str, selection: str) -> float:
    value = result["dev_metric"] if selection == "dev" else result.get("heldout_metric")
    if value is None:
        raise SweepTrialError(f"run_trial({key}) returned no heldout_metric but the table selects on heldout")
    return value if math.isfinite(value) else float("-inf")


def _reuse(trial: optuna.Trial, result: Mapping, key: str, selection: str) -> float:
    trial.set_user_attr(RESULT_ATTR, _pack(dict(result)))
    trial.set_user_attr("reused", True)
    return _value(result, key, selection)


def _objective(
    specs: Mapping[str, TrialSpec],
    universe: Sequence[str],
    run_trial: RunTrial,
    selection: str,
    claims: TrialClaims,
    ledger: _Ledger,
    failures: dict[str, str],
    stopped: list[Exception],
):
    def objective(trial: optuna.Trial) -> float:
        key = trial.suggest_categorical(GRID_PARAM, list(universe))
        trial.set_user_attr(KEY_ATTR, key)
        if key not in specs:  # a queued point of another worker's restriction (e.g. a retry): not ours
            raise optuna.TrialPruned(f"{key} is outside this run's restriction; a run that includes it queues it again")
        trial.set_user_attr(OWNER_ATTR, owner_of_this_process())
        identity = ledger.identity(key)
        trial.set_user_attr(IDENTITY_ATTR, identity)
        study = trial.study
        done = ledger.result(study, key)
        if done is not None:  # another worker (or an earlier run) finished it: reuse, don't train
            return _reuse(trial, done, key, selection)
        holder = claims.claim(f"{key}#{identity}", trial._trial_id, lambda: ledger.result(study, key) is None)
        if holder is not None:  # another worker owns this grid point: leave it to it
            done = ledger.result(study, key)
            if done is not None:  # ... and has finished it since we looked
                return _reuse(trial, done, key, selection)
            log.info("trial %s is claimed by trial id %d in another worker; skipping it here", key, holder)
            raise optuna.TrialPruned(f"{key} is claimed by trial id {holder}")
        spec = specs[key]
        try:
            result = check_result(run_trial(spec), spec)
        except SystemExit:  # SIGTERM (RunStatusHook): the trial failed, another worker takes it at once
            fail_quietly(study, trial._trial_id)
            raise
        except Exception as error:
            failures[key] = f"{type(error).__name__}: {error}".splitlines()[0][:300]
            if isinstance(error, STOPS_THE_WORKER):  # every later trial would fail the same way
                stopped.append(error)
                trial.study.stop()
            raise
        trial.set_user_attr(IDENTITY_ATTR, ledger.identity(key))  # the same, unless the GLUE files were just fetched
        if ledger.origin is not None:
            trial.set_user_attr(ORIGIN_ATTR, ledger.origin)
        trial.set_user_attr(RESULT_ATTR, _pack(result))
        return _value(result, key, selection)

    return objective


def fail_quietly(study: optuna.Study, trial_id: int) -> None:
    """Mark a running trial ``FAIL`` on the way out of a stopped worker; a database that does not answer then is
    left to the heartbeat (the trial goes stale and is retried)."""
    try:
        study._storage.set_trial_state_values(trial_id, TrialState.FAIL)
    except Exception as error:  # the worker is stopping; the heartbeat covers this
        log.warning("trial id %d could not be marked failed (%s): its heartbeat will go stale", trial_id, error)


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
    ledger = _Ledger(specs, options.identity or spec_identity, options.stored, options.origin, options.adopt)
    ledger.report_stale(study, name)
    raised: dict[str, str] = {}
    stopped: list[Exception] = []
    objective = _objective(
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
    done = _completed(study)
    wanted = done if keys is None else [k for k in keys if k in done]
    return {k: _unpack(done[k].user_attrs[RESULT_ATTR]) for k in wanted}
