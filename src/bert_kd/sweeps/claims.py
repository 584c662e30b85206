"""The claims table: before training, a trial claims its grid point in a small table of the study's database,
so exactly one of two workers that GridSampler handed the same point at the same moment trains it."""

from __future__ import annotations

from typing import Callable

import optuna
from optuna.trial import TrialState


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
