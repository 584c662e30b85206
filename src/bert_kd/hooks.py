"""Project hooks: check the run's parameters before anything trains."""

from __future__ import annotations

import logging

from kedro.framework.hooks import hook_impl

log = logging.getLogger(__name__)

#: Parameter blocks whose entries are distillation recipes, and keys that the nodes consume.
RECIPE_BLOCKS = {"distill_methods": (), "ted_methods": (), "multi_teacher_configs": ("teachers",)}


class ValidateParametersHook:
    """Fail in seconds, naming the parameter, instead of after a teacher has been fine-tuned."""

    @hook_impl
    def before_pipeline_run(self, run_params, pipeline, catalog) -> None:
        from bert_kd.data.glue import get_task
        from bert_kd.distill.methods.base import check_method_config

        inputs = pipeline.inputs()
        if "params:task" in inputs:
            get_task(catalog.load("params:task"))
        for name in sorted(inputs):
            if not name.startswith("params:"):
                continue
            block, _, entry = name[len("params:"):].partition(".")
            if block in RECIPE_BLOCKS and entry:
                config = {k: v for k, v in catalog.load(name).items() if k not in RECIPE_BLOCKS[block]}
                try:
                    check_method_config(config)
                except ValueError as exc:
                    raise ValueError(f"parameter {block}.{entry}: {exc}") from exc
        for name in ("params:student", "params:ted_student", "params:multi_student"):
            if name in inputs:
                student = catalog.load(name)
                layers = student.get("num_layers")
                if not student.get("model") and (not isinstance(layers, int) or layers < 1):
                    raise ValueError(f"parameter {name[7:]}.num_layers must be an integer >= 1, got {layers!r}")
        if "params:multi_teachers" in inputs and not catalog.load("params:multi_teachers"):
            raise ValueError("parameter multi_teachers is empty: list at least one teacher")
