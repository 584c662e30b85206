"""MLflow run status that tells the truth: ``FAILED`` when a node raises, ``KILLED`` on
SIGTERM/SIGINT — the nested training runs and the parent ``kedro run`` run alike.

Without this, a killed ``kedro run`` leaves its runs ``RUNNING`` forever (Kedro calls
``on_pipeline_error`` for exceptions only, and SIGTERM ends the process without unwinding).

SIGKILL (the OOM killer, ``kill -9``, a lost machine) cannot be caught. Every run therefore
carries its owner process ([`owner_tags`][runs.owner_tags]: host, pid, process start time), and the next
``kedro run`` on the same host ends the ``RUNNING`` runs whose process is gone as ``KILLED``
([`end_orphaned_runs`][runs.end_orphaned_runs]). Runs owned by other hosts are left to those hosts.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading

from kedro.framework.hooks import hook_impl

from bert_kd.tracking import active_run, end_orphaned_runs, limit_requests, owner_tags
from bert_kd.tracking.runs import STOPPING_LIMITS

log = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: Seconds a process told to stop (SIGTERM) has to unwind before it ends at once: Python waits at exit for every
#: non-daemon thread (an MLflow upload in flight, a heartbeat), which kept a SIGTERMed sweep worker for over 30 s.
STOP_GRACE_S = 10.0


def exit_within(seconds: float, status: int) -> None:
    """End the process with ``status`` in ``seconds`` unless it has ended by then (a daemon timer: it never keeps
    the process alive itself), and skip the interpreter's own teardown once it unwound: collecting the garbage of
    torch, transformers and MLflow took a SIGTERMed sweep worker over 20 s on a busy machine (its stack, dumped
    by SIGABRT: "Garbage-collecting")."""
    timer = threading.Timer(seconds, os._exit, args=(status,))
    timer.daemon = True
    timer.start()
    atexit.register(_end_now, status)  # last registered, first run: after the threads, before the teardown


def _end_now(status: int) -> None:
    logging.shutdown()  # the log's last lines, flushed
    os._exit(status)


def end_active_runs(status: str) -> list[str]:
    """End every MLflow run active in this thread (innermost first) with ``status``; their ids. A run the tracking
    server does not take (it is gone) is named in a warning and left for the next run on this host to end
    ([`end_orphaned_runs`][runs.end_orphaned_runs]): ``mlflow.end_run`` takes it off the stack first, so nothing
    retries it at exit."""
    import mlflow

    ended, left = [], []
    while mlflow.active_run() is not None:
        run_id = mlflow.active_run().info.run_id
        try:
            mlflow.end_run(status)
            ended.append(run_id)
        except Exception:  # the server is gone: stop anyway
            left.append(run_id)
    if left:
        log.warning(
            "the MLflow server did not answer: run(s) %s left for the next run on this host to end", ", ".join(left)
        )
    return ended


def end_runs_on_the_way_out(name: str) -> None:
    """End the active runs as ``KILLED`` for the signal ``name`` with one short try per request, so that a process
    told to stop stops within seconds even when the tracking server is gone (MLflow's own retries kept a
    SIGTERMed sweep worker for minutes)."""
    import mlflow

    limit_requests(mlflow.get_tracking_uri(), STOPPING_LIMITS, force=True)
    ended = end_active_runs("KILLED")
    log.warning("%s: MLflow run(s) %s marked KILLED", name, ", ".join(ended) or "(none active)")


class RunStatusHook:
    """Mark MLflow runs ``FAILED`` on a node error and ``KILLED`` on SIGTERM/SIGINT."""

    def __init__(self):
        self._previous: dict[int, object] = {}
        self._owner_pid: int | None = None
        self._reported = False

    def _on_signal(self, signum, frame):
        """End the runs as KILLED and say so, once, in the process that installed the handler: a
        forked worker (a DataLoader's) inherits the handler and the run stack, and Ctrl-C reaches
        the whole process group, so each worker would otherwise end and report the same runs."""
        name = signal.Signals(signum).name
        if os.getpid() == self._owner_pid and not self._reported:
            self._reported = True
            self._restore()
            end_runs_on_the_way_out(name)
            if signum == signal.SIGTERM:
                exit_within(STOP_GRACE_S, 128 + signum)
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + signum)

    def _restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT end the active MLflow runs as KILLED (main thread only, as Python requires)."""
        if threading.current_thread() is threading.main_thread():
            self._owner_pid, self._reported = os.getpid(), False
            for signum in STOP_SIGNALS:
                self._previous[signum] = signal.signal(signum, self._on_signal)

    @hook_impl(hookwrapper=True)
    def before_pipeline_run(self, run_params, pipeline, catalog):
        """Install the signal handlers; wrap every other ``before_pipeline_run`` (kedro-mlflow opens
        the parent run there, parameter checks may then raise, and Kedro calls ``on_pipeline_error``
        only for errors inside the runner)."""
        self.install_signal_handlers()
        outcome = yield
        if outcome.excinfo is None:
            self._own_active_run()
        else:
            ended = end_active_runs("FAILED")
            if ended:
                log.info(
                    "MLflow run(s) %s marked FAILED (%s before the run)", ", ".join(ended), outcome.excinfo[0].__name__
                )
            self._restore()

    @staticmethod
    def _own_active_run() -> None:
        """Tag the ``kedro run``'s run with its owner process and end orphans of killed processes."""
        active = active_run()
        if active is None:
            return
        import mlflow

        mlflow.set_tags(owner_tags())
        # every experiment of the store: the killed process may have logged to another one (a sweep's, a renamed one)
        experiments = [experiment.experiment_id for experiment in mlflow.search_experiments()]
        ended = end_orphaned_runs(sorted({active.info.experiment_id, *experiments}))
        if ended:
            log.warning(
                "MLflow run(s) %s were RUNNING but their process is gone (killed): marked KILLED", ", ".join(ended)
            )

    @hook_impl(hookwrapper=True)
    def after_pipeline_run(self, run_params, pipeline, catalog):
        """After every other ``after_pipeline_run``: no run of this session stays active in the
        process (kedro-mlflow ends one run from the stack; a stale entry left the parent open)."""
        yield
        ended = end_active_runs("FINISHED")
        if ended:
            log.debug("MLflow run(s) %s still active after the pipeline: ended FINISHED", ", ".join(ended))
        self._restore()

    @hook_impl
    def on_pipeline_error(self, error, run_params, pipeline, catalog) -> None:
        ended = end_active_runs("FAILED")
        if ended:
            log.info("MLflow run(s) %s marked FAILED (%s)", ", ".join(ended), type(error).__name__)
        self._restore()
