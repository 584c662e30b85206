"""Shared Kedro node glue: run settings as one node input, tags."""

from __future__ import annotations

import inspect

import pytest

from bert_kd.config.schema import Runtime, Tracking
from bert_kd.pipelines import common


def _train(tokenized, task, teacher, seed, tracking, runtime, data_source=None, row=None):
    return tokenized, task, teacher, seed, tracking, runtime, data_source, row


SETTINGS = common.build_run_settings(
    "rte", 7, {"enabled": False}, {"progress_bar": False}, common.gather_data_source("glue", 100, None)
)


def test_run_settings_node_reads_its_arguments_by_name():
    node_fn = common.reads_run_settings(_train, row="alp_no")
    assert list(inspect.signature(node_fn).parameters) == ["tokenized", "teacher", "run_settings"]
    assert node_fn("rows", {"model": "m"}, SETTINGS) == (
        "rows",
        "rte",
        {"model": "m"},
        7,
        Tracking(enabled=False),
        Runtime(progress_bar=False),
        {"glue_dir": "glue", "max_train_samples": 100, "max_eval_samples": None},
        "alp_no",
    )
    assert node_fn.__wrapped__ is _train and node_fn.__name__ == "_train"  # kedro-viz shows _train's code


def test_settings_node_is_a_kedro_node_with_one_settings_input():
    node = common.settings_node(
        _train, ["tokenized", "params:teacher"], "model", name="train", tags=common.tags_for("alp_kd", "alp", "student")
    )
    assert node.inputs == ["tokenized", "params:teacher", "run_settings"]
    assert node.tags == {"paper_alp_kd", "method_alp", "role_student"}


def test_a_function_without_run_settings_is_refused():
    with pytest.raises(ValueError, match="takes none of the run settings"):
        common.reads_run_settings(lambda a, b: a)


def test_the_run_settings_nodes_group_the_data_source_and_take_at_most_six_arguments():
    from kedro.io import DataCatalog, MemoryDataset
    from kedro.runner import SequentialRunner

    pipeline = common.run_settings_node()
    assert [n.name for n in pipeline.nodes] == ["data.gather_data_source", "data.build_run_settings"]
    assert all(len(inspect.signature(n.func).parameters) <= 6 for n in pipeline.nodes)
    values = {
        "task": "rte",
        "seed": 7,
        "tracking": {"enabled": False},
        "runtime": {"progress_bar": False},
        "glue_dir": "glue",
        "max_train_samples": 100,
        "max_eval_samples": None,
    }
    catalog = DataCatalog({f"params:{k}": MemoryDataset(v) for k, v in values.items()})
    catalog["run_settings"] = MemoryDataset(copy_mode="assign")
    SequentialRunner().run(pipeline, catalog)
    assert catalog.load("run_settings") == SETTINGS  # the same dataset a notebook builds


def test_a_data_source_with_an_unknown_key_is_refused():
    with pytest.raises(ValueError, match="glue_dirr"):
        common.build_run_settings("rte", 7, None, None, {"glue_dirr": "glue"})


@pytest.mark.parametrize("form", [dict, "model"])
def test_run_settings_hold_the_tracking_and_runtime_models(form):
    tracking, runtime = {"enabled": False, "log_models": False}, {"recompute": True}
    if form == "model":
        tracking, runtime = Tracking.model_validate(tracking), Runtime.model_validate(runtime)
    settings = common.build_run_settings("rte", 1, tracking, runtime)
    assert settings["tracking"] == Tracking(enabled=False, log_models=False) and settings["runtime"].recompute is True
    assert settings["data_source"] == {"glue_dir": None, "max_train_samples": None, "max_eval_samples": None}


def test_an_argument_named_run_gets_all_run_settings_as_one_object():
    from bert_kd.experiment.run_setup import RunSettings

    node_fn = common.reads_run_settings(lambda tokenized, teacher, run: (tokenized, teacher, run))
    assert list(inspect.signature(node_fn).parameters) == ["tokenized", "teacher", "run_settings"]
    tokenized, teacher, run = node_fn("rows", {"model": "m"}, SETTINGS)
    assert isinstance(run, RunSettings) and (run.task, run.seed, run.tracking) == ("rte", 7, Tracking(enabled=False))
    assert run.data_source == {"glue_dir": "glue", "max_train_samples": 100, "max_eval_samples": None}


def _select(options, slot):
    return options[slot]


def test_node_wrappers_point_kedro_viz_at_the_wrapped_functions_file():
    """kedro-viz's "File Path" is ``inspect.getfile(node.func)``: the file holding the function, not common.py."""
    reads = common.reads_run_settings(_train, row="alp_no")
    bound = common.with_fixed(_select, slot=1)
    assert inspect.getfile(reads) == inspect.getfile(bound) == __file__ != inspect.getfile(common)
    assert bound(["a", "b"]) == "b" and list(inspect.signature(bound).parameters) == ["options"]
    assert bound.__wrapped__ is _select and bound.__name__ == "_select"


def test_a_traceback_through_a_node_wrapper_names_the_wrapped_function():
    import traceback

    def failing(tokenized, task):
        raise RuntimeError(f"bad rows for {task}")

    with pytest.raises(RuntimeError) as raised:
        common.reads_run_settings(failing)("rows", SETTINGS)
    frames = traceback.extract_tb(raised.value.__traceback__)
    assert [frame.name for frame in frames[1:]] == ["failing", "_call_with_run_settings", "failing"]
    assert frames[1].filename == __file__ and frames[1].lineno == failing.__code__.co_firstlineno
