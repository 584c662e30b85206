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


def _written(tmp_path, passages=40, rows_per_shard=10):
    tokenizer = make_wordpiece_tokenizer(tmp_path / "tok")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"the cat sat on mat number {i}\n" for i in range(passages)))
    return write_shards(read_passages([corpus]), tokenizer, tmp_path / "shards", max_seq_length=16, rows_per_shard=10)


def _cut(shard):
    """The shard rewritten with its first rows only (valid Arrow: what cutting shards after writing leaves)."""
    import pyarrow as pa

    with pa.ipc.open_stream(str(shard)) as reader:
        table = reader.read_all().slice(0, 3)
    with pa.ipc.new_stream(str(shard), table.schema) as writer:
        writer.write_table(table)


def test_each_shard_records_its_rows_and_a_cut_edited_or_added_shard_is_named(tmp_path):
    from bert_kd.config.errors import DataFileError
    from bert_kd.core.data.shards import shards_manifest, shards_problem

    shards = _written(tmp_path)
    recorded = shards_manifest(shards)["shard_rows"]
    assert recorded == {f"data/shard-0000{i}.arrow": 10 for i in range(4)} and shards_problem(shards) is None
    assert len(open_shards(shards)) == 40
    _cut(shards / "data" / "shard-00002.arrow")
    assert "shard-00002.arrow" in shards_problem(shards)
    with pytest.raises(DataFileError) as error:
        open_shards(shards)
    assert "general.corpus" in error.value.block() and str(shards) in error.value.block()
    (shards / "data" / "shard-00002.arrow").unlink()
    assert "shard-00002.arrow is missing" in shards_problem(shards)
    edited = bytearray((shards / "data" / "shard-00001.arrow").read_bytes())
    edited[-20] ^= 1  # same size, one bit changed
    (shards / "data" / "shard-00002.arrow").write_bytes(bytes(edited))
    assert "sha256" in shards_problem(shards)
    (shards / "data" / "shard-00002.arrow").unlink()
    (shards / "data" / "shard-00009.arrow").write_bytes((shards / "data" / "shard-00001.arrow").read_bytes())
    assert "added" in shards_problem(shards)


@pytest.mark.parametrize(
    ("content", "says"),
    [(b"", "no passage"), (b"\n  \n\t\n", "no passage"), (b"ok line\n\x89PNG\r\n\x1a\n\xff\xfe", "not UTF-8")],
)
def test_an_empty_blank_or_binary_corpus_is_one_block_naming_the_file(tmp_path, content, says):
    from bert_kd.config.errors import DataFileError
    from bert_kd.core.data.shards import files_identity

    tokenizer = make_wordpiece_tokenizer(tmp_path / "tok")
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(content)
    with pytest.raises(DataFileError) as error:
        write_shards(
            read_passages([corpus]), tokenizer, tmp_path / "s", max_seq_length=16, source=files_identity([corpus])
        )
    block = error.value.block()
    assert says in block and "general.corpus.files" in block and "fix:" in block
    assert not (tmp_path / "s").exists()
