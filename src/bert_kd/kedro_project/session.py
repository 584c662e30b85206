"""A Kedro session whose versions cannot collide between runs started in the same instant.

Kedro names a run's versions (``data/08_reporting/teacher_metrics.json/<version>/``) after the
session id, a millisecond UTC timestamp: two ``kedro run`` started within one millisecond drew the
same version and the second failed with "Save path … must not exist if versioning is enabled",
its report lost. [`UniqueVersionSession`][] (``SESSION_CLASS`` in ``settings.py``) appends a
per-run unique part to that timestamp; versions still sort by time (the timestamp comes first).
"""

from __future__ import annotations

import os
import uuid

from kedro.framework.session import KedroSession
from kedro.io.core import generate_timestamp


def unique_version(timestamp: str | None = None) -> str:
    """``<Kedro timestamp>-<pid>-<random>``: sorts by time, unique per process and call."""
    return f"{timestamp or generate_timestamp()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class UniqueVersionSession(KedroSession):
    """`KedroSession` whose id (the save version of every versioned dataset of the run)
    is [`unique_version`][] of Kedro's timestamp."""

    def __init__(self, session_id: str, *args, **kwargs):
        super().__init__(unique_version(session_id), *args, **kwargs)
