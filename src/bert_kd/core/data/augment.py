"""Transfer sets: a task's training rows rewritten many times over, for the teacher to label (Kedro-free).

Two schemes, each with its paper's published values as defaults:

- **Tang et al. (2019), Sec. 3.3** (``rules: [mask, pos, ngram]``): for each word, draw X ~ U[0, 1];
  X < p_mask → ``[MASK]``; p_mask ≤ X < p_mask + p_pos → a word of the same part of speech drawn from the
  training set's unigram distribution; then, with probability p_ng, the example shrinks to one of its
  n-grams, n ~ U{1, …, 5}. p_mask = p_pos = 0.1, p_ng = 0.25, n_iter = 20 passes per example, duplicates
  dropped.
- **TinyBERT (Jiao et al., 2020), Alg. 1** (``rules: [tinybert]``): each word is replaced, with
  probability p_t = 0.4, by one of K = 15 candidates (a masked LM's predictions for a single-piece
  word, GloVe nearest neighbours for the others), N_a = 20 samples per example.

Offline stand-ins (``docs/fidelity.md``): without a POS tagger the "same part of speech" words are the
word's K nearest neighbours in the teacher's input embedding space, drawn by training-set frequency;
without a masked-LM head or GloVe the candidates are those nearest neighbours too. The real resources
are used when given (``pos_tagger: nltk``, ``mlm_model``, ``glove``). In a sentence pair, Tang et al.'s rules
rewrite one sentence (the first or the second, even odds) with probability ``pair_single`` = 2/3 and both
otherwise, as the authors' released ``augment_paired_data.py`` (castorini/d-bert: ``single_only_prob`` 2/3);
TinyBERT's replacement rewrites both.
Augmented rows carry [`NO_LABEL`][]: their targets are the teacher's.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd

from bert_kd.config.errors import DataFileError
from bert_kd.config.schema import Augment

#: The label of an augmented row: PyTorch's cross-entropy ``ignore_index`` (no gold label to learn from).
NO_LABEL = -100
#: Tang et al.'s rules: the schema's default rules ([`bert_kd.config.schema.Augment`][]).
TANG_RULES = tuple(Augment.model_fields["rules"].default)
TINYBERT_RULES = ("tinybert",)
RULES = (*TANG_RULES, *TINYBERT_RULES)


def _schema_default(name: str):
    """The schema's default for an ``augment`` key: the papers' values, written once
    ([`bert_kd.config.schema.Augment`][])."""
    return Augment.model_fields[name].default


@dataclass(frozen=True)
class Scheme:
    """What [`augment_frame`][] does: the rules and their parameters
    (``config.schema.Augment`` checks them; the defaults are the papers', read from it)."""

    rules: tuple[str, ...] = TANG_RULES
    p_mask: float = _schema_default("p_mask")
    p_pos: float = _schema_default("p_pos")
    p_ng: float = _schema_default("p_ng")
    max_ngram: int = _schema_default("max_ngram")
    p_t: float = _schema_default("p_t")
    candidates: int = _schema_default("candidates")
    copies: int = _schema_default("copies")
    seed: int = _schema_default("seed")
    pair_single: float = _schema_default("pair_single")  # Tang's rules on a pair: rewrites changing one sentence


@dataclass
class WordSources:
    """Where replacement words come from: ``neighbours(word)`` (candidates, most similar first),
    ``frequency`` (training-set unigram counts) and, for the real POS rule, ``pos_of(words)``
    (a tag per word) with ``by_tag`` (tag → (words, counts))."""

    neighbours: Callable[[str], Sequence[str]]
    frequency: Mapping[str, int] = field(default_factory=dict)
    pos_of: Callable[[Sequence[str]], Sequence[str]] | None = None
    by_tag: Mapping[str, tuple[list[str], np.ndarray]] = field(default_factory=dict)
    mask_token: str = "[MASK]"


def _pos_word(word: str, tag: str | None, sources: WordSources, rng: np.random.Generator) -> str:
    """Tang's POS rule: a word of ``word``'s tag drawn by unigram frequency (stand-in: among its neighbours)."""
    if tag is not None and tag in sources.by_tag:
        words, counts = sources.by_tag[tag]
        return words[rng.choice(len(words), p=counts / counts.sum())]
    pool = list(sources.neighbours(word))
    if not pool:
        return word
    weights = np.array([sources.frequency.get(w, 0) + 1.0 for w in pool])
    return pool[rng.choice(len(pool), p=weights / weights.sum())]


def tang_copy(words: Sequence[str], scheme: Scheme, sources: WordSources, rng: np.random.Generator) -> list[str]:
    """One pass of Tang et al.'s rules over ``words`` (Sec. 3.3; a rule not in ``scheme.rules`` is off)."""
    p_mask = scheme.p_mask if "mask" in scheme.rules else 0.0
    p_pos = scheme.p_pos if "pos" in scheme.rules else 0.0
    tags = sources.pos_of(words) if (p_pos and sources.pos_of is not None) else [None] * len(words)
    out = []
    for word, tag in zip(words, tags):
        x = rng.random()
        if x < p_mask:
            out.append(sources.mask_token)
        elif x < p_mask + p_pos:
            out.append(_pos_word(word, tag, sources, rng))
        else:
            out.append(word)
    if "ngram" in scheme.rules and out and rng.random() < scheme.p_ng:
        n = min(int(rng.integers(1, scheme.max_ngram + 1)), len(out))
        start = int(rng.integers(0, len(out) - n + 1))
        out = out[start : start + n]
    return out


def tinybert_copy(words: Sequence[str], scheme: Scheme, sources: WordSources, rng: np.random.Generator) -> list[str]:
    """One sample of TinyBERT's Alg. 1: each word, with probability p_t, becomes one of its K candidates."""
    out = []
    for word in words:
        pool = list(sources.neighbours(word))[: scheme.candidates]
        out.append(pool[rng.integers(len(pool))] if pool and rng.random() < scheme.p_t else word)
    return out


def _copy(words: Sequence[str], scheme: Scheme, sources: WordSources, rng: np.random.Generator) -> list[str]:
    if scheme.rules == TINYBERT_RULES:
        return tinybert_copy(words, scheme, sources, rng)
    return tang_copy(words, scheme, sources, rng)


def rewritten_sentences(scheme: Scheme, rng: np.random.Generator) -> tuple[bool, bool]:
    """Which sentences of a pair one of Tang et al.'s rewrites changes: one of them (even odds) with probability
    ``scheme.pair_single``, both otherwise (the authors' ``augment_paired_data.py``)."""
    roll = rng.random()
    both = rng.random() >= scheme.pair_single
    return roll < 0.5 or both, roll >= 0.5 or both


def _texts(row, has_pair: bool) -> tuple[str, ...]:
    return (str(row.sentence1), str(row.sentence2)) if has_pair else (str(row.sentence1),)


def augment_frame(
    frame: pd.DataFrame,
    scheme: Scheme,
    sources: WordSources,
    batch_rows: int = 10_000,
    first_idx: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> Iterator[dict[str, list]]:
    """The augmented rows of ``frame`` (columns ``idx``, ``sentence1``, ``sentence2``), as column batches of
    about ``batch_rows``: up to ``scheme.copies`` distinct rewrites per row (``scheme.copies`` draws, the attempt
    bound: identical rewrites and the original are dropped, as Tang et al. do, never drawn again), ``source_idx``
    naming the row, ``idx`` numbered after the
    largest original ``idx`` (or from ``first_idx``: past every row of the split the set joins), ``label`` = [`NO_LABEL`][]. Row r draws
    from its own generator (seed, r), so the set does not depend on ``batch_rows``. ``progress(rows done)`` is
    called after each source row."""
    has_pair = "sentence2" in frame and frame["sentence2"].notna().any()
    pair_rule = bool(has_pair) and scheme.rules != TINYBERT_RULES
    next_idx = first_idx if first_idx is not None else (int(frame["idx"].max()) + 1 if len(frame) else 0)
    batch: dict[str, list] = {"idx": [], "source_idx": [], "sentence1": [], "sentence2": [], "label": []}
    for position, row in enumerate(frame.itertuples(index=False)):
        rng = np.random.default_rng([scheme.seed, position])
        original = _texts(row, has_pair)
        seen = {original}
        for _ in range(scheme.copies):
            changed = rewritten_sentences(scheme, rng) if pair_rule else (True,) * len(original)
            rewrite = tuple(
                " ".join(_copy(text.split(), scheme, sources, rng)) if change else text
                for text, change in zip(original, changed)
            )
            if rewrite in seen or not all(rewrite):
                continue
            seen.add(rewrite)
            batch["idx"].append(next_idx)
            batch["source_idx"].append(int(row.idx))
            batch["sentence1"].append(rewrite[0])
            batch["sentence2"].append(rewrite[1] if has_pair else None)
            batch["label"].append(NO_LABEL)
            next_idx += 1
        if progress is not None:
            progress(position + 1)
        if len(batch["idx"]) >= batch_rows:
            yield batch
            batch = {key: [] for key in batch}
    if batch["idx"]:
        yield batch


def unigram_counts(frame: pd.DataFrame) -> Counter:
    """Word counts over every sentence of ``frame`` (Tang et al.'s unigram distribution)."""
    counts: Counter = Counter()
    for column in ("sentence1", "sentence2"):
        if column in frame:
            for text in frame[column].dropna().astype(str):
                counts.update(text.split())
    return counts


def is_whole_word(token: str) -> bool:
    """A vocabulary entry that is a word of its own (not ``##piece``, not ``[SEP]``, letters only)."""
    return token.isalpha() and not token.startswith("##")


class EmbeddingNeighbours:
    """The K nearest whole words of a word in an input embedding space (cosine): the offline stand-in
    for Tang's same-POS words, TinyBERT's masked-LM candidates and its GloVe neighbours. A word that is
    several pieces is the mean of its pieces' vectors (its own entry is never its neighbour)."""

    def __init__(self, tokenizer, embeddings, k: int = 15) -> None:
        import torch

        vocab = tokenizer.get_vocab()
        self.tokenizer, self.k = tokenizer, k
        self.words = sorted((t for t in vocab if is_whole_word(t)), key=vocab.__getitem__)
        weight = torch.as_tensor(np.asarray(embeddings, dtype=np.float32))
        self.weight = weight
        self.table = torch.nn.functional.normalize(weight[[vocab[w] for w in self.words]], dim=-1)
        self.cache: dict[str, list[str]] = {}

    def _vector(self, word: str):
        ids = self.tokenizer.convert_tokens_to_ids(self.tokenizer.tokenize(word))
        return self.weight[ids].mean(0) if ids else None

    def __call__(self, word: str) -> list[str]:
        if word not in self.cache:
            self.cache[word] = self._nearest(word)
        return self.cache[word]

    def _nearest(self, word: str) -> list[str]:
        self.prefetch([word])
        return self.cache[word]

    def prefetch(self, words, chunk: int = 512) -> None:
        """Find the neighbours of every word of ``words`` not yet cached, ``chunk`` words per matrix
        product (one product per word reads the whole table each time: memory-bound, ~10× slower)."""
        import torch

        todo = [w for w in dict.fromkeys(words) if w not in self.cache]
        for start in range(0, len(todo), chunk):
            part = todo[start : start + chunk]
            vectors = [self._vector(w) for w in part]
            known = [i for i, v in enumerate(vectors) if v is not None]
            for i in set(range(len(part))) - set(known):
                self.cache[part[i]] = []
            if not known:
                continue
            queries = torch.nn.functional.normalize(torch.stack([vectors[i] for i in known]), dim=-1)
            order = torch.topk(queries @ self.table.T, min(self.k + 1, len(self.words)), dim=-1).indices.tolist()
            for i, row in zip(known, order):
                lowered = part[i].lower()
                self.cache[part[i]] = [self.words[j] for j in row if self.words[j] != lowered][: self.k]


#: The parameter that names a GloVe file.
GLOVE_PARAMETER = "augment.glove"


def _glove_error(path, what: str, line: int | None = None) -> DataFileError:
    return DataFileError(
        f"{path}{f' line {line}' if line else ''}: {what}",
        f"{GLOVE_PARAMETER} ({path}{f':{line}' if line else ''})",
        "give a GloVe text file (one word and its vector of numbers a line, separated by spaces, e.g. "
        "glove.840B.300d.txt), or augment.glove: null for the embedding neighbours stand-in",
    )


def read_glove(path) -> tuple[list[str], list[np.ndarray]]:
    """The words and vectors of a GloVe text file (``word v1 v2 …`` per line). A missing, binary, empty or
    malformed file (a line that is not numbers, vectors of different lengths) is a
    [`DataFileError`][config.errors.DataFileError] naming the file, its line and ``augment.glove``."""
    words: list[str] = []
    vectors: list[np.ndarray] = []
    try:
        with open(path, "rb") as handle:
            for number, raw in enumerate(handle, start=1):
                _glove_line(path, number, raw, words, vectors)
    except OSError as exc:
        raise _glove_error(path, f"cannot be read ({exc.strerror or exc})") from None
    if not vectors:
        raise _glove_error(path, "holds no word vector (empty, or no line of a word and numbers)")
    return words, vectors


def _glove_line(path, number: int, raw: bytes, words: list[str], vectors: list[np.ndarray]) -> None:
    """Append line ``number`` of a GloVe file to ``words`` and ``vectors`` (a line of fewer than three fields is
    skipped, as word2vec's header line)."""
    try:
        parts = raw.decode("utf-8").rstrip().split(" ")
    except UnicodeDecodeError:
        raise _glove_error(
            path, "is not UTF-8 text (a binary file: give the .txt, not a .zip or .bin)", number
        ) from None
    if len(parts) <= 2:
        return
    try:
        vector = np.asarray(parts[1:], dtype=np.float32)
    except ValueError:
        raise _glove_error(path, f"{parts[1][:20]!r}… is not a number: not a GloVe line", number) from None
    if vectors and len(vector) != len(vectors[0]):
        raise _glove_error(
            path, f"a vector of {len(vector)} numbers, the first line's has {len(vectors[0])} (a cut file?)", number
        )
    words.append(parts[0])
    vectors.append(vector)


class GloveNeighbours:
    """TinyBERT's real path for multi-piece words: the K nearest words in a GloVe text file
    (``word v1 v2 …`` per line), cosine. Single-piece words go to ``single`` (a masked LM or a stand-in)."""

    def __init__(self, path: str, tokenizer, single: Callable[[str], Sequence[str]], k: int = 15) -> None:
        words, vectors = read_glove(path)
        table = np.stack(vectors)
        self.table = table / np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-12)
        self.words, self.row = words, {w: i for i, w in enumerate(words)}
        self.tokenizer, self.single, self.k = tokenizer, single, k

    def __call__(self, word: str) -> list[str]:
        if len(self.tokenizer.tokenize(word)) == 1:
            return list(self.single(word))
        if word not in self.row:
            return []
        order = np.argsort(-(self.table @ self.table[self.row[word]]))[: self.k + 1]
        return [self.words[i] for i in order if self.words[i] != word][: self.k]


def nltk_tagger() -> Callable[[Sequence[str]], list[str]]:
    """Tang's POS tagger path: NLTK's averaged perceptron (``pip install nltk`` and its
    ``averaged_perceptron_tagger_eng`` data); a clear error where it is missing."""
    try:
        import nltk

        nltk.pos_tag(["probe"])
    except (ImportError, LookupError) as exc:
        raise RuntimeError(
            f"augment.pos_tagger=nltk needs NLTK and its tagger data ({exc}); "
            "install them or leave pos_tagger at null (embedding neighbours)"
        ) from None
    return lambda words: [tag for _, tag in nltk.pos_tag(list(words))]


def words_by_tag(frame: pd.DataFrame, pos_of: Callable[[Sequence[str]], Sequence[str]]) -> dict:
    """Tag → (words, unigram counts) over ``frame``'s sentences (Tang's per-POS unigram distribution)."""
    per_tag: dict[str, Counter] = {}
    for column in ("sentence1", "sentence2"):
        if column in frame:
            for text in frame[column].dropna().astype(str):
                words = text.split()
                for word, tag in zip(words, pos_of(words)):
                    per_tag.setdefault(tag, Counter())[word] += 1
    return {tag: (list(c), np.array(list(c.values()), dtype=float)) for tag, c in per_tag.items()}
