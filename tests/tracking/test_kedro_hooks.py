from types import SimpleNamespace

from kedro.pipeline import Pipeline, node

from bert_kd.tracking.kedro_hooks import ParentRunHook
from tests.conftest import migrated_mlflow_db

DISTILL = Pipeline([node(lambda task: task, "params:task", "out", name="distill")])
SWEEP = Pipeline([node(lambda table: table, "params:reproduce.table", "table", name="sweep")])


class FakeCatalog:
    def __init__(self, params):
        self.params = params

    def load(self, name):
        return self.params[name.removeprefix("params:")]


def test_parent_run_is_renamed_after_pipeline_task_and_sweep(tmp_path):
    import mlflow

    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(migrated_mlflow_db(tmp_path / "mlflow.db"))
    try:
        experiment = mlflow.set_experiment("hook_test")
        with mlflow.start_run(run_name="distill_alp") as run:  # conf/base's reproduce block is not its sweep
            ParentRunHook().before_pipeline_run(
                {"pipeline_names": ["distill_alp"]},
                DISTILL,
                FakeCatalog({"task": "SST-2", "reproduce": {"table": "cpu_protocol"}}),
            )
        with mlflow.start_run(run_name="reproduce") as sweep:
            ParentRunHook().before_pipeline_run(
                {"pipeline_name": "reproduce"},
                SWEEP,
                FakeCatalog({"task": "rte", "reproduce": {"table": "cpu_protocol"}}),
            )
        client = mlflow.tracking.MlflowClient()
        assert client.get_run(run.info.run_id).info.run_name == "distill_alp:sst2 [kedro run]"
        assert "sweep" not in client.get_run(run.info.run_id).data.tags
        assert client.get_run(sweep.info.run_id).data.tags["sweep"] == "cpu_protocol"
        assert client.get_run(sweep.info.run_id).info.run_name == "reproduce:cpu_protocol [kedro run]"
        tags = client.get_experiment(experiment.experiment_id).tags
        assert tags["mlflow.experimentKind"] == "custom_model_development"
    finally:
        mlflow.set_tracking_uri(previous)


def test_no_active_run_is_left_alone():
    ParentRunHook().before_pipeline_run({"pipeline_name": "x"}, None, SimpleNamespace())  # must not raise
