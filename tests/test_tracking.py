"""Tracking helpers against a real (temporary) SQLite MLflow store."""

import json
from types import SimpleNamespace

import pandas as pd
import pytest

from bert_kd import tracking


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    import mlflow

    uri = f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    experiment_id = mlflow.set_experiment("bert_kd_test").experiment_id
    yield SimpleNamespace(uri=uri, experiment_id=experiment_id, client=mlflow.tracking.MlflowClient(uri))
    mlflow.set_tracking_uri(previous)


def test_layer_map_string_compresses_ranges_and_names_unconnected_layers():
    assert tracking.layer_map_string([[1, 2, 3, 4, 5, 6], []]) == "1-6→1; none→2"
    assert tracking.layer_map_string([[1, 2, 3, 4], [4, 5, 6]]) == "1-4→1; 4-6→2"
    assert tracking.layer_map_string([[3], [1, 2, 5]]) == "3→1; 1-2+5→2"
    with pytest.raises(ValueError, match="mapping"):
        tracking.layer_map_string("pkd_skip")


def test_recipe_string_rounds_weights_and_shows_temperature_only_with_a_teacher_term():
    method = SimpleNamespace(weights={"ce": 1 - 0.5 - 0.2, "kd": 0.5, "layer": 0.2}, temperature=5.0)
    assert tracking.recipe_string(method) == "ce 0.3 + kd 0.5 + layer 0.2, T=5"
    assert tracking.recipe_string({"ce": 1.0, "kd": 0.0}, temperature=5.0) == "ce 1"
    with pytest.raises(ValueError, match="all zero"):
        tracking.recipe_string({"ce": 0.0})


def test_a_staged_recipe_is_logged_by_its_stages_not_its_default_weights():
    from bert_kd.distill.objective import WeightSchedule

    terms = ("ce", "pred", "emb", "hidden", "attn")
    schedule = WeightSchedule.parse([{"fraction": 0.6, "weights": {"emb": 1, "hidden": 1, "attn": 1}},
                                     {"weights": {"pred": 1}}], terms)
    method = SimpleNamespace(weights={"ce": 1.0}, temperature=1.0, schedule=schedule)
    assert tracking.recipe_string(method) == "emb 1 + hidden 1 + attn 1 (60% of epochs) → pred 1, T=1"
    assert tracking.weight_params(method) == {"stages.0.emb": 1.0, "stages.0.hidden": 1.0, "stages.0.attn": 1.0,
                                              "stages.1.pred": 1.0}
    two_epochs = WeightSchedule.parse([{"epochs": 2, "weights": {"ce": 1}}, {"weights": {"ce": 1}}], terms)
    assert tracking.recipe_string(SimpleNamespace(weights={}, temperature=2.0, schedule=two_epochs)) == "ce 1 (2 epochs) → ce 1"
    assert tracking.weight_params(SimpleNamespace(weights={"ce": 0.5}, schedule=None)) == {"weights.ce": 0.5}


def test_format_param_and_log_every():
    assert tracking.format_param(0.1 + 0.2) == "0.3"
    assert tracking.format_param(2e-5) == "2e-05"
    assert tracking.format_param([[1, 2], []]) == "1-2→1; none→2"
    assert tracking.format_param([True, False]) == "[true, false]"
    assert tracking.adaptive_log_every(60) == 1
    assert tracking.adaptive_log_every(300) == 6
    assert tracking.adaptive_log_every(30000) == 10


def test_metric_keys_are_valid_mlflow_names():
    assert tracking.metric_key("% of teacher") == "pct_of_teacher"
    assert tracking.metric_key("throughput (ex/s)") == "throughput_ex_s"
    assert tracking.metric_key("okd[a+b]") == "okd_a_b"


def test_parent_run_gets_name_comparison_metrics_description_and_teacher_link(store, monkeypatch):
    import mlflow

    with mlflow.start_run(run_name="train_teacher:sst2") as teacher_run:
        pass
    table = pd.DataFrame(
        [
            {"method": "teacher", "task": "sst2", "accuracy": 0.9, "% of teacher": 100.0, "parameters (M)": 22.7},
            {"method": "pkd", "task": "sst2", "accuracy": 0.5525, "% of teacher": 61.4, "parameters (M)": 15.6},
            {"method": "alp", "task": "sst2", "accuracy": 0.5631, "% of teacher": 62.6, "parameters (M)": 15.6},
        ]
    )
    with mlflow.start_run(run_name="distill_baselines") as parent:
        name = tracking.name_parent_run("distill_baselines", "sst2")
        logged = tracking.log_comparison_to_parent(
            table, "accuracy", markdown="| method |\n|---|\n| alp |\n", title="distill_baselines on sst2",
            teacher_run_id=teacher_run.info.run_id,
        )
    run = store.client.get_run(parent.info.run_id)
    assert name == "distill_baselines:sst2 [kedro run]" and run.info.run_name == name
    assert run.data.metrics["compare/alp/accuracy"] == pytest.approx(0.5631)
    assert run.data.metrics["compare/pkd/pct_of_teacher"] == pytest.approx(61.4)
    assert run.data.metrics["teacher/accuracy"] == pytest.approx(0.9)
    assert run.data.metrics["best/accuracy"] == pytest.approx(0.5631)
    assert run.data.tags["best_method"] == "alp"
    assert "| alp |" in run.data.tags["mlflow.note.content"]
    assert "Best student: **alp**" in run.data.tags["mlflow.note.content"]
    assert run.data.tags["teacher_run_id"] == teacher_run.info.run_id
    assert run.data.tags["teacher_run_url"].endswith(
        f"#/experiments/{store.experiment_id}/runs/{teacher_run.info.run_id}?workflowType=machine_learning"
    )
    assert set(logged) == {k for k in run.data.metrics}


def test_sweep_parent_name_and_multi_teacher_rows():
    assert tracking.parent_run_name("reproduce", "mrpc", "cpu_protocol") == "reproduce:cpu_protocol [kedro run]"
    rows = [
        {"method": "teacher", "teachers": "a", "accuracy": 0.8},
        {"method": "teacher", "teachers": "b", "accuracy": 0.7},
        {"method": "okd", "teachers": "a+b", "accuracy": 0.75},
    ]
    metrics = tracking.log_comparison_to_parent(rows, "accuracy")  # no active run: computed only
    assert metrics == {"teacher/a/accuracy": 0.8, "teacher/b/accuracy": 0.7, "compare/okd_a_b/accuracy": 0.75,
                       "best/accuracy": 0.75}
    with pytest.raises(ValueError, match="primary_metric 'f1'"):
        tracking.log_comparison_to_parent(rows, "f1")


def test_child_run_has_recipe_layer_map_rounded_weights_data_and_dataset_input(store, tmp_path):
    method = SimpleNamespace(name="alp", weights={"ce": 1 - 0.5 - 0.2, "kd": 0.5, "layer": 0.2}, temperature=5.0,
                             mapping=[[1, 2, 3, 4, 5, 6], []])
    with tracking.tracked_run("distill_alp:sst2") as run:
        tracking.log_training_job(run, task="sst2", seed=42, glue_dir=tmp_path, max_train_samples=512,
                                  max_eval_samples=None, method=method, dataset_digest="abc123", n_train=512,
                                  model_parameters=15_600_000)
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
    assert tracking.data_source(None).startswith("hub:nyu-mll/glue")
    assert tracking.data_params("data/01_raw/glue", None, 100)["max_eval_samples"] == "100"


def test_ui_prints_the_runs_table_url_and_describes_the_experiment(store, capsys):
    url = tracking.open_ui(store.uri, "bert_kd_ui", port=5055, serve=False)
    experiment = store.client.get_experiment_by_name("bert_kd_ui")
    assert url == f"http://127.0.0.1:5055/#/experiments/{experiment.experiment_id}/runs?workflowType=machine_learning"
    printed = capsys.readouterr().out
    assert url in printed and "viewStateShareKey=bert_kd_compare" in printed
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    assert "parent run" in experiment.tags["mlflow.note.content"]
    view = json.loads(experiment.tags["mlflow.sharedViewState.bert_kd_compare"])
    assert "params.`recipe`" in view["selectedColumns"] and "metrics.`final/score`" in view["selectedColumns"]


def test_long_comparison_is_truncated_to_mlflow_tag_limit(store):
    import mlflow

    rows = [{"method": f"m{i}", "accuracy": 0.5, "f1": 0.4} for i in range(600)]  # > 1000 metrics
    with mlflow.start_run() as run:
        tracking.log_comparison_to_parent(rows, "accuracy")
    logged = store.client.get_run(run.info.run_id).data
    assert len(logged.metrics) == 1201
    note = logged.tags["mlflow.note.content"]
    assert len(note) <= 8000 and note.endswith("(truncated: the full table is in the run's artifacts)\n")


def test_many_params_are_logged_in_batches(store):
    with tracking.tracked_run("many") as run:
        run.log_params({"block": {f"p{i}": i / 3 for i in range(250)}})
    params = store.client.get_run(run.run_id).data.params
    assert len([k for k in params if k.startswith("block.")]) == 250 and params["block.p1"] == "0.333333"


def test_child_run_of_a_table_row_is_named_by_the_row(store):
    """``alp_no`` runs the ``alp`` method: the compare view shows the row, the algorithm beside it."""
    method = SimpleNamespace(name="alp", weights={"ce": 0.3, "kd": 0.5, "layer": 0.2}, temperature=5.0, mapping=[[1, 2], [3, 4]])
    with tracking.tracked_run("distill_alp_no:rte") as run:
        tracking.log_training_job(run, task="rte", seed=1, method=method, name="alp_no")
    logged = store.client.get_run(run.run_id)
    assert (logged.data.params["method"], logged.data.params["algorithm"]) == ("alp_no", "alp")
    assert logged.data.tags["method"] == "alp_no"


def test_describing_an_experiment_tolerates_another_process_setting_the_tags_first(store):
    from mlflow.exceptions import MlflowException

    experiment_id = store.client.create_experiment("bert_kd_race")

    class RacingClient:
        """Another `kedro run` inserts each tag just before this one does (SQLite UNIQUE error)."""

        def __init__(self, client):
            self.client, self.calls = client, 0

        def get_experiment(self, experiment_id):
            return self.client.get_experiment(experiment_id)

        def set_experiment_tag(self, experiment_id, key, value):
            self.calls += 1
            self.client.set_experiment_tag(experiment_id, key, value)
            raise MlflowException("UNIQUE constraint failed: experiment_tags.key, experiment_tags.experiment_id")

    racing = RacingClient(store.client)
    tracking.describe_experiment(experiment_id, client=racing)
    tags = store.client.get_experiment(experiment_id).tags
    assert racing.calls == 3 and tags["mlflow.experimentKind"] == "custom_model_development"
    tracking.describe_experiment(experiment_id, client=racing)  # already described: nothing is written again
    assert racing.calls == 3

    class BrokenClient(RacingClient):
        def set_experiment_tag(self, experiment_id, key, value):
            raise MlflowException("database is read-only")

    with pytest.raises(MlflowException, match="read-only"):
        tracking.describe_experiment(store.client.create_experiment("bert_kd_broken"), client=BrokenClient(store.client))


def test_logging_a_dataset_input_tolerates_another_process_inserting_it_first(store, tmp_path, monkeypatch):
    import mlflow
    from mlflow.exceptions import MlflowException

    real_log_input, calls = mlflow.log_input, []

    def racing_log_input(dataset, context=None):
        """The other `kedro run` inserts the same data set row between MLflow's lookup and insert."""
        calls.append(dataset.name)
        if len(calls) == 1:
            raise MlflowException("(sqlite3.IntegrityError) UNIQUE constraint failed: datasets.experiment_id, "
                                  "datasets.name, datasets.digest")
        return real_log_input(dataset, context=context)

    monkeypatch.setattr(mlflow, "log_input", racing_log_input)
    dataset = tracking.glue_dataset("rte", tmp_path, "d1g35t", "train", 48)
    with tracking.tracked_run("train_teacher:rte") as run:
        tracking.log_input_once(dataset, context="training")
    assert calls == ["glue-rte-train-48"] * 2
    assert [d.dataset.name for d in store.client.get_run(run.run_id).inputs.dataset_inputs] == ["glue-rte-train-48"]

    def broken_log_input(dataset, context=None):
        raise MlflowException("database is read-only")

    monkeypatch.setattr(mlflow, "log_input", broken_log_input)
    with tracking.tracked_run("train_teacher:rte"), pytest.raises(MlflowException, match="read-only"):
        tracking.log_input_once(dataset, context="training")


def test_a_tied_comparison_names_no_best_student_and_logs_the_floor(store):
    import mlflow

    rows = [{"method": "teacher", "accuracy": 0.9}, {"method": "majority class", "accuracy": 0.527},
            {"method": "nkd", "accuracy": 0.527}, {"method": "alp", "accuracy": 0.527}]
    with mlflow.start_run() as parent:
        metrics = tracking.log_comparison_to_parent(rows, "accuracy", warning="every student ties with the majority class")
    run = store.client.get_run(parent.info.run_id)
    assert "best_method" not in run.data.tags and "best/accuracy" not in metrics
    assert metrics["majority/accuracy"] == 0.527 and "compare/majority_class/accuracy" not in metrics
    assert run.data.tags["comparison.warning"] == "every student ties with the majority class"
    note = run.data.tags["mlflow.note.content"]
    assert note.startswith("**No best student**: every student ties") and "Best student" not in note
