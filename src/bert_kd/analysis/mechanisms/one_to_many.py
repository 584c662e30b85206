"""The MT method's one-to-many mapping (Shi & Guo 2023, Eq. 2–4): every student layer learns from a group of
consecutive teacher layers, the groups covering every teacher layer once, and D^h averages the MSE over a group.

The case: a 6-layer teacher whose every layer's hidden states are a constant vector of its own, and a 2-layer
student whose hidden states are free parameters trained on the method's own hidden term (``hidden_distance``)
by gradient descent. The minimiser of a group's mean MSE is the group's mean state, so each student layer
converges to the mean of its group's teacher layers; the groups partition the teacher's layers.
"""

from __future__ import annotations

import torch

from bert_kd.analysis.mechanisms import MechanismResult, mechanism
from bert_kd.analysis.mechanisms.toy import tiny_classifier

WIDTH, TEACHER_LAYERS, STUDENT_LAYERS, ROWS, TOKENS, STEPS = 8, 6, 2, 2, 3, 300


def learned_states() -> dict[str, float]:
    """How far each student layer ends from its group's mean teacher state (the largest gap), and whether the
    groups cover every teacher layer exactly once (1.0) or not (0.0)."""
    from bert_kd.core.distill.methods import build_method
    from bert_kd.core.distill.methods.multi_teacher.alignment import TOKEN
    from bert_kd.core.distill.outputs import Features

    method = build_method(
        {"method": "multi_teacher", "projection": "auto"},
        tiny_classifier(layers=STUDENT_LAYERS, hidden=WIDTH, heads=2),
        [tiny_classifier(layers=TEACHER_LAYERS, hidden=WIDTH, heads=2, seed=1)],
    )
    groups = method.groups[0]
    levels = torch.arange(TEACHER_LAYERS + 1, dtype=torch.float32)
    teacher_states = tuple(torch.full((ROWS, TOKENS, WIDTH), float(v)) for v in levels)
    mask = torch.ones(ROWS, TOKENS, dtype=torch.long)
    logits = torch.zeros(ROWS, 2)
    teacher = Features(logits, mask, hidden_states=teacher_states)
    free = torch.nn.Parameter(torch.zeros(STUDENT_LAYERS, WIDTH))
    optimiser = torch.optim.Adam([free], lr=0.1)
    for _ in range(STEPS):
        states = (teacher_states[0],) + tuple(free[i].expand(ROWS, TOKENS, WIDTH) for i in range(STUDENT_LAYERS))
        loss = method.hidden_distance(0, Features(logits, mask, hidden_states=states), teacher, TOKEN)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    targets = torch.stack([levels[group].mean() for group in groups])
    gap = float((free.detach().mean(1) - targets).abs().max())
    covered = sorted(layer for group in groups for layer in group) == list(range(1, TEACHER_LAYERS + 1))
    return {"largest_gap_to_group_mean": gap, "groups_partition_teacher_layers": float(covered)}


@mechanism("one_to_many")
def check() -> list[MechanismResult]:
    measured = learned_states()
    holds = measured["largest_gap_to_group_mean"] <= 0.05 and measured["groups_partition_teacher_layers"] == 1.0
    return [
        MechanismResult(
            method="multi_teacher",
            quantity="student layer trained on the one-to-many hidden term vs its group's mean teacher state",
            measured=measured,
            expected="each student layer at its group's mean (gap ≤ 0.05); groups cover every teacher layer once",
            holds=holds,
        )
    ]
