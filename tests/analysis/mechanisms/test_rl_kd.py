"""RL-KD's mechanism check: the trained policy leaves the adversarial teacher and keeps the good one; with a
reward that ignores the actions (the student's loss before the step, as a reward drawn before the teachers are)
it cannot, and the check's line fails."""

from __future__ import annotations

import pytest

from bert_kd.analysis.mechanisms import rl_kd
from bert_kd.core.distill.methods.multi_teacher.rl_kd import ReinforcedTeacherSelection


@pytest.mark.slow
def test_the_trained_policy_chooses_the_good_teacher_and_leaves_the_adversarial_one():
    (result,) = rl_kd.check()
    assert result.holds, result
    assert result.measured["selection_share_good"] >= 0.8 and result.measured["selection_share_adversarial"] <= 0.2


@pytest.mark.slow
def test_a_reward_that_ignores_the_actions_fails_the_check(monkeypatch):
    monkeypatch.setattr(ReinforcedTeacherSelection, "rewards", lambda self, record: -record["ce_before"])
    (result,) = rl_kd.check()
    assert not result.holds, result
