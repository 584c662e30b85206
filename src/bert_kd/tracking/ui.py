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
    """The runs-table view behind [`compare_view_url`][]: newest first,
    the columns that tell child runs apart (method, task, final dev score and its noise band, recipe,
    layer map, seed, data cap)."""
    return {
        "orderByKey": "attributes.start_time",
        "orderByAsc": False,
        "searchFilter": "",
        "selectedColumns": list(COMPARE_VIEW_COLUMNS),
    }


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
def open_ui(
    tracking_uri: str | None = None,
    experiment: str = "bert_kd",
    host: str = "127.0.0.1",
    port: int = 5000,
    serve: bool = True,
) -> str:
    """Print the runs-table URL of ``experiment`` (created and described if new) and start
    ``mlflow ui`` on the same store; returns the URL."""
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
    print(f"MLflow runs table of '{experiment}': {url}", flush=True)
    print("  (columns: method, task, final/score, final/noise_band, recipe, layer_map, seed)", flush=True)
    if serve:
        command = [
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
        ]
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
    ui.add_argument("--print-only", action="store_true", help="print the URL, do not start the server")
    args = parser.parse_args(argv)
    open_ui(args.backend_store_uri, args.experiment, args.host, args.port, serve=not args.print_only)
