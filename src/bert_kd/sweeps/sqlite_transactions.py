"""SQLite as a sweep's shared storage: every transaction takes the write lock when it begins."""

from __future__ import annotations


def serialise_sqlite_transactions(engine) -> None:
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
