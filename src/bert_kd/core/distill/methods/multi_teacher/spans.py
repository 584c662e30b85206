"""Token-level MT terms across tokenizers: pooling over shared character spans.

The MT terms (Shi & Guo 2023, Eq. 2–11) compare positions, so a teacher with another tokenizer is
compared on the **shared spans** of [`bert_kd.core.data.spans`][] (span ids computed at
tokenization time, [`NO_SPAN`][] outside every shared span). Here, the
model side (torch): [`SpanPooling`][] averages sub-token states inside each span (hidden states,
embeddings) and pools attention maps ([`pool_attention_scores`][],
[`pool_attention_log_probs`][], [`span_attention_probabilities`][]).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from bert_kd.core.data.spans import NO_SPAN
from bert_kd.core.distill.outputs import summary_position
from bert_kd.core.training import SPAN_PAD  # the collator pads span-id columns with it (any side)


def seat_span_ids(span_ids: Tensor, attention_mask: Tensor, column: str) -> Tensor:
    """Span ids ``(B, L)`` placed on the real tokens of ``attention_mask`` ``(B, L)``: a column's
    non-pad entries ([`SPAN_PAD`][training.batching.SPAN_PAD]) belong, in order, to the row's real tokens, so the
    column may be padded on either side whatever side the tokens were padded on."""
    if span_ids.dim() != 2 or attention_mask.dim() != 2 or span_ids.shape[0] != attention_mask.shape[0]:
        raise ValueError(f"column {column!r} has shape {tuple(span_ids.shape)}, tokens {tuple(attention_mask.shape)}")
    present = span_ids != SPAN_PAD
    real = attention_mask.bool()
    if not torch.equal(present.sum(1), real.sum(1)):
        rows = (present.sum(1) != real.sum(1)).nonzero().flatten().tolist()
        raise ValueError(
            f"column {column!r} does not match its tokens in batch row(s) {rows}: it must hold one span id per real "
            f"token, padded with {SPAN_PAD} (bert_kd.core.training.Collator pads every '*span_ids' column so)"
        )
    seated = torch.full_like(attention_mask, NO_SPAN, dtype=torch.long)
    seated[real] = span_ids[present].long()
    return seated


def _assignment(span_ids: Tensor, n_spans: int) -> Tensor:
    """One-hot ``(B, S, L)``: token ``l`` of row ``b`` lies in span ``s``."""
    spans = torch.arange(n_spans, device=span_ids.device).view(1, n_spans, 1)
    return (span_ids.unsqueeze(1) == spans).float()


@dataclass
class SpanPooling:
    """Both sides' tokens of one batch grouped into shared spans ([`bert_kd.core.data.spans.shared_span_ids`][]).

    ``student``/``teacher``: one-hot ``(B, S, L)`` token→span assignments; ``mask`` ``(B, S)``
    marks the spans a row has (rows have different span counts)."""

    student: Tensor
    teacher: Tensor
    mask: Tensor

    @classmethod
    def from_ids(cls, student_ids: Tensor, teacher_ids: Tensor) -> SpanPooling:
        """From seated span ids (``(B, L_s)``, ``(B, L_t)``, [`NO_SPAN`][] outside spans)."""
        n_spans = max(int(max(student_ids.max(), teacher_ids.max())) + 1, 1)  # ≥ 1: a batch may share none
        student, teacher = _assignment(student_ids, n_spans), _assignment(teacher_ids, n_spans)
        mask = (student.sum(-1) > 0) & (teacher.sum(-1) > 0)
        if not torch.equal(mask, student.sum(-1) > 0) or not torch.equal(mask, teacher.sum(-1) > 0):
            raise ValueError("span ids name a span on one side only; build them with shared_span_ids")
        return cls(student, teacher, mask.long())

    @property
    def n_spans(self) -> int:
        return int(self.mask.shape[1])

    def pool_student(self, states: Tensor) -> Tensor:
        return pool_states(states, self.student)

    def pool_teacher(self, states: Tensor) -> Tensor:
        return pool_states(states, self.teacher)


def pool_states(states: Tensor, assignment: Tensor) -> Tensor:
    """Mean of the token states ``(B, L, H)`` inside each span → ``(B, S, H)`` (0 for absent spans)."""
    counts = assignment.sum(-1, keepdim=True).clamp_min(1.0)
    return (assignment / counts).to(states.dtype) @ states


def _key_pooled(scores: Tensor, assignment: Tensor) -> Tensor:
    """``log Σ_{j ∈ span} exp(a_ij)`` per token query and key span: ``(B, H, L, L)`` → ``(B, H, L, S)``.
    Only keys inside a span enter the row maximum, so padding and special keys never matter.
    Computed as a matmul after subtracting the row maximum: a span whose scores all lie more
    than ~87 (float32) below it underflows and is clamped to ``log(tiny)`` (no gradient)."""
    in_span = assignment.sum(1).bool()[:, None, None, :]  # (B, 1, 1, L) keys inside some span
    masked = scores.masked_fill(~in_span, float("-inf"))
    peak = masked.amax(-1, keepdim=True).detach()
    peak = torch.where(torch.isfinite(peak), peak, torch.zeros_like(peak))
    mass = (masked - peak).exp() @ assignment.transpose(1, 2).unsqueeze(1).to(scores.dtype)
    return mass.clamp_min(torch.finfo(scores.dtype).tiny).log() + peak


def pool_attention_scores(scores: Tensor, assignment: Tensor) -> Tensor:
    """Span-level pre-softmax attention scores (MT Eq. 6 on spans): ``(B, H, L, L)`` → ``(B, H, S, S)``.

    Key side: ``log Σ_{j ∈ b} exp(a_ij)``, the score of attending to span b as a whole
    (a softmax over spans gives each span's attention mass, renormalised over shared spans).
    Query side: mean over the span's tokens. A one-token span keeps the token's score, so
    identical tokenizations give the token-level map on the text tokens."""
    keyed = _key_pooled(scores, assignment)
    query_weights = (assignment / assignment.sum(-1, keepdim=True).clamp_min(1.0)).unsqueeze(1).to(scores.dtype)
    keyed = torch.where(torch.isfinite(keyed), keyed, torch.zeros_like(keyed))
    return query_weights @ keyed


def pool_attention_log_probs(log_probs: Tensor, assignment: Tensor) -> Tensor:
    """Span-level log attention probabilities ``(B, H, L, L)`` → ``(B, H, S, S)``, renormalised over the
    shared spans: per query token the key side is ``log Σ_{j ∈ b} p_ij`` less its log-Σ-exp over the row's
    shared spans (the mass on special, whitespace and one-sided keys taken out), then averaged over the
    query span's tokens. Two maps whose rows differ only in the mass outside the shared spans pool to the
    same map, so an MSE between them measures how the rows' attention over the shared text is shaped.
    Rows and columns of absent spans are 0."""
    keyed = _key_pooled(log_probs, assignment)
    present = assignment.sum(-1).bool()[:, None, None, :]  # (B, 1, 1, S)
    normaliser = torch.logsumexp(keyed.masked_fill(~present, float("-inf")), dim=-1, keepdim=True)
    renormalised = (
        keyed - torch.where(torch.isfinite(normaliser), normaliser, torch.zeros_like(normaliser))
    ).masked_fill(~present, 0.0)
    query_weights = (assignment / assignment.sum(-1, keepdim=True).clamp_min(1.0)).unsqueeze(1).to(log_probs.dtype)
    return query_weights @ renormalised


def span_attention_key_material(*models) -> dict:
    """Key material of multi-teacher jobs with an XLNet among ``models``: their span-level attention maps are
    compared as log-probabilities renormalised over the shared spans ([`pool_attention_log_probs`][], since
    2026-11-27), so such stored jobs are recomputed; ``{}`` otherwise, keys as they were."""
    if any(summary_position(m) == "last" for m in models):
        return {"span_attention": "log-probabilities renormalised over the shared spans"}
    return {}


def span_attention_probabilities(scores: Tensor, assignment: Tensor) -> Tensor:
    """Span-level attention probabilities ``(B, H, S, S)``: per query token the attention mass of
    each key span (renormalised over the shared spans), averaged over the query span's tokens.
    Every row of a present span sums to 1; rows and columns of absent spans are 0."""
    keyed = _key_pooled(scores, assignment)
    present = assignment.sum(-1).bool()[:, None, None, :]  # (B, 1, 1, S)
    probs = torch.softmax(keyed.masked_fill(~present, float("-inf")), dim=-1)
    probs = torch.nan_to_num(probs, nan=0.0)  # a row without spans
    query_weights = (assignment / assignment.sum(-1, keepdim=True).clamp_min(1.0)).unsqueeze(1).to(scores.dtype)
    return query_weights @ probs
