"""Fixtures shared by the distillation tests."""

from __future__ import annotations

import pytest

from bert_kd.data.glue import load_glue_task
from bert_kd.data.tokenize import tokenize_splits
from bert_kd.models import load_classifier, load_tokenizer
from bert_kd.training import Collator


@pytest.fixture(scope="module")
def rte(tiny_teacher_dir, tiny_glue_dir):
    """The tiny 4-layer teacher, tokenized tiny RTE and its collator."""
    tokenizer = load_tokenizer(str(tiny_teacher_dir))
    datasets = tokenize_splits(load_glue_task("rte", tiny_glue_dir, allow_download=False), tokenizer, 32)
    teacher = load_classifier(str(tiny_teacher_dir), 2)  # 4 layers, width 32
    return teacher, datasets, Collator({"": tokenizer.pad_token_id})
