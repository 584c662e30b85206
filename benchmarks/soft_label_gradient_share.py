"""How much of the student-logit gradient the multi-teacher soft-label term (MT Eq. 1) carries,
relative to plain cross-entropy, with and without the τ² factor.

For a batch of student logits z_S, labels y and K teachers' logits z_k, it compares
    g_pred = ∂/∂z_S  (1/K) Σ_k soft-CE(softmax(z_k/τ), softmax(z_S/τ))   (× τ² or not)
    g_ce   = ∂/∂z_S  CE(z_S, y)
as the ratio of their norms ‖g_pred‖ / ‖g_ce‖ (per example, then the median over examples),
using the project's own losses (:func:`bert_kd.core.distill.losses.multi_teacher_prediction_loss`).

Logits are random but shaped like the real regime: teachers are confident fine-tuned models
(correct-class margin ~ N(4, 1.5), 85% correct), the student is either fresh (logits ~ N(0, 0.3),
the start of training) or half-trained (margin ~ N(1.5, 1)). Binary (SST-2/MRPC) and 3-class (MNLI).

    PYTHONPATH=src python benchmarks/soft_label_gradient_share.py
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from bert_kd.core.distill.losses import multi_teacher_prediction_loss


def confident_logits(
    labels: torch.Tensor,
    classes: int,
    margin_mean: float,
    margin_std: float,
    accuracy: float,
    generator: torch.Generator,
) -> torch.Tensor:
    """Logits whose argmax is the label with probability ``accuracy`` and whose winning margin is ~ N(mean, std)."""
    n = len(labels)
    wrong = torch.rand(n, generator=generator) > accuracy
    shift = torch.randint(1, classes, (n,), generator=generator)
    winner = torch.where(wrong, (labels + shift) % classes, labels)
    logits = 0.3 * torch.randn(n, classes, generator=generator)
    margin = (margin_mean + margin_std * torch.randn(n, generator=generator)).clamp_min(0.1)
    logits[torch.arange(n), winner] += margin
    return logits


def gradient_share(
    student: torch.Tensor, labels: torch.Tensor, teachers: list[torch.Tensor], tau: float, scale_by_t2: bool
) -> float:
    """Median over examples of ‖∂pred/∂z_S‖ / ‖∂CE/∂z_S‖ (per-example gradients: sum reduction)."""
    z = student.clone().requires_grad_(True)
    n = len(labels)
    pred = multi_teacher_prediction_loss(z, teachers, tau, scale_by_t2=scale_by_t2) * n  # mean → sum
    (g_pred,) = torch.autograd.grad(pred, z)
    z = student.clone().requires_grad_(True)
    (g_ce,) = torch.autograd.grad(F.cross_entropy(z, labels, reduction="sum"), z)
    return float((g_pred.norm(dim=-1) / g_ce.norm(dim=-1).clamp_min(1e-12)).median())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=4096)
    parser.add_argument("--teachers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    g = torch.Generator().manual_seed(args.seed)
    print(f"{'classes':>7} {'student':>12} {'tau':>4} {'no tau^2':>9} {'tau^2':>7}")
    for classes in (2, 3):
        labels = torch.randint(classes, (args.examples,), generator=g)
        teachers = [confident_logits(labels, classes, 4.0, 1.5, 0.85, g) for _ in range(args.teachers)]
        students = {
            "fresh": 0.3 * torch.randn(args.examples, classes, generator=g),
            "half-trained": confident_logits(labels, classes, 1.5, 1.0, 0.75, g),
        }
        for name, student in students.items():
            for tau in (1.0, 5.0, 10.0):
                plain = gradient_share(student, labels, teachers, tau, scale_by_t2=False)
                scaled = gradient_share(student, labels, teachers, tau, scale_by_t2=True)
                print(f"{classes:>7} {name:>12} {tau:>4g} {plain:>9.3f} {scaled:>7.3f}")


if __name__ == "__main__":
    main()
