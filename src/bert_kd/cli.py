"""Project CLI: ``kedro run`` with readable errors.

Kedro loads ``<package>.cli:cli`` and lets its commands override the built-in ones. ``run`` here
is Kedro's own ``run`` (same options, same behaviour) except that a known user error
(:class:`~bert_kd.errors.UserError` anywhere in the exception chain: bad parameters, bad data
files, missing models, offline hub) prints one block — what, where, how to fix — and exits with
status 2 without a traceback. The full traceback is appended to ``logs/bert_kd_errors.log``
(``BERT_KD_ERROR_LOG``) and printed too when ``BERT_KD_DEBUG=1``. Other errors keep their traceback.
"""

from __future__ import annotations

import datetime as _dt
import sys
import traceback
from pathlib import Path

import click
from kedro.framework.cli.project import run as kedro_run

from bert_kd.errors import UserError, debug_enabled, error_log_path, find_user_error

#: Exit status of a user error (click uses 2 for usage errors too).
USER_ERROR_EXIT = 2


def report_user_error(error: UserError, exc: BaseException, stream=None) -> None:
    """Print ``error``'s block on ``stream`` (stderr) and log ``exc``'s traceback to the log file."""
    stream = stream or sys.stderr
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    log_path = Path(error_log_path())
    logged = None
    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("a", encoding="utf-8") as fh:
            fh.write(f"--- {_dt.datetime.now().isoformat(timespec='seconds')} {' '.join(sys.argv)}\n{trace}\n")
        logged = log_path
    except OSError:
        pass
    print(error.block(), file=stream)
    if debug_enabled():
        print(trace, file=stream)
    elif logged is not None:
        print(f"  (traceback in {logged}; BERT_KD_DEBUG=1 prints it here)", file=stream)


def environment_error(exc: BaseException) -> UserError | None:
    """A full or read-only disk, or a damaged SQLite file, met mid-run by code that does not
    name it itself (Kedro's dataset saves, MLflow, Optuna): one block naming the file and the fix."""
    from bert_kd.errors import storage_error
    from bert_kd.preflight import damaged_database_error

    filename = next((getattr(e, "filename", None) for e in _chain(exc) if getattr(e, "filename", None)), None)
    return storage_error(exc, filename or "a file of this run", writing=False) or damaged_database_error(exc)


def _chain(exc: BaseException | None):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def run_guarded(**options):
    """Kedro's ``run`` callback; a :class:`UserError` becomes one block and exit status 2."""
    try:
        return kedro_run.callback(**options)
    except Exception as exc:  # noqa: BLE001 - re-raised unless it is a user error
        error = find_user_error(exc) or environment_error(exc)
        if error is None:
            raise
        report_user_error(error, exc)
        sys.exit(USER_ERROR_EXIT)


@click.group(name="bert_kd")
def cli() -> None:
    """bert-kd project commands."""


#: Kedro's ``run`` with readable user errors (also what ``bert-kd`` / ``python -m bert_kd`` run).
run = click.Command(
    name="run",
    params=list(kedro_run.params),
    callback=run_guarded,
    help=kedro_run.help,
    short_help=kedro_run.short_help,
)
cli.add_command(run)


def _results_group():
    from bert_kd.analysis.cli import results

    return results


#: ``kedro results …`` (also ``bert-kd results …``): readings of committed tables.
cli.add_command(_results_group())
