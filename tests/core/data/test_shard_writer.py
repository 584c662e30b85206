"""Arrow shards: written batch by batch, read back memory-mapped in row order."""

from __future__ import annotations

import pytest

from bert_kd.core.data.shards import ShardWriter, read_shards, shard_paths


def test_rows_come_back_in_order_across_shards(tmp_path):
    writer = ShardWriter(tmp_path, rows_per_shard=4)
    writer.add({"idx": [0, 1, 2], "text": ["a", "b", "c"]})
    writer.add({"idx": list(range(3, 10)), "text": list("defghij")})
    paths = writer.close()
    assert [p.name for p in paths] == ["shard-00000.arrow", "shard-00001.arrow", "shard-00002.arrow"]
    assert shard_paths(tmp_path) == paths and writer.rows == 10
    rows = read_shards(tmp_path)
    assert rows["idx"] == list(range(10)) and rows["text"] == list("abcdefghij")
    assert all(part.cache_files for part in [rows])  # memory-mapped from the shard files, not copied


def test_batches_of_uneven_columns_are_refused(tmp_path):
    with pytest.raises(ValueError, match="differ in length"):
        ShardWriter(tmp_path).add({"idx": [0, 1], "text": ["a"]})


def test_an_empty_folder_reads_as_an_empty_dataset(tmp_path):
    assert len(read_shards(tmp_path)) == 0
