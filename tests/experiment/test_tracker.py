"""bert_kd.experiment.tracker: which tracker a job reports to."""

from __future__ import annotations

import pytest

from bert_kd.config.schema import Tracking
from bert_kd.experiment import tracker


@pytest.mark.parametrize("block", [{"enabled": False}, Tracking(enabled=False)])
def test_tracking_off_is_the_tracker_that_records_nothing(block):
    chosen = tracker.tracker_for(block)
    assert chosen is tracker.NO_TRACKER and not chosen.enabled
    with chosen.start_job("distill_alp:rte") as run:
        run.log_metrics({"train/loss": 1.0})
        assert run.run_id is None and not run.enabled
    assert chosen.log_model(run, "/nowhere", {}, "key") is None and chosen.logged_model("r", "key") is None


def test_tracking_on_is_mlflows_tracker_on_rank_zero_only(monkeypatch):
    from bert_kd.tracking.jobs import MlflowTracker

    assert isinstance(tracker.tracker_for({}), MlflowTracker)  # the schema's default: enabled
    assert isinstance(tracker.tracker_for(Tracking()), MlflowTracker)
    monkeypatch.setenv("RANK", "1")
    assert tracker.tracker_for(Tracking()) is tracker.NO_TRACKER  # one process reports


def test_a_registered_tracker_is_used(monkeypatch):
    made = []
    monkeypatch.setattr(tracker, "_factory", None)
    tracker.register_tracker(lambda: made.append(1) or tracker.NO_TRACKER)
    try:
        assert tracker.tracker_for({"enabled": True}) is tracker.NO_TRACKER and made == [1]
    finally:
        from bert_kd.tracking.jobs import MlflowTracker

        tracker.register_tracker(MlflowTracker)


def test_tracking_on_without_an_installed_tracker_is_an_error_not_a_silent_drop(monkeypatch):
    monkeypatch.setattr(tracker, "_factory", None)
    monkeypatch.setattr(tracker, "_model_sources_factory", None)
    with pytest.raises(tracker.TrackingNotInstalledError, match="use_mlflow"):
        tracker.tracker_for({"enabled": True})
    with pytest.raises(tracker.TrackingNotInstalledError, match="MLflow URI"):
        tracker.model_sources()
    assert tracker.tracker_for({"enabled": False}) is tracker.NO_TRACKER  # off needs no tracker


def test_timed_logs_the_seconds_of_its_block():
    logged = {}

    class Run(tracker.JobRun):
        def log_metrics(self, metrics, step=None):
            logged.update(metrics)

    with tracker.timed(Run(), "time/training_seconds"):
        pass
    assert set(logged) == {"time/training_seconds"} and logged["time/training_seconds"] >= 0


def test_tracking_off_registers_logs_and_finds_nothing():
    off = tracker.tracker_for({"enabled": False})
    assert off.champion_source("bert_kd-rte-student") is None
    assert off.register_best_student({}, None, "bert_kd-rte-student", {}, "") is None
    assert off.log_onnx_model("/nowhere/student.onnx", {}) is None


def test_the_kedro_run_reporter_is_mlflows_on_rank_zero_once_mlflow_is_loaded(monkeypatch):
    import mlflow  # noqa: F401 - loaded, as kedro-mlflow loads it when it opens the kedro run's run

    from bert_kd.tracking.kedro_run import MlflowKedroRun

    assert isinstance(tracker.kedro_run(), MlflowKedroRun)
    monkeypatch.setenv("RANK", "1")
    assert tracker.kedro_run() is tracker.NO_KEDRO_RUN


def test_without_mlflow_loaded_there_is_no_kedro_run_to_report_on_and_none_is_loaded():
    from tests import fresh_interpreter

    code = (
        "import sys; from bert_kd.experiment import tracker; "
        "print(tracker.kedro_run() is tracker.NO_KEDRO_RUN, 'mlflow' in sys.modules)"
    )
    done = fresh_interpreter.run(code, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "False"]


def test_model_sources_read_a_task_only_from_a_models_uri():
    from bert_kd.tracking.model_sources import MlflowModelSources

    sources = tracker.model_sources()
    assert isinstance(sources, MlflowModelSources)
    assert sources.recorded_task("runs:/0123/alp-rte-student") == (None, "")


@pytest.mark.parametrize(
    ("interface", "implementation"),
    [
        ("JobTracker", "bert_kd.tracking.jobs:MlflowTracker"),
        ("JobRun", "bert_kd.tracking.runs:RunLogger"),
        ("KedroRunReporter", "bert_kd.tracking.kedro_run:MlflowKedroRun"),
    ],
)
def test_mlflows_side_overrides_every_method_of_the_interface_whose_methods_do_nothing(interface, implementation):
    """The interface is written once, its methods the no-ops of tracking off; MLflow's class inherits none of
    them (a method it forgot would silently log nothing)."""
    import importlib
    import inspect

    base = getattr(tracker, interface)
    module, name = implementation.split(":")
    mlflow_side = getattr(importlib.import_module(module), name)
    assert issubclass(mlflow_side, base)
    methods = [n for n, v in vars(base).items() if not n.startswith("_") and inspect.isfunction(getattr(base, n))]
    assert len(methods) >= 6
    assert [n for n in methods if getattr(mlflow_side, n) is getattr(base, n)] == []


def test_the_recording_double_records_named_arguments_and_refuses_what_the_interface_lacks():
    from tests.recorder import Recorder

    recorded = Recorder(tracker.JobTracker, {"run_link": lambda run_id: f"link/{run_id}"})
    assert recorded.run_link("r1") == "link/r1" and recorded.logged_model("r2") is None
    assert recorded.called("logged_model") == [{"run_id": "r2", "store_key": None}]
    with pytest.raises(AttributeError):
        recorded.log_everything()
