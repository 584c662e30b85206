"""Moved to :mod:`bert_kd.tracking.distill` (issue 22: the core imports no Kedro, tracking calls
live in the ``tracking`` package); this name stays for existing imports."""

from bert_kd.tracking.distill import *  # noqa: F401,F403
from bert_kd.tracking.distill import __all__  # noqa: F401
