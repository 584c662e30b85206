"""kedro-mlflow's hook with a node's parameters logged in batches.

kedro-mlflow logs each parameter a node reads with its own ``mlflow.log_param`` call: one request
to the tracking server (one SQLite transaction) per flattened parameter. The sweep node reads the
whole parameter tree and ``reproduce`` (about 1,240 parameters with conf/base), which cost a
worker 25–35 s before its first trial on the 2-core machine (2026-11-28). Here the same
parameters, with the same names and values, go in ``log_params`` batches of
[`PARAMS_PER_REQUEST`][bert_kd.tracking.kedro_mlflow_hook.PARAMS_PER_REQUEST]; a value over
MLflow's length limit still follows the configured ``long_params_strategy`` one by one.
``settings.py`` registers this hook in place of the plugin's own.
"""

from __future__ import annotations

from typing import Any

from kedro.framework.hooks import hook_impl
from kedro_mlflow.framework.hooks.mlflow_hook import MlflowHook

#: MLflow's limit of parameters in one ``log_batch`` request.
PARAMS_PER_REQUEST = 100


class BatchedParamsMlflowHook(MlflowHook):
    """kedro-mlflow's ``MlflowHook`` whose ``before_node_run`` logs the node's parameters in batches."""

    _batch: dict[str, Any] | None = None

    @hook_impl
    def before_node_run(self, node, catalog, inputs, is_async) -> None:
        self._batch = {}
        try:
            super().before_node_run(node, catalog, inputs, is_async)
            self._flush()
        finally:
            self._batch = None

    def _log_param(self, name: str, value: Any) -> None:
        from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH

        if self._batch is None or len(str(value)) > MAX_PARAM_VAL_LENGTH:
            super()._log_param(name, value)  # the configured long-params strategy
        else:
            self._batch[name] = value

    def _flush(self) -> None:
        import mlflow

        items = list((self._batch or {}).items())
        for start in range(0, len(items), PARAMS_PER_REQUEST):
            mlflow.log_params(dict(items[start : start + PARAMS_PER_REQUEST]))
