"""Small models and tensors shared by the TED tests (Stage I and the Stage II methods)."""

from __future__ import annotations

import torch
from torch import nn
from transformers import BertConfig, BertForSequenceClassification

from bert_kd.core.distill.outputs import Features
from bert_kd.core.distill.ted_filters import TaskFilters


def tiny_bert(layers=4, hidden=8, heads=2, num_labels=2, seed=0):
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=30,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=hidden * 2,
        max_position_embeddings=32,
        num_labels=num_labels,
    )
    return BertForSequenceClassification(config).eval()


def snapshot(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def identical(before: dict, module: nn.Module) -> bool:
    after = module.state_dict()
    return before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)


def changed(before: dict, module: nn.Module) -> bool:
    after = module.state_dict()
    return any(not torch.equal(before[k], after[k]) for k in before)


def set_identity(filters: TaskFilters) -> None:
    with torch.no_grad():
        for f in filters.filters:
            nn.init.eye_(f.body.weight)
            f.body.bias.zero_()


FAST = dict(
    batch_size=8,
    eval_batch_size=16,
    learning_rate=1e-2,
    warmup_ratio=0.0,
    progress_bar=False,
    cpu=True,
    log_every_steps=1,
)


def handmade_features(seed, width=8, layers=4, batch=2, length=3):
    g = torch.Generator().manual_seed(seed)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])[:batch, :length]
    hidden = tuple(torch.randn(batch, length, width, generator=g) for _ in range(layers + 1))
    logits = torch.randn(batch, 2, generator=g)
    return Features(logits=logits, attention_mask=mask, hidden_states=hidden)


def manual_masked_mse(a, b, mask):
    total, count = 0.0, 0
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            if mask[i, j]:
                total += float(((a[i, j] - b[i, j]) ** 2).mean())
                count += 1
    return total / count


def manual_kl(s_logits, t_logits, T):
    s_logits, t_logits = s_logits.detach(), t_logits.detach()
    p_t = torch.softmax(t_logits / T, -1)
    return float((p_t * (p_t.log() - torch.log_softmax(s_logits / T, -1))).sum(-1).mean())
