"""Student filters copied from the teacher's (bert_kd.core.distill.ted_filters.student)."""

from __future__ import annotations

import pytest
import torch

from bert_kd.core.distill.ted_filters import TaskFilters, copy_filters_for_student
from bert_kd.core.models import build_student
from tests.core.distill.ted_filters.helpers import tiny_bert


def test_copy_filters_for_student():
    teacher = tiny_bert(layers=4)
    filters = TaskFilters.build(teacher, [1, 4], task="rte")
    student, kept = build_student(teacher, 2, "distilbert")
    assert kept == [1, 4]
    copied = copy_filters_for_student(filters, student=student)
    assert copied.layers == [1, 2] and copied.copied_from == "teacher" and copied.role == "student"
    assert copied.fingerprint == filters.fingerprint and copied.task == "rte"
    for k in range(2):
        assert torch.equal(copied.filters[k].body.weight, filters.filters[k].body.weight)
        assert copied.filters[k].body.weight is not filters.filters[k].body.weight
    swapped = copy_filters_for_student(filters, [4, 1])
    assert torch.equal(swapped.filters[0].body.weight, filters.filters[1].body.weight)
    with pytest.raises(ValueError, match="teacher filters at layer"):
        copy_filters_for_student(filters, [2, 4])
    with pytest.raises(ValueError, match="student width 12 != teacher width 8"):
        copy_filters_for_student(filters, student=tiny_bert(layers=2, hidden=12))
