"""kedro-mlflow's own hook: registered as the plugin ships it, off with tracking off, and the ``reproduce``
node hands it ``params:reproduce`` only (the rest of what the node reads is one dataset)."""

from __future__ import annotations

from tests.conftest import migrated_mlflow_db


def session_hook_manager():
    """Kedro's hook manager as a session builds it (settings' hooks, then the plugins' entry points)."""
    from kedro.framework.hooks.manager import _create_hook_manager, _register_hooks, _register_hooks_entry_points

    from bert_kd import settings

    manager = _create_hook_manager()
    _register_hooks(manager, settings.HOOKS)
    _register_hooks_entry_points(manager, getattr(settings, "DISABLE_HOOKS_FOR_PLUGINS", ()))
    return manager


def test_a_session_has_the_plugins_own_hook_and_tracking_off_removes_it():
    from kedro_mlflow.framework.hooks.mlflow_hook import MlflowHook

    from bert_kd.kedro_project.hooks import silence_kedro_mlflow

    manager = session_hook_manager()
    plugins = manager.get_plugins()
    assert [type(p) for p in plugins if isinstance(p, MlflowHook)] == [MlflowHook]
    assert silence_kedro_mlflow(manager)  # tracking.enabled: false
    assert not [p for p in manager.get_plugins() if type(p).__module__.startswith("kedro_mlflow")]


def test_the_reproduce_node_hands_kedro_mlflow_reproduce_parameters_only(tmp_path):
    """The plugin's ``before_node_run`` on the ``reproduce`` node's inputs as Kedro hands them."""
    import mlflow
    from kedro_mlflow.framework.hooks.mlflow_hook import MlflowHook

    from bert_kd.sweeps.reproduce_pipeline import create_pipeline
    from bert_kd.sweeps.reproduce_pipeline.nodes import ReproduceRun

    mlflow.set_tracking_uri(migrated_mlflow_db(tmp_path / "mlflow.db"))
    mlflow.set_experiment(experiment_id=mlflow.create_experiment("hooks", artifact_location=str(tmp_path / "art")))
    (node,) = create_pipeline().nodes
    parameters = {"reproduce": {"table": "tiny", "tasks": ["rte"]}, "teacher": {"model": "t"}, "seed": 42}
    values = {"params:reproduce": parameters["reproduce"], "reproduce_run": ReproduceRun(parameters, parameters)}
    hook = MlflowHook()
    hook.flatten, hook.recursive, hook.sep, hook.long_params_strategy = True, True, ".", "tag"
    with mlflow.start_run() as run:
        hook.before_node_run(node=node, catalog=None, inputs={n: values[n] for n in node.inputs}, is_async=False)
    logged = mlflow.MlflowClient().get_run(run.info.run_id).data.params
    assert logged == {"reproduce.table": "tiny", "reproduce.tasks": "['rte']"}
