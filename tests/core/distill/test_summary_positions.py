"""A row's summary state does not depend on the batch it sits in: the summary token is found from
the attention mask (first / last real token) whichever side the batch is padded on.

Every path that reads a summary token is checked against the row run alone: ``Features.cls()``
(ALP/PKD, the teacher-output cache, multi-teacher ``sentence_repr: summary``, figures), the
masked mean (``Features.mean_pooled()``) and TED's filter pooling (``TaskFilters.head_logits``).
"""

from __future__ import annotations

import pytest
import torch

from bert_kd.core.distill.outputs import Features, forward_features, summary_token_index
from bert_kd.core.distill.ted_filters.filters import TaskFilters
from tests.core.distill.tiny_encoders import tiny_encoder

LONG, SHORT = 6, 3


def tiny_model(family: str):
    return tiny_encoder(family)


def batch_and_alone(side: str):
    """A 2-row batch (a 6-token row and a 3-token row padded to 6 on ``side``) and the short row alone."""
    generator = torch.Generator().manual_seed(1)
    long_row = torch.randint(5, 40, (LONG,), generator=generator)
    short_row = torch.randint(5, 40, (SHORT,), generator=generator)
    pad = torch.zeros(LONG - SHORT, dtype=torch.long)
    short_padded = torch.cat([pad, short_row]) if side == "left" else torch.cat([short_row, pad])
    short_mask = (
        torch.cat([pad, torch.ones(SHORT, dtype=torch.long)])
        if side == "left"
        else torch.cat([torch.ones(SHORT, dtype=torch.long), pad])
    )
    batch = {
        "input_ids": torch.stack([long_row, short_padded]),
        "attention_mask": torch.stack([torch.ones(LONG, dtype=torch.long), short_mask]),
    }
    alone = {"input_ids": short_row[None], "attention_mask": torch.ones(1, SHORT, dtype=torch.long)}
    return batch, alone


#: (model family, padding side) pairs where the model's own states are batch-invariant: XLNet's
#: attention is relative (either side), BERT's positions are absolute (so right padding only).
INVARIANT = [("bert", "right"), ("xlnet", "left"), ("xlnet", "right")]


@pytest.mark.parametrize("family,side", INVARIANT)
def test_summary_state_of_a_short_row_is_the_row_alone(family, side):
    model = tiny_model(family)
    batch, alone = batch_and_alone(side)
    with torch.no_grad():
        padded = forward_features(model, batch, hidden_states=True)
        single = forward_features(model, alone, hidden_states=True)
    if (family, side) != ("xlnet", "right"):  # XLNet's own head reads position -1, a pad on the right
        torch.testing.assert_close(padded.logits[1:], single.logits, atol=1e-4, rtol=0)
    assert (padded.cls()[1:] - single.cls()).abs().max() <= 1e-4
    assert (padded.mean_pooled()[1:] - single.mean_pooled()).abs().max() <= 1e-4


@pytest.mark.parametrize(
    "family,side,arch",
    [(f, s, a) for f, s in INVARIANT for a in ("linear", "mlp")] + [("bert", "right", "subsequent_layer")],
)  # XLNet layers cannot be filters
def test_ted_filter_pooling_of_a_short_row_is_the_row_alone(family, side, arch):
    model = tiny_model(family)
    filters = TaskFilters.build(model, [1, 2], arch).eval()
    assert filters.pool == ("last" if family == "xlnet" else "first")
    batch, alone = batch_and_alone(side)
    with torch.no_grad():
        padded = forward_features(model, batch, hidden_states=True)
        single = forward_features(model, alone, hidden_states=True)
        padded_heads = filters(padded.hidden_states, batch["attention_mask"])
        single_heads = filters(single.hidden_states, alone["attention_mask"])
    for ours, theirs in zip(padded_heads, single_heads):
        assert (ours[1:] - theirs).abs().max() <= 1e-4


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("summary", ["first", "last"])
def test_summary_token_index_is_the_first_or_last_real_token(summary, side):
    mask = (
        torch.tensor([[1, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 0]])
        if side == "left"
        else torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [0, 0, 0, 0]])
    )
    expected = {
        ("first", "left"): [0, 2, 0],
        ("last", "left"): [3, 3, 0],
        ("first", "right"): [0, 0, 0],
        ("last", "right"): [3, 1, 0],
    }[summary, side]
    assert summary_token_index(mask, summary).tolist() == expected
    # Features.cls() reads exactly that position of every layer
    states = torch.arange(3 * 4, dtype=torch.float).view(3, 4, 1)
    features = Features(
        logits=torch.zeros(3, 2), attention_mask=mask, hidden_states=(states, states + 100), summary_index=summary
    )
    rows = torch.arange(3)
    assert torch.equal(features.cls()[:, 0, 0], states[rows, torch.tensor(expected), 0])
    assert torch.equal(features.cls()[:, 1, 0], states[rows, torch.tensor(expected), 0] + 100)


def test_an_unknown_summary_is_refused():
    with pytest.raises(ValueError, match="'first' or 'last'"):
        summary_token_index(torch.ones(1, 3), "middle")


def test_jobs_reading_a_last_token_summary_get_their_own_key_material():
    from bert_kd.core.distill.outputs import summary_key_material

    bert, xlnet = tiny_model("bert"), tiny_model("xlnet")
    assert summary_key_material(bert) == {}  # first-token models: keys as before
    assert summary_key_material(bert, xlnet)["summary_token"] == "last real token"
    from bert_kd.core.distill.methods.multi_teacher.spans import span_attention_key_material

    assert span_attention_key_material(bert) == {}  # BERT-family teachers: multi-teacher keys as before
    assert "renormalised" in span_attention_key_material(xlnet)["span_attention"]
