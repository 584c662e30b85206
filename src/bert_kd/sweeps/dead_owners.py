"""Dead owners: each running trial records the process that runs it (host, pid, start time), so a worker on
the same host fails at once the trials whose process is gone (killed) and they are retried, without waiting for
their heartbeat to go stale (the grace period stays for trials of other hosts)."""

from __future__ import annotations

import logging
import socket
from typing import Mapping

import optuna
from optuna.trial import TrialState

from bert_kd.sweeps.study_records import KEY_ATTR, OWNER_ATTR

log = logging.getLogger(__name__)


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
