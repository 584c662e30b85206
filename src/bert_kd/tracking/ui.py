"""The MLflow UI: the experiment's description and views, parent-run names, URLs, ``python -m bert_kd.tracking ui``."""

from __future__ import annotations

import json
import os
import sys
from typing import Sequence

EXPERIMENT_DESCRIPTION = """\
**bert-kd**: knowledge distillation of BERT models on GLUE (ALP-KD, TED, multi-teacher KD).

- Each `kedro run` is a **parent run** named `<pipeline>:<task> [kedro run]`; its description holds the
  comparison table and its metrics `compare/<method>/<metric>`, `teacher/<metric>`, `best/<metric>`
  (tag `best_method`).
- Each training job is a **child run** (`distill_alp:rte`, `train_teacher:rte`, …) with the columns
  `method`, `task`, the final dev metric `final/score` and its noise band `final/noise_band` (two
  scores closer than that are one score), `recipe`, `layer_map`, `seed`, `max_train_samples`. Expand a parent (the `+` in the runs table) to see its children.
"""

EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
MAX_NOTE_CHARS = 8000  # mlflow.utils.validation.MAX_TAG_VAL_LENGTH
NOTE_TAG = "mlflow.note.content"


def ui_base_url() -> str:
    """The MLflow UI address: ``MLFLOW_UI_URL``; else the tracking server's own address when runs are on one
    (``MLFLOW_TRACKING_URI`` ``http(s)://…``, its user and password left out); else the local UI,
    ``http://127.0.0.1:5000`` (``scripts/mlflow_ui.sh`` serves a SQLite store there)."""
    from urllib.parse import urlsplit, urlunsplit

    if os.environ.get("MLFLOW_UI_URL"):
        return os.environ["MLFLOW_UI_URL"].rstrip("/")
    tracking = urlsplit(os.environ.get("MLFLOW_TRACKING_URI", ""))
    if tracking.scheme in ("http", "https") and tracking.hostname:
        host = tracking.hostname + (f":{tracking.port}" if tracking.port else "")
        return urlunsplit((tracking.scheme, host, tracking.path, "", "")).rstrip("/")
    return "http://127.0.0.1:5000"


def runs_table_url(experiment_id: str, base: str | None = None) -> str:
    """The experiment's runs table in the training view (MLflow 3 opens the GenAI view unless
    ``workflowType=machine_learning`` is in the URL or was chosen once in that browser), opened on
    the comparison view's columns ([`COMPARE_VIEW_COLUMNS`][]: method, task, the primary metric
    and its noise band first) rather than MLflow's first params and metrics."""
    return compare_view_url(experiment_id, base)


def plain_runs_url(experiment_id: str, base: str | None = None) -> str:
    """The experiment's runs table in the training view as the browser last left it (no saved view applied)."""
    return f"{base or ui_base_url()}/#/experiments/{experiment_id}/runs?workflowType=machine_learning"


def run_url(experiment_id: str, run_id: str, base: str | None = None) -> str:
    return f"{base or ui_base_url()}/#/experiments/{experiment_id}/runs/{run_id}?workflowType=machine_learning"


#: Columns of the saved comparison view, as the MLflow UI names them (``<type>.`<key>```).
COMPARE_VIEW_COLUMNS = (
    "tags.`method`",
    "tags.`task`",
    "metrics.`final/score`",
    "metrics.`final/noise_band`",
    "params.`recipe`",
    "params.`layer_map`",
    "params.`seed`",
    "params.`max_train_samples`",
    "attributes.`Dataset`",
    "tags.`parameters_M`",
    "metrics.`best/score`",
    "tags.`best_method`",
    "tags.`comparison.verdict`",
)
#: Experiment tag prefix under which the MLflow UI looks up ``?viewStateShareKey=<key>`` views.
SHARED_VIEW_TAG_PREFIX = "mlflow.sharedViewState."
COMPARE_VIEW_KEY = "bert_kd_compare"


def compare_view_state() -> dict:
    """The runs-table view behind [`compare_view_url`][]: the columns that tell runs apart (method, task, final
    dev score and its noise band, recipe, layer map, seed, data cap) in that order right after the run's name
    (``columnOrder``: MLflow otherwise groups them by type, metrics before params before tags, which put
    ``method`` and ``task`` last, off a laptop's screen); the latest finished first (``end_time``): each
    ``kedro run``'s parent, then its training jobs, every row shown. MLflow nests child runs under a collapsed
    parent only when the table is ordered by start time, and a shared view cannot say which parents to expand
    (the UI drops ``runsExpanded`` from it)."""
    return {
        "orderByKey": "metrics.`final/score`",
        "orderByAsc": False,
        "searchFilter": "",
        "selectedColumns": list(COMPARE_VIEW_COLUMNS),
        "columnOrder": list(COMPARE_VIEW_COLUMNS),
    }


#: The charts view's key: the dev score of every run first, then the loss and dev curves.
CHARTS_VIEW_KEY = "bert_kd_charts"
#: The charts view's first section.
CHARTS_SECTION = "bert_kd_scores"
#: The charts of that section: the dev score as a bar per run, then the loss and the dev accuracy over the steps.
FIRST_CHARTS = (("BAR", "final/score"), ("LINE", "train/loss"), ("LINE", "eval/accuracy"))


def charts_view_state() -> dict:
    """The runs' charts view behind [`charts_view_url`][]: the comparison view's table and, first on the charts
    page, the dev score of each run as a bar ([`FIRST_CHARTS`][]) and the training loss and dev curves, in a
    section of their own above MLflow's per-prefix sections (which otherwise open on a dozen single-value bars,
    ``grad_share/…`` and ``time/…``, before any curve); a chart of a metric no run has is hidden."""
    charts = [
        {
            "uuid": f"bert_kd_{index}",
            "type": kind,
            "metricKey": key,
            "selectedMetricKeys": [key],
            "metricSectionId": CHARTS_SECTION,
            "runsCountToCompare": 10,
            "deleted": False,
            "isGenerated": False,
            **({"xAxisKey": "step", "lineSmoothness": 0, "scaleType": "linear"} if kind == "LINE" else {}),
        }
        for index, (kind, key) in enumerate(FIRST_CHARTS)
    ]
    section = {"uuid": CHARTS_SECTION, "name": "Dev score and curves", "display": True, "isReordered": True}
    return {
        **compare_view_state(),
        "compareRunCharts": charts,
        "compareRunSections": [{**section, "deleted": False, "isGenerated": False}],
        "isAccordionReordered": True,
        "hideEmptyCharts": True,
    }


def charts_view_url(experiment_id: str, base: str | None = None) -> str:
    """The runs' charts page opened on the dev score ([`charts_view_state`][]): the link to compare runs."""
    return (
        f"{base or ui_base_url()}/#/experiments/{experiment_id}/runs"
        f"?viewStateShareKey={CHARTS_VIEW_KEY}&compareRunsMode=CHART&workflowType=machine_learning"
    )


def compare_view_url(experiment_id: str, base: str | None = None) -> str:
    """The runs table opened on the saved comparison view (MLflow 3 shared-view link)."""
    return (
        f"{base or ui_base_url()}/#/experiments/{experiment_id}/runs"
        f"?viewStateShareKey={COMPARE_VIEW_KEY}&workflowType=machine_learning"
    )


def describe_experiment(experiment_id: str, client=None) -> None:
    """Set the experiment's description, mark it a machine-learning (not GenAI) experiment
    (``mlflow.experimentKind``, what the UI's own kind selector writes) and store the comparison
    view ([`compare_view_state`][])."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    client = client or MlflowClient()
    wanted = {
        NOTE_TAG: EXPERIMENT_DESCRIPTION,
        EXPERIMENT_KIND_TAG: "custom_model_development",
        SHARED_VIEW_TAG_PREFIX + COMPARE_VIEW_KEY: json.dumps(compare_view_state()),
        SHARED_VIEW_TAG_PREFIX + CHARTS_VIEW_KEY: json.dumps(charts_view_state()),
    }
    present = client.get_experiment(experiment_id).tags
    for key, value in wanted.items():
        if present.get(key) == value:
            continue
        try:
            client.set_experiment_tag(experiment_id, key, value)
        except MlflowException:
            # two `kedro run`s starting together race to insert the same tag (SQLite UNIQUE
            # constraint): the other process has set it, which is all this needs
            if key not in client.get_experiment(experiment_id).tags:
                raise


#: Suffix that tells a ``kedro run``'s parent from its training jobs: ``kedro run --pipelines
#: distill_alp`` has a parent and a child that would both be ``distill_alp:rte``.
PARENT_SUFFIX = " [kedro run]"


def parent_run_name(pipeline: str, task: str | None, sweep: str | None = None) -> str:
    """``distill_baselines:sst2 [kedro run]``, or ``reproduce:cpu_protocol [kedro run]`` for a
    sweep over tasks."""
    name = pipeline or "__default__"
    if sweep:
        name += f":{sweep}"
    if task and not sweep:
        name += f":{task}"
    return name + PARENT_SUFFIX


def name_parent_run(pipeline: str, task: str | None, sweep: str | None = None, run_id: str | None = None) -> str | None:
    """Rename the active (or given) run ``<pipeline>:<task> [kedro run]``; tag pipeline/task/sweep."""
    import mlflow

    run_id = run_id or (mlflow.active_run().info.run_id if mlflow.active_run() else None)
    if run_id is None:
        return None
    name = parent_run_name(pipeline, task, sweep)
    tags = {"mlflow.runName": name, "pipeline": pipeline, "role": "parent"}
    if task:
        tags["task"] = task
    if sweep:
        tags["sweep"] = sweep
    client = mlflow.tracking.MlflowClient()
    for key, value in tags.items():
        client.set_tag(run_id, key, value)
    return name


# ---------------------------------------------------------------- `python -m bert_kd.tracking ui`
#: ``mlflow ui``'s job runner (GenAI scorers and other server-side jobs, a process tree of its own) is off
#: unless this variable is set: bert-kd starts no server jobs.
JOB_EXECUTION_ENV = "MLFLOW_SERVER_ENABLE_JOB_EXECUTION"


def lean_workers(cores: int | None = None) -> int:
    """The UI's web workers: one on a machine of up to 4 cores, else two. One person browsing needs no more;
    MLflow's default (4 workers and its job runner: 15 processes, about 3.7 GB on the 2-core machine) takes
    memory and cores a training run wants."""
    cores = cores or os.cpu_count() or 1
    return 1 if cores <= 4 else 2


def ui_command(tracking_uri: str, host: str, port: int, workers: int | None = None) -> list[str]:
    """``mlflow ui`` on ``tracking_uri`` with [`lean_workers`][] (or ``workers``)."""
    return [
        sys.executable,
        "-m",
        "mlflow",
        "ui",
        "--backend-store-uri",
        tracking_uri,
        "--host",
        host,
        "--port",
        str(port),
        "--workers",
        str(workers or lean_workers()),
    ]


def open_ui(
    tracking_uri: str | None = None,
    experiment: str = "bert_kd",
    host: str = "127.0.0.1",
    port: int = 5000,
    serve: bool = True,
    workers: int | None = None,
) -> str:
    """Print the links to ``experiment``'s runs (created and described if new): the comparison view (score,
    method and task first), the charts view (the dev score first) and the plain runs table; start ``mlflow ui`` on the same store, lean
    ([`ui_command`][]: [`lean_workers`][] web workers, no job runner); returns the comparison view's URL."""
    import mlflow
    from mlflow.tracking import MlflowClient

    tracking_uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or "sqlite:///mlflow.db"
    client = MlflowClient(tracking_uri)
    found = client.get_experiment_by_name(experiment)
    experiment_id = found.experiment_id if found else client.create_experiment(experiment)
    mlflow.set_tracking_uri(tracking_uri)
    describe_experiment(experiment_id, client)
    base = f"http://{host}:{port}"
    url = runs_table_url(experiment_id, base)
    print(f"MLflow runs of '{experiment}', the comparison view: {url}", flush=True)
    print(
        "  (columns: method, task, final/score, final/noise_band, recipe, layer_map, seed; the latest finished first)"
    )
    print(f"The runs' charts, the dev score first: {charts_view_url(experiment_id, base)}")
    print(f"The plain runs table (the columns as this browser left them): {plain_runs_url(experiment_id, base)}")
    if serve:
        command = ui_command(tracking_uri, host, port, workers)
        os.environ.setdefault(JOB_EXECUTION_ENV, "false")
        print(
            f"Starting the MLflow UI with {command[-1]} web worker(s), no job runner ({' '.join(command[2:])})",
            flush=True,
        )
        os.execvp(command[0], command)
    return url


def main(argv: Sequence[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bert_kd.tracking", description=open_ui.__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    ui = sub.add_parser("ui", help="print the runs-table URL and start `mlflow ui`")
    ui.add_argument("--backend-store-uri", default=None, help="default: $MLFLOW_TRACKING_URI or sqlite:///mlflow.db")
    ui.add_argument("--experiment", default="bert_kd")
    ui.add_argument("--host", default="127.0.0.1")
    ui.add_argument("--port", type=int, default=5000)
    ui.add_argument("--workers", type=int, default=None, help="web workers (default: 1 on up to 4 cores, else 2)")
    ui.add_argument("--print-only", action="store_true", help="print the links, do not start the server")
    args = parser.parse_args(argv)
    open_ui(args.backend_store_uri, args.experiment, args.host, args.port, not args.print_only, args.workers)
