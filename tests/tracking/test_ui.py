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
    # the README's two links (the comparison view and the plain runs table) and the charts view
    plain = f"http://127.0.0.1:5055/#/experiments/{experiment.experiment_id}/runs?workflowType=machine_learning"
    charts = "runs?viewStateShareKey=bert_kd_charts&compareRunsMode=CHART&workflowType=machine_learning"
    assert plain in printed.split() and charts in printed
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
    assert racing.calls == 4 and tags["mlflow.experimentKind"] == "custom_model_development"
    describe_experiment(experiment_id, client=racing)  # already described: nothing is written again
    assert racing.calls == 4

    class BrokenClient(RacingClient):
        def set_experiment_tag(self, experiment_id, key, value):
            raise MlflowException("database is read-only")

    with pytest.raises(MlflowException, match="read-only"):
        describe_experiment(store.client.create_experiment("bert_kd_broken"), client=BrokenClient(store.client))


def test_the_comparison_view_puts_score_method_and_task_first_and_every_run_in_a_row():
    """MLflow groups the chosen columns by type (metrics, params, tags: ``method`` and ``task`` last) unless the
    view sets ``columnOrder``; it nests child runs under a collapsed parent when ordered by start time (a
    shared view cannot expand a parent: the UI drops ``runsExpanded`` from it), so the view orders by the score."""
    from bert_kd.tracking.ui import COMPARE_VIEW_COLUMNS, compare_view_state

    view = compare_view_state()
    assert view["columnOrder"][:3] == ["tags.`method`", "tags.`task`", "metrics.`final/score`"]
    assert view["columnOrder"] == view["selectedColumns"] == list(COMPARE_VIEW_COLUMNS)
    assert view["orderByKey"] == "metrics.`final/score`" and view["orderByAsc"] is False
    assert "runsExpanded" not in view


def test_the_charts_view_opens_on_the_dev_score_then_the_curves():
    from bert_kd.tracking.ui import CHARTS_SECTION, charts_view_state, charts_view_url

    view = charts_view_state()
    charts = [(c["type"], c["metricKey"]) for c in view["compareRunCharts"]]
    assert charts[0] == ("BAR", "final/score") and ("LINE", "train/loss") in charts
    assert all(c["metricSectionId"] == CHARTS_SECTION for c in view["compareRunCharts"])
    assert [s["uuid"] for s in view["compareRunSections"]] == [CHARTS_SECTION] and view["isAccordionReordered"]
    assert charts_view_url("7", "http://h:1") == (
        "http://h:1/#/experiments/7/runs?viewStateShareKey=bert_kd_charts&compareRunsMode=CHART"
        "&workflowType=machine_learning"
    )


def test_the_ui_starts_lean_on_a_small_machine(monkeypatch):
    """One web worker on up to 4 cores (two above) instead of MLflow's four, and no job runner: MLflow's
    defaults started 15 processes and about 3.7 GB on the 2-core machine."""
    import os

    import bert_kd.tracking.ui as ui

    assert (ui.lean_workers(2), ui.lean_workers(4), ui.lean_workers(16)) == (1, 1, 2)
    command = ui.ui_command("sqlite:///mlflow.db", "127.0.0.1", 5000, workers=None)
    assert command[command.index("--workers") + 1] == str(ui.lean_workers())
    started = {}
    monkeypatch.delenv(ui.JOB_EXECUTION_ENV, raising=False)
    monkeypatch.setattr(os, "execvp", lambda path, args: started.update(args=args, env=dict(os.environ)))
    monkeypatch.setattr(ui, "describe_experiment", lambda *args, **kwargs: None)

    class Client:
        def __init__(self, uri):
            pass

        def get_experiment_by_name(self, name):
            return type("Experiment", (), {"experiment_id": "3"})()

    monkeypatch.setattr("mlflow.tracking.MlflowClient", Client)
    monkeypatch.setattr("mlflow.set_tracking_uri", lambda uri: None)
    ui.open_ui("sqlite:///x.db", workers=2)
    assert started["args"][started["args"].index("--workers") + 1] == "2"
    assert started["env"][ui.JOB_EXECUTION_ENV] == "false"
