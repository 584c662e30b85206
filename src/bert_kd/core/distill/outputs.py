"""One view of any HF encoder's outputs, so losses never touch model internals.

``forward_features`` runs a model on a batch and returns [`Features`][]: logits, per-layer
hidden states (index 0 = embeddings, 1..L = transformer layers, as in the papers), per-layer
pre-softmax attention scores QKᵀ/√d (TinyBERT's attention target) and the [CLS]/summary states.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from bert_kd.core.models import attention_implementation, find_layer_stack

#: Inputs a HF encoder accepts from our collated batches.
MODEL_INPUT_KEYS = ("input_ids", "attention_mask", "token_type_ids")


@dataclass
class Features:
    """What distillation losses may read from a model's forward pass."""

    logits: Tensor
    attention_mask: Tensor
    hidden_states: tuple[Tensor, ...] | None = None
    attention_scores: list[Tensor] | None = None
    summary_index: str = "first"
    #: what ``attention_scores`` hold: ``scores`` (pre-softmax QKᵀ/√d) or ``log_probs`` (log attention
    #: probabilities, for models without BERT-style query/key projections, e.g. XLNet)
    attention_space: str = "scores"
    extras: dict = field(default_factory=dict)

    @property
    def num_layers(self) -> int:
        if self.hidden_states is None:
            raise ValueError("hidden states were not requested for this forward pass")
        return len(self.hidden_states) - 1

    def cls(self) -> Tensor:
        """Summary-token state of every layer, shape (batch, layers + 1, hidden)."""
        if "cls" in self.extras:
            return self.extras["cls"]
        if self.hidden_states is None:
            raise ValueError("hidden states were not requested for this forward pass")
        stacked = torch.stack(self.hidden_states, dim=1)  # (B, L+1, T, H)
        position = summary_token_index(self.attention_mask, self.summary_index)
        index = position.view(-1, 1, 1, 1).expand(-1, stacked.shape[1], 1, stacked.shape[-1])
        return stacked.gather(2, index).squeeze(2)

    def mean_pooled(self) -> Tensor:
        """Masked mean over tokens of every layer, shape (batch, layers + 1, hidden)."""
        if self.hidden_states is None:
            raise ValueError("hidden states were not requested for this forward pass")
        stacked = torch.stack(self.hidden_states, dim=1)
        mask = self.attention_mask[:, None, :, None].to(stacked.dtype)
        return (stacked * mask).sum(2) / mask.sum(2).clamp_min(1.0)


def summary_token_index(attention_mask: Tensor, summary: str) -> Tensor:
    """Per row, the position of the summary token: the first (``first``) or last (``last``) real
    token, i.e. the first or last 1 of ``attention_mask`` (B, T), whichever side the batch is padded
    on. A row without any real token gets position 0."""
    if summary not in ("first", "last"):
        raise ValueError(f"summary must be 'first' or 'last', got {summary!r}")
    real = attention_mask.long() != 0
    steps = torch.arange(1, real.shape[1] + 1, device=real.device)
    if summary == "first":
        steps = steps.flip(0)  # the earliest real token scores highest
    return (real * steps).argmax(dim=1)


def summary_position(model: nn.Module) -> str:
    """Which token summarises a sequence: ``last`` for XLNet, ``first`` for BERT-like models."""
    return "last" if getattr(model.config, "model_type", "") == "xlnet" else "first"


def summary_key_material(*models: nn.Module) -> dict:
    """Key material of jobs with an XLNet (a model that summarises with its last token) among ``models``:
    the summary token is now the mask's last 1 (before 2026-11-26 a left-padded row read a pad there)
    and its attention maps are compared as log-probabilities on both sides
    ([`attention_in_one_space`][]), so such stored jobs are recomputed; ``{}`` for first-token
    models, whose keys stay as they were."""
    if any(summary_position(m) == "last" for m in models):
        return {"summary_token": "last real token", "attention_target": "log-probabilities, both sides"}
    return {}


class _ScoreRecorder:
    """Forward hooks on each layer's query/key projections to rebuild QKᵀ/√d per head."""

    def __init__(self, model: nn.Module):
        self.queries: dict[int, Tensor] = {}
        self.keys: dict[int, Tensor] = {}
        self.handles = []
        self.num_heads = model.config.num_attention_heads
        _, _, layers = find_layer_stack(model)
        for index, layer in enumerate(layers):
            attention = getattr(getattr(layer, "attention", None), "self", None)
            if attention is None or not hasattr(attention, "query") or not hasattr(attention, "key"):
                self.remove()
                raise LookupError("no query/key projections")
            self.handles.append(attention.query.register_forward_hook(self._store(self.queries, index)))
            self.handles.append(attention.key.register_forward_hook(self._store(self.keys, index)))

    @staticmethod
    def _store(target: dict, index: int):
        def hook(_module, _inputs, output):
            target[index] = output

        return hook

    def scores(self) -> list[Tensor]:
        result = []
        for index in sorted(self.queries):
            q, k = self.queries[index], self.keys[index]
            b, t, d = q.shape
            head_dim = d // self.num_heads
            q = q.view(b, t, self.num_heads, head_dim).transpose(1, 2)
            k = k.view(b, t, self.num_heads, head_dim).transpose(1, 2)
            result.append(q @ k.transpose(-1, -2) / math.sqrt(head_dim))
        return result

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []


def forward_features(
    model: nn.Module,
    batch: dict[str, Tensor],
    *,
    hidden_states: bool = False,
    attention_scores: bool = False,
    prefix: str = "",
) -> Features:
    """Run ``model`` on ``batch`` (keys ``{prefix}input_ids`` …) and collect what losses need.

    Attention scores are the pre-softmax QKᵀ/√d of each head (via hooks on BERT-style
    query/key projections); for other architectures they fall back to log attention
    probabilities, which differ from the scores by a per-row constant.
    """
    inputs = {key: batch[prefix + key] for key in MODEL_INPUT_KEYS if prefix + key in batch}
    recorder = None
    want_probs = False
    if attention_scores:
        try:
            recorder = _ScoreRecorder(model)
        except (LookupError, ValueError, AttributeError):
            want_probs = True
    kernel = "eager" if attention_scores else None  # attention maps and scores: the eager kernel
    try:
        with attention_implementation(model, kernel) if kernel else contextlib.nullcontext():
            out = model(
                **inputs,
                output_hidden_states=hidden_states or attention_scores,
                output_attentions=want_probs,
                return_dict=True,
            )
        scores = None
        if recorder is not None:
            scores = recorder.scores()
        elif want_probs:
            if not out.attentions:
                raise ValueError(
                    f"{type(model).__name__} returned no attentions: load it with attn_implementation='eager'"
                )
            scores = [torch.log(a.clamp_min(1e-12)) for a in out.attentions]
    finally:
        if recorder is not None:
            recorder.remove()
    return Features(
        logits=out.logits,
        attention_mask=inputs["attention_mask"],
        hidden_states=tuple(out.hidden_states) if (hidden_states or attention_scores) else None,
        attention_scores=scores,
        summary_index=summary_position(model),
        attention_space="log_probs" if want_probs else "scores",
    )


#: log of the smallest attention probability kept (padding keys and underflow), both sides alike
LOG_PROB_FLOOR = math.log(1e-12)


def attention_log_probs(scores: Tensor, attention_mask: Tensor) -> Tensor:
    """Log attention probabilities of pre-softmax ``scores`` (B, H, L, L): a log-softmax over the keys
    with padding keys (``attention_mask`` (B, L) = 0) masked out, floored at [`LOG_PROB_FLOOR`][]
    as [`forward_features`][] floors a model's own probabilities."""
    keys = attention_mask[:, None, None, :].to(torch.bool)
    masked = scores.masked_fill(~keys, torch.finfo(scores.dtype).min)
    return torch.log_softmax(masked, dim=-1).clamp_min(LOG_PROB_FLOOR)


def attention_in_one_space(student: Features, teacher: Features) -> tuple[list[Tensor], list[Tensor], str]:
    """Both sides' attention maps in one space, for an attention-map MSE (TinyBERT's L_attn, the
    multi-teacher Eq. 6): pre-softmax scores QKᵀ/√d when both models give them (the equation as
    written); log attention probabilities when either gives only probabilities (XLNet: its relative
    attention has no query/key projections to hook), the other side's scores going through a masked
    log-softmax. Log-probabilities are scores less each row's log-normaliser, so the two sides then
    differ by the shape of their rows only, not by a per-row shift that MSE would count
    (docs/fidelity.md, "XLNet attention target"). Returns (student maps, teacher maps, space)."""
    if student.attention_scores is None or teacher.attention_scores is None:
        raise ValueError("attention scores were not requested for this forward pass")
    if student.attention_space == teacher.attention_space == "scores":
        return list(student.attention_scores), list(teacher.attention_scores), "scores"

    def log_probs(features: Features) -> list[Tensor]:
        if features.attention_space == "log_probs":
            return list(features.attention_scores)
        return [attention_log_probs(a, features.attention_mask) for a in features.attention_scores]

    return log_probs(student), log_probs(teacher), "log_probs"
