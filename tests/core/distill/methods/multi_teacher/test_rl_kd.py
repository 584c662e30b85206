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


BATCH = {
    "input_ids": torch.tensor([[2, 5, 6, 3], [2, 7, 3, 0]]),
    "attention_mask": torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]]),
}


def _step(method, seed: int = 0, batch=None):
    """One training step's terms with the method's own student run on ``batch`` (default ``BATCH``)."""
    batch = {**(batch or BATCH), "labels": LABELS}
    logits = method.student_model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    student = Features(logits, batch["attention_mask"], extras={})
    return method.terms(student, {0: _features(1 + seed), 1: _features(2 + seed)}, batch), logits


def _update(student):
    """A stand-in for the optimiser's step: an in-place change of the student's parameters."""
    with torch.no_grad():
        student.classifier.bias.add_(torch.tensor([0.3, -0.3]))


def test_the_policy_gradient_is_the_hand_computed_reinforce_step_on_the_reward_after_the_update():
    """Two teachers, two examples. The first step draws actions and has no reward yet; after the student's update the
    next step rewards them with R_j = CE_j(before) − CE_j(after) against b_j, the others' mean reward: ∂/∂b_k of
    −mean_j (R_j − b_j)·Σ_k log π(a_jk) is −mean_j (R_j − b_j)(a_jk − p_jk) for a logistic agent
    (∂ log σ(z)/∂z = 1 − σ, ∂ log(1 − σ(z))/∂z = −σ)."""
    method = _method(seed=5)
    method.train()
    first, before = _step(method)
    assert float(first["policy"]) == 0.0  # nothing learned from yet: no reward
    generator = torch.Generator().manual_seed(5 * 1_000_003)  # the first draw
    probabilities = torch.full((2, 2), 0.5)  # zero-initialised agents
    actions = (torch.rand((2, 2), generator=generator) < probabilities).float()
    _update(method.student_model)
    after = method.student_model(**BATCH).logits
    ce = torch.nn.functional.cross_entropy
    reward = ce(before.detach(), LABELS, reduction="none") - ce(after.detach(), LABELS, reduction="none")
    advantage = reward - reward.flip(0)  # the baseline of each example: the mean reward of the batch's others
    second, _ = _step(method, seed=7)
    second["policy"].backward()
    expected = -(advantage[:, None] * (actions - probabilities)).mean(0)
    assert method.policy.bias.grad == pytest.approx(expected, abs=1e-6)
    assert float(method.baseline) == pytest.approx(0.1 * float(reward.mean()), abs=1e-7)
    assert float(method.chosen.sum()) >= float(actions.sum()) and float(method.examples) == 4


def test_the_reward_follows_the_actions():
    """The same update rewards a batch whose actions pushed the student toward the gold label more than one whose
    actions pushed it away: the reward is the student's gain after learning from the selected teachers."""
    method = _method(seed=5)
    method.train()
    _step(method)
    record = dict(method.pending)
    with torch.no_grad():
        method.student_model.classifier.bias.add_(torch.where(torch.arange(2) == 1, 1.0, -1.0))  # toward label 1
    gains = method.rewards(record)
    assert float(gains[0]) > 0 > float(gains[1])  # example 0's label is 1, example 1's is 0


def test_no_reward_while_the_student_has_not_been_updated():
    method = _method(seed=5)
    method.train()
    _step(method)
    terms, _ = _step(method)  # no optimiser step in between (a micro-batch of an accumulation round)
    assert float(terms["policy"]) == 0.0 and float(method.baseline) == 0.0


def test_a_policy_that_always_picks_one_teacher_is_single_teacher_kd():
    method = _method(beta=0.5, scale_by_t2=True)
    method.train()
    with torch.no_grad():
        method.policy.bias.copy_(torch.tensor([1e4, -1e4]))  # π(teacher 0) = 1, π(teacher 1) = 0
    terms, logits = _step(method)
    single = 4.0 * soft_ce(logits, _features(1).logits, 2.0)  # τ² · soft-CE to teacher 0
    assert float(terms["pred"]) == pytest.approx(float(single), abs=1e-6)
    assert method.selection_shares() == {"teacher_0": 1.0, "teacher_1": 0.0}


def test_the_agents_state_resumes_with_the_run():
    """Agents, their draw counter, baseline, selection counts and the batch waiting for its reward are the method's
    state: a resumed run draws and updates as the uninterrupted one."""
    first = _method(seed=3)
    first.train()
    for step in range(3):
        _step(first, seed=step)
        _update(first.student_model)
    resumed = _method(seed=3)
    resumed.load_state_dict(first.state_dict())
    resumed.train()
    assert int(resumed.draw_step) == 3 and float(resumed.baseline) == pytest.approx(float(first.baseline))
    assert first.pending.keys() == resumed.pending.keys()
    assert all(torch.equal(first.pending[k].float(), resumed.pending[k].float()) for k in first.pending)
    with torch.no_grad():  # the resumed run's student is the checkpoint's
        for p, q in zip(first.student_model.parameters(), resumed.student_model.parameters()):
            q.copy_(p)
    baseline = float(first.baseline)
    a, _ = _step(first, seed=9)
    b, _ = _step(resumed, seed=9)
    assert float(a["pred"]) == float(b["pred"]) and float(a["policy"]) == pytest.approx(float(b["policy"]), abs=1e-7)
    assert float(first.baseline) != baseline  # the waiting batch was rewarded, in both runs alike
    assert float(resumed.baseline) == pytest.approx(float(first.baseline)) and torch.equal(first.chosen, resumed.chosen)


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


def test_an_epoch_without_training_examples_reports_nothing():
    assert _method().epoch_report() == {}


def test_the_initial_policy_selects_every_teacher_half_the_time():
    method = _method()
    states = torch.zeros(4, 2, len(method.features))
    assert torch.allclose(method.policy(states), torch.full((4, 2), 0.5))
    assert math.isclose(float(method.baseline), 0.0)


def _fit_rl_kd(hetero, checkpoint_dir, crash_after=None):
    """Two epochs of RL-KD (32 rows, batch 8: 4 steps an epoch) checkpointed every 3 steps and at each epoch's end;
    with ``crash_after``, the method dies after that many training steps as a killed job would."""
    from bert_kd.core.distill.methods.multi_teacher import build_multi_teacher_objective
    from bert_kd.core.training.config import TrainingConfig
    from bert_kd.core.training.loop import fit

    torch.manual_seed(0)
    objective = build_multi_teacher_objective(
        hetero.student(), hetero.teachers[:2], {"method": "rl_kd", "policy_learning_rate": 0.05, "seed": 1}
    )
    terms, calls = objective.method.terms, []

    def dying_terms(*args, **kwargs):
        if objective.method.training:
            calls.append(1)
            if crash_after is not None and len(calls) > crash_after:
                raise KeyboardInterrupt("simulated kill")
        return terms(*args, **kwargs)

    objective.method.terms = dying_terms
    config = TrainingConfig(
        epochs=2, batch_size=8, eval_batch_size=16, log_every_steps=1, progress_bar=False, cpu=True, seed=0,
        warmup_ratio=0.0, learning_rate=1e-3, checkpoint_every_steps=3,
        checkpoint_dir=None if checkpoint_dir is None else str(checkpoint_dir),
    )  # fmt: skip
    logged = []
    result = fit(
        objective, hetero.ds["train"], hetero.ds["validation"], config, collator=hetero.collator,
        evaluate_fn=lambda p, l: {"accuracy": float((p.argmax(-1) == l).mean())},
        log_fn=lambda m, step: logged.append((step, dict(m))),
    )  # fmt: skip
    return result, objective.method, logged


def test_a_killed_rl_kd_job_resumes_its_policy_through_the_trainer(hetero, tmp_path):
    """Killed in its 2nd epoch and resumed from the trainer's checkpoint, the job ends with the uninterrupted
    one's agents, draw counter, baseline, selection counts and per-epoch shares."""
    straight, straight_method, logged = _fit_rl_kd(hetero, tmp_path / "straight")
    with pytest.raises(KeyboardInterrupt):
        _fit_rl_kd(hetero, tmp_path / "resumed", crash_after=6)
    resumed, resumed_method, _ = _fit_rl_kd(hetero, tmp_path / "resumed")
    assert resumed.resumed_from_step == 6 and straight.global_step == resumed.global_step == 8
    for name in ("policy.weight", "policy.bias", "draw_step", "baseline", "chosen", "examples"):
        assert torch.equal(straight_method.state_dict()[name], resumed_method.state_dict()[name]), name
    assert [r.get("observed") for r in resumed.history] == [r.get("observed") for r in straight.history]
    # each epoch's selection shares: logged at the epoch's end and kept in its history record
    shares = [record["observed"] for record in straight.history]
    names = straight_method.teacher_names
    assert len(shares) == 2 and all(set(s) == {f"selection_share/{n}" for n in names} for s in shares)
    assert all(0.0 <= v <= 1.0 for s in shares for v in s.values())
    per_epoch = [m for _, m in logged if any(k.startswith("train/selection_share/") for k in m)]
    assert [{k.removeprefix("train/"): v for k, v in m.items()} for m in per_epoch] == shares
    run_share = straight_method.selection_shares()  # equal-sized epochs: the epochs' mean is the run's share
    assert all(sum(s[f"selection_share/{n}"] for s in shares) / 2 == pytest.approx(run_share[n]) for n in names)
    assert "observed" not in straight.best_metrics


def test_the_selection_figure_draws_one_line_per_teacher():
    from bert_kd.core.reports.plots import per_epoch_lines

    figure = per_epoch_lines(
        {
            1: {"selection_share/a": 0.4, "selection_share/b": 0.7},
            2: {"selection_share/a": 0.3, "selection_share/b": 0.8},
        },
        "rl_kd: teachers chosen per epoch",
        "share of examples",
    )
    lines = figure.axes[0].get_lines()
    assert [line.get_label() for line in lines] == ["a", "b"] and list(lines[1].get_ydata()) == [0.7, 0.8]
    with pytest.raises(ValueError, match="no values"):
        per_epoch_lines({}, "t", "y")


def test_rl_kd_students_are_keyed_by_its_reward_and_other_methods_keep_their_keys():
    """The reward changed (the student's gain after the update, not the loss before it): a student trained by
    RL-KD gets a key of its own; a method that declares nothing adds nothing to its students' keys."""
    from bert_kd.core.distill.methods import method_key_material

    assert method_key_material({"method": "rl_kd"}) == {
        "method_computation": {"reward": "gain_after_update", "baseline": "leave_one_out"}
    }
    assert method_key_material({"method": "multi_teacher"}) == {} and method_key_material({"method": "pkd"}) == {}
