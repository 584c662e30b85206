"""Tokenization for a teacher: a ``teacher`` block or a ``multi_teachers`` entry, dict or the hook's model."""

from __future__ import annotations

import pytest

from bert_kd.config.schema import MultiTeacher, Teacher
from bert_kd.core.data.glue import load_glue_task
from bert_kd.pipelines.data_processing import nodes


@pytest.fixture
def frames(tiny_glue_dir):
    splits = load_glue_task("rte", tiny_glue_dir, allow_download=False)
    return splits["train"], splits["validation"].assign(split="validation")


def test_a_teacher_model_and_its_dict_tokenize_alike(frames, tiny_teacher_dir):
    block = {"model": str(tiny_teacher_dir), "max_seq_length": 8}
    from_dict = nodes.tokenize_for_model(*frames, block)
    from_model = nodes.tokenize_for_model(*frames, Teacher.model_validate(block))
    assert from_dict["train"]["input_ids"] == from_model["train"]["input_ids"]
    assert max(len(ids) for ids in from_model["train"]["input_ids"]) == 8


def test_an_entry_without_max_seq_length_gets_the_schemas_default(frames, tiny_teacher_dir, monkeypatch):
    """A ``multi_teachers`` entry without ``max_seq_length`` passed validation and then raised
    ``KeyError`` here; the schema's default (128) now reaches the tokenizer, dict or model alike."""
    lengths = []
    monkeypatch.setattr(nodes, "tokenize_splits", lambda splits, tokenizer, length: lengths.append(length))
    entry = {"name": "t0", "model": str(tiny_teacher_dir), "seed": 3}
    nodes.tokenize_for_model(*frames, entry)
    nodes.tokenize_for_model(*frames, MultiTeacher.model_validate(entry))
    assert lengths == [Teacher.model_fields["max_seq_length"].default] * 2 == [128, 128]
