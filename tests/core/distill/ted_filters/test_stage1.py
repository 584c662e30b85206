"""TED Stage I driver (bert_kd.core.distill.ted_filters.stage1)."""

from __future__ import annotations

import torch

from bert_kd.core.distill.ted_filters import (
    FilterPlacement,
    FilterTraining,
    TaskFilters,
    evaluate_filters,
    ted_layer_map,
    train_filters,
)
from bert_kd.core.models import build_student, parameters_fingerprint
from bert_kd.core.training import TrainingConfig
from tests.core.distill.ted_filters.helpers import FAST, changed, identical, snapshot


def test_stage1_trains_filters_model_bit_identical(rte):
    teacher, data, collator = rte
    before = snapshot(teacher)
    flags = [p.requires_grad for p in teacher.parameters()]
    layers = ted_layer_map("distilbert", 4, 2)
    config = TrainingConfig(epochs=2, select_metric="accuracy", **FAST)
    torch.manual_seed(config.seed)  # same seed as train_filters -> same initial filters
    untrained = TaskFilters.build(teacher, layers, task="rte")
    filters, metrics = train_filters(
        teacher, data["train"], data["validation"], FilterPlacement(layers, "rte"), FilterTraining(config, collator)
    )
    assert identical(before, teacher)
    assert [p.requires_grad for p in teacher.parameters()] == flags
    assert changed(snapshot(untrained), filters)
    assert set(metrics) == {1, 4} and all("accuracy" in m for m in metrics.values())
    assert filters.info["per_layer_metrics"]["4"] == metrics[4]
    assert filters.fingerprint == parameters_fingerprint(teacher) and filters.task == "rte"
    assert evaluate_filters(teacher, filters, data["validation"], collator, "rte") == metrics


def test_stage1_student_route_keeps_student_trainable(rte):
    teacher, data, collator = rte
    student, _ = build_student(teacher, 2, "distilbert")
    before = snapshot(student)
    config = TrainingConfig(max_steps=3, **FAST)
    filters, metrics = train_filters(
        student,
        data["train"],
        None,
        FilterPlacement([1, 2], "rte", "mlp", out_width=32, role="student"),
        FilterTraining(config, collator),
    )
    assert metrics == {} and filters.role == "student" and filters.out_width == 32
    assert identical(before, student)
    assert all(p.requires_grad for p in student.parameters())
