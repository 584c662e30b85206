"""Transfer-set rules: Tang et al.'s masking, POS replacement and n-gram sampling; TinyBERT's replacement."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bert_kd.core.data import augment as rules

WORDS = ["the", "film", "was", "a", "quiet", "and", "moving", "study", "of", "grief"]


def _sources(neighbours=None):
    return rules.WordSources(neighbours or (lambda word: [word.upper()]), {"FILM": 5})


def _copies(scheme, n=400, sources=None):
    rng = np.random.default_rng(0)
    return [rules._copy(WORDS, scheme, sources or _sources(), rng) for _ in range(n)]


def test_tang_masks_and_replaces_words_at_their_probabilities():
    copies = _copies(rules.Scheme(rules=("mask", "pos"), p_mask=0.1, p_pos=0.2))
    tokens = [t for c in copies for t in c]
    assert all(len(c) == len(WORDS) for c in copies)  # no n-gram rule: every word stays in place
    assert tokens.count("[MASK]") / len(tokens) == pytest.approx(0.1, abs=0.02)
    assert sum(t.isupper() and t != "[MASK]" for t in tokens) / len(tokens) == pytest.approx(0.2, abs=0.02)


def test_tang_ngram_sampling_keeps_one_n_gram_of_up_to_five_words():
    copies = _copies(rules.Scheme(rules=("ngram",), p_ng=0.25))
    short = [c for c in copies if len(c) < len(WORDS)]
    assert len(short) / len(copies) == pytest.approx(0.25, abs=0.05)
    text = " ".join(WORDS)
    assert all(1 <= len(c) <= 5 and " ".join(c) in text for c in short)


def test_tinybert_replaces_words_with_candidates_at_p_t():
    copies = _copies(rules.Scheme(rules=("tinybert",), p_t=0.4))
    tokens = [t for c in copies for t in c]
    assert sum(t.isupper() for t in tokens) / len(tokens) == pytest.approx(0.4, abs=0.03)


def test_augment_frame_rewrites_the_sentences_of_pairs_without_gold_labels():
    frame = pd.DataFrame(
        {"idx": [3, 7], "sentence1": ["a quiet film", "grief and film"], "sentence2": ["moving study", "the end"]}
    )
    scheme = rules.Scheme(rules=("mask",), p_mask=0.5, copies=5)
    (batch,) = list(rules.augment_frame(frame, scheme, _sources()))
    assert batch["idx"] == list(range(8, 8 + len(batch["idx"])))  # after the largest original idx
    assert set(batch["label"]) == {rules.NO_LABEL} and set(batch["source_idx"]) <= {3, 7}
    assert any("[MASK]" in s for s in batch["sentence2"]) and any("[MASK]" in s for s in batch["sentence1"])
    originals = set(zip(frame.sentence1, frame.sentence2))
    pairs = list(zip(batch["sentence1"], batch["sentence2"]))
    assert len(set(pairs)) == len(pairs) and not originals & set(pairs)  # duplicates and originals dropped
    again = [b for b in rules.augment_frame(frame, scheme, _sources(), batch_rows=1)]
    assert sum((b["sentence1"] for b in again), []) == batch["sentence1"]  # batch size does not change the rows


def test_pos_rule_draws_same_tag_words_by_frequency_when_a_tagger_is_given():
    sources = _sources()
    sources.pos_of = lambda words: ["NN"] * len(words)
    sources.by_tag = {"NN": (["cat", "dog"], np.array([0.0, 1.0]))}
    copies = _copies(rules.Scheme(rules=("pos",), p_pos=1.0), n=5, sources=sources)
    assert {t for c in copies for t in c} == {"dog"}


def test_embedding_neighbours_are_whole_words_other_than_the_word(tiny_teacher_dir):
    from bert_kd.core.models import load_classifier, load_tokenizer

    tokenizer = load_tokenizer(str(tiny_teacher_dir))
    weight = load_classifier(str(tiny_teacher_dir), 2).get_input_embeddings().weight.detach()
    neighbours = rules.EmbeddingNeighbours(tokenizer, weight, k=3)
    found = neighbours("film")
    assert len(found) == 3 and "film" not in found and all(rules.is_whole_word(w) for w in found)
    assert neighbours("film") is neighbours("film")  # cached


def test_glove_neighbours_serve_multi_piece_words(tmp_path, tiny_teacher_dir):
    from bert_kd.core.models import load_tokenizer

    glove = tmp_path / "glove.txt"
    glove.write_text("films 1 0\nnear 0.9 0.1\nfar -1 0\n")
    tokenizer = load_tokenizer(str(tiny_teacher_dir))
    neighbours = rules.GloveNeighbours(str(glove), tokenizer, single=lambda w: ["SINGLE"], k=1)
    assert neighbours("films") == ["near"] and neighbours("the") == ["SINGLE"]


def test_the_schemes_defaults_are_the_schemas_values_written_once():
    """The papers' values live in ``config.schema.Augment``; ``Scheme`` reads them (Tang et al. Sec. 3.3:
    p_mask = p_pos = 0.1, p_ng = 0.25, n ≤ 5, 20 copies; TinyBERT Alg. 1: p_t = 0.4, K = 15)."""
    from dataclasses import fields

    from bert_kd.config.schema import Augment

    schema, scheme = Augment(), rules.Scheme()
    for field in fields(rules.Scheme):
        expected = getattr(schema, field.name)
        assert getattr(scheme, field.name) == (tuple(expected) if field.name == "rules" else expected), field.name
    assert (scheme.p_mask, scheme.p_pos, scheme.p_ng, scheme.max_ngram, scheme.copies) == (0.1, 0.1, 0.25, 5, 20)
    assert (scheme.p_t, scheme.candidates, rules.TANG_RULES) == (0.4, 15, ("mask", "pos", "ngram"))


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "cannot be read"),
        (b"", "holds no word vector"),
        (b"PK\x03\x04\x14\x00\xff\xfe\x00binary\n", "not UTF-8"),
        (b"films 1 0\nnear 0.9 zero\n", "line 2"),
        (b"films 1 0\nnear 0.9\nfar -1 0 3\n", "a cut file"),
    ],
)
def test_a_missing_or_damaged_glove_file_is_one_block_naming_it(tmp_path, content, says):
    from bert_kd.config.errors import DataFileError

    glove = tmp_path / "glove.txt"
    if content is not None:
        glove.write_bytes(content)
    with pytest.raises(DataFileError) as error:
        rules.read_glove(str(glove))
    block = error.value.block()
    assert says in block and str(glove) in block and "augment.glove" in block and "fix:" in block


def test_tang_rewrites_one_sentence_of_a_pair_two_times_in_three():
    """The authors' augment_paired_data.py: one sentence (the first or the second, even odds) with probability 2/3,
    both otherwise; a rule that changes every word shows which sentences a rewrite changed."""
    rng = np.random.default_rng(0)
    draws = [rules.rewritten_sentences(rules.Scheme(), rng) for _ in range(3000)]
    only_first = sum(a and not b for a, b in draws) / len(draws)
    only_second = sum(b and not a for a, b in draws) / len(draws)
    both = sum(a and b for a, b in draws) / len(draws)
    assert only_first == pytest.approx(1 / 3, abs=0.03) and only_second == pytest.approx(1 / 3, abs=0.03)
    assert both == pytest.approx(1 / 3, abs=0.03) and all(a or b for a, b in draws)
    frame = pd.DataFrame({"idx": [0], "sentence1": ["a quiet film"], "sentence2": ["moving study of grief"]})
    everything = rules.Scheme(rules=("mask",), p_mask=1.0, copies=20)
    (batch,) = list(rules.augment_frame(frame, everything, _sources()))
    kept = {
        (s1 == "a quiet film", s2 == "moving study of grief") for s1, s2 in zip(batch["sentence1"], batch["sentence2"])
    }
    assert kept == {(True, False), (False, True), (False, False)}  # one sentence kept, or neither; never both
