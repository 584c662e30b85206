"""Wiring: a distillation objective whose multi-teacher method knows each teacher's columns."""

from __future__ import annotations

from typing import Sequence

from torch import nn

from bert_kd.core.distill.methods.base import build_method
from bert_kd.core.distill.objective import DistillationObjective


def build_multi_teacher_objective(student: nn.Module, teachers: Sequence, config: dict, regression: bool = False):
    """A [`DistillationObjective`][] for ``config['method']``
    (default ``multi_teacher``) whose method knows each teacher's batch prefix and name.

    ``teachers`` are [`Teacher`][objective.Teacher] specs (model, prefix, cache, name).
    """
    teachers = list(teachers)
    if not teachers:
        raise ValueError("distillation needs at least one teacher, got an empty teacher list")
    config = dict(config)
    config.setdefault("method", "multi_teacher")
    method = build_method(config, student, [t.model for t in teachers], regression)
    return DistillationObjective(student, teachers, method, method.weights)
