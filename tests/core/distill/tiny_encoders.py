"""A 2-layer random BERT (eager attention) or XLNet classifier with a 40-token vocabulary: the models of
the attention-kernel and summary-position tests."""

from __future__ import annotations

import torch


def tiny_encoder(family: str):
    """``family`` "xlnet" or "bert", seeded, in eval mode."""
    from transformers import BertConfig, BertForSequenceClassification, XLNetConfig, XLNetForSequenceClassification

    torch.manual_seed(0)
    if family == "xlnet":
        config = XLNetConfig(vocab_size=40, d_model=32, n_layer=2, n_head=4, d_inner=64, num_labels=2)
        return XLNetForSequenceClassification(config).eval()
    config = BertConfig(
        vocab_size=40,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        num_labels=2,
        attn_implementation="eager",
    )
    return BertForSequenceClassification(config).eval()
