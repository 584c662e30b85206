"""Row sets larger than memory: Arrow shards written batch by batch, read back memory-mapped (Kedro-free).

[`ShardWriter`][bert_kd.core.data.shards.ShardWriter] appends column batches to ``shard-00000.arrow``,
``shard-00001.arrow`` … in a folder (the ``datasets`` library's own Arrow stream files, each closed after
``rows_per_shard`` rows); only the batch in hand is in memory. [`read_shards`][bert_kd.core.data.shards.read_shards]
opens every shard memory-mapped as one ``datasets.Dataset``: a training loop reads it like any dataset,
and the operating system pages rows in and out as the loop goes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

#: Shard file names: ``shard-00000.arrow`` … (sorted order is row order).
SHARD_PATTERN = "shard-*.arrow"


class ShardWriter:
    """Append column batches (``{column: [values]}``, every column the same length) to Arrow shards
    in ``directory``; [`close`][bert_kd.core.data.shards.ShardWriter.close] returns the shard paths."""

    def __init__(self, directory: str | Path, rows_per_shard: int = 100_000) -> None:
        if rows_per_shard < 1:
            raise ValueError(f"rows_per_shard must be >= 1, got {rows_per_shard}")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.rows_per_shard = rows_per_shard
        self.rows = 0
        self.paths: list[Path] = []
        self._writer = None
        self._in_shard = 0

    def _open(self) -> None:
        from datasets.arrow_writer import ArrowWriter

        path = self.directory / f"shard-{len(self.paths):05d}.arrow"
        self.paths.append(path)
        self._writer, self._in_shard = ArrowWriter(path=str(path)), 0

    def _finish_shard(self) -> None:
        if self._writer is not None:
            self._writer.finalize()
            self._writer.close()
            self._writer = None

    def add(self, batch: Mapping[str, Sequence]) -> None:
        """Write ``batch``, starting a new shard whenever the current one is full."""
        lengths = {len(values) for values in batch.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns of one batch differ in length: { {k: len(v) for k, v in batch.items()} }")
        total = lengths.pop() if lengths else 0
        start = 0
        while start < total:
            if self._writer is None or self._in_shard >= self.rows_per_shard:
                self._finish_shard()
                self._open()
            take = min(total - start, self.rows_per_shard - self._in_shard)
            self._writer.write_batch({key: list(values[start : start + take]) for key, values in batch.items()})
            self._in_shard += take
            self.rows += take
            start += take

    def close(self) -> list[Path]:
        self._finish_shard()
        return list(self.paths)


def shard_paths(directory: str | Path) -> list[Path]:
    """The shards of ``directory`` in row order."""
    return sorted(Path(directory).glob(SHARD_PATTERN))


def read_shards(directory: str | Path):
    """Every shard of ``directory`` as one memory-mapped ``datasets.Dataset`` (nothing read into memory
    up front); an empty ``datasets.Dataset`` when the folder holds no shard."""
    from datasets import Dataset, concatenate_datasets

    paths = shard_paths(directory)
    if not paths:
        return Dataset.from_dict({})
    parts = [Dataset.from_file(str(path)) for path in paths]
    return parts[0] if len(parts) == 1 else concatenate_datasets(parts)
