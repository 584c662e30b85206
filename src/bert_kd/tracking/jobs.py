"""The MLflow side of [`bert_kd.experiment.tracker.JobTracker`][]: one child run per job, open exactly
while the job runs; a reused model's own short run linked to the run that trained it; the stored
model logged once as a named LoggedModel; evaluations added to a finished run without reopening
it (so a run's duration is its job's)."""

from __future__ import annotations

import logging
from typing import Any, Mapping

from bert_kd.experiment.tracker import CHAMPION_ALIAS, JobTracker
from bert_kd.tracking.runs import RunLogger, tracked_run
from bert_kd.tracking.ui import NOTE_TAG, run_url

log = logging.getLogger(__name__)

#: Tags of a run whose job reused a stored model: the link to (and the id of) the run that trained it.
TRAINED_IN_TAG = "bert_kd.trained_in_run"
TRAINED_IN_ID_TAG = "bert_kd.trained_in_run_id"
REUSED_TAG = "bert_kd.reused"
#: Suffix of a reused job's run name (``distill_alp:sst2 (reused)``).
REUSED_SUFFIX = " (reused)"
#: Tags of the training run copied onto a reuse run that lacks them (the comparison view's columns).
COPIED_TAGS = ("role", "method", "task", "seed", "parameters", "parameters_M")
#: Tag of a reuse run whose row differs from the row that trained the model (``alp_po`` reusing ``alp``).
SAME_JOB_AS_TAG = "bert_kd.same_job_as"


class MlflowTracker(JobTracker):
    """[`bert_kd.experiment.tracker.JobTracker`][] on the active MLflow tracking store."""

    enabled = True

    def start_job(self, name: str, tags: Mapping[str, str] | None = None):
        return tracked_run(name, True, tags)

    def mark_reused(self, run: RunLogger, trained_in_run_id: str | None) -> bool:
        """Name ``run`` ``<name> (reused)``, link the run that trained the model and copy its params and
        the identifying tags ``run`` lacks (so the comparison view still reads recipe and seed; the
        run's own row stays in its tag and its ``method`` param, the trained method in ``algorithm``,
        and [`SAME_JOB_AS_TAG`][] names the row that trained the model);
        whether that run is in this tracking store."""
        if not run.enabled or run.run_id is None:
            return False
        from mlflow import MlflowClient
        from mlflow.exceptions import MlflowException

        client = MlflowClient()
        own = client.get_run(run.run_id)
        tags = {REUSED_TAG: "true", "mlflow.runName": own.info.run_name + REUSED_SUFFIX}
        source = None
        if trained_in_run_id:
            tags[TRAINED_IN_ID_TAG] = trained_in_run_id
            try:
                source = client.get_run(trained_in_run_id)
            except MlflowException:
                log.info("the run %s that trained this stored model is not in this tracking store", trained_in_run_id)
        if source is not None:
            link = run_url(source.info.experiment_id, trained_in_run_id)
            tags[TRAINED_IN_TAG] = link
            tags[NOTE_TAG] = (
                f"Reused the stored model trained in run [{source.info.run_name}]({link}) "
                f"(`{trained_in_run_id}`); this run only loaded it."
            )
            # the run keeps its own row (alp_po stays alp_po) and names the row whose job it repeats
            tags.update({k: v for k, v in source.data.tags.items() if k in COPIED_TAGS and k not in own.data.tags})
            trained_as, row = source.data.tags.get("method"), own.data.tags.get("method")
            if trained_as and row and trained_as != row:
                tags[SAME_JOB_AS_TAG] = trained_as
            params = {k: v for k, v in source.data.params.items() if k not in own.data.params}
            if row and "method" in params:  # the param says the row, as the tag does (alp_no, not alp)
                params["method"] = row
                params.setdefault("algorithm", source.data.params.get("algorithm") or trained_as or row)
            if params:
                run.log_params(params)
            if source.inputs.dataset_inputs:  # the data it was trained on: the run's Datasets
                from mlflow.entities import DatasetInput

                client.log_inputs(
                    run.run_id, datasets=[DatasetInput(d.dataset, d.tags) for d in source.inputs.dataset_inputs]
                )
        run.set_tags(tags)
        return source is not None

    def logged_model(self, run_id: str | None, store_key: str | None = None) -> str | None:
        from bert_kd.tracking.logged_models import find_logged_model

        return find_logged_model(run_id, store_key=store_key)

    def drop_unfinished_models(self, store_key: str) -> list[str]:
        from bert_kd.tracking.logged_models import drop_unfinished_models

        return drop_unfinished_models(store_key)

    def model_run(self, model_id: str) -> str | None:
        from mlflow import MlflowClient
        from mlflow.exceptions import MlflowException

        try:
            return MlflowClient().get_logged_model(model_id).source_run_id
        except MlflowException:
            return None

    def log_model(
        self, run: RunLogger, directory, info: Mapping[str, Any], store_key: str, regression: bool = False
    ) -> str | None:
        """The store entry as the LoggedModel ``<row>-<task>-student`` / ``teacher-<task>`` of ``run``."""
        if not run.enabled:
            return None
        from bert_kd.tracking.logged_models import log_model_directory, logged_model_name

        return log_model_directory(
            directory,
            task=info.get("task"),
            regression=regression,
            name=logged_model_name(info),
            tags={"role": info.get("role", ""), "store_key": store_key},
        )

    def run_link(self, run_id: str | None) -> str | None:
        from mlflow import MlflowClient

        from bert_kd.tracking.logged_models import run_link

        return run_link(run_id, MlflowClient())

    def log_evaluation(self, run_id: str | None, evaluation: Mapping) -> None:
        from bert_kd.tracking.evaluation import log_evaluation_to_run

        log_evaluation_to_run(evaluation, run_id)

    def describe_job(
        self, run: RunLogger, store_job, task: str, seed: int, data_source: Mapping | None, n_train: int, model
    ) -> None:
        from bert_kd.tracking.distill import log_job_columns

        log_job_columns(run, store_job, task, seed, data_source, n_train, model)

    def distillation_started(self, run: RunLogger, job, model, method, objective, settings) -> None:
        from bert_kd.tracking.distill import log_distillation_start

        log_distillation_start(run, job, model, method, objective, settings)

    def distillation_ended(self, run: RunLogger, job, method, outcome: Mapping[str, Any]) -> None:
        from bert_kd.tracking.distill import log_distillation_end

        log_distillation_end(run, job, method, outcome)

    def ted_stage_one_started(
        self, run: RunLogger, job, teacher, mapping, arch: str, route: str, config, data_source, n_train: int
    ) -> None:
        from bert_kd.tracking.distill import log_ted_stage_one_start

        log_ted_stage_one_start(run, job, teacher, mapping, arch, route, config, data_source, n_train)

    def ted_filters_scored(
        self, run: RunLogger, per_layer: Mapping[str, Mapping[str, float]], metric: str, task: str
    ) -> None:
        from bert_kd.tracking.distill import log_ted_filter_scores

        log_ted_filter_scores(run, per_layer, metric, task)

    def log_stored_filters(self, run_id: str, directory) -> None:
        """The filters as ``ted_filters`` artifacts of the finished run (not reopened)."""
        import mlflow

        mlflow.MlflowClient().log_artifacts(run_id, str(directory), "ted_filters")

    def log_onnx_model(self, onnx_path, tags: Mapping[str, str]) -> str | None:
        from bert_kd.tracking.logged_models import log_onnx_model

        return log_onnx_model(onnx_path, tags=tags)

    def champion_source(self, name: str) -> str | None:
        from bert_kd.tracking.logged_models import champion_uri

        return champion_uri(name)

    def register_best_student(
        self,
        student_info: Mapping,
        teacher_info: Mapping | None,
        name: str,
        extra_tags: Mapping[str, str],
        description: str,
        alias: str | None = CHAMPION_ALIAS,
    ) -> str | None:
        from bert_kd.tracking.logged_models import register_best_student

        version = register_best_student(
            student_info, teacher_info, name, extra_tags=extra_tags, description=description, alias=alias
        )
        return str(version.version)
