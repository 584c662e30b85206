"""Tests for bert_kd.core.training.config: TrainingConfig built from the schema's training and runtime blocks."""

from __future__ import annotations

import pytest
import torch

from bert_kd.config.errors import ParameterError
from bert_kd.config.schema import Runtime, Training
from bert_kd.core.training import (
    SupervisedObjective,
    TrainingConfig,
    cpu_has_bf16,
    make_optimizer,
    resolve_mixed_precision,
)
from tests.core.training.helpers import new_model

TRAINING = {"epochs": 2, "batch_size": "16", "learning_rate": "5e-5", "warmup_ratio": 0, "max_steps": None}
RUNTIME = {
    "mixed_precision": "bf16",
    "group_by_length": True,
    "checkpoint_every_steps": 50,
    "recompute": True,
    "fused_optimizer": False,
    "eval_batch_size": 24,
}


def test_a_dict_built_and_a_schema_built_config_are_equal():
    from_models = TrainingConfig.from_schema(
        Training.model_validate(TRAINING),
        Runtime.model_validate(RUNTIME),
        seed=3,
        select_metric="accuracy",
        checkpoint_dir="ckpt",
    )
    flat = TrainingConfig.from_dict(
        {
            **TRAINING,
            **{k: v for k, v in RUNTIME.items() if k != "recompute"},
            "seed": 3,
            "select_metric": "accuracy",
            "checkpoint_dir": "ckpt",
        }
    )
    assert from_models == flat
    assert vars(from_models) == {
        **vars(TrainingConfig()),
        "epochs": 2.0,
        "batch_size": 16,
        "learning_rate": 5e-5,
        "warmup_ratio": 0.0,
        "mixed_precision": "bf16",
        "group_by_length": True,
        "checkpoint_every_steps": 50,
        "fused_optimizer": False,
        "eval_batch_size": 24,
        "seed": 3,
        "select_metric": "accuracy",
        "checkpoint_dir": "ckpt",
    }
    assert type(from_models.epochs) is float and type(from_models.batch_size) is int  # as job keys spell them


def test_keys_the_parameters_leave_out_keep_the_schemas_defaults():
    """A Runtime model fills in the schema's defaults (group_by_length: true); only keys the
    parameters set count, so a config (and the job key built from it) is the same for a dict and
    for the validated model of that dict."""
    config = TrainingConfig.from_schema(Training(), Runtime(), seed=42, select_metric=None)
    assert config == TrainingConfig() and config.group_by_length is False
    assert TrainingConfig.from_dict({}) == TrainingConfig()
    explicit_nulls = TrainingConfig.from_dict({"epochs": None, "aux_learning_rate": None, "log_every_steps": None})
    assert explicit_nulls == TrainingConfig()


def test_every_field_comes_from_the_schema_or_is_a_run_setting():
    """A new TrainingConfig field needs a schema key (``training:`` or ``runtime``), or a keyword of from_schema."""
    import inspect
    from dataclasses import fields

    run_settings = set(inspect.signature(TrainingConfig.from_schema).parameters) - {"training", "runtime", "where"}
    assert {f.name for f in fields(TrainingConfig)} == (
        set(Training.model_fields) | set(Runtime.model_fields) | run_settings
    ) - {"recompute", "threads"}  # run-level: the job path's reuse, the process's torch threads


def test_schema_fields_default_to_the_schemas_defaults():
    """One set of defaults: a training or runtime key left out means the schema's default, except
    group_by_length (False here, True in Runtime) whose dataclass default job keys have always taken."""
    config, training, runtime = TrainingConfig(), Training(), Runtime()
    differ = {
        name: (getattr(config, name), getattr(block, name))
        for block in (training, runtime)
        for name, field in type(block).model_fields.items()
        if hasattr(config, name) and field.default is not None and getattr(config, name) != getattr(block, name)
    }
    assert differ == {"group_by_length": (False, True)}
    assert {name: getattr(config, name) for name in Training.model_fields} == training.model_dump()


def test_no_schema_default_is_written_a_second_time():
    """Every field the schema holds takes its default from the schema (``_schema_default``), never
    from a literal here that could drift from it; group_by_length is the one stated exception."""
    import ast
    import inspect

    from bert_kd.core.training import config as config_module

    run_settings = set(inspect.signature(TrainingConfig.from_schema).parameters)  # seed, select_metric, …
    schema_keys = (set(Training.model_fields) | set(Runtime.model_fields)) - run_settings
    tree = ast.parse(inspect.getsource(config_module.TrainingConfig))
    literals = {
        node.target.id: ast.unparse(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.AnnAssign)
        and node.target.id in schema_keys
        and not (isinstance(node.value, ast.Call) and ast.unparse(node.value.func) == "_schema_default")
    }
    assert literals == {"group_by_length": "False"}


def test_a_key_set_to_null_is_a_key_left_out():
    """``epochs: null`` keeps the default and is not among the keys the block sets (MLflow params);
    a null whose default is null (``max_steps``) stays set, as written."""
    block = Training.model_validate({"epochs": None, "batch_size": 16, "max_steps": None})
    assert block.epochs == Training().epochs
    assert block.model_dump(exclude_unset=True) == {"batch_size": 16, "max_steps": None}


def test_runtime_settings_win_over_the_training_block():
    config = TrainingConfig.from_schema(
        Training(eval_batch_size=8, log_every_steps=5),
        Runtime(eval_batch_size=32, log_every_steps=2),
        seed=1,
        select_metric=None,
    )
    assert (config.eval_batch_size, config.log_every_steps) == (32, 2)


@pytest.mark.parametrize(
    ("training", "runtime", "named"),
    [
        ({"batch_size": 0}, {}, "training.batch_size"),
        ({"warmup_ratio": 1.5}, {}, "training.warmup_ratio"),
        ({}, {"mixed_precision": "fp8"}, "runtime.mixed_precision"),
        ({}, {"tf32": "sometimes"}, "runtime.tf32"),
    ],
)
def test_schema_errors_of_a_flat_dict_name_the_dotted_key(training, runtime, named):
    with pytest.raises(ParameterError, match=named.replace(".", r"\.")):
        TrainingConfig.from_dict({**training, **runtime})


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"seed": -1}, "training.seed"),
        ({"seed": True}, "training.seed"),
        ({"seed": 2**32}, "training.seed"),
        ({"select_metric": 3}, "training.select_metric"),
        ({"greater_is_better": "yes"}, "training.greater_is_better"),
        ({"checkpoint_dir": 7}, "training.checkpoint_dir"),
    ],
)
def test_settings_outside_the_schema_are_checked_here(settings, named):
    with pytest.raises(ValueError, match=named):
        TrainingConfig.from_schema(Training(), Runtime(), **{"seed": 1, "select_metric": None, **settings})


# --------------------------------------------------------------------------- from_dict


def test_from_dict_accepts_known_keys_and_defaults():
    config = TrainingConfig.from_dict({"batch_size": 4, "learning_rate": 1e-4, "select_metric": "accuracy"})
    assert config.batch_size == 4 and config.learning_rate == 1e-4 and config.select_metric == "accuracy"
    assert TrainingConfig.from_dict(None) == TrainingConfig()


def test_from_dict_rejects_unknown_keys_naming_them():
    with pytest.raises(ValueError, match="lerning_rate") as info:
        TrainingConfig.from_dict({"lerning_rate": 1e-4, "batch_size": 8})
    assert "batch_size" not in str(info.value).split("valid")[0]  # only the unknown key is reported as unknown


@pytest.mark.parametrize(
    "key, value",
    [
        ("batch_size", 0),
        ("eval_batch_size", -1),
        ("gradient_accumulation_steps", 0),
        ("learning_rate", 0.0),
        ("learning_rate", -1e-5),
        ("epochs", 0),
        ("mixed_precision", "fp8"),
        ("log_every_steps", 0),  # used as a modulus in fit: 0 would crash mid-training
        ("max_steps", -3),  # a negative step budget would silently train nothing
        ("batch_size", "large"),  # wrong types must name the key too, not fail inside int()/<=
        ("learning_rate", "fast"),
        ("warmup_ratio", 1.5),  # the schema's range, unchecked before TrainingConfig followed it
        ("fused_optimizer", "sometimes"),
    ],
)
def test_from_dict_rejects_bad_values_naming_the_key(key, value):
    with pytest.raises(ParameterError, match=key):
        TrainingConfig.from_dict({key: value})


def test_from_dict_follows_the_schema_on_epochs():
    """``epochs: 0`` is refused as the parameter schema refuses it (with ``max_steps``, leave epochs
    out); ``epochs: null`` is the default, as an unset schema key is."""
    with pytest.raises(ParameterError, match="epochs"):
        TrainingConfig.from_dict({"epochs": 0, "max_steps": 5})
    assert TrainingConfig.from_dict({"epochs": None, "max_steps": 5}).epochs == TrainingConfig().epochs


# --------------------------------------------------------------------------- precision, optimizer


@pytest.mark.parametrize(
    "flags, expected",
    [("fpu avx2 amx_bf16 amx_tile", True), ("fpu avx512f avx512_bf16", True), ("fpu avx2 avx512f", False), ("", False)],
)
def test_cpu_has_bf16_reads_the_flags_line(flags, expected):
    assert cpu_has_bf16(f"processor : 0\nflags\t\t: {flags}\nbugs : x\n") is expected


def test_resolve_mixed_precision_auto_is_fp32_on_a_cpu_even_with_bf16_instructions(monkeypatch):
    import bert_kd.core.training.config as training_config

    assert resolve_mixed_precision("fp16") == "fp16" and resolve_mixed_precision("no") == "no"
    monkeypatch.setattr(training_config, "cpu_has_bf16", lambda: True)
    assert resolve_mixed_precision("auto", cpu=True) == "no"
    with pytest.raises(ParameterError, match="mixed_precision"):
        TrainingConfig.from_dict({"mixed_precision": "int8"})


@pytest.mark.parametrize(
    "setting, device, fused",
    [("auto", "cpu", True), ("auto", "cuda", True), ("auto", "meta", None), (False, "cpu", None), (True, "cpu", True)],
)
def test_make_optimizer_fuses_adamw_on_cpu_and_cuda_by_default(tiny_teacher_dir, setting, device, fused):
    objective = SupervisedObjective(new_model(tiny_teacher_dir))
    optimizer = make_optimizer(objective, TrainingConfig.from_dict({"fused_optimizer": setting}), torch.device(device))
    assert optimizer.defaults["fused"] is fused
    assert sum(len(g["params"]) for g in optimizer.param_groups) == len(list(objective.parameters()))


def test_the_run_seed_default_is_written_once():
    """The loop's, the parameters' and conf/base's default seed are the schema's ``DEFAULT_SEED``."""
    import yaml

    from bert_kd.config.schema import DEFAULT_SEED
    from bert_kd.experiment.parameters import Parameters
    from tests.conftest import REPO_ROOT

    conf = yaml.safe_load((REPO_ROOT / "conf/base/parameters.yml").read_text())
    assert TrainingConfig().seed == Parameters.model_fields["seed"].default == conf["seed"] == DEFAULT_SEED
