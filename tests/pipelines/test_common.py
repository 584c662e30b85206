"""Shared node glue: run settings as one node input, adaptive loss-logging interval."""

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


@pytest.mark.parametrize(("section", "rows", "expected"), [
    ({"epochs": 1, "batch_size": 8}, 48, 1),          # 6 steps: every step
    ({"epochs": 3, "batch_size": 32}, 3000, 5),       # 282 steps: every 5
    ({"epochs": 3, "batch_size": 32}, 67349, 10),     # capped at 10
    ({"epochs": 1, "batch_size": 8, "log_every_steps": 4}, 48, 4),  # the user's choice wins
])
def test_loss_logging_interval_adapts_to_the_run_length(section, rows, expected):
    config = common.training_config(section, None, 0, "rte", None, n_train=rows)
    assert config.log_every_steps == expected


def test_training_config_is_the_same_for_parameter_dicts_and_their_validated_models():
    """Nodes get dicts (notebooks, tests, sweep trials) or the hook's validated models: same config, same job key."""
    from bert_kd.jobs import training_spec
    from bert_kd.schema import Runtime, Training

    section = {"epochs": 1, "batch_size": 8, "learning_rate": "1e-4"}
    runtime = {"group_by_length": True, "eval_batch_size": 16, "recompute": True}
    as_dicts = common.training_config(section, runtime, 5, "rte", "ckpt", n_train=48)
    as_models = common.training_config(Training.model_validate(section), Runtime.model_validate(runtime), 5, "rte",
                                       "ckpt", n_train=48)
    assert as_dicts == as_models and training_spec(vars(as_dicts)) == training_spec(vars(as_models))
    assert (as_models.seed, as_models.select_metric, as_models.checkpoint_dir, as_models.keep_checkpoint) == (
        5, "accuracy", "ckpt", True)
    assert (as_models.group_by_length, as_models.eval_batch_size, as_models.log_every_steps) == (True, 16, 1)
    assert Runtime().group_by_length and not common.training_config(section, Runtime(), 5, "rte", None).group_by_length
    assert common.training_config(section, {"log_every_steps": 4}, 5, "rte", None, n_train=48).log_every_steps == 4


def test_model_size_is_read_from_the_store_entry_and_matches_a_fresh_save(tmp_path, tiny_teacher_dir):
    from transformers import AutoModelForSequenceClassification

    from bert_kd.models import ModelBundle, write_bundle_files

    model = AutoModelForSequenceClassification.from_pretrained(tiny_teacher_dir)
    unsaved = ModelBundle(model, tokenizer=None, info={})
    measured = common._saved_size(unsaved)  # no store entry: saved to a temporary folder
    entry = tmp_path / "entry"
    entry.mkdir()
    model.save_pretrained(entry)
    (entry / "manifest.json").write_text("{}" * 1000)  # store bookkeeping is not the model's size
    stored = ModelBundle(model, tokenizer=None, info={"store_path": str(entry)})
    assert common._saved_size(stored) == measured > 0
    (entry / "model.safetensors").write_bytes(b"0" * 10)  # proves the store entry is what was read
    assert common._saved_size(stored) == (entry / "config.json").stat().st_size + 10


@pytest.mark.parametrize("form", [dict, "model"])
def test_settings_helpers_read_the_hooks_models_and_dicts_alike(form):
    tracking, runtime = {"enabled": False, "log_models": False}, {"recompute": True}
    if form == "model":
        tracking, runtime = Tracking.model_validate(tracking), Runtime.model_validate(runtime)
    assert common.tracking_enabled(tracking) is False and common.recompute(runtime) is True
    assert common.tracking_enabled(None) is True and common.recompute(None) is False  # the schema's defaults
    settings = common.build_run_settings("rte", 1, tracking, runtime, None, None, None)
    assert settings["tracking"] == Tracking(enabled=False, log_models=False) and settings["runtime"].recompute is True


def test_a_bad_key_in_a_notebooks_dict_names_the_block():
    from bert_kd.errors import ParameterError

    with pytest.raises(ParameterError, match="runtime.recompte"):
        common.recompute({"recompte": True})
