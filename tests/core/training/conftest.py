"""Fixtures of the training tests: a tiny tokenized SST-2."""

from __future__ import annotations

import pytest

from bert_kd.core.data.glue import load_glue_task
from bert_kd.core.data.tokenize import tokenize_splits
from bert_kd.core.models import load_tokenizer


@pytest.fixture(scope="module")
def sst2(tiny_teacher_dir, tiny_glue_dir):
    """Tiny SST-2 (48 train / 24 dev rows, the label is readable from one word)."""
    tokenizer = load_tokenizer(str(tiny_teacher_dir))
    splits = load_glue_task("sst2", tiny_glue_dir, allow_download=False)
    return tokenize_splits(splits, tokenizer, 32), tokenizer
