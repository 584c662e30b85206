"""TED Stage II methods (ted, ted_kl) and the KD / LWD baselines (bert_kd.core.distill.methods.ted)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from bert_kd.core.distill import losses
from bert_kd.core.distill.methods import build_method
from bert_kd.core.distill.methods.ted import DEFAULT_TEMPERATURE, TED_GRID
from bert_kd.core.distill.objective import DistillationObjective, Teacher
from bert_kd.core.distill.outputs import Features
from bert_kd.core.distill.ted_filters import FilterPlacement, FilterTraining, TaskFilters, ted_layer_map, train_filters
from bert_kd.core.metrics import glue_metrics
from bert_kd.core.models import build_student
from bert_kd.core.training import TrainingConfig, fit
from tests.core.distill.ted_filters.helpers import (
    FAST,
    changed,
    handmade_features,
    identical,
    manual_kl,
    manual_masked_mse,
    set_identity,
    snapshot,
    tiny_bert,
)


def test_ted_term_on_handmade_tensors():
    teacher, student = tiny_bert(layers=4), tiny_bert(layers=2, seed=3)
    t_filters = TaskFilters.build(teacher, [1, 4], task="rte")
    set_identity(t_filters)
    with torch.no_grad():
        t_filters.filters[1].body.weight.mul_(2.0)  # g_t^2(H) = 2H
    method = build_method({"method": "ted", "teacher_filters": t_filters, "task": "rte"}, student, [teacher])
    assert method.weights == {"ce": 1.0, "pred": 1.0, "ted": 100.0}
    assert method.temperature == DEFAULT_TEMPERATURE == 2.0
    assert method.mapping == [1, 4]
    s_feat = handmade_features(1, layers=2)
    t_feat = handmade_features(2, layers=4)
    t_feat.attention_mask = s_feat.attention_mask
    labels = torch.tensor([0, 1])
    terms = method.terms(s_feat, {0: t_feat}, {"labels": labels})
    # student filters are copies of the teacher's: g_s^1 = I, g_s^2 = 2I
    mask = s_feat.attention_mask
    expected = manual_masked_mse(t_feat.hidden_states[1], s_feat.hidden_states[1], mask) + manual_masked_mse(
        2 * t_feat.hidden_states[4], 2 * s_feat.hidden_states[2], mask
    )
    assert terms["ted"].item() == pytest.approx(expected, rel=1e-5)
    assert terms["pred"].item() == pytest.approx(manual_kl(s_feat.logits, t_feat.logits, 2.0), rel=1e-5)
    assert terms["ce"].item() == pytest.approx(nn.functional.cross_entropy(s_feat.logits, labels).item())
    # padding does not matter
    s2 = copy.deepcopy(s_feat)
    s2.hidden_states = tuple(h.clone() for h in s2.hidden_states)
    s2.hidden_states[2][1, 2] += 100.0
    assert method.terms(s2, {0: t_feat}, {"labels": labels})["ted"].item() == pytest.approx(expected, rel=1e-5)
    # gradient reaches the student filters, never the teacher filters
    terms["ted"].backward()
    assert method.student_filters.filters[0].body.weight.grad is not None
    assert all(p.grad is None and not p.requires_grad for p in method.teacher_filters.parameters())
    assert all(not p.requires_grad for h in method.student_filters.heads() for p in h.parameters())


def test_ted_kl_term_on_handmade_tensors():
    teacher, student = tiny_bert(layers=4), tiny_bert(layers=2, seed=3)
    t_filters = TaskFilters.build(teacher, [1, 4], task="rte")
    set_identity(t_filters)
    method = build_method({"method": "ted_kl", "teacher_filters": t_filters, "temperature": 1.5}, student, [teacher])
    assert method.weights["ted"] == 1.0
    s_feat, t_feat = handmade_features(5, layers=2), handmade_features(6, layers=4)
    terms = method.terms(s_feat, {0: t_feat}, {"labels": torch.tensor([1, 0])})
    expected = 0.0
    for k, (s_layer, t_layer) in enumerate(((1, 1), (2, 4))):
        head = t_filters.filters[k].head  # student heads are copies of the teacher heads
        t_logits = head(t_feat.hidden_states[t_layer][:, 0])
        s_logits = head(s_feat.hidden_states[s_layer][:, 0])
        expected += manual_kl(s_logits, t_logits, 1.5)
    assert terms["ted"].item() == pytest.approx(expected, rel=1e-5)
    assert all(p.requires_grad for h in method.student_filters.heads() for p in h.parameters())


def test_kd_and_lwd_terms():
    teacher, student = tiny_bert(layers=4, hidden=8), tiny_bert(layers=2, hidden=6, heads=2, seed=3)
    s_feat, t_feat = handmade_features(7, width=6, layers=2), handmade_features(8, width=8, layers=4)
    labels = {"labels": torch.tensor([0, 1])}

    kd = build_method({"method": "kd"}, student, [teacher])
    assert kd.student_needs == {} and kd.weights == {"ce": 1.0, "pred": 1.0}
    terms = kd.terms(s_feat, {0: t_feat}, labels)
    assert set(terms) == {"ce", "pred"}
    assert terms["pred"].item() == pytest.approx(losses.kl_div_loss(s_feat.logits, t_feat.logits, 2.0).item())

    lwd = build_method({"method": "lwd", "weights": {"layer": 10}}, student, [teacher])
    assert lwd.mapping == [1, 4] and lwd.weights == {"ce": 1.0, "pred": 1.0, "layer": 10.0}
    assert [tuple(p.weight.shape) for p in lwd.projections] == [(8, 6), (8, 6)]
    terms = lwd.terms(s_feat, {0: t_feat}, labels)
    mask = s_feat.attention_mask
    expected = sum(
        manual_masked_mse(t_feat.hidden_states[t], lwd.projections[k](s_feat.hidden_states[k + 1]).detach(), mask)
        for k, t in enumerate([1, 4])
    )
    assert terms["layer"].item() == pytest.approx(expected, rel=1e-5)

    reg = build_method({"method": "kd"}, student, [teacher], regression=True)
    s1, t1 = torch.randn(2, 1), torch.randn(2, 1)
    f_s = Features(logits=s1, attention_mask=mask)
    f_t = Features(logits=t1, attention_mask=mask)
    assert reg.terms(f_s, {0: f_t}, {"labels": torch.tensor([0.5, 1.0])})["pred"].item() == pytest.approx(
        nn.functional.mse_loss(s1, t1).item()
    )


def test_method_option_errors():
    teacher, student = tiny_bert(layers=4), tiny_bert(layers=2, seed=3)
    t_filters = TaskFilters.build(teacher, [1, 4], task="rte")
    with pytest.raises(ValueError, match="needs option teacher_filters"):
        build_method({"method": "ted"}, student, [teacher])
    with pytest.raises(ValueError, match="does not match the layers"):
        build_method({"method": "ted", "teacher_filters": t_filters, "mapping": [2, 4]}, student, [teacher])
    with pytest.raises(ValueError, match="outside 1..4"):
        build_method({"method": "lwd", "mapping": [1, 7]}, student, [teacher])
    with pytest.raises(ValueError, match="trained for task 'rte', not 'sst2'"):
        build_method({"method": "ted", "teacher_filters": t_filters, "task": "sst2"}, student, [teacher])
    with pytest.raises(ValueError, match="fingerprint"):
        build_method({"method": "ted", "teacher_filters": t_filters}, student, [tiny_bert(layers=4, seed=9)])
    ok = build_method(
        {"method": "ted", "teacher_filters": t_filters, "task": "sst2", "allow_filter_mismatch": True},
        student,
        [teacher],
    )
    assert ok.mapping == [1, 4]
    narrow = tiny_bert(layers=2, hidden=4, heads=2)
    with pytest.raises(ValueError, match="student width 4 != teacher width 8"):
        build_method({"method": "ted", "teacher_filters": t_filters}, narrow, [teacher])
    random_route = build_method(
        {"method": "ted", "teacher_filters": t_filters, "student_filters": "random"}, narrow, [teacher]
    )
    assert random_route.student_filters.in_width == 4 and random_route.student_filters.out_width == 8
    with pytest.raises(ValueError, match="unknown option"):
        build_method({"method": "ted", "teacher_filters": t_filters, "alpha": 1}, student, [teacher])
    with pytest.raises(ValueError, match="exactly one teacher"):
        build_method({"method": "ted", "teacher_filters": t_filters}, student, [teacher, teacher])
    assert TED_GRID["alpha1"] == (1.0, 2.5, 5.0, 10.0) and 100.0 in TED_GRID["alpha2"]


def test_teacher_filters_stay_in_eval_mode():
    teacher, student = tiny_bert(layers=4), tiny_bert(layers=2, seed=3)
    t_filters = TaskFilters.build(teacher, [1, 4], "subsequent_layer", task="rte")
    method = build_method({"method": "ted", "teacher_filters": t_filters}, student, [teacher])
    objective = DistillationObjective(student, [Teacher(teacher)], method, method.weights)
    objective.train()
    assert not method.teacher_filters.training and not any(m.training for m in method.teacher_filters.modules())
    assert method.student_filters.training and not objective.teacher_0.training
    assert method.teacher_filters is not t_filters  # a frozen copy; the caller's object is untouched


@pytest.mark.parametrize("name", ["ted", "ted_kl"])
def test_stage2_through_fit(rte, tmp_path, name):
    teacher, data, collator = rte
    teacher = copy.deepcopy(teacher)
    layers = ted_layer_map("distilbert", 4, 2)
    t_filters, _ = train_filters(
        teacher,
        data["train"],
        None,
        FilterPlacement(layers, "rte"),
        FilterTraining(TrainingConfig(max_steps=3, **FAST), collator),
    )
    t_filters.save(tmp_path / "filters")
    student, _ = build_student(teacher, 2, "distilbert")
    method = build_method(
        {"method": name, "teacher_filters": str(tmp_path / "filters"), "task": "rte"}, student, [teacher]
    )
    objective = DistillationObjective(student, [Teacher(teacher)], method, method.weights)
    teacher_before, t_filters_before = snapshot(teacher), snapshot(method.teacher_filters)
    student_before, s_filters_before = snapshot(student), snapshot(method.student_filters)
    logged = []
    result = fit(
        objective,
        data["train"],
        data["validation"],
        TrainingConfig(max_steps=4, **FAST),
        collator=collator,
        evaluate_fn=lambda p, y: glue_metrics("rte", p, y),
        log_fn=lambda m, s: logged.append(m),
    )
    assert result.global_step == 4 and "accuracy" in result.best_metrics
    assert {"train/ce", "train/pred", "train/ted"} <= set(logged[0])
    assert identical(teacher_before, teacher)
    assert identical(t_filters_before, method.teacher_filters)
    assert changed(student_before, student)
    assert changed(s_filters_before, method.student_filters)
    heads_before = {k: v for k, v in s_filters_before.items() if ".head." in k}
    heads_changed = any(not torch.equal(v, method.student_filters.state_dict()[k]) for k, v in heads_before.items())
    assert heads_changed == (name == "ted_kl")  # ted drops the heads


@pytest.mark.parametrize("name", ["kd", "lwd"])
def test_baselines_through_fit(rte, name):
    teacher, data, collator = rte
    teacher = copy.deepcopy(teacher)
    student, _ = build_student(teacher, 2, "distilbert")
    method = build_method({"method": name}, student, [teacher])
    objective = DistillationObjective(student, [Teacher(teacher)], method, method.weights)
    teacher_before, student_before = snapshot(teacher), snapshot(student)
    aux_before = snapshot(method)
    fit(objective, data["train"], None, TrainingConfig(max_steps=3, **FAST), collator=collator)
    assert identical(teacher_before, teacher)
    assert changed(student_before, student)
    if name == "lwd":
        assert changed(aux_before, method)
