"""Fixtures of the multi-teacher tests: hand-made features and heterogeneous teachers."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from bert_kd.core.data.glue import load_glue_task
from bert_kd.core.data.tokenize import merge_tokenized, tokenize_splits
from bert_kd.core.distill.objective import Teacher
from bert_kd.core.models import load_classifier, load_tokenizer
from bert_kd.core.training import Collator
from tests.conftest import make_tiny_bert, write_tiny_glue
from tests.core.distill.methods.multi_teacher.helpers import (
    make_bpe_tokenizer,
    make_other_wordpiece_tokenizer,
    random_features,
    tiny_bert,
    tiny_roberta,
)


@pytest.fixture(scope="module")
def hand_setup():
    """Student N=2 (d=8, 2 heads); teacher 0 M=3 (d=12, 3 heads) aligned (student columns);
    teacher 1 M=5 (d=8, 2 heads) reads its own, different tokenization ``t1_`` (with shared spans)."""
    torch.manual_seed(0)
    models = SimpleNamespace(student=tiny_bert(2, 8, 2), t0=tiny_bert(3, 12, 3), t1=tiny_bert(5, 8, 2))
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    mask1 = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]])
    student = random_features(2, 4, 2, 8, 2, mask, seed=1)
    teacher0 = random_features(2, 4, 3, 12, 3, mask, seed=2)
    teacher1 = random_features(2, 5, 5, 8, 2, mask1, seed=3)
    batch = {
        "input_ids": torch.tensor([[2, 5, 6, 3], [2, 7, 3, 0]]),
        "attention_mask": mask,
        "labels": torch.tensor([0, 1]),
        "t1_input_ids": torch.tensor([[0, 9, 8, 7, 2], [0, 6, 2, 1, 1]]),
        "t1_attention_mask": mask1,
        # shared spans: row 0 student tokens 1 | 2 ↔ teacher tokens 1+2 | 3; row 1 student 1 ↔ teacher 1
        # (one id per real token, -1 = special, -2 = padding of the column)
        "t1_student_span_ids": torch.tensor([[-1, 0, 1, -1], [-1, 0, -1, -2]]),
        "t1_span_ids": torch.tensor([[-1, 0, 0, 1, -1], [-1, 0, -2, -2, -2]]),
    }
    return SimpleNamespace(
        models=models, student=student, teachers={0: teacher0, 1: teacher1}, batch=batch, mask=mask, mask1=mask1
    )


@pytest.fixture(scope="module")
def hetero(tmp_path_factory):
    """Student: 2-layer BERT (d=16, 2 heads, WordPiece A). Teachers, each with its OWN tokenizer:
    t0 = 4-layer BERT (d=32, 4 heads) with its own saved copy of vocabulary A (aligned);
    t1 = 3-layer RoBERTa (d=24, 3 heads) with a byte-level BPE; t2 = 5-layer BERT (d=20,
    5 heads) with a different WordPiece vocabulary."""
    root: Path = tmp_path_factory.mktemp("mt")
    make_tiny_bert(root / "student", num_layers=2, hidden=16, heads=2, seed=0)
    tok_s = load_tokenizer(str(root / "student"))
    tok_s.save_pretrained(root / "t0_tokenizer")  # t0 ships its own copy of the student's vocabulary
    tok0 = load_tokenizer(str(root / "t0_tokenizer"))
    tok1, tok2 = make_bpe_tokenizer(), make_other_wordpiece_tokenizer()
    t0 = tiny_bert(4, 32, 4, vocab=len(tok0), seed=1)
    t1 = tiny_roberta(tok1)
    torch.manual_seed(3)
    t2 = tiny_bert(5, 20, 5, vocab=len(tok2), seed=3)
    write_tiny_glue(root / "glue", "RTE", n_train=32, n_dev=16)
    splits = load_glue_task("rte", root / "glue", allow_download=False)
    ds = merge_tokenized(
        tokenize_splits(splits, tok_s, 32, with_offsets=True),
        {
            p: tokenize_splits(splits, tok, 32, with_offsets=True)
            for p, tok in (("t0_", tok0), ("t1_", tok1), ("t2_", tok2))
        },
    )
    collator = Collator(
        {"": tok_s.pad_token_id, "t0_": tok0.pad_token_id, "t1_": tok1.pad_token_id, "t2_": tok2.pad_token_id}
    )
    teachers = [
        Teacher(t0, "t0_", name="bert_same_vocab"),
        Teacher(t1, "t1_", name="roberta_bpe"),
        Teacher(t2, "t2_", name="bert_other_vocab"),
    ]
    row = ds["train"][0]
    assert row["input_ids"] == row["t0_input_ids"]  # same vocabulary, separately loaded tokenizer
    assert row["input_ids"] != row["t1_input_ids"] and row["input_ids"] != row["t2_input_ids"]
    assert "t0_span_ids" not in ds["train"].column_names  # identical tokens: no spans needed
    assert {"t1_span_ids", "t1_student_span_ids", "t2_span_ids"} <= set(ds["train"].column_names)
    return SimpleNamespace(
        root=root,
        ds=ds,
        collator=collator,
        teachers=teachers,
        pad_ids=collator.pad_ids,
        student=lambda: load_classifier(str(root / "student"), 2),
    )
