"""Shared character spans between two tokenizations of the same text (the data side of the
multi-teacher method's token-level terms with a teacher of another tokenizer).

Two tokenizers cut the same sentence differently ("unhappiness" → ``un ##ha ##pp ##iness`` vs
``Ġunh appiness``). The finest partition of each sentence's characters that no token of either
side crosses gives the **shared spans**: tokens of both sides are grouped by character overlap
(connected components); a group is a shared span when both sides have tokens in it and cover the
same characters (a word split differently, or a single token both sides agree on). Identical
tokenizations give one span per text token.

Excluded (span id [`NO_SPAN`][]): special tokens ([CLS], <s>, <sep> …), whitespace-only
tokens, and groups only one side covers or covers differently (truncation cut a word on one
side). Both sentences of a pair are handled, each in its own character coordinates.

Pure Python, at tokenization time: [`token_character_spans`][] turns a fast tokenizer's
``offset_mapping`` and ``sequence_ids`` into ``(sentence, start, end)`` per token;
[`shared_span_ids`][] gives both sides' span ids for one row. The model side (pooling states and
attention maps over these spans) is [`bert_kd.core.distill.methods.multi_teacher.spans`][].
"""

from __future__ import annotations

from typing import Sequence

#: Span id of a token that belongs to no shared span (special, whitespace, one-sided).
NO_SPAN = -1
#: ``(sentence, start, end)`` of a token that covers no text.
NO_CHARS = (-1, 0, 0)


def token_character_spans(offsets: Sequence, sequence_ids: Sequence, texts: Sequence[str]) -> list[list[int]]:
    """Per token ``[sentence, start, end]``: character offsets into ``texts[sentence]`` with
    surrounding whitespace trimmed (tokenizers differ in whether ``▁``/``Ġ`` tokens include the
    space), or [`NO_CHARS`][] for special tokens (``sequence_ids`` None) and tokens covering
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
    token, from [`token_character_spans`][]): ``0 … S−1`` numbered in text order, the same id
    on both sides, [`NO_SPAN`][] outside shared spans. Every id is used on both sides."""
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
