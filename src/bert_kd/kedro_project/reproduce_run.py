"""The ``reproduce`` node's one computed input: the run's parameters, handed over as a dataset.

kedro-mlflow logs every ``params:`` input of a node (and all of ``parameters``, flattened): a node that read the
whole parameter tree logged about 1,240 parameters, one request each. The ``reproduce`` node reads
``params:reproduce`` and one [`ReproduceRun`][], made here
once per run, so the plugin's own hook logs ``reproduce.*`` only.
"""

from __future__ import annotations

import copy

from kedro.framework.hooks import hook_impl

from bert_kd.sweeps.reproduce_pipeline.nodes import REPRODUCE_RUN, ReproduceRun


class ReproduceRunHook:
    """Save the run's [`ReproduceRun`][] when the pipeline
    reads it: the parameters as the catalog holds them once every other hook has checked them (``trylast``),
    the same without the run's ``--params`` (the context's loader with no runtime params), and the ``--params``."""

    def __init__(self):
        self._loader = None

    @hook_impl
    def after_context_created(self, context) -> None:
        self._loader = context.config_loader

    @hook_impl(trylast=True)
    def before_pipeline_run(self, run_params, pipeline, catalog) -> None:
        if REPRODUCE_RUN in pipeline.inputs():
            run = ReproduceRun(
                parameters=catalog.load("parameters"),
                conf_params=conf_parameters(self._loader),
                cli_params=dict(run_params.get("runtime_params") or {}),
            )
            catalog.save(REPRODUCE_RUN, run)


def conf_parameters(loader) -> dict | None:
    """``loader["parameters"]`` without its runtime params (the same conf folders and environment); None
    without a loader."""
    if loader is None:
        return None
    plain = copy.copy(loader)
    plain.runtime_params = {}
    return plain["parameters"]
