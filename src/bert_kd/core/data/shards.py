"""A text corpus tokenized once into memory-mapped Arrow shards (Hugging Face ``datasets``), keyed by content.

[`write_shards`][bert_kd.core.data.shards.write_shards] tokenizes passages as they stream in (a generator: the
corpus is never whole in memory) and publishes the shard folder atomically;
[`open_shards`][bert_kd.core.data.shards.open_shards] maps it back without reading it into memory, so a training
loop draws rows from disk. [`corpus_key`][bert_kd.core.data.shards.corpus_key] names a corpus by its bytes and the
tokenization, so the same corpus and tokenizer find the same shards. Reusable by anything that
tokenizes text to train on (general distillation, augmented transfer sets).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from bert_kd.core.files import write_atomically

#: Rows tokenized per call of the tokenizer while streaming.
TOKENIZE_BATCH = 1000
#: The file in a shard folder that says what it holds (corpus key, tokenizer, length, rows).
SHARDS_MANIFEST = "shards.json"


def read_passages(paths: Sequence[str | Path]) -> Iterator[str]:
    """The passages of text files, one a line, in file order; blank lines are skipped."""
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                text = line.strip()
                if text:
                    yield text


def corpus_key(source: dict, tokenizer_identity: dict, max_seq_length: int) -> str:
    """A short content key for a corpus (its ``source``: files' sha256 or a dataset name and revision)
    tokenized by ``tokenizer_identity`` at ``max_seq_length`` tokens."""
    text = json.dumps([source, tokenizer_identity, max_seq_length], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def files_identity(paths: Sequence[str | Path]) -> dict:
    """The sha256 of each file, in order (the key material of a text-file corpus)."""
    digests = []
    for path in paths:
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        digests.append(digest.hexdigest())
    return {"files_sha256": digests}


def _tokenized_batches(passages: Iterable[str], tokenize: Callable[[list[str]], dict]) -> Iterator[dict]:
    """Columns of ``tokenize`` over ``passages``, [`TOKENIZE_BATCH`][bert_kd.core.data.shards.TOKENIZE_BATCH] passages at a time."""
    chunk: list[str] = []
    for text in passages:
        chunk.append(text)
        if len(chunk) == TOKENIZE_BATCH:
            yield dict(tokenize(chunk))
            chunk = []
    if chunk:
        yield dict(tokenize(chunk))


def write_shards(
    passages: Iterable[str],
    tokenizer,
    directory: str | Path,
    *,
    max_seq_length: int,
    rows_per_shard: int = 100_000,
    source: dict | None = None,
) -> Path:
    """Tokenize ``passages`` (truncated to ``max_seq_length`` tokens, unpadded) into Arrow shards of at most
    ``rows_per_shard`` rows in ``directory``, streaming (one tokenizer batch in memory at a time), written
    under a temporary name and renamed when complete (a killed run leaves no half-written folder); ``source``
    (what the corpus is) goes into its manifest."""
    import pyarrow as pa

    directory = Path(directory)

    def tokenize(texts: list[str]) -> dict:
        return tokenizer(texts, truncation=True, max_length=max_seq_length, return_special_tokens_mask=True)

    def write(target: Path) -> None:
        (target / "data").mkdir()
        rows, shard, writer, in_shard = 0, 0, None, 0
        for columns in _tokenized_batches(passages, tokenize):
            table = pa.table({name: pa.array(values, type=pa.list_(pa.int32())) for name, values in columns.items()})
            for piece in table.to_batches(max_chunksize=rows_per_shard):
                while piece.num_rows:
                    if writer is None or in_shard == rows_per_shard:
                        if writer is not None:
                            writer.close()
                        writer = pa.ipc.new_stream(str(target / "data" / f"shard-{shard:05d}.arrow"), piece.schema)
                        shard, in_shard = shard + 1, 0
                    take = piece.slice(0, rows_per_shard - in_shard)
                    writer.write_batch(take)
                    in_shard, rows = in_shard + take.num_rows, rows + take.num_rows
                    piece = piece.slice(take.num_rows)
        if writer is not None:
            writer.close()
        if rows == 0:
            raise ValueError(f"the corpus for {directory} has no passage (no non-blank line)")
        manifest = {"rows": rows, "shards": shard, "max_seq_length": max_seq_length, "source": source or {}}
        (target / SHARDS_MANIFEST).write_text(json.dumps(manifest, indent=2))

    write_atomically(directory, write)
    return directory


def open_shards(directory: str | Path):
    """The shards in ``directory`` as a memory-mapped ``datasets.Dataset`` (rows read from disk on demand)."""
    import datasets

    directory = Path(directory)
    if not (directory / SHARDS_MANIFEST).is_file():
        raise FileNotFoundError(f"{directory} holds no tokenized shards ({SHARDS_MANIFEST} is missing)")
    files = sorted((directory / "data").glob("shard-*.arrow"))
    return datasets.concatenate_datasets([datasets.Dataset.from_file(str(f), in_memory=False) for f in files])


def shards_manifest(directory: str | Path) -> dict:
    """What [`write_shards`][bert_kd.core.data.shards.write_shards] recorded about the shards in ``directory``."""
    return json.loads((Path(directory) / SHARDS_MANIFEST).read_text())
