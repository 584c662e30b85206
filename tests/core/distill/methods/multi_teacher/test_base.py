"""Validation and teacher binding shared by the multi-teacher methods (multi_teacher.base)."""

from __future__ import annotations

import pytest

from bert_kd.core.distill.methods import METHODS, build_method
from tests.core.distill.methods.multi_teacher.helpers import tiny_bert


@pytest.mark.parametrize("method_name", ["multi_teacher", "okd", "multi_pkd", "rse_kd"])
def test_validation_errors(method_name):
    student = tiny_bert(2, 8, 2)
    with pytest.raises(ValueError, match="empty teacher list"):
        build_method({"method": method_name}, student, [])
    with pytest.raises(ValueError, match="label"):
        build_method({"method": method_name}, student, [tiny_bert(4, 8, 2), tiny_bert(4, 8, 2, num_labels=3)])
    with pytest.raises(ValueError, match="beta"):
        build_method({"method": method_name, "beta": 1.5}, student, [tiny_bert(4, 8, 2)])
    with pytest.raises(ValueError, match="beta"):
        build_method({"method": method_name, "beta": -0.1}, student, [tiny_bert(4, 8, 2)])


def test_validation_errors_multi_teacher_specific():
    student = tiny_bert(3, 8, 2)
    with pytest.raises(ValueError, match="fewer than the student"):
        build_method({"method": "multi_teacher"}, student, [tiny_bert(4, 8, 2), tiny_bert(2, 8, 2)])
    for alpha in (-0.01, 1.01, float("nan"), "high"):
        with pytest.raises(ValueError, match="alpha"):
            build_method({"method": "multi_teacher", "alpha": alpha}, student, [tiny_bert(4, 8, 2)])
    with pytest.raises(ValueError, match="alpha"):
        build_method({"method": "multi_pkd", "alpha": 2}, student, [tiny_bert(4, 8, 2)])
    with pytest.raises(ValueError, match="sentence_repr"):
        build_method({"method": "multi_teacher", "sentence_repr": "max"}, student, [tiny_bert(4, 8, 2)])
    with pytest.raises(ValueError, match="teacher_prefixes"):
        build_method({"method": "multi_teacher", "teacher_prefixes": ["", "t1_"]}, student, [tiny_bert(4, 8, 2)])
    with pytest.raises(ValueError, match="unknown option"):
        build_method({"method": "multi_teacher", "gamma": 1}, student, [tiny_bert(4, 8, 2)])
    with pytest.raises(ValueError, match="teacher 0"):
        build_method({"method": "multi_pkd"}, tiny_bert(3, 8, 2), [tiny_bert(2, 8, 2)])
    assert {"multi_teacher", "okd", "multi_pkd", "rse_kd"} <= set(METHODS)


def test_unbound_prefixes_with_prefixed_columns_is_an_error(hand_setup):
    s = hand_setup
    method = build_method({"method": "multi_teacher"}, s.models.student, [s.models.t0, s.models.t1])
    with pytest.raises(ValueError, match="teacher_prefixes"):
        method.terms(s.student, s.teachers, s.batch)
