"""Shared Kedro node glue: run settings as one node input, tags."""

from __future__ import annotations

import inspect

import pytest

from bert_kd.pipelines import common
from bert_kd.schema import Runtime, Tracking


def _train(tokenized, task, teacher, seed, tracking, runtime, data_source=None, row=None):
    return tokenized, task, teacher, seed, tracking, runtime, data_source, row


SETTINGS = common.build_run_settings("rte", 7, {"enabled": False}, {"progress_bar": False}, "glue", 100, None)


def test_run_settings_node_reads_its_arguments_by_name():
    node_fn = common.reads_run_settings(_train, row="alp_no")
    assert list(inspect.signature(node_fn).parameters) == ["tokenized", "teacher", "run_settings"]
    assert node_fn("rows", {"model": "m"}, SETTINGS) == (
        "rows", "rte", {"model": "m"}, 7, Tracking(enabled=False), Runtime(progress_bar=False),
        {"glue_dir": "glue", "max_train_samples": 100, "max_eval_samples": None}, "alp_no")
    assert node_fn.__wrapped__ is _train and node_fn.__name__ == "_train"  # kedro-viz shows _train's code


def test_settings_node_is_a_kedro_node_with_one_settings_input():
    node = common.settings_node(_train, ["tokenized", "params:teacher"], "model", name="train", tags=common.tags_for("alp_kd", "alp", "student"))
    assert node.inputs == ["tokenized", "params:teacher", "run_settings"]
    assert node.tags == {"paper.alp_kd", "method.alp", "role.student"}


def test_a_function_without_run_settings_is_refused():
    with pytest.raises(ValueError, match="takes none of the run settings"):
        common.reads_run_settings(lambda a, b: a)
