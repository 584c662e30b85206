"""The alignment policy for heterogeneous teachers: at which level the MT terms compare a
teacher's positions with the student's (the rule in [`bert_kd.core.distill.methods.multi_teacher`][])."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from bert_kd.core.distill.methods.multi_teacher.spans import SpanPooling, seat_span_ids

#: ``alignment`` option: token-level terms (on shared spans where the tokenizations differ), or
#: sentence vectors for every teacher.
ALIGNMENT_MODES = ("token", "sentence")
#: ``sentence_repr`` option for the sentence-level path.
SENTENCE_REPRS = ("mean", "summary")
#: Levels a teacher's terms run at in one batch.
LEVELS = ("token", "span", "sentence")


@dataclass(frozen=True)
class TeacherAlignment:
    """How one teacher's positions meet the student's in one batch: ``token`` (the same
    positions), ``span`` (shared character spans, ``spans`` set) or ``sentence``."""

    level: str
    spans: SpanPooling | None = None


TOKEN = TeacherAlignment("token")
SENTENCE = TeacherAlignment("sentence")


def tokens_aligned(batch: dict[str, Tensor], prefix: str) -> bool:
    """Whether the columns ``{prefix}input_ids``/``{prefix}attention_mask`` hold the student's token
    positions: same shape, equal masks, equal ids on every valid position (padding may differ).
    A teacher reading the student's own columns (``prefix == ""``) is aligned by definition."""
    if prefix == "":
        return True
    key = prefix + "input_ids"
    if key not in batch:
        raise KeyError(f"column {key!r} is missing from the batch")
    ids_s, ids_t = batch["input_ids"], batch[key]
    if ids_s.shape != ids_t.shape:
        return False
    mask_s = batch.get("attention_mask", torch.ones_like(ids_s))
    mask_t = batch.get(prefix + "attention_mask", torch.ones_like(ids_t))
    if mask_s.shape != mask_t.shape or not torch.equal(mask_s.bool(), mask_t.bool()):
        return False
    valid = mask_s.bool()
    return bool(torch.equal(ids_s[valid], ids_t[valid]))


def span_pooling(batch: dict[str, Tensor], prefix: str, teacher: str = "teacher") -> SpanPooling:
    """The shared spans of teacher ``prefix`` in ``batch`` (columns ``{prefix}span_ids`` and
    ``{prefix}student_span_ids``, made by [`merge_tokenized`][data.tokenize.merge_tokenized])."""
    t_key, s_key = prefix + "span_ids", prefix + "student_span_ids"
    if t_key not in batch or s_key not in batch:
        raise ValueError(
            f"{teacher} tokenizes differently from the student but the batch has no shared-span columns "
            f"{t_key!r}/{s_key!r}: tokenize both with tokenize_splits(..., with_offsets=True) (fast tokenizers) and "
            f"merge_tokenized, or set the multi_teacher option alignment: sentence"
        )
    ones = torch.ones_like(batch["input_ids"])
    student = seat_span_ids(batch[s_key], batch.get("attention_mask", ones), s_key)
    t_ones = torch.ones_like(batch[prefix + "input_ids"])
    teacher_ids = seat_span_ids(batch[t_key], batch.get(prefix + "attention_mask", t_ones), t_key)
    return SpanPooling.from_ids(student, teacher_ids)
