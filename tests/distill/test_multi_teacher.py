"""Multi-teacher one-to-many distillation (Shi & Guo 2023) and its multi-teacher baselines.

Everything is local and tiny: in-memory BERT/RoBERTa models, tokenizers trained in
milliseconds with ``tokenizers``, hand-made :class:`Features` for the loss formulas.
"""

from __future__ import annotations

import copy
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from bert_kd.distill import losses
from bert_kd.distill.mapping import layer_map
from bert_kd.distill.methods import METHODS, build_method
from bert_kd.distill.methods.multi_teacher import (
    MultiTeacherOneToMany,
    RandomSingleTeacherKD,
    build_multi_teacher_objective,
)
from bert_kd.distill.objective import DistillationObjective, Teacher
from bert_kd.distill.outputs import Features, forward_features
from bert_kd.training import Collator, TrainingConfig, fit, make_loader
from tests.conftest import WORDS, make_tiny_bert, make_wordpiece_tokenizer, write_tiny_glue

# --------------------------------------------------------------------------- helpers


def tiny_bert(layers: int, hidden: int, heads: int, num_labels: int = 2, vocab: int = 40, seed: int = 0):
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=2 * hidden, max_position_embeddings=64, num_labels=num_labels,
    )
    return BertForSequenceClassification(config).eval()


def make_bpe_tokenizer():
    """A byte-level BPE (RoBERTa-style) tokenizer trained locally."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator([" ".join(WORDS)] * 20, trainer)
    tok.post_processor = processors.RobertaProcessing(("</s>", tok.token_to_id("</s>")), ("<s>", tok.token_to_id("<s>")))
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", sep_token="</s>", cls_token="<s>",
        unk_token="<unk>", pad_token="<pad>", mask_token="<mask>", model_input_names=["input_ids", "attention_mask"],
    )


def make_other_wordpiece_tokenizer():
    """A WordPiece vocabulary different from conftest's (other corpus, other special-token ids)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=120, special_tokens=["[MASK]", "[SEP]", "[UNK]", "[PAD]", "[CLS]"])
    tok.train_from_iterator([" ".join(reversed(WORDS))] * 5 + ["zebra quantum orbit"] * 5, trainer)
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
        mask_token="[MASK]", model_input_names=["input_ids", "token_type_ids", "attention_mask"],
    )


def tiny_roberta(tokenizer, layers: int = 3, hidden: int = 24, heads: int = 3, seed: int = 2):
    from transformers import RobertaConfig, RobertaForSequenceClassification

    torch.manual_seed(seed)
    config = RobertaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=2 * hidden, max_position_embeddings=80, type_vocab_size=1, num_labels=2,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
    )
    return RobertaForSequenceClassification(config).eval()


def manual_masked_mse(s, t, mask):
    total, count = 0.0, 0
    for b in range(s.shape[0]):
        for pos in range(s.shape[1]):
            if mask[b, pos]:
                total = total + ((s[b, pos] - t[b, pos]) ** 2).mean()
                count += 1
    return total / count


def manual_attention_mse(s, t, mask):
    if s.shape[1] != t.shape[1]:
        s, t = s.mean(1, keepdim=True), t.mean(1, keepdim=True)
    per_head = []
    for h in range(s.shape[1]):
        total, count = 0.0, 0
        for b in range(s.shape[0]):
            for q in range(s.shape[2]):
                for k in range(s.shape[3]):
                    if mask[b, q] and mask[b, k]:
                        total = total + (s[b, h, q, k] - t[b, h, q, k]) ** 2
                        count += 1
        per_head.append(total / count)
    return sum(per_head) / len(per_head)


def manual_mean_pool(h, mask):
    m = mask.float().unsqueeze(-1)
    return (h * m).sum(1) / m.sum(1)


def soft_ce(s, t, temperature):
    return -(F.softmax(t / temperature, -1) * F.log_softmax(s / temperature, -1)).sum(-1).mean()


def random_features(batch: int, length: int, layers: int, width: int, heads: int, mask, classes: int = 2, seed=0):
    """Hand-made Features; padded attention entries hold a huge value that must be ignored."""
    g = torch.Generator().manual_seed(seed)
    hidden = tuple(torch.randn(batch, length, width, generator=g) for _ in range(layers + 1))
    pad_pair = ~(mask.bool()[:, None, :, None] & mask.bool()[:, None, None, :])
    scores = [torch.randn(batch, heads, length, length, generator=g).masked_fill(pad_pair, 1e4) for _ in range(layers)]
    return Features(logits=torch.randn(batch, classes, generator=g), attention_mask=mask,
                    hidden_states=hidden, attention_scores=scores)


# --------------------------------------------------------------------------- groups


@pytest.mark.parametrize("n_t, n_s, expected", [
    (12, 5, [[1, 2, 3], [4, 5, 6], [7, 8], [9, 10], [11, 12]]),
    (6, 4, [[1, 2], [3, 4], [5], [6]]),
])
def test_one_to_many_groups_uneven_depths(n_t, n_s, expected):
    groups = layer_map("one_to_many", n_t, n_s)
    assert groups == expected
    flat = [j for g in groups for j in g]
    assert flat == list(range(1, n_t + 1))  # in order, each teacher layer exactly once
    assert all(g == list(range(g[0], g[-1] + 1)) for g in groups)  # contiguous
    sizes = [len(g) for g in groups]
    assert max(sizes) - min(sizes) <= 1 and min(sizes) >= 1


def test_method_builds_one_group_set_per_teacher():
    student = tiny_bert(5, 8, 2)
    method = build_method({"method": "multi_teacher"}, student, [tiny_bert(12, 8, 2), tiny_bert(6, 12, 3)])
    assert method.groups == [layer_map("one_to_many", 12, 5), layer_map("one_to_many", 6, 5)]
    report = method.alignment_report()
    assert report["teacher_1"]["groups"] == [[1, 2], [3], [4], [5], [6]]
    assert report["teacher_1"]["width"] == 12 and report["teacher_1"]["heads"] == 3
    assert report["teacher_0"]["token_aligned"] is None  # nothing seen yet


# --------------------------------------------------------------------------- loss terms by hand


@pytest.fixture(scope="module")
def hand_setup():
    """Student N=2 (d=8, 2 heads); teacher 0 M=3 (d=12, 3 heads) aligned (student columns);
    teacher 1 M=5 (d=8, 2 heads) reads its own, different tokenization ``t1_``."""
    torch.manual_seed(0)
    models = SimpleNamespace(student=tiny_bert(2, 8, 2), t0=tiny_bert(3, 12, 3), t1=tiny_bert(5, 8, 2))
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    mask1 = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]])
    student = random_features(2, 4, 2, 8, 2, mask, seed=1)
    teacher0 = random_features(2, 4, 3, 12, 3, mask, seed=2)
    teacher1 = random_features(2, 5, 5, 8, 2, mask1, seed=3)
    batch = {
        "input_ids": torch.tensor([[2, 5, 6, 3], [2, 7, 3, 0]]), "attention_mask": mask,
        "labels": torch.tensor([0, 1]),
        "t1_input_ids": torch.tensor([[0, 9, 8, 7, 2], [0, 6, 2, 1, 1]]), "t1_attention_mask": mask1,
    }
    return SimpleNamespace(models=models, student=student, teachers={0: teacher0, 1: teacher1}, batch=batch,
                           mask=mask, mask1=mask1)


@pytest.mark.parametrize("sentence_repr", ["mean", "summary"])
def test_each_term_matches_the_formulas(hand_setup, sentence_repr):
    s = hand_setup
    config = {"method": "multi_teacher", "alpha": 0.1, "beta": 0.7, "temperature": 5.0,
              "sentence_repr": sentence_repr, "teacher_prefixes": ["", "t1_"]}
    method = build_method(config, s.models.student, [s.models.t0, s.models.t1])
    terms = method.terms(s.student, s.teachers, s.batch)
    st, t0, t1 = s.student, s.teachers[0], s.teachers[1]
    Wh, We = method.hidden_projections, method.embedding_projections
    with torch.no_grad():
        # Eq. 1: mean over teachers of soft-CE at temperature (no τ²)
        pred = (soft_ce(st.logits, t0.logits, 5.0) + soft_ce(st.logits, t1.logits, 5.0)) / 2
        # Eq. 2-4, teacher 0 (token level), groups [[1, 2], [3]]: group MEAN, sum over student layers
        h = [Wh[0](x) for x in st.hidden_states]
        hidden0 = (manual_masked_mse(h[1], t0.hidden_states[1], s.mask)
                   + manual_masked_mse(h[1], t0.hidden_states[2], s.mask)) / 2 \
            + manual_masked_mse(h[2], t0.hidden_states[3], s.mask)
        # teacher 1 is misaligned: sentence vectors, groups [[1, 2, 3], [4, 5]]
        if sentence_repr == "mean":
            sv = [manual_mean_pool(x, s.mask) for x in st.hidden_states]
            tv = [manual_mean_pool(x, s.mask1) for x in t1.hidden_states]
        else:
            sv = [x[:, 0] for x in st.hidden_states]
            tv = [x[:, 0] for x in t1.hidden_states]
        d = lambda i, j: ((Wh[1](sv[i]) - tv[j]) ** 2).mean()  # noqa: E731
        hidden1 = (d(1, 1) + d(1, 2) + d(1, 3)) / 3 + (d(2, 4) + d(2, 5)) / 2
        # Eq. 6-9 teacher 0 only (3 heads vs 2: head-averaged), padding entries (1e4) ignored
        a = lambda i, j: manual_attention_mse(st.attention_scores[i - 1], t0.attention_scores[j - 1], s.mask)  # noqa: E731
        attn0 = (a(1, 1) + a(1, 2)) / 2 + a(2, 3)
        # Eq. 11: token level for teacher 0, mean-pooled embeddings for teacher 1
        emb0 = manual_masked_mse(We[0](st.hidden_states[0]), t0.hidden_states[0], s.mask)
        emb1 = ((We[1](manual_mean_pool(st.hidden_states[0], s.mask))
                 - manual_mean_pool(t1.hidden_states[0], s.mask1)) ** 2).mean()
        ce = F.cross_entropy(st.logits, s.batch["labels"])
    expected = {"ce": ce, "pred": pred, "hidden": (hidden0 + hidden1) / 2, "attn": attn0, "emb": (emb0 + emb1) / 2,
                "hidden_t0": hidden0, "hidden_t1": hidden1, "attn_t0": attn0, "attn_t1": 0.0,
                "emb_t0": emb0, "emb_t1": emb1, "aligned_t0": 1.0, "aligned_t1": 0.0}
    for name, value in expected.items():
        assert float(torch.as_tensor(terms[name]).detach()) == pytest.approx(float(value), rel=1e-5, abs=1e-6), name
    # Eq. 12-13 expressed as weights: L = β(αH + A + E + (1−α)P) + (1−β)CE
    w = method.weights
    assert w == pytest.approx({"ce": 0.3, "pred": 0.7 * 0.9, "hidden": 0.7 * 0.1, "attn": 0.7, "emb": 0.7})
    total = sum(w[k] * terms[k] for k in w)
    paper = 0.7 * (0.1 * terms["hidden"] + terms["attn"] + terms["emb"] + 0.9 * terms["pred"]) + 0.3 * terms["ce"]
    assert float(total.detach()) == pytest.approx(float(paper.detach()), rel=1e-6)
    assert method.alignment_report()["teacher_1"]["attention"] == "skipped"


def test_alignment_sentence_forces_the_sentence_path(hand_setup):
    s = hand_setup
    config = {"method": "multi_teacher", "alignment": "sentence", "teacher_prefixes": ["", "t1_"]}
    method = build_method(config, s.models.student, [s.models.t0, s.models.t1])
    assert not method.student_needs.get("attention") and not method.teacher_needs.get("attention")
    terms = method.terms(s.student, s.teachers, s.batch)
    assert float(terms["aligned_t0"]) == 0.0 and float(terms["attn"]) == 0.0
    with torch.no_grad():
        sv = [manual_mean_pool(x, s.mask) for x in s.student.hidden_states]
        tv = [manual_mean_pool(x, s.mask) for x in s.teachers[0].hidden_states]
        d = lambda i, j: ((method.hidden_projections[0](sv[i]) - tv[j]) ** 2).mean()  # noqa: E731
        expected = (d(1, 1) + d(1, 2)) / 2 + d(2, 3)
    assert float(terms["hidden_t0"]) == pytest.approx(float(expected), rel=1e-5)


def test_regression_prediction_term_is_mse_to_each_teacher():
    student, t0, t1 = tiny_bert(2, 8, 2, num_labels=1), tiny_bert(2, 8, 2, num_labels=1), tiny_bert(4, 8, 2, num_labels=1)
    method = build_method({"method": "multi_teacher"}, student, [t0, t1], regression=True)
    mask = torch.ones(3, 4, dtype=torch.long)
    s, a, b = (random_features(3, 4, n, 8, 2, mask, classes=1, seed=i) for i, n in enumerate((2, 2, 4)))
    batch = {"input_ids": torch.zeros(3, 4, dtype=torch.long), "attention_mask": mask, "labels": torch.tensor([0.5, 1.0, 4.0])}
    terms = method.terms(s, {0: a, 1: b}, batch)
    expected = (((s.logits - a.logits) ** 2).mean() + ((s.logits - b.logits) ** 2).mean()) / 2
    assert float(terms["pred"]) == pytest.approx(float(expected), rel=1e-6)
    assert float(terms["ce"]) == pytest.approx(float(((s.logits.squeeze(-1) - batch["labels"]) ** 2).mean()), rel=1e-6)


def test_projection_auto_uses_identity_for_equal_widths():
    method = build_method({"method": "multi_teacher", "projection": "auto"}, tiny_bert(2, 8, 2),
                          [tiny_bert(2, 8, 2), tiny_bert(2, 12, 3)])
    assert isinstance(method.hidden_projections[0], nn.Identity)
    assert isinstance(method.hidden_projections[1], nn.Linear)
    paper = build_method({"method": "multi_teacher"}, tiny_bert(2, 8, 2), [tiny_bert(2, 8, 2)])
    assert isinstance(paper.hidden_projections[0], nn.Linear)  # W_{h,k} always, as in the paper


# --------------------------------------------------------------------------- K = 1


def test_single_teacher_reduces_to_direct_computation():
    student, teacher = tiny_bert(2, 16, 2, seed=1), tiny_bert(4, 32, 4, seed=2)
    g = torch.Generator().manual_seed(0)
    batch = {"input_ids": torch.randint(5, 40, (3, 7), generator=g),
             "attention_mask": torch.tensor([[1] * 7, [1] * 5 + [0] * 2, [1] * 3 + [0] * 4]),
             "labels": torch.tensor([0, 1, 1])}
    config = {"method": "multi_teacher", "alpha": 0.5, "beta": 0.2, "temperature": 10.0}
    method = build_method(config, student, [teacher])
    objective = DistillationObjective(student, [Teacher(teacher)], method, method.weights)
    got = objective.training_step(batch)

    s = forward_features(student, batch, hidden_states=True, attention_scores=True)
    with torch.no_grad():
        t = forward_features(teacher, batch, hidden_states=True, attention_scores=True)
    mask, groups = batch["attention_mask"], [[1, 2], [3, 4]]
    Wh, We = method.hidden_projections[0], method.embedding_projections[0]
    pred = losses.soft_cross_entropy(s.logits, t.logits, 10.0)
    hidden = losses.group_mean_mse([Wh(h) for h in s.hidden_states[1:]], list(t.hidden_states[1:]), groups, mask)
    attn = losses.group_mean_mse(s.attention_scores, t.attention_scores, groups, mask)
    emb = losses.masked_mse(We(s.hidden_states[0]), t.hidden_states[0], mask)
    ce = F.cross_entropy(s.logits, batch["labels"])
    direct = 0.2 * (0.5 * hidden + attn + emb + 0.5 * pred) + 0.8 * ce
    assert float(got["loss"].detach()) == pytest.approx(float(direct.detach()), rel=1e-5)

    # Two copies of the same teacher (with the same projections) give the same loss as K = 1.
    twin = build_method(config, student, [teacher, teacher])
    for k in range(2):
        twin.hidden_projections[k].load_state_dict(Wh.state_dict())
        twin.embedding_projections[k].load_state_dict(We.state_dict())
    twin_obj = DistillationObjective(student, [Teacher(teacher), Teacher(teacher)], twin, twin.weights)
    twin_loss = twin_obj.training_step(batch)["loss"].detach()
    assert float(twin_loss) == pytest.approx(float(got["loss"].detach()), rel=1e-5)


# --------------------------------------------------------------------------- baselines on hand-made tensors


def test_okd_averages_soft_labels(hand_setup):
    s = hand_setup
    method = build_method({"method": "okd", "beta": 0.7, "temperature": 2.0}, s.models.student, [s.models.t0, s.models.t1])
    assert method.weights == pytest.approx({"ce": 0.3, "pred": 0.7})
    assert method.teacher_needs == {} and method.student_needs == {}
    terms = method.terms(s.student, s.teachers, s.batch)
    expected = (soft_ce(s.student.logits, s.teachers[0].logits, 2.0) + soft_ce(s.student.logits, s.teachers[1].logits, 2.0)) / 2
    assert float(terms["pred"]) == pytest.approx(float(expected), rel=1e-6)
    assert set(terms) == {"ce", "pred"}


def test_multi_pkd_normalised_cls_per_teacher():
    student = tiny_bert(2, 8, 2)
    teachers = [tiny_bert(4, 8, 2), tiny_bert(6, 12, 3)]
    method = build_method({"method": "multi_pkd", "alpha": 0.5, "beta": 0.5}, student, teachers)
    assert method.mappings == [[[2], []], [[3], []]]
    assert isinstance(method.projections[0], nn.Identity) and isinstance(method.projections[1], nn.Linear)
    assert method.weights == pytest.approx({"ce": 0.5, "pred": 0.25, "layer": 0.25})
    g = torch.Generator().manual_seed(0)
    one = torch.ones(2, 1)
    s = Features(torch.randn(2, 2, generator=g), one, extras={"cls": torch.randn(2, 3, 8, generator=g)})
    a = Features(torch.randn(2, 2, generator=g), one, extras={"cls": torch.randn(2, 5, 8, generator=g)})
    b = Features(torch.randn(2, 2, generator=g), one, extras={"cls": torch.randn(2, 7, 12, generator=g)})
    terms = method.terms(s, {0: a, 1: b}, {"labels": torch.tensor([1, 0])})
    unit = lambda x: x / x.norm(dim=-1, keepdim=True)  # noqa: E731
    with torch.no_grad():
        d0 = ((unit(s.cls()[:, 1]) - unit(a.cls()[:, 2])) ** 2).sum(-1).mean()  # student 1 <- teacher 2
        d1 = ((unit(method.projections[1](s.cls()[:, 1])) - unit(b.cls()[:, 3])) ** 2).sum(-1).mean()
    assert float(terms["layer"].detach()) == pytest.approx(float((d0 + d1) / 2), rel=1e-5)


def _rse(seed, k=3):
    return build_method({"method": "rse_kd", "seed": seed}, tiny_bert(2, 8, 2), [tiny_bert(2, 8, 2)] * k)


def test_rse_kd_draws_every_teacher_reproducibly():
    method = _rse(7)
    draws = [method.choose_teachers(3, True) for _ in range(300)]
    assert all(len(d) == 1 for d in draws)
    counts = [sum(d == [k] for d in draws) for k in range(3)]
    assert min(counts) >= 60, counts  # each teacher drawn (uniform: ~100 each)
    assert method.alignment_report()["teacher_0"]["draws"] == counts[0]
    same, other = _rse(7), _rse(8)
    assert [same.choose_teachers(3, True) for _ in range(300)] == draws  # same seed, same draws
    assert [other.choose_teachers(3, True) for _ in range(300)] != draws
    assert method.choose_teachers(3, False) == [0, 1, 2]  # evaluation / diagnostics: all teachers
    # Resuming from a saved state continues the same sequence.
    first = _rse(7)
    head = [first.choose_teachers(3, True) for _ in range(10)]
    resumed = _rse(7)
    resumed.load_state_dict(first.state_dict())
    assert head + [resumed.choose_teachers(3, True) for _ in range(20)] == draws[:30]


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize("method_name", ["multi_teacher", "okd", "multi_pkd", "rse_kd"])
def test_validation_errors(method_name):
    student = tiny_bert(2, 8, 2)
    with pytest.raises(ValueError, match="empty teacher list"):
        build_method({"method": method_name}, student, [])
    with pytest.raises(ValueError, match="label"):
        build_method({"method": method_name}, student, [tiny_bert(4, 8, 2), tiny_bert(4, 8, 2, num_labels=3)])
    with pytest.raises(ValueError, match="beta"):
        build_method({"method": method_name, "beta": 1.5}, student, [tiny_bert(4, 8, 2)])
    with pytest.raises(ValueError, match="beta"):
        build_method({"method": method_name, "beta": -0.1}, student, [tiny_bert(4, 8, 2)])


def test_validation_errors_multi_teacher_specific():
    student = tiny_bert(3, 8, 2)
    with pytest.raises(ValueError, match="fewer than the student"):
        build_method({"method": "multi_teacher"}, student, [tiny_bert(4, 8, 2), tiny_bert(2, 8, 2)])
    for alpha in (-0.01, 1.01, float("nan"), "high"):
        with pytest.raises(ValueError, match="alpha"):
            build_method({"method": "multi_teacher", "alpha": alpha}, student, [tiny_bert(4, 8, 2)])
    with pytest.raises(ValueError, match="alpha"):
        build_method({"method": "multi_pkd", "alpha": 2}, student, [tiny_bert(4, 8, 2)])
    with pytest.raises(ValueError, match="sentence_repr"):
        build_method({"method": "multi_teacher", "sentence_repr": "max"}, student, [tiny_bert(4, 8, 2)])
    with pytest.raises(ValueError, match="teacher_prefixes"):
        build_method({"method": "multi_teacher", "teacher_prefixes": ["", "t1_"]}, student, [tiny_bert(4, 8, 2)])
    with pytest.raises(ValueError, match="unknown option"):
        build_method({"method": "multi_teacher", "gamma": 1}, student, [tiny_bert(4, 8, 2)])
    with pytest.raises(ValueError, match="teacher 0"):
        build_method({"method": "multi_pkd"}, tiny_bert(3, 8, 2), [tiny_bert(2, 8, 2)])
    assert {"multi_teacher", "okd", "multi_pkd", "rse_kd"} <= set(METHODS)


def test_unbound_prefixes_with_prefixed_columns_is_an_error(hand_setup):
    s = hand_setup
    method = build_method({"method": "multi_teacher"}, s.models.student, [s.models.t0, s.models.t1])
    with pytest.raises(ValueError, match="teacher_prefixes"):
        method.terms(s.student, s.teachers, s.batch)


# --------------------------------------------------------------------------- heterogeneous teachers end to end


@pytest.fixture(scope="module")
def hetero(tmp_path_factory):
    """Student: 2-layer BERT (d=16, 2 heads, WordPiece A). Teachers, each with its OWN tokenizer:
    t0 = 4-layer BERT (d=32, 4 heads) with its own saved copy of vocabulary A (aligned);
    t1 = 3-layer RoBERTa (d=24, 3 heads) with a byte-level BPE; t2 = 5-layer BERT (d=20,
    5 heads) with a different WordPiece vocabulary."""
    from bert_kd.data.glue import load_glue_task
    from bert_kd.data.tokenize import merge_tokenized, tokenize_splits
    from bert_kd.models import load_classifier, load_tokenizer

    root: Path = tmp_path_factory.mktemp("mt")
    make_tiny_bert(root / "student", num_layers=2, hidden=16, heads=2, seed=0)
    tok_s = load_tokenizer(str(root / "student"))
    tok_s.save_pretrained(root / "t0_tokenizer")  # t0 ships its own copy of the student's vocabulary
    tok0 = load_tokenizer(str(root / "t0_tokenizer"))
    tok1, tok2 = make_bpe_tokenizer(), make_other_wordpiece_tokenizer()
    t0 = tiny_bert(4, 32, 4, vocab=len(tok0), seed=1)
    t1 = tiny_roberta(tok1)
    torch.manual_seed(3)
    t2 = tiny_bert(5, 20, 5, vocab=len(tok2), seed=3)
    write_tiny_glue(root / "glue", "RTE", n_train=32, n_dev=16)
    splits = load_glue_task("rte", root / "glue", allow_download=False)
    ds = merge_tokenized(
        tokenize_splits(splits, tok_s, 32),
        {p: tokenize_splits(splits, tok, 32) for p, tok in (("t0_", tok0), ("t1_", tok1), ("t2_", tok2))},
    )
    collator = Collator({"": tok_s.pad_token_id, "t0_": tok0.pad_token_id, "t1_": tok1.pad_token_id,
                         "t2_": tok2.pad_token_id})
    teachers = [Teacher(t0, "t0_", name="bert_same_vocab"), Teacher(t1, "t1_", name="roberta_bpe"),
                Teacher(t2, "t2_", name="bert_other_vocab")]
    row = ds["train"][0]
    assert row["input_ids"] == row["t0_input_ids"]  # same vocabulary, separately loaded tokenizer
    assert row["input_ids"] != row["t1_input_ids"] and row["input_ids"] != row["t2_input_ids"]
    return SimpleNamespace(
        root=root, ds=ds, collator=collator, teachers=teachers, pad_ids=collator.pad_ids,
        student=lambda: load_classifier(str(root / "student"), 2),
    )


def _fit(objective, hetero, steps=3):
    logged = []
    config = TrainingConfig(max_steps=steps, batch_size=8, eval_batch_size=16, log_every_steps=1, progress_bar=False,
                            cpu=True, seed=0, warmup_ratio=0.0, learning_rate=1e-3)
    result = fit(objective, hetero.ds["train"], hetero.ds["validation"], config, collator=hetero.collator,
                 evaluate_fn=lambda p, l: {"accuracy": float((p.argmax(-1) == l).mean())},
                 log_fn=lambda m, step: logged.append(dict(m)))
    return result, [m for m in logged if "train/loss" in m]


def test_heterogeneous_teachers_token_terms_only_where_aligned(hetero):
    student = hetero.student()
    before = [copy.deepcopy(t.model.state_dict()) for t in hetero.teachers]
    objective = build_multi_teacher_objective(
        student, hetero.teachers, {"method": "multi_teacher", "alpha": 0.5, "beta": 0.5, "temperature": 2.0}
    )
    result, logged = _fit(objective, hetero)
    assert result.global_step == 3 and "accuracy" in result.best_metrics
    report = objective.method.alignment_report()
    assert set(report) == {"bert_same_vocab", "roberta_bpe", "bert_other_vocab"}
    aligned = report["bert_same_vocab"]
    assert aligned["token_aligned"] is True and aligned["token_aligned_fraction"] == 1.0 and aligned["batches"] == 3
    assert aligned["attention"] == "used" and aligned["hidden_level"] == "token"
    assert (aligned["layers"], aligned["width"], aligned["heads"]) == (4, 32, 4)
    assert aligned["groups"] == [[1, 2], [3, 4]]
    for name, groups in (("roberta_bpe", [[1, 2], [3]]), ("bert_other_vocab", [[1, 2, 3], [4, 5]])):
        info = report[name]
        assert info["token_aligned"] is False and info["token_aligned_fraction"] == 0.0
        assert info["attention"] == "skipped" and info["hidden_level"] == "sentence"
        assert info["groups"] == groups
    assert report["roberta_bpe"]["model_type"] == "roberta" and report["roberta_bpe"]["heads"] == 3
    for m in logged:  # per-batch terms: attention only from the aligned teacher
        assert m["train/aligned_t0"] == 1.0 and m["train/aligned_t1"] == 0.0 and m["train/aligned_t2"] == 0.0
        assert m["train/attn_t0"] > 0 and m["train/attn_t1"] == 0.0 and m["train/attn_t2"] == 0.0
        assert m["train/hidden_t1"] > 0 and m["train/hidden_t2"] > 0 and m["train/emb_t1"] > 0
        assert m["train/attn"] == pytest.approx(m["train/attn_t0"], rel=1e-5)
    metrics = objective.method.alignment_metrics()
    assert metrics["align/roberta_bpe/token_aligned_fraction"] == 0.0
    for spec, state in zip(hetero.teachers, before):  # teachers never change
        for key, value in spec.model.state_dict().items():
            assert torch.equal(value, state[key]), key


def test_gradients_reach_student_and_projections_never_teachers(hetero):
    student = hetero.student()
    objective = build_multi_teacher_objective(student, hetero.teachers, {"method": "multi_teacher"})
    objective.train()
    batch = next(iter(make_loader(hetero.ds["train"], 8, hetero.collator, shuffle=False)))
    out = objective.training_step(batch)
    out["loss"].backward()
    grads = [p.grad for p in student.parameters() if p.requires_grad]
    assert sum(g is not None and bool(g.abs().sum() > 0) for g in grads) > 0.8 * len(grads)
    method = objective.method
    for k in range(3):
        for proj in (method.hidden_projections[k], method.embedding_projections[k]):
            assert proj.weight.grad is not None and proj.weight.grad.abs().sum() > 0
    for spec in objective.teachers:
        assert all(not p.requires_grad and p.grad is None for p in spec.parameters())
    aux = {id(p) for g in objective.parameter_groups(TrainingConfig()) for p in g["params"]}
    assert id(method.hidden_projections[1].weight) in aux
    assert not any(id(p) in aux for t in objective.teachers for p in t.parameters())


@pytest.mark.parametrize("method_name", ["okd", "multi_pkd", "rse_kd"])
def test_baselines_train_with_heterogeneous_teachers(hetero, method_name):
    objective = build_multi_teacher_objective(hetero.student(), hetero.teachers, {"method": method_name, "seed": 3}
                                              if method_name == "rse_kd" else {"method": method_name})
    calls = [0, 0, 0]
    handles = [t.model.register_forward_hook(lambda *_, k=k: calls.__setitem__(k, calls[k] + 1))
               for k, t in enumerate(hetero.teachers)]
    try:
        result, logged = _fit(objective, hetero, steps=4)
    finally:
        for h in handles:
            h.remove()
    assert result.global_step == 4 and all(torch.isfinite(torch.tensor(m["train/loss"])) for m in logged)
    if method_name == "rse_kd":
        assert sum(calls) == 4  # one teacher forward per training batch
        assert sum(objective.method.draw_counts) == 4
    else:
        assert calls == [4, 4, 4]
