"""OKD, multi-teacher PKD and RSE-KD (multi_teacher.baselines)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from bert_kd.core.distill.methods import build_method
from bert_kd.core.distill.methods.multi_teacher import build_multi_teacher_objective
from bert_kd.core.distill.outputs import Features
from tests.core.distill.methods.multi_teacher.helpers import fit_briefly, soft_ce, tiny_bert


def test_okd_averages_soft_labels(hand_setup):
    s = hand_setup
    method = build_method(
        {"method": "okd", "beta": 0.7, "temperature": 2.0}, s.models.student, [s.models.t0, s.models.t1]
    )
    assert method.weights == pytest.approx({"ce": 0.3, "pred": 0.7})
    assert method.teacher_needs == {} and method.student_needs == {}
    terms = method.terms(s.student, s.teachers, s.batch)
    expected = (
        soft_ce(s.student.logits, s.teachers[0].logits, 2.0) + soft_ce(s.student.logits, s.teachers[1].logits, 2.0)
    ) / 2
    assert float(terms["pred"]) == pytest.approx(4.0 * float(expected), rel=1e-6)  # τ² = 4
    assert set(terms) == {"ce", "pred"}


def test_multi_pkd_normalised_cls_per_teacher():
    student = tiny_bert(2, 8, 2)
    teachers = [tiny_bert(4, 8, 2), tiny_bert(6, 12, 3)]
    method = build_method({"method": "multi_pkd", "alpha": 0.5, "beta": 0.5}, student, teachers)
    assert method.mappings == [[[2], []], [[3], []]]
    assert isinstance(method.projections[0], nn.Identity) and isinstance(method.projections[1], nn.Linear)
    assert method.weights == pytest.approx({"ce": 0.5, "pred": 0.25, "layer": 0.25})
    g = torch.Generator().manual_seed(0)
    one = torch.ones(2, 1)
    s = Features(torch.randn(2, 2, generator=g), one, extras={"cls": torch.randn(2, 3, 8, generator=g)})
    a = Features(torch.randn(2, 2, generator=g), one, extras={"cls": torch.randn(2, 5, 8, generator=g)})
    b = Features(torch.randn(2, 2, generator=g), one, extras={"cls": torch.randn(2, 7, 12, generator=g)})
    terms = method.terms(s, {0: a, 1: b}, {"labels": torch.tensor([1, 0])})
    unit = lambda x: x / x.norm(dim=-1, keepdim=True)  # noqa: E731
    with torch.no_grad():
        d0 = ((unit(s.cls()[:, 1]) - unit(a.cls()[:, 2])) ** 2).sum(-1).mean()  # student 1 <- teacher 2
        d1 = ((unit(method.projections[1](s.cls()[:, 1])) - unit(b.cls()[:, 3])) ** 2).sum(-1).mean()
    assert float(terms["layer"].detach()) == pytest.approx(float((d0 + d1) / 2), rel=1e-5)


def _rse(seed, k=3):
    return build_method({"method": "rse_kd", "seed": seed}, tiny_bert(2, 8, 2), [tiny_bert(2, 8, 2)] * k)


def test_rse_kd_draws_every_teacher_reproducibly():
    method = _rse(7)
    draws = [method.choose_teachers(3, True) for _ in range(300)]
    assert all(len(d) == 1 for d in draws)
    counts = [sum(d == [k] for d in draws) for k in range(3)]
    assert min(counts) >= 60, counts  # each teacher drawn (uniform: ~100 each)
    assert method.alignment_report()["teacher_0"]["draws"] == counts[0]
    same, other = _rse(7), _rse(8)
    assert [same.choose_teachers(3, True) for _ in range(300)] == draws  # same seed, same draws
    assert [other.choose_teachers(3, True) for _ in range(300)] != draws
    assert method.choose_teachers(3, False) == [0, 1, 2]  # evaluation / diagnostics: all teachers
    # Resuming from a saved state continues the same sequence.
    first = _rse(7)
    head = [first.choose_teachers(3, True) for _ in range(10)]
    resumed = _rse(7)
    resumed.load_state_dict(first.state_dict())
    assert head + [resumed.choose_teachers(3, True) for _ in range(20)] == draws[:30]


@pytest.mark.parametrize("method_name", ["okd", "multi_pkd", "rse_kd"])
def test_baselines_train_with_heterogeneous_teachers(hetero, method_name):
    objective = build_multi_teacher_objective(
        hetero.student(),
        hetero.teachers,
        {"method": method_name, "seed": 3} if method_name == "rse_kd" else {"method": method_name},
    )
    calls = [0, 0, 0]
    handles = [
        t.model.register_forward_hook(lambda *_, k=k: calls.__setitem__(k, calls[k] + 1))
        for k, t in enumerate(hetero.teachers)
    ]
    try:
        result, logged = fit_briefly(objective, hetero, steps=4)
    finally:
        for h in handles:
            h.remove()
    assert result.global_step == 4 and all(torch.isfinite(torch.tensor(m["train/loss"])) for m in logged)
    if method_name == "rse_kd":
        assert sum(calls) == 4  # one teacher forward per training batch
        assert sum(objective.method.draw_counts) == 4
    else:
        assert calls == [4, 4, 4]


@pytest.mark.parametrize("method_name", ["multi_teacher", "okd", "multi_pkd", "rse_kd"])
def test_scale_by_t2_is_an_explicit_option(hand_setup, method_name):
    """MT Eq. 1 literally with ``scale_by_t2: false``; × τ² (the default) otherwise."""
    s = hand_setup
    teachers = [s.models.t0, s.models.t1]
    base = {"method": method_name, "temperature": 5.0, "teacher_prefixes": ["", "t1_"]}
    if method_name == "rse_kd":
        base["seed"] = 1
    literal = build_method({**base, "scale_by_t2": False}, s.models.student, teachers)
    scaled = build_method({**base, "scale_by_t2": True}, s.models.student, teachers)
    default = build_method(base, s.models.student, teachers)
    eq1 = (
        soft_ce(s.student.logits, s.teachers[0].logits, 5.0) + soft_ce(s.student.logits, s.teachers[1].logits, 5.0)
    ) / 2
    assert float(literal.prediction_terms(s.student, s.teachers)) == pytest.approx(float(eq1), rel=1e-6)
    assert float(scaled.prediction_terms(s.student, s.teachers)) == pytest.approx(25.0 * float(eq1), rel=1e-6)
    assert default.scale_by_t2 is True
    with pytest.raises(ValueError, match="scale_by_t2"):
        build_method({**base, "scale_by_t2": "yes"}, s.models.student, teachers)
