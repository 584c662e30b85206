"""The attention-map target of TinyBERT's L_attn and the multi-teacher Eq. 6: pre-softmax scores when
both models give them, log-probabilities on both sides when one is an XLNet (which gives only
probabilities)."""

from __future__ import annotations

import pytest
import torch

from bert_kd.core.distill import losses
from bert_kd.core.distill.outputs import (
    LOG_PROB_FLOOR,
    attention_in_one_space,
    attention_log_probs,
    forward_features,
)
from bert_kd.core.models import attention_implementation
from tests.core.distill.test_attention_kernels import padded_batch, tiny_model


@pytest.mark.parametrize("side", ["left", "right"])
def test_an_xlnet_gives_log_probabilities_and_a_bert_pre_softmax_scores(side):
    batch = padded_batch(side)
    with torch.no_grad():
        xlnet = forward_features(tiny_model("xlnet"), batch, attention_scores=True)
        bert = forward_features(tiny_model("bert"), batch, attention_scores=True)
    assert xlnet.attention_space == "log_probs" and bert.attention_space == "scores"
    keys = batch["attention_mask"][:, None, None, :].bool()
    for log_p in xlnet.attention_scores:  # rows of real keys sum to one
        probabilities = log_p.exp().masked_fill(~keys, 0).sum(-1)
        real_queries = batch["attention_mask"][:, None, :].bool().expand_as(probabilities)
        torch.testing.assert_close(probabilities[real_queries], torch.ones(int(real_queries.sum())), atol=1e-5, rtol=0)


def test_two_bert_style_models_compare_pre_softmax_scores_as_written():
    batch = padded_batch("right")
    with torch.no_grad():
        student = forward_features(tiny_model("bert"), batch, attention_scores=True)
        teacher = forward_features(tiny_model("bert"), batch, attention_scores=True)
    s_maps, t_maps, space = attention_in_one_space(student, teacher)
    assert space == "scores"
    assert all(torch.equal(a, b) for a, b in zip(s_maps, student.attention_scores))


@pytest.mark.parametrize("side", ["left", "right"])
def test_a_bert_student_against_an_xlnet_teacher_is_compared_in_log_probabilities(side):
    batch = padded_batch(side)
    bert = tiny_model("bert")
    with torch.no_grad():
        student = forward_features(bert, batch, attention_scores=True)
        teacher = forward_features(tiny_model("xlnet"), batch, attention_scores=True)
        with attention_implementation(bert, "eager"):
            probabilities = bert(**batch, output_attentions=True).attentions
    s_maps, t_maps, space = attention_in_one_space(student, teacher)
    assert space == "log_probs" and t_maps == list(teacher.attention_scores)
    keys = batch["attention_mask"][:, None, None, :].bool()
    for ours, p in zip(s_maps, probabilities):  # the student's side: log of its own softmax
        expected = torch.log(p.clamp_min(1e-12))
        torch.testing.assert_close(
            ours.masked_select(keys.expand_as(ours)),
            expected.masked_select(keys.expand_as(expected)),
            atol=1e-5,
            rtol=1e-5,
        )
        assert ours.min() >= LOG_PROB_FLOOR - 1e-6


def test_the_log_probability_target_ignores_a_per_row_shift_of_the_student_scores():
    """MSE of raw scores against log-probabilities counts each row's log-normaliser; in one space it does not."""
    batch = padded_batch("left")
    mask = batch["attention_mask"]
    with torch.no_grad():
        student = forward_features(tiny_model("bert"), batch, attention_scores=True)
        teacher = forward_features(tiny_model("xlnet"), batch, attention_scores=True)
    shifted = [a + torch.randn(a.shape[:-1] + (1,)) * 5 for a in student.attention_scores]

    def loss(scores):
        import dataclasses

        s_maps, t_maps, _ = attention_in_one_space(dataclasses.replace(student, attention_scores=scores), teacher)
        return losses.attention_score_mse(s_maps[0], t_maps[0], mask)

    torch.testing.assert_close(loss(shifted), loss(list(student.attention_scores)), atol=1e-4, rtol=1e-4)
    raw = losses.attention_score_mse(student.attention_scores[0], teacher.attention_scores[0], mask)
    raw_shifted = losses.attention_score_mse(shifted[0], teacher.attention_scores[0], mask)
    assert abs(float(raw - raw_shifted)) > 1e-2  # the comparison this replaces was not invariant


def test_attention_log_probs_masks_padding_keys():
    scores = torch.zeros(1, 1, 3, 3)
    mask = torch.tensor([[1, 1, 0]])
    log_p = attention_log_probs(scores, mask)
    torch.testing.assert_close(log_p[0, 0, :, :2].exp(), torch.full((3, 2), 0.5))
    assert torch.all(log_p[0, 0, :, 2] == LOG_PROB_FLOOR)


def test_one_space_needs_attention_scores():
    batch = padded_batch("right")
    with torch.no_grad():
        plain = forward_features(tiny_model("bert"), batch)
    with pytest.raises(ValueError, match="attention scores were not requested"):
        attention_in_one_space(plain, plain)
