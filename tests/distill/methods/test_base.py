"""The Method base class: no-op hooks every caller may use without probing (methods.base)."""

from __future__ import annotations

import torch

from bert_kd.distill.methods import build_method
from bert_kd.distill.objective import DistillationObjective, Teacher, collect_diagnostics
from tests.distill.ted.helpers import tiny_bert


def test_hooks_default_to_no_ops():
    teacher, student = tiny_bert(layers=4), tiny_bert(layers=2, seed=1)
    method = build_method({"method": "pkd"}, student, [teacher])
    assert method.bind_teachers([Teacher(teacher)]) is method
    assert method.observe(None, {}, {}) is None
    assert method.alignment_report() == {} and method.alignment_metrics() == {}
    assert not method.observes and not method.reads_teacher_prefixes


def test_only_observing_methods_run_a_diagnostics_pass():
    teacher, student = tiny_bert(layers=4), tiny_bert(layers=2, seed=1)
    batch = {"input_ids": torch.randint(0, 30, (2, 5)), "attention_mask": torch.ones(2, 5, dtype=torch.long),
             "labels": torch.tensor([0, 1])}
    for name, expect_alpha in (("pkd", False), ("alp", True)):
        method = build_method({"method": name}, student, [teacher])
        objective = DistillationObjective(student, [Teacher(teacher)], method, method.weights)
        diagnostics = collect_diagnostics(objective, [batch])
        assert ("alp_attention" in diagnostics) == expect_alpha
    assert build_method({"method": "okd"}, student, [teacher]).reads_teacher_prefixes
