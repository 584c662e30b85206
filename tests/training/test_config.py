"""Tests for bert_kd.training.config: TrainingConfig built from the schema's training and runtime blocks."""

from __future__ import annotations

import pytest

from bert_kd.errors import ParameterError
from bert_kd.schema import Runtime, Training
from bert_kd.training import TrainingConfig

TRAINING = {"epochs": 2, "batch_size": "16", "learning_rate": "5e-5", "warmup_ratio": 0, "max_steps": None}
RUNTIME = {"mixed_precision": "bf16", "group_by_length": True, "checkpoint_every_steps": 50, "recompute": True,
           "fused_optimizer": False, "eval_batch_size": 24}


def test_a_dict_built_and_a_schema_built_config_are_equal():
    from_dicts = TrainingConfig.from_schema(TRAINING, RUNTIME, seed=3, select_metric="accuracy", checkpoint_dir="ckpt")
    from_models = TrainingConfig.from_schema(Training.model_validate(TRAINING), Runtime.model_validate(RUNTIME),
                                             seed=3, select_metric="accuracy", checkpoint_dir="ckpt")
    flat = TrainingConfig.from_dict({**TRAINING, **{k: v for k, v in RUNTIME.items() if k != "recompute"},
                                     "seed": 3, "select_metric": "accuracy", "checkpoint_dir": "ckpt"})
    assert from_dicts == from_models == flat
    assert vars(from_models) == {**vars(TrainingConfig()), "epochs": 2.0, "batch_size": 16, "learning_rate": 5e-5,
                                 "warmup_ratio": 0.0, "mixed_precision": "bf16", "group_by_length": True,
                                 "checkpoint_every_steps": 50, "fused_optimizer": False, "eval_batch_size": 24,
                                 "seed": 3, "select_metric": "accuracy", "checkpoint_dir": "ckpt"}
    assert type(from_models.epochs) is float and type(from_models.batch_size) is int  # as job keys spell them


def test_keys_the_parameters_leave_out_keep_the_dataclass_defaults():
    """A Runtime model fills in the schema's defaults (group_by_length: true); only keys the
    parameters set count, so a config (and the job key built from it) is the same for a dict and
    for the validated model of that dict."""
    config = TrainingConfig.from_schema(Training(), Runtime(), seed=42, select_metric=None)
    assert config == TrainingConfig() and config.group_by_length is False
    assert TrainingConfig.from_schema(None, None, seed=42, select_metric=None) == TrainingConfig()
    explicit_nulls = TrainingConfig.from_schema({"epochs": None, "aux_learning_rate": None}, {"log_every_steps": None},
                                                seed=42, select_metric=None)
    assert explicit_nulls == TrainingConfig()


def test_every_field_comes_from_the_schema_or_is_a_run_setting():
    """A new TrainingConfig field needs a schema key (``training:`` or ``runtime``), or a keyword of from_schema."""
    import inspect
    from dataclasses import fields

    run_settings = set(inspect.signature(TrainingConfig.from_schema).parameters) - {"training", "runtime", "where"}
    assert {f.name for f in fields(TrainingConfig)} == (set(Training.model_fields) | set(Runtime.model_fields)
                                                         | run_settings) - {"recompute"}


def test_runtime_settings_win_over_the_training_block():
    config = TrainingConfig.from_schema({"eval_batch_size": 8, "log_every_steps": 5},
                                        {"eval_batch_size": 32, "log_every_steps": 2}, seed=1, select_metric=None)
    assert (config.eval_batch_size, config.log_every_steps) == (32, 2)


@pytest.mark.parametrize(("training", "runtime", "named"), [
    ({"lerning_rate": 1e-4}, None, "student.training.lerning_rate"),
    ({"batch_size": 0}, None, "student.training.batch_size"),
    ({"warmup_ratio": 1.5}, None, "student.training.warmup_ratio"),
    ({}, {"mixed_precision": "fp8"}, "runtime.mixed_precision"),
    ({}, {"seed": 3}, "runtime.seed"),  # not a runtime setting
])
def test_schema_errors_name_the_dotted_key(training, runtime, named):
    with pytest.raises(ParameterError, match=named.replace(".", r"\.")):
        TrainingConfig.from_schema(training, runtime, seed=1, select_metric=None, where="student.training")


@pytest.mark.parametrize(("settings", "named"), [
    ({"seed": -1}, "training.seed"), ({"seed": True}, "training.seed"), ({"seed": 2**32}, "training.seed"),
    ({"select_metric": 3}, "training.select_metric"), ({"greater_is_better": "yes"}, "training.greater_is_better"),
    ({"checkpoint_dir": 7}, "training.checkpoint_dir"),
])
def test_settings_outside_the_schema_are_checked_here(settings, named):
    with pytest.raises(ValueError, match=named):
        TrainingConfig.from_schema({}, {}, **{"seed": 1, "select_metric": None, **settings})
