"""An evaluation's results on MLflow: flat ``final/…`` metrics and ``evaluation.json`` on the
model's run, added to that finished run without reopening it (its end time stays its job's), the
metrics linked to the run's LoggedModel and to the dev split they were measured on."""

from __future__ import annotations

import logging
from typing import Mapping

import numpy as np

from bert_kd.config.schema import Block, Tracking
from bert_kd.core.reports.verdict import noise_tolerance
from bert_kd.experiment.floor import floor_of
from bert_kd.experiment.tracker import tracker_for
from bert_kd.tracking.format import metric_value

log = logging.getLogger(__name__)

#: Metric of a model's run: the seconds its evaluation on every dev split took.
EVALUATION_SECONDS = "time/evaluation_seconds"
#: Metric of a model's run: the noise band of its dev score, ``0.5 / √n`` ([`noise_tolerance`][]).
NOISE_BAND = "final/noise_band"
#: Metrics of a model's run: its task's majority-class share on the same dev rows, the score minus it, and
#: the dev rows cut at the max length ([`bert_kd.experiment.floor`][]).
MAJORITY_CLASS, OVER_MAJORITY, INPUT_CUT_ROWS = (
    "final/majority_class",
    "final/over_majority_class",
    "final/input_cut_rows",
)
#: Tag of a model's run: ``above`` its task's majority class, or the warning at or below it.
FLOOR_TAG = "floor"


def flat_eval_metrics(evaluation: Mapping) -> dict[str, float]:
    """``{"final/validation/accuracy": …, "final/parameters": …, "final/noise_band": …,
    "time/evaluation_seconds": …}`` for MLflow, the scores to four significant digits ([`metric_value`][])."""
    flat = {}
    for split, metrics in evaluation["metrics"].items():
        for name, value in metrics.items():
            if value is not None and np.isfinite(value):
                flat[f"final/{split}/{name}"] = metric_value(value)
    for key in ("score", "parameters", "encoder_parameters", "size_on_disk_bytes", "throughput_examples_per_s"):
        flat[f"final/{key}"] = evaluation[key] if evaluation[key] is None else metric_value(evaluation[key])
    if evaluation.get("evaluation_seconds") is not None:
        flat[EVALUATION_SECONDS] = evaluation["evaluation_seconds"]
    if evaluation.get("score_examples"):  # ± of one dev-set run: scores closer than this are one score
        flat[NOISE_BAND] = round(noise_tolerance(evaluation["score_examples"]), 4)
    floor = floor_of(evaluation)
    if floor is not None and floor.majority is not None:
        flat[MAJORITY_CLASS], flat[OVER_MAJORITY] = metric_value(floor.majority), round(floor.margin, 4)
    if floor is not None and (floor.cut.get(floor.split) or {}).get("cut") is not None:
        flat[INPUT_CUT_ROWS] = int(floor.cut[floor.split]["cut"])
    return flat


def floor_tag(evaluation: Mapping) -> dict[str, str]:
    """``{"floor": "above"}``, or the warning of a score at or below its majority class; ``{}`` without one."""
    floor = floor_of(evaluation)
    if floor is None or floor.majority is None:
        return {}
    return {FLOOR_TAG: floor.standing() if floor.at_or_below else "above"}


def evaluation_dataset(run, task: str | None, split: str | None):
    """The dev split an evaluation read, as an MLflow dataset from the same source as the run's
    training input (None when the run logged none)."""
    from mlflow.data.meta_dataset import MetaDataset

    for item in run.inputs.dataset_inputs:
        if any(t.key == "mlflow.data.context" and t.value == "training" for t in item.tags):
            source = item.dataset
            from mlflow.data.dataset_source_registry import get_dataset_source_from_json

            name = f"glue-{task}-{split}" if task and split else f"{source.name}-eval"
            return MetaDataset(source=get_dataset_source_from_json(source.source, source.source_type), name=name)
    return None


def log_evaluation_to_run(evaluation: Mapping, run_id: str | None) -> None:
    """``evaluation``'s flat metrics and ``evaluation.json`` on the finished run ``run_id`` (no
    reopening: the run's status and end time stay), linked to its LoggedModel(s) and dev split."""
    if not run_id:
        return
    import mlflow
    from mlflow.exceptions import MlflowException

    client = mlflow.MlflowClient()
    try:
        run = client.get_run(run_id)
    except MlflowException:
        log.warning(
            "MLflow run %s of this model is not in the tracking store %s: its evaluation is not logged there",
            run_id,
            mlflow.get_tracking_uri(),
        )
        return
    splits = list(evaluation.get("metrics") or {})
    split = "validation_matched" if "validation_matched" in splits else (splits[0] if splits else None)
    try:
        dataset = evaluation_dataset(run, evaluation.get("task"), split)
    except Exception as exc:  # noqa: BLE001 - a source MLflow cannot read back: the metrics still go in
        log.debug("no evaluation dataset for run %s: %s", run_id, exc)
        dataset = None
    mlflow.log_metrics(flat_eval_metrics(evaluation), run_id=run_id, dataset=dataset, synchronous=True)
    for key, value in floor_tag(evaluation).items():
        client.set_tag(run_id, key, value)
    client.log_dict(run_id, dict(evaluation), "evaluation.json")
    log_score_to_parent(evaluation, run)


#: The ``kedro run``'s own metric for each model it evaluated: ``score/<method>`` (``score/teacher``, ``score/alp``),
#: the model's primary dev metric, so that the parent run the terminal links to shows every score.
PARENT_SCORE_PREFIX = "score/"


def log_score_to_parent(evaluation: Mapping, run) -> None:
    """``evaluation``'s score on the active run (the ``kedro run``'s parent) as ``score/<method>``, the method
    read from the model's run ``run`` (its ``method`` tag; a teacher's is ``teacher``); nothing without an
    active run other than ``run``, or without a score."""
    import mlflow

    from bert_kd.tracking.format import metric_key
    from bert_kd.tracking.runs import is_main_process

    active = mlflow.active_run()
    score = evaluation.get("score")
    if active is None or active.info.run_id == run.info.run_id or score is None or not is_main_process():
        return
    method = run.data.tags.get("method") or run.data.params.get("method") or "model"
    mlflow.log_metric(f"{PARENT_SCORE_PREFIX}{metric_key(method)}", metric_value(score), run_id=active.info.run_id)


def log_evaluation(evaluation: dict, run_id: str | None, tracking: Block[Tracking] | None) -> None:
    """``evaluation``'s flat metrics and ``evaluation.json`` on the model's run ``run_id``."""
    tracker_for(tracking).log_evaluation(run_id, evaluation)
