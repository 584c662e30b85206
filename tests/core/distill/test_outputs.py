"""Tests for bert_kd.core.distill.outputs: hidden states, rebuilt attention scores, [CLS] views."""

from __future__ import annotations

import math

import pytest
import torch

from bert_kd.core.distill.outputs import Features, forward_features, summary_position
from bert_kd.core.models import attention_implementation, find_layer_stack, load_classifier, load_tokenizer

TEXTS = ["the movie was great", "a dog sat on the mat and it was very fun", "no"]


@pytest.fixture(scope="module")
def model(tiny_teacher_dir):
    torch.manual_seed(0)
    return load_classifier(str(tiny_teacher_dir), 2).eval()


@pytest.fixture(scope="module")
def tokenizer(tiny_teacher_dir):
    return load_tokenizer(str(tiny_teacher_dir))


def padded_batch(tokenizer, texts=TEXTS):
    batch = dict(tokenizer(list(texts), padding=True, return_tensors="pt"))
    assert (batch["attention_mask"] == 0).any()  # the fixture batch really has padding
    return batch


def test_hidden_states_have_one_entry_per_layer_plus_embeddings(model, tokenizer):
    batch = padded_batch(tokenizer)
    features = forward_features(model, batch, hidden_states=True)
    assert isinstance(features, Features)
    assert len(features.hidden_states) == model.config.num_hidden_layers + 1 == 5
    assert features.num_layers == 4
    b, t = batch["input_ids"].shape
    assert all(h.shape == (b, t, 32) for h in features.hidden_states)
    assert features.attention_scores is None
    with torch.no_grad():
        reference = model(**batch, output_hidden_states=True)
    torch.testing.assert_close(features.logits, reference.logits)
    for ours, theirs in zip(features.hidden_states, reference.hidden_states):
        torch.testing.assert_close(ours, theirs)
    assert torch.equal(features.attention_mask, batch["attention_mask"])


def test_logits_only_forward(model, tokenizer):
    features = forward_features(model, padded_batch(tokenizer))
    assert features.hidden_states is None and features.attention_scores is None
    assert features.logits.shape == (3, 2)
    with pytest.raises(ValueError, match="hidden states were not requested"):
        features.cls()
    with pytest.raises(ValueError, match="hidden states were not requested"):
        _ = features.num_layers


def manual_scores(model, hidden_states, layer: int) -> torch.Tensor:
    """QKᵀ/√d of 1-based ``layer`` computed from its input ``hidden_states[layer - 1]``."""
    attention = find_layer_stack(model)[2][layer - 1].attention.self
    x = hidden_states[layer - 1]
    b, t, d = x.shape
    heads = model.config.num_attention_heads
    q = attention.query(x).view(b, t, heads, d // heads).permute(0, 2, 1, 3)
    k = attention.key(x).view(b, t, heads, d // heads).permute(0, 2, 1, 3)
    return torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(d // heads)


def test_attention_scores_equal_manual_qk_over_sqrt_d(model, tokenizer):
    batch = padded_batch(tokenizer)
    with torch.no_grad():
        features = forward_features(model, batch, attention_scores=True)
    assert features.hidden_states is not None  # scores imply hidden states
    assert len(features.attention_scores) == 4
    b, t = batch["input_ids"].shape
    for layer in range(1, 5):
        scores = features.attention_scores[layer - 1]
        assert scores.shape == (b, 4, t, t)
        expected = manual_scores(model, features.hidden_states, layer)
        torch.testing.assert_close(scores, expected, rtol=1e-5, atol=1e-5)
        # scores are not probabilities: rows do not sum to 1 and take negative values
        assert not torch.allclose(scores.exp().sum(-1), torch.ones(b, 4, t))


@pytest.mark.parametrize("padded", [False, True])
def test_softmax_of_scores_equals_eager_attention_probabilities(model, tokenizer, padded):
    batch = padded_batch(tokenizer) if padded else dict(tokenizer(TEXTS[:1], return_tensors="pt"))
    with torch.no_grad():
        features = forward_features(model, batch, attention_scores=True)
        with attention_implementation(model, "eager"):  # loaded models run SDPA, which returns no maps
            eager = model(**batch, output_attentions=True).attentions
    assert len(eager) == 4
    mask = batch["attention_mask"]
    additive = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
    for scores, probs in zip(features.attention_scores, eager):
        torch.testing.assert_close(torch.softmax(scores + additive, dim=-1), probs, rtol=1e-5, atol=1e-6)
        if padded:  # padding keys get no attention
            assert torch.all(probs.masked_select(mask[:, None, None, :].expand_as(probs) == 0) < 1e-6)


def test_attention_scores_carry_gradients_and_hooks_are_removed(model, tokenizer):
    batch = padded_batch(tokenizer)
    features = forward_features(model, batch, attention_scores=True)
    assert features.attention_scores[0].requires_grad
    features.attention_scores[-1].mean().backward()
    query = find_layer_stack(model)[2][-1].attention.self.query
    assert query.weight.grad is not None and query.weight.grad.abs().sum() > 0
    model.zero_grad(set_to_none=True)
    for layer in find_layer_stack(model)[2]:
        assert not layer.attention.self.query._forward_hooks
        assert not layer.attention.self.key._forward_hooks


def test_cls_and_mean_pooled_views(model, tokenizer):
    batch = padded_batch(tokenizer)
    features = forward_features(model, batch, hidden_states=True)
    cls = features.cls()
    assert cls.shape == (3, 5, 32)  # (B, L+1, H)
    for i, h in enumerate(features.hidden_states):
        assert torch.equal(cls[:, i], h[:, 0])
    pooled = features.mean_pooled()
    assert pooled.shape == (3, 5, 32)
    n_real = int(batch["attention_mask"][2].sum())
    torch.testing.assert_close(pooled[2, 4], features.hidden_states[4][2, :n_real].mean(0))
    assert summary_position(model) == "first"


def test_cls_last_summary_takes_the_last_real_token(model, tokenizer):
    batch = padded_batch(tokenizer)
    features = forward_features(model, batch, hidden_states=True)
    features.summary_index = "last"  # XLNet convention (right padding)
    last = features.cls()
    lengths = batch["attention_mask"].sum(1)
    for row in range(3):
        for i, h in enumerate(features.hidden_states):
            assert torch.equal(last[row, i], h[row, lengths[row] - 1])


def test_prefixed_inputs_are_read(model, tokenizer):
    batch = padded_batch(tokenizer)
    prefixed = {"t1_" + k: v for k, v in batch.items()}
    prefixed["input_ids"] = torch.zeros_like(batch["input_ids"])  # the unprefixed columns are ignored
    with torch.no_grad():
        ours = forward_features(model, prefixed, hidden_states=True, prefix="t1_")
        theirs = forward_features(model, batch, hidden_states=True)
    torch.testing.assert_close(ours.logits, theirs.logits)
    assert torch.equal(ours.attention_mask, batch["attention_mask"])


def test_non_bert_architectures_fall_back_to_log_probabilities(tokenizer):
    from transformers import DistilBertConfig, DistilBertForSequenceClassification

    torch.manual_seed(0)
    config = DistilBertConfig(
        vocab_size=len(tokenizer),
        dim=32,
        n_layers=2,
        n_heads=4,
        hidden_dim=64,
        max_position_embeddings=64,
        num_labels=2,
    )
    config._attn_implementation = "eager"
    distil = DistilBertForSequenceClassification(config).eval()
    batch = {k: v for k, v in padded_batch(tokenizer).items() if k != "token_type_ids"}
    with torch.no_grad():
        features = forward_features(distil, batch, attention_scores=True)
        probs = distil(**batch, output_attentions=True).attentions
    assert len(features.attention_scores) == len(features.hidden_states) - 1 == 2
    for scores, p in zip(features.attention_scores, probs):
        torch.testing.assert_close(scores, torch.log(p.clamp_min(1e-12)))
        torch.testing.assert_close(torch.softmax(scores, -1), p, rtol=1e-5, atol=1e-6)
