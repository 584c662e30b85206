"""Token-level MT terms across tokenizers: shared character spans and span pooling.

Two tokenizers cut the same sentence differently ("unhappiness" → ``un ##ha ##pp ##iness`` vs
``Ġunh appiness``). The MT terms (Shi & Guo 2023, Eq. 2–11) compare positions, so a teacher
with another tokenizer is compared on **shared spans**: the finest partition of each sentence's
characters that no token of either side crosses. Tokens of both sides are grouped by character
overlap (connected components); a group is a shared span when both sides have tokens in it and
cover the same characters (a word split differently, or a single token both sides agree on).
Identical tokenizations give one span per text token.

Excluded (span id :data:`NO_SPAN`): special tokens ([CLS], <s>, <sep> …), whitespace-only
tokens, and groups only one side covers or covers differently (truncation cut a word on one
side). Both sentences of a pair are handled, each in its own character coordinates.

Data side (pure Python, at tokenization time): :func:`token_character_spans` turns a fast
tokenizer's ``offset_mapping`` and ``sequence_ids`` into ``(sentence, start, end)`` per token;
:func:`shared_span_ids` gives both sides' span ids for one row. Model side (torch):
:class:`SpanPooling` averages sub-token states inside each span (hidden states, embeddings) and
pools attention maps (:func:`pool_attention_scores`, :func:`pool_attention_log_probs`,
:func:`span_attention_probabilities`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor

from bert_kd.core.distill.outputs import summary_position
from bert_kd.core.training import SPAN_PAD  # the collator pads span-id columns with it (any side)

#: Span id of a token that belongs to no shared span (special, whitespace, one-sided).
NO_SPAN = -1
#: ``(sentence, start, end)`` of a token that covers no text.
NO_CHARS = (-1, 0, 0)


def token_character_spans(offsets: Sequence, sequence_ids: Sequence, texts: Sequence[str]) -> list[list[int]]:
    """Per token ``[sentence, start, end]``: character offsets into ``texts[sentence]`` with
    surrounding whitespace trimmed (tokenizers differ in whether ``▁``/``Ġ`` tokens include the
    space), or :data:`NO_CHARS` for special tokens (``sequence_ids`` None) and tokens covering
    only whitespace."""
    if len(offsets) != len(sequence_ids):
        raise ValueError(f"{len(offsets)} offsets but {len(sequence_ids)} sequence ids")
    out = []
    for (start, end), sentence in zip(offsets, sequence_ids):
        if sentence is None or sentence < 0 or sentence >= len(texts):
            out.append(list(NO_CHARS))
            continue
        text = texts[sentence]
        start, end = int(start), min(int(end), len(text))
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        out.append([int(sentence), start, end] if start < end else list(NO_CHARS))
    return out


def shared_span_ids(student: Sequence[Sequence[int]], teacher: Sequence[Sequence[int]]) -> tuple[list[int], list[int]]:
    """Span ids of every student and teacher token of one row (``[sentence, start, end]`` per
    token, from :func:`token_character_spans`): ``0 … S−1`` numbered in text order, the same id
    on both sides, :data:`NO_SPAN` outside shared spans. Every id is used on both sides."""
    tokens = []  # (sentence, start, end, side, position)
    for side, row in enumerate((student, teacher)):
        for position, (sentence, start, end) in enumerate(row):
            if sentence >= 0 and start < end:
                tokens.append((int(sentence), int(start), int(end), side, position))
    tokens.sort()
    ids = ([NO_SPAN] * len(student), [NO_SPAN] * len(teacher))
    next_id = 0
    i = 0
    while i < len(tokens):
        # one group: tokens of the same sentence that overlap the running extent
        sentence, _, reach, _, _ = tokens[i]
        j = i + 1
        while j < len(tokens) and tokens[j][0] == sentence and tokens[j][1] < reach:
            reach = max(reach, tokens[j][2])
            j += 1
        group = tokens[i:j]
        extents = [None, None]
        for _, start, end, side, _ in group:
            lo, hi = extents[side] or (start, end)
            extents[side] = (min(lo, start), max(hi, end))
        if extents[0] is not None and extents[0] == extents[1]:
            for _, _, _, side, position in group:
                ids[side][position] = next_id
            next_id += 1
        i = j
    return ids


# --------------------------------------------------------------------------- model side


def seat_span_ids(span_ids: Tensor, attention_mask: Tensor, column: str) -> Tensor:
    """Span ids ``(B, L)`` placed on the real tokens of ``attention_mask`` ``(B, L)``: a column's
    non-pad entries (:data:`SPAN_PAD`) belong, in order, to the row's real tokens, so the
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
    """Both sides' tokens of one batch grouped into shared spans (:func:`shared_span_ids`).

    ``student``/``teacher``: one-hot ``(B, S, L)`` token→span assignments; ``mask`` ``(B, S)``
    marks the spans a row has (rows have different span counts)."""

    student: Tensor
    teacher: Tensor
    mask: Tensor

    @classmethod
    def from_ids(cls, student_ids: Tensor, teacher_ids: Tensor) -> SpanPooling:
        """From seated span ids (``(B, L_s)``, ``(B, L_t)``, :data:`NO_SPAN` outside spans)."""
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
    compared as log-probabilities renormalised over the shared spans (:func:`pool_attention_log_probs`, since
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
