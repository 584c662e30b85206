"""A text corpus tokenized once into memory-mapped Arrow shards (Hugging Face ``datasets``), keyed by content.

[`write_shards`][] tokenizes passages as they stream in (a generator: the
corpus is never whole in memory) and publishes the shard folder atomically;
[`open_shards`][] maps it back without reading it into memory, so a training
loop draws rows from disk. [`corpus_key`][] names a corpus by its bytes and the
tokenization, so the same corpus and tokenizer find the same shards (general distillation's corpus). Each shard's
rows, size and sha256 are recorded when it is written (``shards.json``, ``manifest.json``) and checked when the
folder is read ([`shards_problem`][]): a shard cut, edited or added afterwards is named, never read as the corpus.

Rows made rather than read (an augmented transfer set): [`ShardWriter`][]
appends column batches to ``shard-00000.arrow``, ``shard-00001.arrow`` … in a folder (the ``datasets`` library's
own Arrow stream files, each closed after ``rows_per_shard`` rows); only the batch in hand is in memory, and
[`read_shards`][] opens every shard memory-mapped as one ``datasets.Dataset``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping, Sequence

from bert_kd.config.errors import DataFileError
from bert_kd.core.files import MANIFEST, file_sha256, write_atomically

#: Rows tokenized per call of the tokenizer while streaming.
TOKENIZE_BATCH = 1000
#: The file in a shard folder that says what it holds (corpus key, tokenizer, length, rows).
SHARDS_MANIFEST = "shards.json"


#: Where a corpus's files are named (the block of a corpus that cannot be read names it).
CORPUS_PARAMETER = "general.corpus.files"


def read_passages(paths: Sequence[str | Path], parameter: str = CORPUS_PARAMETER) -> Iterator[str]:
    """The passages of text files, one a line, in file order; blank lines are skipped. A file that is not UTF-8
    text (binary, another encoding, a NUL byte) is a [`DataFileError`][config.errors.DataFileError] naming its
    line and ``parameter``."""
    for path in paths:
        with open(path, "rb") as handle:
            for number, raw in enumerate(handle, start=1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise DataFileError(
                        f"{path} line {number} is not UTF-8 text ({exc.reason} at byte {exc.start}): a binary file "
                        "or another encoding",
                        f"{parameter} ({path}:{number})",
                        "give plain UTF-8 text files, one passage a line (iconv -t utf-8 converts one)",
                    ) from None
                if "\x00" in line:
                    raise DataFileError(
                        f"{path} line {number} holds a NUL byte: a binary file, not text",
                        f"{parameter} ({path}:{number})",
                        "give plain UTF-8 text files, one passage a line",
                    )
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
    """Columns of ``tokenize`` over ``passages``, [`TOKENIZE_BATCH`][] passages at a time."""
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
        shard_rows: dict[str, int] = {}
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
                    shard_rows[f"data/shard-{shard - 1:05d}.arrow"] = in_shard
        if writer is not None:
            writer.close()
        if rows == 0:
            raise DataFileError(
                f"the corpus for {directory} has no passage: its files are empty or hold only blank lines",
                source_parameter(source),
                "give text files with one passage a line (or another corpus: general.corpus)",
            )
        manifest = {
            "rows": rows,
            "shards": shard,
            "shard_rows": shard_rows,
            "max_seq_length": max_seq_length,
            "source": source or {},
        }
        (target / SHARDS_MANIFEST).write_text(json.dumps(manifest, indent=2))

    write_atomically(directory, write)
    return directory


def source_parameter(source: Mapping | None) -> str:
    """The parameter that names a corpus of key material ``source``."""
    source = source or {}
    if "files_sha256" in source:
        return CORPUS_PARAMETER
    if "hf_dataset" in source:
        return "general.corpus.hf_dataset"
    if "glue_stand_in" in source:
        return "general.corpus.glue_stand_in (glue_dir)"
    return "general.corpus"


def shards_problem(directory: str | Path) -> str | None:
    """Why the shard folder ``directory`` is not what [`write_shards`][] wrote (None when it is): its
    ``manifest.json`` must list every file with the size and sha256 it had when written and the folder hold
    nothing else, and ``shards.json`` must record each shard's rows, adding up to its ``rows`` (a shard cut,
    edited, removed or added after the folder was written is named)."""
    directory = Path(directory)
    try:
        manifest = json.loads((directory / MANIFEST).read_text())
        recorded = json.loads((directory / SHARDS_MANIFEST).read_text())
    except FileNotFoundError as exc:
        return f"{Path(exc.filename).name} is missing"
    except (OSError, ValueError) as exc:
        return f"unreadable {MANIFEST} or {SHARDS_MANIFEST} ({exc})"
    files = manifest.get("files") if isinstance(manifest, dict) else None
    shard_rows = recorded.get("shard_rows") if isinstance(recorded, dict) else None
    if not isinstance(files, dict) or not isinstance(shard_rows, dict):
        return "it records no rows and sha256 per shard (written before shards were verified)"
    problem = _files_problem(directory, files)
    if problem is not None:
        return problem
    shards = {name for name in files if name.startswith("data/shard-")}
    if set(shard_rows) != shards or sum(shard_rows.values()) != recorded.get("rows"):
        return f"{SHARDS_MANIFEST}'s rows per shard do not add up to its {recorded.get('rows')} rows"
    return None


def _files_problem(directory: Path, files: dict) -> str | None:
    """Why the files of ``directory`` are not those ``files`` (the manifest's) lists, with their sizes and sha256."""
    present = {str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file() and p.name != MANIFEST}
    for name in sorted(present - set(files)):
        return f"{directory / name} was added after the shards were written"
    for name, entry in files.items():
        path = directory / name
        size = entry.get("size") if isinstance(entry, dict) else None
        if not path.is_file():
            return f"{path} is missing"
        if path.stat().st_size != size:
            return f"{path} has {path.stat().st_size} bytes, {size} when written (cut or edited)"
        if file_sha256(path) != entry.get("sha256"):
            return f"{path} does not match its sha256 recorded when it was written (edited)"
    return None


def damaged_shards_error(directory: str | Path, problem: str, parameter: str = "general.corpus") -> DataFileError:
    """The block of a shard folder that is not what was written."""
    return DataFileError(
        f"the tokenized corpus at {directory} is damaged: {problem}",
        parameter,
        "run `kedro run --pipelines=distill_general` again: its tokenize step sets a damaged corpus aside "
        f"({Path(directory).name}.corrupt-<time>) and tokenizes the corpus again",
    )


def open_shards(directory: str | Path, verify: bool = True):
    """The shards in ``directory`` as a memory-mapped ``datasets.Dataset`` (rows read from disk on demand),
    checked first against what was recorded when they were written ([`shards_problem`][]; ``verify=False``
    skips it, for a folder just checked)."""
    import datasets

    directory = Path(directory)
    if not (directory / SHARDS_MANIFEST).is_file():
        raise FileNotFoundError(f"{directory} holds no tokenized shards ({SHARDS_MANIFEST} is missing)")
    if verify:
        problem = shards_problem(directory)
        if problem is not None:
            raise damaged_shards_error(directory, problem, source_parameter(_recorded_source(directory)))
    files = sorted((directory / "data").glob("shard-*.arrow"))
    return datasets.concatenate_datasets([datasets.Dataset.from_file(str(f), in_memory=False) for f in files])


def _recorded_source(directory: Path) -> dict:
    try:
        source = shards_manifest(directory).get("source")
    except (OSError, ValueError, AttributeError):
        return {}
    return source if isinstance(source, dict) else {}


def shards_manifest(directory: str | Path) -> dict:
    """What [`write_shards`][] recorded about the shards in ``directory``."""
    return json.loads((Path(directory) / SHARDS_MANIFEST).read_text())


#: Shard file names: ``shard-00000.arrow`` … (sorted order is row order).
SHARD_PATTERN = "shard-*.arrow"


class ShardWriter:
    """Append column batches (``{column: [values]}``, every column the same length) to Arrow shards
    in ``directory``; [`close`][] returns the shard paths."""

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
        """Close the shard being written; every shard's path, in row order."""
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
