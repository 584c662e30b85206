"""Where a sweep's study lives: its storage URL, opened with heartbeats, and what a database that is missing,
refuses this user or stops answering raises, as one `UserError` block."""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import optuna
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback

from bert_kd.config.errors import UserError
from bert_kd.sweeps.sqlite_transactions import serialise_sqlite_transactions


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
        serialise_sqlite_transactions(storage.engine)
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
