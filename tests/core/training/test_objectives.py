"""Tests for bert_kd.core.training.objectives: frozen references, precision of their forwards, parameter groups."""

from __future__ import annotations

import pytest
import torch

from bert_kd.config.errors import ParameterError
from bert_kd.core.training import Collator, SupervisedObjective, TrainingConfig, make_loader
from tests.core.training.helpers import base_config, new_model


def test_frozen_autocast_follows_the_teacher_precision(tiny_teacher_dir):
    objective = SupervisedObjective(new_model(tiny_teacher_dir))
    x = torch.ones(2, 2)
    with objective.frozen_autocast():
        assert (x @ x).dtype == torch.float32  # "same": nothing changes
    objective.frozen_precision = "bf16"
    with objective.frozen_autocast():
        assert (x @ x).dtype == torch.bfloat16
    objective.frozen_precision = "no"
    with torch.autocast("cpu", dtype=torch.bfloat16), objective.frozen_autocast():
        assert (x @ x).dtype == torch.float32  # fp32 teachers under a bf16 student
    with pytest.raises(ParameterError, match="teacher_mixed_precision"):
        TrainingConfig.from_dict({"teacher_mixed_precision": "int4"})


def test_objective_forward_is_the_training_step(tiny_teacher_dir, sst2):
    ds, tokenizer = sst2
    objective = SupervisedObjective(new_model(tiny_teacher_dir)).eval()
    batch = next(iter(make_loader(ds["train"], 4, Collator({"": tokenizer.pad_token_id}), shuffle=False)))
    assert torch.equal(objective(batch)["loss"], objective.training_step(batch)["loss"])


def test_parameter_groups_put_auxiliary_modules_apart(tiny_teacher_dir):
    objective = SupervisedObjective(new_model(tiny_teacher_dir))
    objective.projection = torch.nn.Linear(4, 4)
    objective.add_frozen("frozen", torch.nn.Linear(3, 3))
    groups = objective.parameter_groups(base_config(aux_learning_rate=0.5, weight_decay=0.1))
    assert len(groups) == 3
    decay, no_decay, aux = groups
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert all(p.ndim >= 2 for p in decay["params"]) and all(p.ndim < 2 for p in no_decay["params"])
    assert aux["lr"] == 0.5 and {id(p) for p in aux["params"]} == {id(p) for p in objective.projection.parameters()}
    grouped = {id(p) for g in groups for p in g["params"]}
    assert not grouped & {id(p) for p in objective.frozen.parameters()}
    assert "frozen.weight" not in objective.trainable_state() and "projection.weight" in objective.trainable_state()
    objective.train()
    assert objective.model.training and not objective.frozen.training
