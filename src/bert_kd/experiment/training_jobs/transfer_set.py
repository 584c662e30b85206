"""The transfer set as a content-keyed job: a task's training rows augmented, tokenized for the teacher and
stored as memory-mapped Arrow shards (``kind: transfer_set``), Kedro-free.

The key holds what decides the rows: the source rows (their sha256, after sampling), the scheme (rules,
probabilities, copies per row, seed), the tokenizer (its vocabulary's sha256 and ``max_seq_length``) and
where replacement words come from (the teacher's key for the embedding stand-in, a GloVe file's
sha256, the POS tagger). A second run with the same key reads the stored shards; a changed rule makes
a new set. Rows are written batch by batch ([`bert_kd.core.data.shards`][]), never
held whole in memory. The teacher labels the rows where they are used (the teacher cache of the
``distill_*`` pipelines); an augmented row's ``labels`` is [`NO_LABEL`][core.data.augment.NO_LABEL].
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bert_kd.config.errors import ParameterError
from bert_kd.config.schema import Augment, typed
from bert_kd.core.data import augment as rules
from bert_kd.core.data.shards import ShardWriter, read_shards, shard_paths
from bert_kd.core.data.tokenize import tokenize_frame
from bert_kd.core.models import ModelBundle
from bert_kd.experiment import jobs
from bert_kd.experiment.lineage import Lineage

log = logging.getLogger(__name__)

INFO_FILE = "transfer_set.json"
KIND = "transfer_set"


@dataclass
class TransferSet:
    """The augmented rows (memory-mapped ``datasets.Dataset``: ``idx``, ``source_idx``, text, ``labels``,
    the teacher's token columns), the job's key and folder, and what made them (``info``)."""

    rows: object
    key: str
    path: Path
    info: dict


def tokenizer_fingerprint(tokenizer, max_seq_length: int) -> str:
    """sha256 of a tokenizer's vocabulary, class and ``max_seq_length`` (what its token ids mean)."""
    vocab = json.dumps(sorted(tokenizer.get_vocab().items()), separators=(",", ":"))
    material = f"{type(tokenizer).__name__};{max_seq_length};{vocab}"
    return hashlib.sha256(material.encode()).hexdigest()


def scheme_of(block: Augment) -> rules.Scheme:
    fields = {f.name for f in dataclasses.fields(rules.Scheme)}
    values = {k: v for k, v in block.model_dump().items() if k in fields}
    return rules.Scheme(**{**values, "rules": tuple(block.rules)})


def _file_sha256(path: str) -> str:
    from bert_kd.core.files import file_sha256

    if not Path(path).is_file():
        raise ParameterError(
            [(rules.GLOVE_PARAMETER, f"{path} is not a file" if Path(path).exists() else f"no such file: {path}")],
            fix="give a GloVe text file (e.g. glove.840B.300d.txt, unzipped), or augment.glove: null for the "
            "embedding neighbours stand-in",
        )
    return file_sha256(Path(path))


def word_source_material(block: Augment, teacher: ModelBundle) -> dict:
    """Key material of where replacement words come from."""
    return {
        "embedding_neighbours_of": Lineage.of(teacher.info).key or teacher.info.get("model"),
        "glove_sha256": _file_sha256(block.glove) if block.glove else None,
        "pos_tagger": block.pos_tagger,
    }


def word_sources(block: Augment, teacher: ModelBundle, train: pd.DataFrame) -> rules.WordSources:
    """The offline stand-ins, or the real resources where ``block`` names them (``docs/fidelity.md``)."""
    tokenizer = teacher.tokenizer
    embeddings = teacher.model.get_input_embeddings().weight.detach()
    neighbours = rules.EmbeddingNeighbours(tokenizer, embeddings, k=block.candidates)
    counts = rules.unigram_counts(train)
    neighbours.prefetch(counts)
    if block.glove:
        neighbours = rules.GloveNeighbours(block.glove, tokenizer, single=neighbours, k=block.candidates)
    sources = rules.WordSources(neighbours, counts, mask_token=tokenizer.mask_token or "[MASK]")
    if block.pos_tagger == "nltk" and "pos" in block.rules:
        sources.pos_of = rules.nltk_tagger()
        sources.by_tag = rules.words_by_tag(train, sources.pos_of)
    return sources


def _token_batch(batch: dict, tokenizer, max_seq_length: int) -> dict:
    frame = pd.DataFrame(batch)
    tokenized = tokenize_frame(frame, tokenizer, max_seq_length).to_dict()
    text = {key: batch[key] for key in ("source_idx", "sentence1", "sentence2")}
    return {**tokenized, **text}


#: Seconds between two progress lines of a long augmentation.
PROGRESS_EVERY_S = 30.0


class Progress:
    """One log line at most every [`PROGRESS_EVERY_S`][] seconds while ``total`` source rows are augmented: the
    rows done, the share, the rate and an estimate of the time left (from the rate so far)."""

    def __init__(self, total: int, copies: int, every_s: float | None = None) -> None:
        self.total, self.copies = total, copies
        self.every_s = PROGRESS_EVERY_S if every_s is None else every_s
        self.started = self.last = time.monotonic()

    def __call__(self, done: int) -> None:
        now = time.monotonic()
        if now - self.last < self.every_s or done >= self.total:
            return
        self.last = now
        rate = done / max(now - self.started, 1e-9)
        left = (self.total - done) / rate if rate > 0 else float("inf")
        log.info(
            "transfer set: %d of %d source rows (%.0f%%), %.1f rows/s, about %s left",
            done,
            self.total,
            100.0 * done / self.total,
            rate,
            _duration(left),
        )


def _duration(seconds: float) -> str:
    if seconds == float("inf"):
        return "an unknown time"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def write_rows(train: pd.DataFrame, block: Augment, teacher: ModelBundle, max_seq_length: int, out: Path) -> int:
    """Augment ``train``'s source rows into shards under ``out`` batch by batch (their ``idx`` after every
    row of ``train``), with a progress line and an estimate while it runs; returns the number of rows."""
    source = source_rows(train, block)
    sources = word_sources(block, teacher, source)
    writer = ShardWriter(out, rows_per_shard=block.rows_per_shard)
    first = int(train["idx"].max()) + 1 if len(train) else 0
    log.info(
        "transfer set: %d source rows x %d copies (%d draws, at most as many rows)",
        len(source),
        block.copies,
        len(source) * block.copies,
    )
    progress = Progress(len(source), block.copies)
    batches = rules.augment_frame(
        source, scheme_of(block), sources, min(10_000, block.rows_per_shard), first, progress=progress
    )
    for batch in batches:
        writer.add(_token_batch(batch, teacher.tokenizer, max_seq_length))
    writer.close()
    return writer.rows


def has_pairs(frame: pd.DataFrame) -> bool:
    """Whether ``frame``'s rows are sentence pairs (a ``sentence2`` column with text)."""
    return bool("sentence2" in frame and frame["sentence2"].notna().any())


def source_rows(train: pd.DataFrame, block: Augment) -> pd.DataFrame:
    return train.head(block.max_source_rows) if block.max_source_rows else train


def transfer_set_job(train: pd.DataFrame, teacher: ModelBundle, augment, task: str, max_seq_length: int, **run):
    """The stored transfer set of ``train`` (``augment``: the ``augment`` block), built once per key.
    ``run``: ``recompute`` (bool)."""
    block = typed(Augment, augment, "augment")
    source = source_rows(train, block)
    tokenizer_key = tokenizer_fingerprint(teacher.tokenizer, max_seq_length)
    info = {
        "task": task,
        "tokenizer": tokenizer_key,
        "source_rows": len(source),
        "source_sha256": jobs.frame_fingerprint(source),
        "first_idx": int(train["idx"].max()) + 1 if len(train) else 0,
        "scheme": {k: v for k, v in dataclasses.asdict(scheme_of(block)).items() if k != "pair_single"},
        "words": word_source_material(block, teacher),
    }
    if has_pairs(source) and tuple(block.rules) != rules.TINYBERT_RULES:  # only Tang's rules on pairs read it
        info["pair_single"] = block.pair_single
    job = jobs.Job(KIND, info, Path(block.directory))

    def build(checkpoint_dir: Path) -> Path:
        shutil.rmtree(checkpoint_dir, ignore_errors=True)  # a half-written set is rebuilt, never resumed
        rows = write_rows(train, block, teacher, max_seq_length, checkpoint_dir)
        (checkpoint_dir / INFO_FILE).write_text(json.dumps({**info, "rows": rows}, indent=2))
        log.info("transfer set: %d rows from %d %s rows", rows, len(source), task)
        return checkpoint_dir

    def save(built: Path, directory: Path) -> None:
        for path in [*shard_paths(built), built / INFO_FILE]:
            shutil.move(str(path), directory / path.name)

    def load(directory: Path) -> TransferSet:
        return load_transfer_set(directory)

    outcome = jobs.run_job(job, build, save, load, recompute=bool(run.get("recompute")))
    return outcome.value if isinstance(outcome.value, TransferSet) else load_transfer_set(outcome.path)


def load_transfer_set(directory: str | Path) -> TransferSet:
    directory = Path(directory)
    info_file = directory / INFO_FILE
    if not info_file.exists():
        raise ParameterError([("augment.path", f"{directory} holds no transfer set ({INFO_FILE} missing)")])
    info = json.loads(info_file.read_text())
    return TransferSet(read_shards(directory), directory.name, directory, info)


def verified_transfer_set(directory: str | Path, where: str = "augment.path") -> TransferSet:
    """The transfer set in ``directory`` (given by path, so not made by this run) once its ``manifest.json``
    proves it whole, as the store proves an entry it reuses: the folder's files (the Arrow shards and
    ``transfer_set.json``) have the sizes and sha256 recorded when the set was stored, nothing was added, and in a
    store folder (``<root>/transfer_set/<key>``) the manifest names that key. An edited, truncated or
    manifest-less set is refused with one block naming the folder (``where``: the parameter)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ParameterError(
            [(where, f"{directory} is not a folder")], fix=f"give a transfer set's store folder ({KIND}/<key>)"
        )
    problem = jobs.store_entry_problem(directory)
    if problem is not None:
        raise ParameterError(
            [(where, f"the transfer set at {directory} does not match its manifest: {problem}")],
            fix=f"use the set as stored (augment.directory/{KIND}/<key>, its files unchanged), or leave {where} empty "
            "to build the set with `kedro run --pipelines=augment_glue` (a changed set is a new set, with its own key)",
        )
    return load_transfer_set(directory)


def check_transfer_set(transfer: TransferSet, task: str, tokenizer, max_seq_length: int, where: str) -> None:
    """A transfer set of another task or tokenizer is refused, naming ``where`` (the parameter)."""
    problems = []
    if transfer.info.get("task") != task:
        problems.append(
            (where, f"the transfer set at {transfer.path} is of task {transfer.info.get('task')!r}, not {task!r}")
        )
    if transfer.info.get("tokenizer") != tokenizer_fingerprint(tokenizer, max_seq_length):
        problems.append(
            (where, f"the transfer set at {transfer.path} was tokenized by another tokenizer or max_seq_length")
        )
    if problems:
        raise ParameterError(
            problems, fix="augment this task with the run's teacher (kedro run --pipelines=augment_glue)"
        )
