"""bert_kd.tracking.data: a training job's data, recipe and dataset input on its child run."""

from types import SimpleNamespace

import pytest

from bert_kd.tracking.data import data_params, data_source, glue_dataset, log_input_once, log_training_job
from bert_kd.tracking.runs import tracked_run


def test_child_run_has_recipe_layer_map_rounded_weights_data_and_dataset_input(store, tmp_path):
    method = SimpleNamespace(
        name="alp",
        weights={"ce": 1 - 0.5 - 0.2, "kd": 0.5, "layer": 0.2},
        temperature=5.0,
        mapping=[[1, 2, 3, 4, 5, 6], []],
    )
    with tracked_run("distill_alp:sst2") as run:
        log_training_job(
            run,
            task="sst2",
            seed=42,
            glue_dir=tmp_path,
            max_train_samples=512,
            max_eval_samples=None,
            method=method,
            dataset_digest="abc123",
            n_train=512,
            model_parameters=15_600_000,
        )
        run.log_metrics({"final/score": 0.56, "final/parameters": 15_600_000, "final/size_on_disk_bytes": 62.5e6})
    logged = store.client.get_run(run.run_id)
    params, tags = logged.data.params, logged.data.tags
    assert params["recipe"] == "ce 0.3 + kd 0.5 + layer 0.2, T=5"
    assert params["weights.ce"] == "0.3" and params["temperature"] == "5"
    assert params["layer_map"] == "1-6→1; none→2"
    assert params["max_train_samples"] == "512" and params["max_eval_samples"] == "all"
    assert params["data.source"] == str(tmp_path.resolve())
    assert tags["parameters_M"] == "15.60" and tags["size_MB"] == "62.5" and tags["method"] == "alp"
    assert "final/parameters" not in logged.data.metrics and logged.data.metrics["final/score"] == 0.56
    inputs = logged.inputs.dataset_inputs
    assert [d.dataset.name for d in inputs] == ["glue-sst2-train-512"]
    assert inputs[0].dataset.digest == "abc123"


def test_hub_data_source_is_named():
    assert data_source(None).startswith("hub:nyu-mll/glue")
    assert data_params("data/01_raw/glue", None, 100)["max_eval_samples"] == "100"


def test_child_run_of_a_table_row_is_named_by_the_row(store):
    """``alp_no`` runs the ``alp`` method: the compare view shows the row, the algorithm beside it."""
    method = SimpleNamespace(
        name="alp", weights={"ce": 0.3, "kd": 0.5, "layer": 0.2}, temperature=5.0, mapping=[[1, 2], [3, 4]]
    )
    with tracked_run("distill_alp_no:rte") as run:
        log_training_job(run, task="rte", seed=1, method=method, name="alp_no")
    logged = store.client.get_run(run.run_id)
    assert (logged.data.params["method"], logged.data.params["algorithm"]) == ("alp_no", "alp")
    assert logged.data.tags["method"] == "alp_no"


def test_logging_a_dataset_input_tolerates_another_process_inserting_it_first(store, tmp_path, monkeypatch):
    import mlflow
    from mlflow.exceptions import MlflowException

    real_log_input, calls = mlflow.log_input, []

    def racing_log_input(dataset, context=None):
        """The other `kedro run` inserts the same data set row between MLflow's lookup and insert."""
        calls.append(dataset.name)
        if len(calls) == 1:
            raise MlflowException(
                "(sqlite3.IntegrityError) UNIQUE constraint failed: datasets.experiment_id, "
                "datasets.name, datasets.digest"
            )
        return real_log_input(dataset, context=context)

    monkeypatch.setattr(mlflow, "log_input", racing_log_input)
    dataset = glue_dataset("rte", tmp_path, "d1g35t", "train", 48)
    with tracked_run("train_teacher:rte") as run:
        log_input_once(dataset, context="training")
    assert calls == ["glue-rte-train-48"] * 2
    assert [d.dataset.name for d in store.client.get_run(run.run_id).inputs.dataset_inputs] == ["glue-rte-train-48"]

    def broken_log_input(dataset, context=None):
        raise MlflowException("database is read-only")

    monkeypatch.setattr(mlflow, "log_input", broken_log_input)
    with tracked_run("train_teacher:rte"), pytest.raises(MlflowException, match="read-only"):
        log_input_once(dataset, context="training")
