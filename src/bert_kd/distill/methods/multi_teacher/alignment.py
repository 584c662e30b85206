"""The alignment policy for heterogeneous teachers: when token-level terms may compare a teacher's
positions with the student's (the rule in :mod:`bert_kd.distill.methods.multi_teacher`)."""

from __future__ import annotations

import torch
from torch import Tensor

#: ``alignment`` option: decide per batch (``auto``) or always compare sentence vectors.
ALIGNMENT_MODES = ("auto", "sentence")
#: ``sentence_repr`` option for the sentence-level fallback.
SENTENCE_REPRS = ("mean", "summary")


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
