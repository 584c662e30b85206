"""A real, temporary SQLite MLflow store for the tracking tests of one module."""

from types import SimpleNamespace

import pytest

from tests.conftest import migrated_mlflow_db


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    import mlflow

    uri = migrated_mlflow_db(tmp_path_factory.mktemp("mlflow") / "mlflow.db")
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    experiment_id = mlflow.set_experiment("bert_kd_test").experiment_id
    yield SimpleNamespace(uri=uri, experiment_id=experiment_id, client=mlflow.tracking.MlflowClient(uri))
    mlflow.set_tracking_uri(previous)
