"""bert_kd.tracking.ui: the experiment's description and views, the runs-table URL."""

import json

import pytest

from bert_kd.tracking.ui import describe_experiment, open_ui


def test_ui_prints_the_runs_table_url_and_describes_the_experiment(store, capsys):
    url = open_ui(store.uri, "bert_kd_ui", port=5055, serve=False)
    experiment = store.client.get_experiment_by_name("bert_kd_ui")
    assert url == (
        f"http://127.0.0.1:5055/#/experiments/{experiment.experiment_id}/runs"
        "?viewStateShareKey=bert_kd_compare&workflowType=machine_learning"
    )  # the runs table opens on the comparison columns
    printed = capsys.readouterr().out
    assert url in printed
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    assert "parent run" in experiment.tags["mlflow.note.content"]
    view = json.loads(experiment.tags["mlflow.sharedViewState.bert_kd_compare"])
    assert view["selectedColumns"][:4] == [
        "tags.`method`",
        "tags.`task`",
        "metrics.`final/score`",
        "metrics.`final/noise_band`",
    ]
    assert "params.`recipe`" in view["selectedColumns"]


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
    describe_experiment(experiment_id, client=racing)
    tags = store.client.get_experiment(experiment_id).tags
    assert racing.calls == 3 and tags["mlflow.experimentKind"] == "custom_model_development"
    describe_experiment(experiment_id, client=racing)  # already described: nothing is written again
    assert racing.calls == 3

    class BrokenClient(RacingClient):
        def set_experiment_tag(self, experiment_id, key, value):
            raise MlflowException("database is read-only")

    with pytest.raises(MlflowException, match="read-only"):
        describe_experiment(store.client.create_experiment("bert_kd_broken"), client=BrokenClient(store.client))
