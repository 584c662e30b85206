"""ALP-KD's α follows the input: a teacher whose informative layer differs between examples.

ALP-KD (Passban et al. 2021, Eq. 5–6, Figure 3) weighs each teacher layer for a student layer by a softmax
over their similarity, per example: the teacher layers a student layer correlates with get the weight, and
which they are may change from one input to the next (Figure 3's rows differ). The case: a 4-layer teacher
and a 2-layer student of width 32 (tiny BERTs, read by the method for their sizes) and constructed [CLS]
states. Every teacher layer shares a common direction and a direction of its own (states of a Transformer's
layers are alike: MiniLM's cosines are 0.96–0.99), with norms that differ by layer (the largest on layer 4)
and a part of each example's own; the student's first layer is a noisy copy of teacher layer 1 on half the
examples and of teacher layer 3 on the other half. The real ALP method (``build_method``, its default score
unless ``recipe`` says otherwise) computes α; the mechanism holds when α's largest weight is the example's
informative layer for at least 90% of the examples in both halves, with at least twice the uniform weight
(1/4) on it on average.
"""

from __future__ import annotations

import torch
from transformers import BertConfig, BertForSequenceClassification

from bert_kd.analysis.mechanisms import MechanismResult, mechanism
from bert_kd.core.distill.methods import build_method
from bert_kd.core.distill.outputs import Features

EXAMPLES, TEACHER_LAYERS, STUDENT_LAYERS, WIDTH = 32, 4, 2, 32
#: the student's first layer copies this teacher layer: layer 1 for the first half of the examples, 3 for the rest
INFORMATIVE = (1, 3)
#: teacher layers' norms (layer 4 the largest, so that Eq. 5's raw dot product prefers it whatever the input)
NORMS = (6.0, 7.0, 6.5, 11.0)
SHARE, WEIGHT = 0.9, 2.0 / TEACHER_LAYERS


def tiny_model(layers: int) -> BertForSequenceClassification:
    """A BERT classifier of width `WIDTH` the method reads its layer count and width from (its weights are unused)."""
    config = BertConfig(
        vocab_size=16,
        hidden_size=WIDTH,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=2 * WIDTH,
        max_position_embeddings=8,
    )
    return BertForSequenceClassification(config)


def informative_layers() -> torch.Tensor:
    """``(EXAMPLES,)``: the teacher layer (1-based) each example's student state copies."""
    half = EXAMPLES // 2
    return torch.tensor([INFORMATIVE[0]] * half + [INFORMATIVE[1]] * (EXAMPLES - half))


def constructed_states(seed: int = 0) -> tuple[Features, Features]:
    """Student and teacher [`Features`][bert_kd.core.distill.outputs.Features] with the constructed [CLS] states (embedding row first)."""
    g = torch.Generator().manual_seed(seed)

    def unit(*shape: int) -> torch.Tensor:
        return torch.nn.functional.normalize(torch.randn(*shape, WIDTH, generator=g), dim=-1)

    common, own = unit(1, 1), unit(1, TEACHER_LAYERS)  # shared by all layers; each layer's own direction
    example = unit(EXAMPLES, TEACHER_LAYERS)  # each (example, layer)'s own part
    teacher = torch.nn.functional.normalize(common + 0.5 * own + example, dim=-1) * torch.tensor(NORMS).view(1, -1, 1)
    copied = teacher[torch.arange(EXAMPLES), informative_layers() - 1]  # (EXAMPLES, WIDTH)
    student_first = copied + 0.1 * copied.norm(dim=-1, keepdim=True) * unit(EXAMPLES)
    student_last = teacher[:, -1] + unit(EXAMPLES)  # unconnected under ALP's `all` map
    embeddings = unit(EXAMPLES, 1)
    student_cls = torch.cat([embeddings, student_first[:, None], student_last[:, None]], dim=1)
    teacher_cls = torch.cat([embeddings, teacher], dim=1)
    mask = torch.ones(EXAMPLES, 4, dtype=torch.long)
    logits = torch.zeros(EXAMPLES, 2)
    return Features(logits, mask, extras={"cls": student_cls}), Features(logits, mask, extras={"cls": teacher_cls})


@torch.no_grad()
def measure(recipe: dict | None = None, seed: int = 0) -> MechanismResult:
    """α of the student's first layer per example, by the ALP method built from ``recipe`` (default: ``{}``,
    the method's defaults), read against each example's informative layer."""
    config = {"method": "alp", **(recipe or {})}
    method = build_method(config, tiny_model(STUDENT_LAYERS), [tiny_model(TEACHER_LAYERS)])
    student, teacher = constructed_states(seed)
    alpha = method.attention(student, teacher)[:, 0]  # (EXAMPLES, TEACHER_LAYERS)
    informative = informative_layers() - 1
    rows = torch.arange(EXAMPLES)
    on_informative = alpha[rows, informative]
    top_is_informative = alpha.argmax(dim=-1) == informative
    measured = {}
    for layer in INFORMATIVE:
        group = informative == layer - 1
        measured[f"top_is_informative_share_layer_{layer}"] = round(float(top_is_informative[group].float().mean()), 4)
    measured["alpha_on_informative_mean"] = round(float(on_informative.mean()), 4)
    measured["alpha_sd_across_examples_max"] = round(float(alpha.std(dim=0).max()), 4)
    holds = (
        all(measured[f"top_is_informative_share_layer_{layer}"] >= SHARE for layer in INFORMATIVE)
        and measured["alpha_on_informative_mean"] >= WEIGHT
    )
    return MechanismResult(
        method="alp",
        quantity=f"α of student layer 1 per example ({method.similarity}), informative teacher layer 1 or 3",
        measured=measured,
        expected=(
            f"α's largest weight on each example's informative layer for ≥ {SHARE:.0%} of the examples of each "
            f"half, mean α there ≥ {WEIGHT:.2f} (twice uniform)"
        ),
        holds=holds,
    )


@mechanism("alp")
def check() -> list[MechanismResult]:
    """ALP's default score on the constructed teacher ([module docs][bert_kd.analysis.mechanisms.alp])."""
    return [measure()]
