"""Project hooks: check the run's parameters before anything trains."""

from __future__ import annotations

import logging

from kedro.framework.hooks import hook_impl

log = logging.getLogger(__name__)


def used_blocks(pipeline_inputs) -> set[str]:
    """Parameter blocks a pipeline reads: ``params:distill_methods.alp`` → ``distill_methods``,
    ``distill_methods.alp``; ``params:teacher.max_seq_length`` → ``teacher`` …"""
    used: set[str] = set()
    for name in pipeline_inputs:
        if name.startswith("params:"):
            parts = name[len("params:"):].split(".")
            used.update(".".join(parts[: i + 1]) for i in range(min(len(parts), 2)))
    if "params:ted" in pipeline_inputs or any(n.startswith("params:ted_methods.") for n in pipeline_inputs):
        used.add("ted_student")
    return used


class ValidateParametersHook:
    """Validate the merged parameters (conf + ``--params``) with :mod:`bert_kd.schema` before
    any node runs (and before the other plugins' hooks, e.g. MLflow opening a run), then hand the
    nodes each recipe with its weights written out explicitly (what MLflow records)."""

    @hook_impl(tryfirst=True)
    def before_pipeline_run(self, run_params, pipeline, catalog) -> None:
        from bert_kd.schema import RECIPE_BLOCKS, cross_check, explicit_weights, validate_parameters

        parameters = catalog.load("parameters")
        typed = validate_parameters(parameters)
        inputs = pipeline.inputs()
        cross_check(typed, used_blocks(inputs))
        for name in sorted(inputs):
            block, _, entry = name[len("params:"):].partition(".")
            if name.startswith("params:") and block in RECIPE_BLOCKS and entry and "." not in entry:
                recipe = dict(catalog.load(name))
                recipe["weights"] = explicit_weights(recipe)
                catalog.save(name, recipe)
