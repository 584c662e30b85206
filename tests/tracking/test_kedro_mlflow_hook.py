"""The batched kedro-mlflow hook logs what the plugin's hook logs, in a few requests instead of one per parameter."""

from __future__ import annotations

import pytest

from tests.conftest import migrated_mlflow_db

LONG = "x" * 7000  # over MLflow's parameter length limit: the configured strategy (a tag) applies


def node_inputs() -> dict:
    """A node's inputs as Kedro hands them: two parameter blocks (205 leaves, one too long) and a dataset."""
    return {
        "params:reproduce": {"tables": {f"t{i}": {"seed": i, "paper": f"row {i}"} for i in range(100)}, "note": LONG},
        "parameters": {"task": "rte", "student": {"layers": [1, 2], "training": {"epochs": 3}}, "batch size": 8},
        "train_rows": object(),
    }


def logged_by(hook, monkeypatch) -> tuple[dict, dict, dict]:
    """What ``hook.before_node_run`` logged to a new run: its params, its tags, and the fluent calls it made."""
    import mlflow

    calls = {"log_param": 0, "log_params": 0}
    for name in calls:
        original = getattr(mlflow, name)

        def counted(*args, _name=name, _original=original, **kwargs):
            calls[_name] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(mlflow, name, counted)
    hook.flatten, hook.recursive, hook.sep, hook.long_params_strategy = True, True, ".", "tag"
    with mlflow.start_run() as run:
        hook.before_node_run(node=None, catalog=None, inputs=node_inputs(), is_async=False)
    monkeypatch.undo()
    data = mlflow.MlflowClient().get_run(run.info.run_id).data
    return data.params, {k: v for k, v in data.tags.items() if not k.startswith("mlflow.")}, calls


@pytest.fixture()
def tracking_store(tmp_path):
    import mlflow

    mlflow.set_tracking_uri(migrated_mlflow_db(tmp_path / "mlflow.db"))
    mlflow.set_experiment(experiment_id=mlflow.create_experiment("hooks", artifact_location=str(tmp_path / "art")))


def test_a_nodes_parameters_are_logged_as_the_plugin_logs_them_in_batches_of_a_hundred(tracking_store, monkeypatch):
    from kedro_mlflow.framework.hooks.mlflow_hook import MlflowHook

    from bert_kd.tracking.kedro_mlflow_hook import BatchedParamsMlflowHook

    plugin_params, plugin_tags, plugin_calls = logged_by(MlflowHook(), monkeypatch)
    params, tags, calls = logged_by(BatchedParamsMlflowHook(), monkeypatch)
    assert len(params) == 204 and params == plugin_params  # same names, same values
    assert params["reproduce.tables.t7.paper"] == "row 7" and params["parameters.student.layers"] == "[1, 2]"
    assert tags == plugin_tags == {"reproduce.note": LONG}  # the long value: the configured strategy, as before
    assert plugin_calls == {"log_param": 204, "log_params": 0}
    assert calls == {"log_param": 0, "log_params": 3}  # 204 parameters: three requests


def test_a_kedro_session_has_the_batched_hook_in_place_of_the_plugins():
    """Kedro's hook manager as a session builds it (settings' hooks, then the plugins' entry points)."""
    from kedro.framework.hooks.manager import _create_hook_manager, _register_hooks, _register_hooks_entry_points
    from kedro_mlflow.framework.hooks.mlflow_hook import MlflowHook

    from bert_kd import settings
    from bert_kd.tracking.kedro_mlflow_hook import BatchedParamsMlflowHook

    manager = _create_hook_manager()
    _register_hooks(manager, settings.HOOKS)
    _register_hooks_entry_points(manager, settings.DISABLE_HOOKS_FOR_PLUGINS)
    mlflow_hooks = [plugin for plugin in manager.get_plugins() if isinstance(plugin, MlflowHook)]
    assert [type(hook) for hook in mlflow_hooks] == [BatchedParamsMlflowHook]  # the plugin's own is not registered
    assert isinstance(settings.HOOKS[-1], BatchedParamsMlflowHook)  # registered last: it runs first, as the plugin's
