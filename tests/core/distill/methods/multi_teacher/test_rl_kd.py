"""RL-KD (multi_teacher.rl_kd): the REINFORCE step by hand, a policy fixed on one teacher is single-teacher KD,
the agents' state resumes, bad options are refused."""

from __future__ import annotations

import math

import pytest
import torch

from bert_kd.core.distill.methods import build_method
from bert_kd.core.distill.outputs import Features
from tests.core.distill.methods.multi_teacher.helpers import soft_ce, tiny_bert

LABELS = torch.tensor([1, 0])


def _method(**options):
    return build_method(
        {"method": "rl_kd", "temperature": 2.0, **options}, tiny_bert(2, 8, 2), [tiny_bert(2, 8, 2)] * 2
    )


def _features(seed: int) -> Features:
    g = torch.Generator().manual_seed(seed)
    return Features(torch.randn(2, 2, generator=g), torch.ones(2, 1), extras={"cls": torch.randn(2, 3, 8, generator=g)})


def test_the_policy_gradient_is_the_hand_computed_reinforce_step():
    """Two teachers, two examples: ∂/∂b_k of −mean_j (R_j − b)·Σ_k log π(a_jk) is −mean_j (R_j − b)(a_jk − p_jk)
    for a logistic agent (∂ log σ(z)/∂z = 1 − σ, ∂ log(1 − σ(z))/∂z = −σ)."""
    method = _method(seed=5)
    method.train()
    student = Features(torch.randn(2, 2, requires_grad=True), torch.ones(2, 1), extras={})
    teachers = {0: _features(1), 1: _features(2)}
    terms = method.terms(student, teachers, {"labels": LABELS})
    generator = torch.Generator().manual_seed(5 * 1_000_003)  # the first draw
    probabilities = torch.full((2, 2), 0.5)  # zero-initialised agents
    actions = (torch.rand((2, 2), generator=generator) < probabilities).float()
    reward = -torch.nn.functional.cross_entropy(student.logits.detach(), LABELS, reduction="none")
    advantage = reward - 0.0  # the baseline starts at 0
    terms["policy"].backward()
    expected = -(advantage[:, None] * (actions - probabilities)).mean(0)
    assert method.policy.bias.grad == pytest.approx(expected, abs=1e-6)
    assert float(method.chosen.sum()) == float(actions.sum()) and float(method.examples) == 2


def test_a_policy_that_always_picks_one_teacher_is_single_teacher_kd():
    method = _method(beta=0.5, scale_by_t2=True)
    method.train()
    with torch.no_grad():
        method.policy.bias.copy_(torch.tensor([1e4, -1e4]))  # π(teacher 0) = 1, π(teacher 1) = 0
    student = Features(torch.randn(2, 2), torch.ones(2, 1), extras={})
    teachers = {0: _features(1), 1: _features(2)}
    terms = method.terms(student, teachers, {"labels": LABELS})
    single = 4.0 * soft_ce(student.logits, teachers[0].logits, 2.0)  # τ² · soft-CE to teacher 0
    assert float(terms["pred"]) == pytest.approx(float(single), abs=1e-6)
    assert method.selection_shares() == {"teacher_0": 1.0, "teacher_1": 0.0}


def test_the_agents_state_resumes_with_the_run():
    """Agents, their draw counter, baseline and selection counts are the method's state: a resumed run draws and
    updates as the uninterrupted one."""
    first = _method(seed=3)
    first.train()
    student = Features(torch.randn(2, 2), torch.ones(2, 1), extras={})
    teachers = {0: _features(1), 1: _features(2)}
    for _ in range(3):
        first.terms(student, teachers, {"labels": LABELS})
    resumed = _method(seed=3)
    resumed.load_state_dict(first.state_dict())
    resumed.train()
    assert int(resumed.draw_step) == 3 and float(resumed.baseline) == pytest.approx(float(first.baseline))
    a = first.terms(student, teachers, {"labels": LABELS})
    b = resumed.terms(student, teachers, {"labels": LABELS})
    assert float(a["pred"]) == float(b["pred"]) and torch.equal(first.chosen, resumed.chosen)


def test_rl_kd_trains_in_the_loop_with_the_policy_at_its_own_learning_rate(hetero):
    from bert_kd.core.distill.methods.multi_teacher import build_multi_teacher_objective
    from bert_kd.core.training.config import TrainingConfig
    from tests.core.distill.methods.multi_teacher.helpers import fit_briefly

    method_config = {"method": "rl_kd", "policy_learning_rate": 0.05, "seed": 1}
    objective = build_multi_teacher_objective(hetero.student(), hetero.teachers, method_config)
    groups = objective.parameter_groups(TrainingConfig.from_dict({"learning_rate": 1e-4}))
    policy = [g for g in groups if any(p is objective.method.policy.bias for p in g["params"])]
    assert len(policy) == 1 and policy[0]["lr"] == 0.05 and len(policy[0]["params"]) == 2
    result, logged = fit_briefly(objective, hetero, steps=4)
    assert result.global_step == 4 and all(torch.isfinite(torch.tensor(m["train/loss"])) for m in logged)
    shares = objective.method.selection_shares()
    assert set(shares) == set(objective.method.teacher_names) and all(0 <= v <= 1 for v in shares.values())


@pytest.mark.parametrize(
    "options, message",
    [
        ({"policy_learning_rate": -1e-3}, "policy_learning_rate"),
        ({"state_features": ["teacher_mood"]}, "state feature"),
    ],
)
def test_bad_rl_kd_options_are_refused_naming_the_key(options, message):
    with pytest.raises(ValueError, match=message):
        _method(**options)


def test_the_initial_policy_selects_every_teacher_half_the_time():
    method = _method()
    states = torch.zeros(4, 2, len(method.features))
    assert torch.allclose(method.policy(states), torch.full((4, 2), 0.5))
    assert math.isclose(float(method.baseline), 0.0)
