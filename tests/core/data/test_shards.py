"""Corpus shards: tokenized once, memory-mapped, content-keyed; the GLUE stand-in corpus de-duplicated."""

from __future__ import annotations

import pytest

from bert_kd.core.data.glue_corpus import glue_training_sentences, write_glue_stand_in
from bert_kd.core.data.shards import corpus_key, files_identity, open_shards, read_passages, write_shards
from tests.conftest import make_wordpiece_tokenizer, write_tiny_glue


def test_shards_hold_every_passage_tokenized_and_are_memory_mapped(tmp_path):
    tokenizer = make_wordpiece_tokenizer(tmp_path / "tok")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat\n\n  a dog ran  \n" + "words " * 200 + "\n")
    shards = write_shards(read_passages([corpus]), tokenizer, tmp_path / "shards", max_seq_length=16, rows_per_shard=2)
    rows = open_shards(shards)
    assert len(rows) == 3  # the blank line is no passage
    assert rows[0]["input_ids"] == tokenizer("the cat sat on the mat")["input_ids"]
    assert len(rows[2]["input_ids"]) == 16 and set(rows.column_names) >= {"input_ids", "special_tokens_mask"}
    assert all(table_file.exists() for table_file in (shards / "data").glob("*.arrow"))
    assert len(list((shards / "data").glob("*.arrow"))) == 2
    assert not list(tmp_path.glob(".shards.tmp-*"))


def test_an_empty_corpus_leaves_no_folder(tmp_path):
    tokenizer = make_wordpiece_tokenizer(tmp_path / "tok")
    with pytest.raises(Exception, match="no passage"):
        write_shards(iter(["", " "][:0]), tokenizer, tmp_path / "shards", max_seq_length=16)
    assert not (tmp_path / "shards").exists()


def test_the_key_follows_the_bytes_and_the_tokenization(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("one\n")
    b.write_text("two\n")
    tok = {"sha": "x"}
    assert corpus_key(files_identity([a]), tok, 128) == corpus_key(files_identity([a]), tok, 128)
    assert corpus_key(files_identity([a]), tok, 128) != corpus_key(files_identity([b]), tok, 128)
    assert corpus_key(files_identity([a]), tok, 128) != corpus_key(files_identity([a]), tok, 64)


def test_the_glue_stand_in_holds_each_training_sentence_once(tmp_path):
    glue = write_tiny_glue(tmp_path / "glue", "RTE", n_train=20, n_dev=4)
    write_tiny_glue(glue, "SST-2", n_train=20, n_dev=4)
    sentences = list(glue_training_sentences(glue))
    assert len(sentences) == len(set(sentences)) > 0
    written = write_glue_stand_in(glue, tmp_path / "stand_in")
    assert written.read_text().splitlines() == sentences
