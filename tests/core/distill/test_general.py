"""General distillation: DistilBERT's triple loss against a hand computation on a tiny masked LM,
TinyBERT's general terms, BERT's masking rates."""

from __future__ import annotations

import math

import pytest
import torch

from bert_kd.core.data.masking import mask_tokens
from bert_kd.core.distill.general import GeneralDistillation, distilbert_triple_terms, has_masked_lm_head
from bert_kd.core.models import build_student


def tiny_mlm(layers: int = 4, seed: int = 0):
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=30,
        hidden_size=16,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    return BertForMaskedLM(config).eval()


def hand_triple_loss(student, teacher, labels, mask, temperature, distill_positions="masked"):
    """Each term written out position by position with plain Python sums (``student``/``teacher``: outputs); the KL
    term over the masked positions or every non-pad one (``distill_positions``)."""
    s_logits, t_logits = student.logits, teacher.logits
    s_last, t_last = student.hidden_states[-1], teacher.hidden_states[-1]
    ce = mlm = 0.0
    chosen = [(b, i) for b in range(labels.shape[0]) for i in range(labels.shape[1]) if labels[b, i] != -100]
    read = chosen if distill_positions == "masked" else [(b, i) for b, i in mask.nonzero().tolist()]
    for b, i in read:
        p_t = torch.softmax(t_logits[b, i] / temperature, -1)
        log_p_s = torch.log_softmax(s_logits[b, i] / temperature, -1)
        ce += float(sum(p_t[v] * (math.log(p_t[v]) - log_p_s[v]) for v in range(p_t.shape[0])))
    for b, i in chosen:
        mlm += -float(torch.log_softmax(s_logits[b, i], -1)[labels[b, i]])
    cos, real = 0.0, 0
    for b in range(mask.shape[0]):
        for i in range(mask.shape[1]):
            if mask[b, i]:
                s, t = s_last[b, i], t_last[b, i]
                cos += 1.0 - float(s @ t) / (float(s.norm()) * float(t.norm()))
                real += 1
    return {"ce": temperature**2 * ce / len(read), "mlm": mlm / len(chosen), "cos": cos / real}


@pytest.mark.parametrize("distill_positions", ["all", "masked"])
def test_triple_loss_matches_a_hand_computation(distill_positions):
    teacher = tiny_mlm(4, seed=0)
    student, _ = build_student(teacher, 2)
    torch.nn.init.normal_(student.cls.predictions.decoder.weight, std=0.5)  # unlike the teacher's head
    ids = torch.tensor([[2, 7, 8, 9, 3, 0], [2, 11, 12, 13, 14, 3]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]])
    labels = torch.full_like(ids, -100)
    labels[0, 2], labels[1, 1], labels[1, 4] = 8, 11, 14
    corrupted = ids.clone()
    corrupted[0, 2], corrupted[1, 1] = 4, 4
    inputs = {"input_ids": corrupted, "attention_mask": mask}
    terms = distilbert_triple_terms(student, teacher, inputs, labels, 2.0, distill_positions=distill_positions)
    with torch.no_grad():
        t_out = teacher(**inputs, output_hidden_states=True)
        s_out = student(**inputs, output_hidden_states=True)
    expected = hand_triple_loss(s_out, t_out, labels, mask, 2.0, distill_positions)
    for name in ("ce", "mlm", "cos"):
        assert float(terms[name].detach()) == pytest.approx(expected[name], rel=1e-4), name
    assert expected["ce"] > 0.01 and expected["cos"] > 1e-4


def test_triple_loss_total_uses_the_published_weights():
    teacher = tiny_mlm(4)
    student, _ = build_student(teacher, 2)
    objective = GeneralDistillation(student, teacher, "distilbert", mask_token_id=4, token_counts=torch.ones(30))
    assert objective.weights == {"ce": 5.0, "mlm": 2.0, "cos": 1.0} and objective.temperature == 2.0
    assert objective.distill_positions == "all" and objective.mask_smoothing == 0.7
    ids = torch.randint(5, 30, (4, 12))
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "special_tokens_mask": torch.zeros_like(ids)}
    torch.manual_seed(3)
    out = objective(batch)
    assert float(out["loss"]) == pytest.approx(float(5 * out["ce"] + 2 * out["mlm"] + out["cos"]), rel=1e-5)


def test_tinybert_general_terms_are_zero_for_a_student_that_is_the_teacher_under_identity_projections():
    teacher = tiny_mlm(2)
    student, _ = build_student(teacher, 2)
    objective = GeneralDistillation(student, teacher, "tinybert")
    with torch.no_grad():
        for projection in (objective.embedding_projection, objective.hidden_projection):
            projection.weight.copy_(torch.eye(16))
            projection.bias.zero_()
    ids = torch.randint(5, 30, (2, 8))
    out = objective({"input_ids": ids, "attention_mask": torch.ones_like(ids)})
    assert objective.mapping == [[1], [2]]
    assert float(out["loss"]) == pytest.approx(0.0, abs=1e-10)
    assert set(out) == {"loss", "emb", "hidden", "attn"}


def test_a_teacher_without_a_masked_lm_head_is_recognised():
    from transformers import BertConfig, BertModel

    assert has_masked_lm_head(tiny_mlm(2))
    assert not has_masked_lm_head(
        BertModel(
            BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
        )
    )


def test_masking_follows_berts_rates_and_never_touches_padding_or_special_tokens():
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(10, 1000, (200, 100))
    maskable = torch.ones_like(ids, dtype=torch.bool)
    maskable[:, 0] = maskable[:, -10:] = False
    corrupted, labels = mask_tokens(ids, maskable, mask_token_id=4, vocab_size=1000, generator=generator)
    chosen = labels != -100
    share = chosen[maskable].float().mean()
    assert 0.14 < float(share) < 0.16
    assert not chosen[~maskable].any() and torch.equal(corrupted[~maskable], ids[~maskable])
    assert torch.equal(labels[chosen], ids[chosen])
    masked = (corrupted[chosen] == 4).float().mean()
    kept = (corrupted[chosen] == ids[chosen]).float().mean()
    assert 0.77 < float(masked) < 0.83 and 0.08 < float(kept) < 0.12


def test_smoothed_masking_draws_rare_tokens_more_often_and_a_fixed_share():
    """DistilBERT's reference draws ⌈15%⌉ of the maskable positions without replacement, a position holding token v
    with weight count(v)^−0.7: a token 100× rarer is masked far more often (uniform: equally often)."""
    from bert_kd.core.data.masking import smoothed_mask_tokens, smoothing_weights

    counts = torch.ones(30)
    counts[10], counts[11] = 10_000.0, 100.0  # 10 frequent, 11 rare
    ids = torch.tensor([[10, 11] * 20] * 8)
    maskable = torch.ones_like(ids, dtype=torch.bool)
    maskable[:, 0] = False  # a special position is never drawn
    generator = torch.Generator().manual_seed(0)
    rates = {10: 0, 11: 0}
    for _ in range(50):
        _, labels = smoothed_mask_tokens(ids, maskable, smoothing_weights(counts), 4, 30, 0.15, generator)
        assert int((labels != -100).sum()) == math.ceil(0.15 * int(maskable.sum())) and bool(
            (labels[:, 0] == -100).all()
        )
        for token in rates:
            rates[token] += int((labels == token).sum())
    assert rates[11] > 5 * rates[10]
    _, uniform = smoothed_mask_tokens(ids, maskable, smoothing_weights(counts, 0.0), 4, 30, 0.15, generator)
    assert int((uniform != -100).sum()) == math.ceil(0.15 * int(maskable.sum()))


def test_smoothed_masking_without_counts_is_refused():
    teacher = tiny_mlm(2)
    student, _ = build_student(teacher, 2)
    with pytest.raises(ValueError, match="token_counts"):
        GeneralDistillation(student, teacher, "distilbert", mask_token_id=4)
    assert GeneralDistillation(student, teacher, "distilbert", mask_token_id=4, mask_smoothing=0).mask_weights is None
