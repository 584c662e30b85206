"""TED Stage I objective, Eq. 5 (bert_kd.core.distill.ted_filters.filter_objective)."""

from __future__ import annotations

import copy

import pytest
import torch

from bert_kd.core.distill.ted_filters import FilterTrainingObjective, TaskFilters


def test_filter_objective_predicts_one_or_all_heads(rte):
    teacher, data, collator = rte
    frozen = copy.deepcopy(teacher)
    filters = TaskFilters.build(frozen, [2, 3], task="rte")
    batch = collator([data["train"][i] for i in range(4)])
    assert FilterTrainingObjective(frozen, filters).predict(batch).shape == (4, 4)
    objective = FilterTrainingObjective(frozen, filters, predict_position=1)
    assert objective.predict(batch).shape == (4, 2)
    step = objective.training_step(batch)
    assert set(step) == {"loss", "ce_L2", "ce_L3"}
    assert torch.allclose(step["loss"], step["ce_L2"] + step["ce_L3"])
    assert all(not n.startswith("encoder.") for n in objective.trainable_state())
    with pytest.raises(ValueError):
        FilterTrainingObjective(frozen, filters, predict_position=2)
