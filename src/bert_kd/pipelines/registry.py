"""The project's pipelines composed from a parameter tree: the blocks in ``pipelines/`` put together into the
commands users run (``distill_<row>``, TED, multi-teacher, the transfer-set and general-distillation ones).

[`bert_kd.pipeline_registry`][] hands Kedro these for the configured parameters (adding the sweep's ``reproduce``
pipeline); a sweep trial ([`bert_kd.sweeps.trial`][]) runs one of them for its own parameters, so a trial and
``kedro run --pipelines=<name>`` run one composition.
"""

from __future__ import annotations

from typing import Mapping

from kedro.pipeline import Pipeline

from bert_kd.pipelines import (
    augment_glue,
    data_processing,
    distill,
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


def teacher_count(parameters: Mapping) -> int:
    """``len(multi_teachers)`` of ``parameters``: one ``train_teacher`` block each."""
    return len(parameters.get("multi_teachers") or []) or DEFAULT_TEACHER_COUNT


def recipe_rows(parameters: Mapping, block: str = "distill_methods") -> dict:
    """The recipe rows of ``block`` (``distill_methods``, ``ted_methods``): one ``distill_<row>`` pipeline each."""
    return dict(parameters.get(block) or {})


def compose(parameters: Mapping) -> dict[str, Pipeline]:
    """Every pipeline the parameters make: ``train_teacher``, ``distill_<row>`` (one per row of
    ``distill_methods`` and ``ted_methods``), ``distill_baselines``, ``distill_multi_teacher``, the transfer-set
    pipelines, ``distill_general``, ``tinybert_general``, ``all`` (without the transfer set's) and ``__default__``
    (``distill_alp``)."""
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
    count = teacher_count(parameters)
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
    pipelines["predict_glue"] = predict_glue.create_pipeline()  # not in all: needs a model
    return pipelines
