"""The ``alp`` mechanism check: ALP's default α puts its weight on each example's informative teacher layer,
and the check fails when α does not follow the input (a score that ignores it) or is near-uniform."""

from __future__ import annotations

import torch

from bert_kd.analysis.mechanisms import CHECKS, MechanismResult
from bert_kd.analysis.mechanisms import alp as alp_check
from bert_kd.core.distill import losses


def test_the_default_alpha_follows_each_examples_informative_layer():
    assert CHECKS["alp"] is alp_check.check
    (result,) = alp_check.check()
    assert isinstance(result, MechanismResult) and result.method == "alp"
    assert result.holds, result.measured
    assert losses.ALP_DEFAULT_SIMILARITY in result.quantity
    assert (
        result.measured["top_is_informative_share_layer_1"]
        == result.measured["top_is_informative_share_layer_3"]
        == 1.0
    )


def test_a_score_that_ignores_the_input_breaks_it(monkeypatch):
    def same_for_every_example(student_cls, teacher_cls, similarity=None, temperature=None):
        per_layer = torch.arange(teacher_cls.shape[1], dtype=teacher_cls.dtype)  # layer n always preferred
        return per_layer.expand(student_cls.shape[0], student_cls.shape[1], -1).clone()

    monkeypatch.setattr(losses, "alp_scores", same_for_every_example)
    (result,) = alp_check.check()
    assert not result.holds
    assert result.measured["alpha_sd_across_examples_max"] == 0.0


def test_a_near_uniform_alpha_does_not_pass():
    result = alp_check.measure({"similarity": "cosine"})  # cosines in [−1, 1] at τ = 1: α close to 1/4
    assert not result.holds and result.measured["alpha_on_informative_mean"] < alp_check.WEIGHT
