"""MLflow runs: open one per training job, log to it, tag its owner, end the orphans of killed processes."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import time
from pathlib import Path
from typing import Iterator, Mapping

from bert_kd.config.credentials import mask, scrub
from bert_kd.config.errors import TrackingUnreachableError
from bert_kd.config.schema import Block, Tracking, typed
from bert_kd.experiment.provenance import environment_info
from bert_kd.experiment.tracker import JobRun
from bert_kd.tracking.format import SIZE_METRICS, flatten, format_param, is_number, size_tags

log = logging.getLogger(__name__)


def is_main_process() -> bool:
    """Rank 0 of a torchrun / ``accelerate launch`` job (or a plain single process): the only
    process that talks to MLflow, so N processes make one run and one store."""
    return int(os.environ.get("RANK", "0") or 0) == 0


def num_processes() -> int:
    """Processes of this job (``WORLD_SIZE`` set by torchrun / ``accelerate launch``; 1 otherwise)."""
    return int(os.environ.get("WORLD_SIZE", "1") or 1)


#: Seconds the start-of-run check waits for the tracking server (MLflow's own retries take minutes).
TRACKING_CHECK_TIMEOUT_S = 10.0

#: MLflow's own retry settings for a run on a tracking server, unless the user set them: each request is tried
#: 5 times over about 15 s (backoff 1, 2, 4, 8 s, up to 1 s of jitter each) and waits at most 20 s for an answer,
#: so a server restarted within that is ridden through and one that stays down is named in a block within about
#: 30 s (MLflow's defaults, 7 retries up to 120 s apart and 120 s per request, kept a sweep worker waiting for 13
#: minutes; backoff 2 and every later request of the failing run retried in turn, 180-221 s).
REQUEST_LIMITS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "4",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "20",
}
#: While a stopping process ends its runs (SIGTERM), and once a request's retries ran out (the server is down:
#: ending the run and kedro-mlflow's own clean-up ask again): one try, 5 s.
STOPPING_LIMITS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "5"}


class RetryNotice(logging.Filter):
    """urllib3's "Retrying (Retry(total=3, …)) after connection broken by …" warning, one per retry of every request
    (888 lines while a server was down), as one line per ``every_s`` seconds naming the server and the bound."""

    def __init__(self, every_s: float = 60.0) -> None:
        super().__init__()
        self.every_s, self.last = every_s, -float("inf")

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("Retrying"):
            return True
        now = time.monotonic()
        if now - self.last < self.every_s:
            return False
        self.last = now
        seconds = sum(
            float(os.environ.get("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")) * 2**n
            for n in range(int(os.environ.get("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "4")))
        )
        record.msg = "the MLflow tracking server did not answer a request (%s); retrying for up to %.0f s"
        args = record.args if isinstance(record.args, tuple) else ()
        record.args = (mask(" ".join(str(args[-1] if args else "").split()))[:200], seconds)
        return True


#: The one [`RetryNotice`][] on urllib3's connection-pool logger.
RETRY_NOTICE = RetryNotice()


def quiet_retries() -> None:
    """Install [`RETRY_NOTICE`][] on urllib3's logger (once)."""
    pool = logging.getLogger("urllib3.connectionpool")
    if RETRY_NOTICE not in pool.filters:
        pool.addFilter(RETRY_NOTICE)


def limit_requests(uri: str, limits: Mapping[str, str] = REQUEST_LIMITS, force: bool = False) -> dict[str, str]:
    """Bound how long MLflow waits on the tracking server ``uri`` (``http(s)://`` only): ``limits`` go into this
    process's environment, which MLflow reads at every request (and the processes it starts inherit); a value the
    user set wins unless ``force``. → the values set."""
    if not uri.lower().startswith(("http://", "https://")):
        return {}
    quiet_retries()
    chosen = {name: value for name, value in limits.items() if force or name not in os.environ}
    os.environ.update(chosen)
    return chosen


def tracking_store_problem(uri: str, timeout: float = TRACKING_CHECK_TIMEOUT_S) -> str | None:
    """Why the MLflow server at ``uri`` answers but cannot read its runs (its backend store, e.g. PostgreSQL, is
    down: every request then fails with HTTP 5xx, which MLflow retries for minutes); None when it reads them, or
    ``uri`` is no server."""
    import json
    import urllib.error
    import urllib.request

    if not uri.lower().startswith(("http://", "https://")):
        return None
    url = uri.rstrip("/") + "/api/2.0/mlflow/experiments/search?max_results=1"
    try:
        with urllib.request.urlopen(url, timeout=timeout):
            return None
    except urllib.error.HTTPError as error:
        if error.code < 500:
            return None
        body = error.read().decode("utf-8", "replace")
        try:
            body = json.loads(body).get("message", body)
        except (ValueError, AttributeError):
            pass
        return f"HTTP {error.code}: {mask(' '.join(str(body).split()))[:300]}"
    except OSError:
        return None  # no answer at all: tracking_server_problem names it


def tracking_server_problem(uri: str, timeout: float = TRACKING_CHECK_TIMEOUT_S) -> str | None:
    """Why the MLflow server at an ``http(s)://`` tracking ``uri`` does not answer within
    ``timeout`` seconds (name lookup included); None when it answers anything (an HTTP error
    status is an answer) or ``uri`` is not a server (SQLite, files, Databricks …)."""
    import concurrent.futures
    import urllib.error
    import urllib.request

    if not uri.lower().startswith(("http://", "https://")):
        return None

    def ask() -> None:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout):
            pass

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        pool.submit(ask).result(timeout=timeout + 1)
    except urllib.error.HTTPError:
        return None
    except concurrent.futures.TimeoutError:
        return f"no answer within {timeout:g} s"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"{type(reason).__name__}: {reason}" if not isinstance(reason, str) else reason
    finally:
        pool.shutdown(wait=False)
    return None


class RunLogger(JobRun):
    """Thin wrapper over the active MLflow run; every call is a no-op when tracking is off."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.run_id: str | None = None

    def log_params(self, params: Mapping) -> None:
        """Flattened params; floats rounded (``0.3``, not ``0.30000000000000004``), layer maps as
        ``1-6→1; none→2``."""
        if not self.enabled:
            return
        import mlflow

        items = [(mask(key), mask(format_param(value))[:6000]) for key, value in flatten(params).items()]
        for start in range(0, len(items), 100):  # MLflow's per-request limit
            mlflow.log_params(dict(items[start : start + 100]))

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Numeric metrics; model-size figures ([`SIZE_METRICS`][]) go to tags instead, since a
        one-point chart per run says nothing."""
        if not self.enabled:
            return
        import mlflow

        clean = {k.replace("@", "_"): float(v) for k, v in metrics.items() if is_number(v)}
        sizes = {k: v for k, v in clean.items() if k.rsplit("/", 1)[-1] in SIZE_METRICS}
        if sizes:
            mlflow.set_tags(size_tags({k.rsplit("/", 1)[-1]: v for k, v in sizes.items()}))
        clean = {k: v for k, v in clean.items() if k not in sizes}
        if clean:
            mlflow.log_metrics(clean, step=step)

    def set_tags(self, tags: Mapping[str, str]) -> None:
        if self.enabled:
            import mlflow

            mlflow.set_tags({mask(k): mask(str(v)) for k, v in tags.items()})

    def log_dict(self, data: Mapping, name: str) -> None:
        if self.enabled:
            import mlflow

            mlflow.log_dict(scrub(dict(data)), name)

    def log_figure(self, figure, name: str) -> None:
        if self.enabled:
            import mlflow

            mlflow.log_figure(figure, name)

    def log_artifacts(self, directory: str | Path, artifact_path: str) -> None:
        if self.enabled:
            import mlflow

            mlflow.log_artifacts(str(directory), artifact_path)


def active_run():
    """The active MLflow run of this thread, or ``None`` (none open, or MLflow not installed)."""
    try:
        import mlflow
    except ImportError:  # pragma: no cover
        return None
    return mlflow.active_run()


# ---------------------------------------------------------------- runs of killed processes
HOST_TAG, PID_TAG, STARTED_TAG = "bert_kd.host", "bert_kd.pid", "bert_kd.process_started"
ENDED_BY_TAG = "bert_kd.ended_by"


def owner_tags(pid: int | None = None) -> dict[str, str]:
    """Host, pid and start time of the process that owns a run (pid and start time together
    name one process: a pid may be reused)."""
    import psutil

    process = psutil.Process(pid)
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(process.pid), STARTED_TAG: f"{process.create_time():.2f}"}


def _process_alive(pid: str, started: str) -> bool:
    import psutil

    try:
        return f"{psutil.Process(int(pid)).create_time():.2f}" == started
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return False


def end_orphaned_runs(experiment_ids: list[str], client=None) -> list[str]:
    """End as ``KILLED`` the ``RUNNING`` runs of ``experiment_ids`` owned by a process of this host
    that no longer exists (killed with SIGKILL, or a crashed machine's restart); their ids."""
    import mlflow

    client = client or mlflow.MlflowClient()
    host = socket.gethostname().replace("'", "")
    runs = client.search_runs(experiment_ids, f"attributes.status = 'RUNNING' and tags.`{HOST_TAG}` = '{host}'")
    ended = []
    for run in runs:
        pid, started = run.data.tags.get(PID_TAG, ""), run.data.tags.get(STARTED_TAG, "")
        if _process_alive(pid, started):
            continue
        client.set_tag(run.info.run_id, ENDED_BY_TAG, f"bert-kd: its process (pid {pid} on {host}) was gone")
        client.set_terminated(run.info.run_id, "KILLED")
        ended.append(run.info.run_id)
    return ended


@contextlib.contextmanager
def tracked_run(name: str, enabled: bool = True, tags: Mapping[str, str] | None = None) -> Iterator[RunLogger]:
    """Open an MLflow run called ``name`` (nested when a run is already active).

    With ``enabled=False``, or on a process other than rank 0, yields a logger that does nothing.
    """
    if not enabled or not is_main_process():
        yield RunLogger(False)
        return
    import mlflow

    nested = mlflow.active_run() is not None
    try:
        with mlflow.start_run(run_name=name, nested=nested, tags=owner_tags()) as run:  # owned from its first moment
            logger = RunLogger(True)
            logger.run_id = run.info.run_id
            logger.set_tags({**environment_info(), **(tags or {})})
            logger.log_params({"num_processes": num_processes()})
            try:
                yield logger
            except Exception as error:
                if failed_connection(error):  # ending the run below asks once, not through its own retries
                    _stop_retrying(mlflow.get_tracking_uri())
                raise
    except Exception as error:
        down = server_down_error(mlflow.get_tracking_uri(), error)
        if down is None:
            raise
        raise down from error


def _stop_retrying(uri: str) -> None:
    """The server is down (a request's retries ran out): every later request of this process (ending the run,
    kedro-mlflow's clean-up) is tried once, for 5 s, so the block comes within seconds, not after each request's
    own retries in turn."""
    limit_requests(uri, STOPPING_LIMITS, force=True)


def create_experiment_once(uri: str, name: str, tags: Mapping[str, str] | None = None) -> None:
    """Create the experiment ``name`` unless it exists; losing the race to another process creating it at
    the same moment (the workers of a sweep) is fine."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    client = MlflowClient(tracking_uri=uri)
    if client.get_experiment_by_name(name) is not None:
        return
    try:
        client.create_experiment(name, tags=dict(tags or {}))
    except MlflowException as error:
        if error.error_code != "RESOURCE_ALREADY_EXISTS":
            raise


#: What MLflow's client says when its retries against the server ran out (refused, cut, or only 5xx answers).
CONNECTION_FAILED = ("Max retries exceeded", "Connection refused", "Connection aborted", "too many 50")


def failed_connection(error: BaseException | None) -> str | None:
    """The first line of the error in ``error``'s chain that says MLflow's requests never reached the server (the
    server may be back by the time anyone looks); None otherwise."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        text = " ".join(str(error).split())
        mlflows = type(error).__module__.startswith(("mlflow", "requests", "urllib3"))  # not the database's driver
        if mlflows and any(mark in text for mark in CONNECTION_FAILED):
            return mask(text)[:300]
        error = error.__cause__ or error.__context__
    return None


def server_down_error(uri: str, error: Exception) -> TrackingUnreachableError | None:
    """A [`TrackingUnreachableError`][] block when ``error`` came while the tracking server ``uri``
    does not answer (it went down mid-run, after MLflow's own retries); None otherwise."""
    if isinstance(error, TrackingUnreachableError) or not uri.lower().startswith(("http://", "https://")):
        return None
    shown = re.sub(r"//[^/@]*@", "//***@", uri)  # no credentials in the message
    again = (
        "and run the same command: finished jobs and trials are reused and the one cut off resumes from its checkpoint"
    )
    down = tracking_server_problem(uri, timeout=5.0)
    if down is None:
        backend = tracking_store_problem(uri, timeout=10.0)
        if backend is not None:
            _stop_retrying(uri)
            return TrackingUnreachableError(
                f"the MLflow tracking server {shown} answers, but the database it keeps its runs in (its "
                f"--backend-store-uri, e.g. PostgreSQL) does not: {backend}",
                "the tracking server's --backend-store-uri",
                "start that database again (scripts/start_postgres.sh starts the local one of docs/scaling.md; the "
                f"server itself needs no restart) {again}",
            )
    problem = down or failed_connection(error)
    if problem is None:
        return None
    _stop_retrying(uri)
    return TrackingUnreachableError(
        f"the MLflow tracking server {shown} stopped answering during the run ({problem})",
        "MLFLOW_TRACKING_URI",
        f"start the server again {again}",
    )


def tracking_enabled(tracking: Block[Tracking] | None) -> bool:
    """``tracking.enabled``: whether this run logs to MLflow."""
    return typed(Tracking, tracking, "tracking").enabled


def log_to_active_run(texts: Mapping[str, str], figures: Mapping[str, object]) -> None:
    """Attach texts and figures to the run kedro-mlflow opened for this ``kedro run``, if any."""
    try:
        import mlflow
    except ImportError:  # pragma: no cover
        return
    if mlflow.active_run() is None or not is_main_process():
        return
    for name, text in texts.items():
        mlflow.log_text(text, name)
    for name, figure in figures.items():
        mlflow.log_figure(figure, name)
