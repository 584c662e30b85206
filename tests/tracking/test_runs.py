"""bert_kd.tracking.runs: runs opened and logged to (real temporary SQLite store)."""

from bert_kd.tracking.runs import tracked_run


def test_many_params_are_logged_in_batches(store):
    with tracked_run("many") as run:
        run.log_params({"block": {f"p{i}": i / 3 for i in range(250)}})
    params = store.client.get_run(run.run_id).data.params
    assert len([k for k in params if k.startswith("block.")]) == 250 and params["block.p1"] == "0.333333"


def test_a_tracking_server_gone_mid_run_is_one_block_without_credentials():
    import socket

    from bert_kd.config.errors import TrackingUnreachableError
    from bert_kd.tracking.runs import server_down_error

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there
    error = server_down_error(f"http://user:s3cret@127.0.0.1:{port}", ConnectionError("max retries exceeded"))
    assert isinstance(error, TrackingUnreachableError) and "stopped answering" in error.what
    assert "s3cret" not in str(error) and "run the same command" in error.fix
    assert server_down_error("sqlite:///mlflow.db", ValueError("a training error")) is None


def test_workers_starting_at_once_create_the_experiment_once(tmp_path, monkeypatch):
    import mlflow

    from bert_kd.tracking.runs import create_experiment_once

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    create_experiment_once(uri, "bert_kd", {"team": "kd"})
    # the second worker looked a moment before the first created it: its create fails, and that is fine
    monkeypatch.setattr(mlflow.MlflowClient, "get_experiment_by_name", lambda self, name: None)
    create_experiment_once(uri, "bert_kd")
    monkeypatch.undo()
    experiment = mlflow.MlflowClient(tracking_uri=uri).get_experiment_by_name("bert_kd")
    assert experiment.tags["team"] == "kd"
