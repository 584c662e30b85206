"""Shared character spans between two tokenizations (:mod:`bert_kd.core.data.spans`): pure functions."""

from __future__ import annotations

from bert_kd.core.data.spans import NO_SPAN, shared_span_ids, token_character_spans


def test_character_spans_trim_whitespace_and_drop_special_tokens():
    texts = ("Hello world", "again")
    offsets = [(0, 0), (0, 5), (5, 11), (5, 6), (0, 0), (0, 5), (0, 0)]
    sequence_ids = [None, 0, 0, 0, None, 1, None]
    assert token_character_spans(offsets, sequence_ids, texts) == [
        [-1, 0, 0],
        [0, 0, 5],
        [0, 6, 11],
        [-1, 0, 0],
        [-1, 0, 0],
        [1, 0, 5],
        [-1, 0, 0],
    ]  # "▁world" (5, 11) → (6, 11); a lone-space token → none


def test_shared_spans_group_words_split_differently_and_drop_one_sided_groups():
    # "unhappiness is" / "ok": student un|happi|ness is ; teacher unh|appiness is|(truncated)
    student = [[-1, 0, 0], [0, 0, 2], [0, 2, 7], [0, 7, 11], [0, 12, 14], [-1, 0, 0], [1, 0, 2], [-1, 0, 0]]
    teacher = [[-1, 0, 0], [0, 0, 3], [0, 3, 11], [0, 12, 14], [-1, 0, 0], [1, 0, 1]]
    s_ids, t_ids = shared_span_ids(student, teacher)
    assert s_ids == [NO_SPAN, 0, 0, 0, 1, NO_SPAN, NO_SPAN, NO_SPAN]  # "ok" vs "o": covered differently
    assert t_ids == [NO_SPAN, 0, 0, 1, NO_SPAN, NO_SPAN]
    # sentence 2 aligned when both cover it alike; identical tokens → one span per text token
    s_ids, t_ids = shared_span_ids(student, student)
    assert s_ids == t_ids == [NO_SPAN, 0, 1, 2, 3, NO_SPAN, 4, NO_SPAN]
