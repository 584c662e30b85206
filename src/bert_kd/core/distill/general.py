"""General distillation on a corpus (no task, no labels): TinyBERT's first stage and DistilBERT's triple loss.

* ``tinybert`` (Jiao et al. 2020, Sec. 3.1–3.2, Eq. 7–9 and 11 without the prediction layer):
  L = emb·MSE(E_S W_e, E_T) + hidden·Σ_m MSE(H_S^m W_h, H_T^{g(m)}) + attn·Σ_m MSE(A_S^m, A_T^{g(m)})
  over the uniform map g(m) = m·N/M, the teacher being the pre-trained (not fine-tuned) model.
* ``distilbert`` (Sanh et al. 2019, Sec. 2–3): L = α_ce·T²·KL(p_T ‖ p_S) + α_mlm·MLM + α_cos·(1 − cos(h_S, h_T))
  on the last hidden states, with dynamic masking (15%, 80/10/10). As in the reference implementation the paper
  points to (``examples/research_projects/distillation``, huggingface/transformers), by default the KL term
  reads every non-pad token (``distill_positions: all``; ``masked``: the masked positions only, its
  ``restrict_ce_to_mask``) and the positions to mask are drawn with frequency smoothing, weight count^−0.7
  (``mask_smoothing: 0.7``, its ``mlm_smoothing``; 0: BERT's uniform draw), the counts those of the corpus.
"""

from __future__ import annotations

from typing import Mapping

import torch
from torch import Tensor, nn

from bert_kd.core.data.masking import (
    MASK_PROBABILITY,
    MASK_SMOOTHING,
    mask_tokens,
    smoothed_mask_tokens,
    smoothing_weights,
)
from bert_kd.core.distill import losses
from bert_kd.core.distill.methods.tinybert import uniform_map
from bert_kd.core.distill.outputs import attention_in_one_space, forward_features
from bert_kd.core.models import num_layers
from bert_kd.core.training.objectives import Objective

#: The published defaults. TinyBERT: every term weight 1 (Eq. 11). DistilBERT: α_ce 5.0, α_mlm 2.0,
#: α_cos 1.0 (examples/research_projects/distillation/README.md in huggingface/transformers), T = 2.0
#: (its ``train.py`` default).
GENERAL_LOSSES: dict[str, dict[str, float]] = {
    "tinybert": {"emb": 1.0, "hidden": 1.0, "attn": 1.0},
    "distilbert": {"ce": 5.0, "mlm": 2.0, "cos": 1.0},
}
DISTILBERT_TEMPERATURE = 2.0
#: Where DistilBERT's KL term reads the teacher: every non-pad token (the reference's default) or the masked ones.
DISTILL_POSITIONS = ("all", "masked")


def has_masked_lm_head(model: nn.Module) -> bool:
    """Whether ``model`` predicts tokens (an ``…ForMaskedLM`` with its output embeddings)."""
    return model.__class__.__name__.endswith("ForMaskedLM") and model.get_output_embeddings() is not None


def _width(model: nn.Module) -> int:
    return int(model.config.hidden_size)


class GeneralDistillation(Objective):
    """The student learns from a frozen pre-trained teacher on unlabelled text (``loss``: ``tinybert`` or
    ``distilbert``, ``weights``: term → weight, the published ones by default)."""

    def __init__(self, student, teacher, loss: str, weights: Mapping[str, float] | None = None, **options):
        super().__init__(student)
        if loss not in GENERAL_LOSSES:
            raise ValueError(f"general distillation loss {loss!r} is not one of {sorted(GENERAL_LOSSES)}")
        self.loss_name = loss
        self.weights = {**GENERAL_LOSSES[loss], **dict(weights or {})}
        self.temperature = float(options.get("temperature") or DISTILBERT_TEMPERATURE)
        self.mask_probability = float(options.get("mask_probability") or MASK_PROBABILITY)
        self.mask_token_id = options.get("mask_token_id")
        self.distill_positions = options.get("distill_positions") or "all"
        if self.distill_positions not in DISTILL_POSITIONS:
            raise ValueError(f"distill_positions must be one of {DISTILL_POSITIONS}, got {self.distill_positions!r}")
        smoothing = options.get("mask_smoothing")
        self.mask_smoothing = MASK_SMOOTHING if smoothing is None else float(smoothing)
        counts = options.get("token_counts")  # per vocabulary id, in the corpus: the smoothing's weights
        weights = None
        if loss == "distilbert" and self.mask_smoothing > 0:
            if counts is None:
                raise ValueError(
                    "frequency-smoothed masking (mask_smoothing > 0) needs the corpus's token_counts; "
                    "pass them, or mask_smoothing: 0 for BERT's uniform draw"
                )
            weights = smoothing_weights(torch.as_tensor(counts), self.mask_smoothing)
        self.register_buffer("mask_weights", weights, persistent=False)
        self.add_frozen("teacher", teacher)
        self.mapping = uniform_map(num_layers(teacher), num_layers(student))
        if loss == "tinybert":
            self.embedding_projection = nn.Linear(_width(student), _width(teacher))  # W_e
            self.hidden_projection = nn.Linear(_width(student), _width(teacher))  # W_h
        elif _width(student) != _width(teacher):
            raise ValueError(
                f"the cosine term needs equal widths: student {_width(student)}, teacher {_width(teacher)}"
            )

    def training_step(self, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        terms = self.tinybert_terms(batch) if self.loss_name == "tinybert" else self.distilbert_terms(batch)
        total = sum(self.weights[name] * value for name, value in terms.items())
        return {"loss": total, **{name: value.detach() for name, value in terms.items()}}

    def tinybert_terms(self, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        """TinyBERT Eq. 7–9 over the uniform map (no prediction layer in general distillation)."""
        with torch.no_grad(), self.frozen_autocast():
            teacher = forward_features(self.teacher, batch, hidden_states=True, attention_scores=True)
        student = forward_features(self.model, batch, hidden_states=True, attention_scores=True)
        mask = batch["attention_mask"]
        s_maps, t_maps, _ = attention_in_one_space(student, teacher)
        emb = losses.masked_mse(self.embedding_projection(student.hidden_states[0]), teacher.hidden_states[0], mask)
        hidden = attn = emb.new_zeros(())
        for m, (k,) in enumerate(self.mapping, start=1):
            hidden = hidden + losses.masked_mse(
                self.hidden_projection(student.hidden_states[m]), teacher.hidden_states[k], mask
            )
            attn = attn + losses.attention_score_mse(s_maps[m - 1], t_maps[k - 1], mask)
        return {"emb": emb, "hidden": hidden, "attn": attn}

    def distilbert_terms(self, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        """DistilBERT's triple loss on a freshly masked copy of the batch."""
        maskable = batch["attention_mask"].bool() & ~batch["special_tokens_mask"].bool()
        vocab = self.model.config.vocab_size
        if self.mask_weights is not None:
            corrupted, labels = smoothed_mask_tokens(
                batch["input_ids"], maskable, self.mask_weights, self.mask_token_id, vocab, self.mask_probability
            )
        else:
            corrupted, labels = mask_tokens(
                batch["input_ids"], maskable, self.mask_token_id, vocab, self.mask_probability
            )
        inputs = {**{k: batch[k] for k in ("attention_mask", "token_type_ids") if k in batch}, "input_ids": corrupted}
        return distilbert_triple_terms(
            self.model, self.teacher, inputs, labels, self.temperature, self.frozen_autocast, self.distill_positions
        )

    def predict(self, batch):  # a general student is not evaluated on a task
        raise NotImplementedError("a general student has no task head to evaluate")


def distilbert_triple_terms(
    student, teacher, inputs, labels, temperature, frozen_autocast=None, distill_positions: str = "all"
) -> dict[str, Tensor]:
    """The three DistilBERT terms of masked-LM ``student`` and ``teacher`` on corrupted ``inputs``; the KL term
    over every non-pad token (``distill_positions: all``) or the masked ones (``masked``)."""
    import contextlib

    with torch.no_grad(), (frozen_autocast or contextlib.nullcontext)():
        t_out = teacher(**inputs, output_hidden_states=True, return_dict=True)
    s_out = student(**inputs, output_hidden_states=True, return_dict=True)
    mask = inputs["attention_mask"]
    return {
        "ce": losses.masked_soft_target_loss(
            s_out.logits, t_out.logits, labels, temperature, mask.bool() if distill_positions == "all" else None
        ),
        "mlm": losses.masked_lm_loss(s_out.logits, labels),
        "cos": losses.cosine_hidden_loss(s_out.hidden_states[-1], t_out.hidden_states[-1], mask),
    }
