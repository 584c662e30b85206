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

from bert_kd.pipelines import evaluate
from bert_kd.pipelines.registry import compose, teacher_count
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
    return teacher_count(project_parameters() if parameters is None else parameters)


def recipe_rows(parameters: dict | None = None, block: str = "distill_methods") -> dict:
    """The recipe rows of ``block`` (``distill_methods`` in ``parameters_distill.yml``, ``ted_methods``
    in ``parameters_ted.yml``): one ``distill_<row>`` pipeline each."""
    parameters = project_parameters() if parameters is None else parameters
    return dict(parameters.get(block) or {})


def register_pipelines():
    """``train_teacher``, ``distill_<row>`` (one per row of ``distill_methods``), ``distill_baselines`` … (see README):
    the configured parameters' composition ([`bert_kd.pipelines.registry.compose`][]), and ``reproduce`` and
    ``evaluate``.

    ``__default__`` (what a bare ``kedro run`` and kedro-viz's first screen show) is the main job
    ``distill_alp``; ``all`` holds every block (about 100 nodes, unreadable as a first screen)."""
    pipelines = compose(project_parameters())
    pipelines["reproduce"], pipelines["evaluate"] = (
        reproduce_pipeline.create_pipeline(),
        evaluate.create_pipeline(),
    )  # not in all
    return pipelines
