"""DistilBERT's triple loss (Sanh et al. 2019, Sec. 2–3), as its reference implementation runs it (the
``examples/research_projects/distillation`` code of huggingface/transformers the paper points to).

The case: a tiny masked-LM teacher and its 2-layer student in ``GeneralDistillation`` with the defaults. Two
quantities the reference's choices move: (1) the KL term trains the student's prediction at every non-pad token,
not only at the masked ones (its ``restrict_ce_to_mask`` is off): the share of non-pad positions whose logits
get a gradient from it is 1; (2) frequency-smoothed masking (weight count^−0.7) masks a token that is 100× rarer
in the corpus far more often than a frequent one (uniform masking: equally often).
"""

from __future__ import annotations

import torch

from bert_kd.analysis.mechanisms import MechanismResult, mechanism

VOCAB, MASK_ID, FREQUENT, RARE = 30, 4, 10, 11


def _masked_lm(layers: int, seed: int):
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=VOCAB, hidden_size=16, num_hidden_layers=layers, num_attention_heads=2, intermediate_size=32,
        max_position_embeddings=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )  # fmt: skip
    return BertForMaskedLM(config)


def triple_loss_quantities() -> dict[str, float]:
    """The share of non-pad positions the KL term trains, and the ratio of the rare token's masking rate to the
    frequent token's, with DistilBERT's defaults."""
    from bert_kd.core.data.masking import smoothed_mask_tokens
    from bert_kd.core.distill.general import GeneralDistillation
    from bert_kd.core.models import build_student

    teacher = _masked_lm(4, seed=0)
    student, _ = build_student(teacher, 2)
    counts = torch.ones(VOCAB)
    counts[FREQUENT], counts[RARE] = 10_000.0, 100.0
    objective = GeneralDistillation(student, teacher, "distilbert", mask_token_id=MASK_ID, token_counts=counts)
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(5, VOCAB, (4, 12), generator=generator)
    attention = torch.ones_like(ids)
    attention[1, 8:] = 0  # padding
    batch = {"input_ids": ids, "attention_mask": attention, "special_tokens_mask": torch.zeros_like(ids)}
    captured = []
    hook = student.cls.register_forward_hook(lambda module, inputs, output: captured.append(output))
    try:
        torch.manual_seed(0)
        terms = objective.distilbert_terms(batch)
    finally:
        hook.remove()
    logits = captured[-1]
    (gradient,) = torch.autograd.grad(terms["ce"], logits)
    trained = gradient.abs().sum(-1) > 0
    real = attention.bool()
    share = float((trained & real).sum()) / float(real.sum())

    words = torch.tensor([[FREQUENT, RARE] * 20] * 8)
    maskable = torch.ones_like(words, dtype=torch.bool)
    rates = {FREQUENT: 0, RARE: 0}
    for _ in range(20):
        _, labels = smoothed_mask_tokens(words, maskable, objective.mask_weights, MASK_ID, VOCAB, 0.15, generator)
        for token in rates:
            rates[token] += int((labels == token).sum())
    ratio = rates[RARE] / max(rates[FREQUENT], 1)
    return {"kl_trained_share_of_non_pad_tokens": share, "rare_to_frequent_masking_rate": ratio}


@mechanism("distilbert")
def check() -> list[MechanismResult]:
    measured = triple_loss_quantities()
    return [
        MechanismResult(
            method="distilbert",
            quantity="share of non-pad tokens whose prediction the KL term trains",
            measured=measured["kl_trained_share_of_non_pad_tokens"],
            expected="1 (every non-pad token, the reference's default; masked positions only: about 0.15)",
            holds=measured["kl_trained_share_of_non_pad_tokens"] == 1.0,
        ),
        MechanismResult(
            method="distilbert",
            quantity="masking rate of a 100× rarer token over a frequent one (frequency smoothing 0.7)",
            measured=measured["rare_to_frequent_masking_rate"],
            expected="≥ 5 (weights count^−0.7; uniform masking: about 1)",
            holds=measured["rare_to_frequent_masking_rate"] >= 5.0,
        ),
    ]
