"""Kedro hook: give kedro-mlflow's parent run a name that says what ran (``distill_alp:rte``)."""

from __future__ import annotations

import logging

from kedro.framework.hooks import hook_impl

from bert_kd import tracking

log = logging.getLogger(__name__)


def _param(catalog, name: str):
    try:
        return catalog.load(f"params:{name}")
    except Exception:  # the pipeline does not read this parameter
        return None


def _reads_param(pipeline, name: str) -> bool:
    """Whether ``pipeline`` takes ``params:<name>`` or one of its keys as an input (conf/base
    defines ``reproduce.table`` for every run; only a sweep's parent is named after it)."""
    try:
        inputs = pipeline.inputs()
    except AttributeError:  # not a Kedro pipeline
        return False
    return any(i == f"params:{name}" or i.startswith(f"params:{name}.") for i in inputs)


class ParentRunHook:
    """After kedro-mlflow opened the run of this ``kedro run`` (plugin hooks run before project
    hooks), rename it ``<pipeline>:<task> [kedro run]`` (``:<sweep>`` with ``reproduce.table``) and describe
    the experiment."""

    @hook_impl
    def before_pipeline_run(self, run_params, pipeline, catalog) -> None:
        active = tracking.active_run()
        if active is None:
            return
        names = run_params.get("pipeline_names") or run_params.get("pipeline_name") or ["__default__"]
        pipeline_name = "+".join([names] if isinstance(names, str) else names)
        task = _param(catalog, "task")
        # reproduce.table has a default in conf/base: it names the sweep only for the sweep pipelines
        is_sweep = _reads_param(pipeline, "reproduce")
        reproduce = _param(catalog, "reproduce") if is_sweep else None
        sweep = reproduce.get("table") if isinstance(reproduce, dict) else None
        try:
            from bert_kd.core.data.glue import get_task

            task = get_task(task).name if task else None
        except (KeyError, ValueError):
            pass  # ValidateParametersHook reports a bad task
        name = tracking.name_parent_run(pipeline_name, task, sweep, active.info.run_id)
        tracking.describe_experiment(active.info.experiment_id)
        # no Rich markup: "[kedro run]" in the name is text, not a style tag (Kedro's RichHandler would drop it)
        url = tracking.run_url(active.info.experiment_id, active.info.run_id)
        log.info("MLflow run '%s': %s", name, url, extra={"markup": False})
