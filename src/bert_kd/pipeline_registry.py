"""Project pipelines: the blocks in ``pipelines/`` composed into the commands users run.

The registry is explicit rather than ``find_pipelines``: ``kedro run --pipelines=X`` makes
``find_pipelines`` return only folder X, while every user command here is a composition of
several blocks (ingest → teacher → distil → evaluate).
"""

from __future__ import annotations

import logging
import os

from kedro.config import OmegaConfigLoader
from kedro.framework.project import settings
from kedro.pipeline import Pipeline

from bert_kd.pipelines import (
    augment_glue,
    data_processing,
    distill,
    evaluate,
    evaluate_teacher,
    export_student,
    general,
    multi_teacher,
    predict_glue,
    ted,
    train_teacher,
)
from bert_kd.pipelines.distill.pipeline import row_pipeline, teacher_cache_pipeline
from bert_kd.pipelines.multi_teacher.pipeline import DEFAULT_TEACHER_COUNT, configuration_pipeline, teachers_pipeline
from bert_kd.pipelines.ted.pipeline import stage_one_pipeline, ted_method_pipeline
from bert_kd.sweeps import reproduce_pipeline

log = logging.getLogger(__name__)


def project_parameters() -> dict:
    """The project's configured parameters (``conf/base`` + the run's environment), ``{}`` when there
    is no readable configuration here (e.g. imported from a notebook outside the project)."""
    try:
        loader = OmegaConfigLoader(settings.CONF_SOURCE, env=os.environ.get("KEDRO_ENV"), **settings.CONFIG_LOADER_ARGS)
        return dict(loader["parameters"])
    except Exception as exc:  # noqa: BLE001 - no project configuration here
        log.debug("parameters not readable (%s)", exc)
        return {}


def configured_teacher_count(parameters: dict | None = None) -> int:
    """``len(multi_teachers)`` in the project's configuration: one ``train_teacher`` block each."""
    parameters = project_parameters() if parameters is None else parameters
    return len(parameters.get("multi_teachers") or []) or DEFAULT_TEACHER_COUNT


def recipe_rows(parameters: dict | None = None, block: str = "distill_methods") -> dict:
    """The recipe rows of ``block`` (``distill_methods`` in ``parameters_distill.yml``, ``ted_methods``
    in ``parameters_ted.yml``): one ``distill_<row>`` pipeline each."""
    parameters = project_parameters() if parameters is None else parameters
    return dict(parameters.get(block) or {})


def register_pipelines() -> dict[str, Pipeline]:
    """``train_teacher``, ``distill_<row>`` (one per row of ``distill_methods``), ``distill_baselines`` … (see README).

    ``__default__`` (what a bare ``kedro run`` and kedro-viz's first screen show) is the main job
    ``distill_alp``; ``all`` holds every block (about 100 nodes, unreadable as a first screen)."""
    parameters = project_parameters()
    recipes = recipe_rows(parameters, "distill_methods")
    teacher = data_processing.create_pipeline() + train_teacher.create_pipeline() + evaluate_teacher.create_pipeline()
    pipelines: dict[str, Pipeline] = {"data_processing": data_processing.create_pipeline(), "train_teacher": teacher}
    for row in recipes:
        pipelines[f"distill_{row}"] = teacher + teacher_cache_pipeline() + row_pipeline(row, recipes)
    pipelines["distill_baselines"] = teacher + distill.create_pipeline(recipes)
    if "distill_alp" in pipelines:
        pipelines["export_student"] = pipelines["distill_alp"] + export_student.create_pipeline("alp")
    pipelines["train_ted_filters"] = teacher + stage_one_pipeline()
    for method in recipe_rows(parameters, "ted_methods"):
        pipelines[f"distill_{method}"] = (
            teacher + teacher_cache_pipeline() + stage_one_pipeline() + ted_method_pipeline(method)
        )
    pipelines["distill_ted_baselines"] = teacher + teacher_cache_pipeline() + ted.create_pipeline()
    ingest = data_processing.create_pipeline()
    count = configured_teacher_count(parameters)
    pipelines["distill_multi_teacher"] = ingest + teachers_pipeline(count) + configuration_pipeline("multi_teacher")
    pipelines["distill_multi_teacher_baselines"] = ingest + multi_teacher.create_pipeline(count)
    pipelines["all"] = sum(pipelines.values(), Pipeline([]))
    pipelines["distill_general"] = general.create_pipeline()
    if "tinybert" in recipes:  # TinyBERT end to end: general stage → task stage → evaluation
        pipelines["tinybert_general"] = (
            teacher + teacher_cache_pipeline() + general.create_pipeline() + general.two_stage_pipeline("tinybert")
        )
    pipelines.update(augment_glue.transfer_pipelines(teacher, recipes))  # not in all: the transfer set's own blocks
    pipelines["__default__"] = pipelines.get("distill_alp", pipelines["train_teacher"])
    pipelines["reproduce"], pipelines["evaluate"] = (
        reproduce_pipeline.create_pipeline(),
        evaluate.create_pipeline(),
    )  # not in all
    pipelines["predict_glue"] = predict_glue.create_pipeline()  # not in all: needs a model
    return pipelines
