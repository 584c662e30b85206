"""MLflow tracking: one run per training job, nested under the ``kedro run`` when kedro-mlflow
opened one, so every method of a comparison pipeline gets its own comparable run.

What a user sees in the MLflow UI is decided here (Kedro-free):

- the experiment: a description and the "machine learning" kind ([`describe_experiment`][]),
  and the URL of its runs table ([`runs_table_url`][], ``python -m bert_kd.tracking ui``);
- the parent run of a ``kedro run``: named ``<pipeline>:<task> [kedro run]`` ([`name_parent_run`][]), with
  the comparison table as its description and ``compare/<method>/<metric>`` metrics
  ([`log_comparison_to_parent`][]);
- each training job's child run: a short recipe, the layer map as ``1-6→1``, rounded weights, the
  data source and sample caps, the dataset as an MLflow input, model size as tags
  ([`log_training_job`][]).

The package, by concern: [`runs`][] (open, log to and clean up runs; the machine, versions
and git commit they are tagged with come from the MLflow-free [`bert_kd.experiment.provenance`][]), [`format`][] (values as the UI shows them), [`data`][] (a
training job's data and recipe columns), [`ui`][] (experiment, parent run, URLs, the CLI),
[`comparison`][] (a comparison table on the parent run), [`evaluation`][] (an evaluation's
metrics on its model's run), [`jobs`][] (the job path's [`JobTracker`][experiment.tracker.JobTracker]:
one run per job, reused models linked to the run that trained them); [`kedro_run`][] (what report nodes show on the
``kedro run``'s run: [`KedroRunReporter`][experiment.tracker.KedroRunReporter]), [`model_sources`][]
(``models:/`` and ``runs:/`` URIs to local directories: [`ModelSources`][experiment.tracker.ModelSources]); [`distill`][] (what distillation runs record) imports the models
and is imported by its own name. Every name is re-exported here.
"""

from bert_kd.experiment.provenance import (
    NOT_A_CHECKOUT,
    environment_info,
    git_commit_label,
    git_provenance,
    project_root,
)
from bert_kd.experiment.tracker import install_tracking
from bert_kd.tracking.comparison import FLOOR_METHOD, log_comparison_to_parent, row_label
from bert_kd.tracking.data import (
    DEFAULT_GLUE_DIR,
    HUB_GLUE,
    data_params,
    data_source,
    glue_dataset,
    log_input_once,
    log_training_job,
)
from bert_kd.tracking.evaluation import flat_eval_metrics, log_evaluation
from bert_kd.tracking.format import (
    SIZE_METRICS,
    flatten,
    format_number,
    format_param,
    is_layer_map,
    is_number,
    layer_map_string,
    metric_key,
    recipe_string,
    size_tags,
    weight_params,
)
from bert_kd.tracking.jobs import MlflowTracker
from bert_kd.tracking.runs import (
    ENDED_BY_TAG,
    HOST_TAG,
    PID_TAG,
    STARTED_TAG,
    TRACKING_CHECK_TIMEOUT_S,
    RunLogger,
    active_run,
    end_orphaned_runs,
    is_main_process,
    limit_requests,
    log_to_active_run,
    num_processes,
    owner_tags,
    tracked_run,
    tracking_enabled,
    tracking_server_problem,
    tracking_store_problem,
)
from bert_kd.tracking.ui import (
    COMPARE_VIEW_COLUMNS,
    COMPARE_VIEW_KEY,
    EXPERIMENT_DESCRIPTION,
    EXPERIMENT_KIND_TAG,
    MAX_NOTE_CHARS,
    NOTE_TAG,
    PARENT_SUFFIX,
    SHARED_VIEW_TAG_PREFIX,
    compare_view_state,
    compare_view_url,
    describe_experiment,
    main,
    name_parent_run,
    open_ui,
    parent_run_name,
    run_url,
    runs_table_url,
    ui_base_url,
)


def use_mlflow() -> None:
    """Make MLflow this program's tracker ([`bert_kd.experiment.tracker.install_tracking`][]): the job
    runs, the ``kedro run``'s reports, model URIs. Called where a program starts (Kedro's ``settings.py``);
    loads no MLflow itself."""
    from bert_kd.tracking.kedro_run import MlflowKedroRun
    from bert_kd.tracking.model_sources import MlflowModelSources

    install_tracking(MlflowTracker, MlflowKedroRun, MlflowModelSources)


__all__ = [
    "MlflowTracker",
    "use_mlflow",
    "COMPARE_VIEW_COLUMNS",
    "COMPARE_VIEW_KEY",
    "DEFAULT_GLUE_DIR",
    "ENDED_BY_TAG",
    "EXPERIMENT_DESCRIPTION",
    "EXPERIMENT_KIND_TAG",
    "FLOOR_METHOD",
    "HOST_TAG",
    "HUB_GLUE",
    "MAX_NOTE_CHARS",
    "NOTE_TAG",
    "NOT_A_CHECKOUT",
    "PARENT_SUFFIX",
    "PID_TAG",
    "SHARED_VIEW_TAG_PREFIX",
    "SIZE_METRICS",
    "STARTED_TAG",
    "TRACKING_CHECK_TIMEOUT_S",
    "RunLogger",
    "active_run",
    "compare_view_state",
    "compare_view_url",
    "data_params",
    "data_source",
    "describe_experiment",
    "end_orphaned_runs",
    "environment_info",
    "flat_eval_metrics",
    "flatten",
    "format_number",
    "format_param",
    "git_commit_label",
    "git_provenance",
    "glue_dataset",
    "is_layer_map",
    "is_main_process",
    "is_number",
    "layer_map_string",
    "log_comparison_to_parent",
    "log_evaluation",
    "log_input_once",
    "log_to_active_run",
    "log_training_job",
    "main",
    "metric_key",
    "name_parent_run",
    "num_processes",
    "open_ui",
    "owner_tags",
    "parent_run_name",
    "project_root",
    "recipe_string",
    "row_label",
    "run_url",
    "runs_table_url",
    "size_tags",
    "tracked_run",
    "tracking_enabled",
    "limit_requests",
    "tracking_server_problem",
    "tracking_store_problem",
    "ui_base_url",
    "weight_params",
]
