"""Checks made once before a run starts, so a broken environment fails in seconds with one
block that names the file or server and the fix, instead of retrying for minutes or failing
hours in with a traceback: an unreachable MLflow server, a damaged SQLite file (``mlflow.db``,
the sweeps' ``optuna.db``).

Kedro-free; [`bert_kd.kedro_project.hooks.PreflightHook`][] calls these at the start of a ``kedro run``.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from pathlib import Path
from typing import Mapping

from bert_kd.config.errors import StorageError, TrackingUnreachableError, UserError
from bert_kd.tracking import tracking_server_problem, tracking_store_problem

log = logging.getLogger(__name__)

#: How to turn tracking off, quoted in every tracking error.
TRACKING_OFF = "--params tracking.enabled=false"
#: Where the tracking URI comes from (conf/base/mlflow.yml reads the environment variable).
TRACKING_URI_SETTING = "MLFLOW_TRACKING_URI (or server.mlflow_tracking_uri in conf/base/mlflow.yml)"


def sqlite_path(uri: str | None) -> Path | None:
    """The database file of a ``sqlite:///relative.db`` / ``sqlite:////absolute.db`` URL (None
    for other URLs and in-memory databases)."""
    if not uri or not uri.startswith("sqlite:///"):
        return None
    name = uri[len("sqlite:///") :].split("?", 1)[0]
    return Path(name) if name and name != ":memory:" else None


def sqlite_problem(path: Path) -> str | None:
    """Why the SQLite file at ``path`` is damaged (SQLite's own words), or None when it is sound,
    absent or empty (SQLite creates it). Reads only; ``PRAGMA quick_check`` takes milliseconds on
    a project's databases."""
    if not path.is_file() or path.stat().st_size == 0:
        return None
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)) as connection:
            verdict = connection.execute("PRAGMA quick_check(1)").fetchone()
    except sqlite3.DatabaseError as exc:
        text = str(exc)
        damaged = any(word in text for word in ("malformed", "not a database", "corrupt"))
        return text if damaged else None  # locked, busy …: the run itself deals with those
    if verdict and verdict[0] != "ok":
        return str(verdict[0])
    return None


def check_sqlite(path: Path | None, what: str, extra_fix: str = "") -> None:
    """[`StorageError`][] naming ``path`` and the fix when it is a damaged SQLite file."""
    if path is None:
        return
    problem = sqlite_problem(path)
    if problem is None:
        return
    raise StorageError(
        f"the {what} database is damaged: {problem}",
        str(path),
        f"move it aside (mv {path} {path}.damaged) and run again: a new, empty one is created "
        f"(or restore it from a backup){extra_fix}",
    )


def file_store(uri: str) -> bool:
    """Whether ``uri`` names MLflow's file store (``file:./mlruns``, ``./mlruns``, ``/abs/mlruns``)."""
    scheme = uri.split("://", 1)[0].lower() if "://" in uri else ""
    return uri.lower().startswith("file:") or (not scheme and not uri.lower().startswith(("sqlite:", "databricks")))


def check_tracking(uri: str) -> None:
    """Before anything is logged: the tracking URI is not MLflow 3's refused file store, the tracking
    server answers (≤ 15 s), its SQLite file is sound."""
    import os

    allowed = os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").strip().lower() in {"1", "true", "yes"}
    if file_store(uri) and not allowed:
        raise UserError(
            f"the MLflow tracking URI {uri} is a file store, which MLflow 3 refuses (maintenance mode)",
            TRACKING_URI_SETTING,
            f"use a database: export MLFLOW_TRACKING_URI=sqlite:///mlflow.db (the project's default; "
            f"`mlflow migrate-filestore` moves old runs there), or run without tracking: {TRACKING_OFF}",
        )
    problem = tracking_server_problem(uri)
    if problem is not None:
        raise TrackingUnreachableError(
            f"the MLflow tracking server {uri} does not answer ({problem})",
            TRACKING_URI_SETTING,
            f"start the server or point MLFLOW_TRACKING_URI at one that runs, or run without tracking: {TRACKING_OFF}",
        )
    problem = tracking_store_problem(uri)
    if problem is not None:
        raise TrackingUnreachableError(
            f"the MLflow tracking server {uri} answers but cannot read its runs ({problem})",
            TRACKING_URI_SETTING,
            "start the database the server keeps its runs in (its --backend-store-uri; scripts/start_postgres.sh "
            f"starts the local one of docs/scaling.md) and run again, or run without tracking: {TRACKING_OFF}",
        )
    check_sqlite_folder(sqlite_path(uri), "MLflow tracking", TRACKING_URI_SETTING)
    check_sqlite(sqlite_path(uri), "MLflow tracking", f"; or run without tracking: {TRACKING_OFF}")


def check_sqlite_folder(path: Path | None, what: str, setting: str) -> None:
    """[`StorageError`][] when the folder of the SQLite file ``path`` is not a folder: SQLite creates the
    file, never its folder, and MLflow then failed with a long traceback."""
    if path is None or path.parent.is_dir():
        return
    above = next((p for p in path.parents if p.exists()), None)
    problem = f"{above} is a file" if above is not None and not above.is_dir() else f"{path.parent} does not exist"
    raise StorageError(
        f"the {what} database {path} cannot be created: {problem}",
        setting,
        "point it at a file in an existing folder (sqlite:///mlflow.db, the project's default)"
        + ("" if above is not None and not above.is_dir() else f", or create the folder: mkdir -p {path.parent}"),
    )


def check_sweep_storage(reproduce: Mapping | None) -> None:
    """The Optuna storage of ``reproduce`` (``reproduce.storage``), when it is a SQLite file."""
    storage = (reproduce or {}).get("storage")
    check_sqlite(
        sqlite_path(storage),
        "Optuna sweep",
        " (finished trials are also in the results folder: nothing finished is lost)",
    )


#: SQLite files a run may use when the error itself does not say which (checked in this order).
KNOWN_DATABASES = (
    ("MLflow tracking", "MLFLOW_TRACKING_URI", "sqlite:///mlflow.db"),
    ("Optuna sweep", None, "sqlite:///data/09_sweeps/optuna.db"),
)


def damaged_database_error(exc: BaseException) -> StorageError | None:
    """A [`StorageError`][] naming the damaged file when ``exc`` (or its cause) is SQLite's
    "malformed" / "not a database" raised mid-run (the start-of-run check passed, or the run's
    own database was damaged meanwhile); None for other errors."""
    import os

    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        text = str(exc)
        if "database disk image is malformed" in text or "file is not a database" in text:
            for what, variable, default in KNOWN_DATABASES:
                path = sqlite_path(os.environ.get(variable) if variable else None) or sqlite_path(default)
                try:
                    check_sqlite(path, what)
                except StorageError as error:
                    return error
            return StorageError(
                f"a SQLite database is damaged ({text.splitlines()[0][:200]})",
                None,
                "find the damaged file in the traceback (logs/bert_kd_errors.log), move it aside and run again",
            )
        exc = exc.__cause__ or exc.__context__
    return None
