"""TED (Liang et al. 2023, Eq. 6–7): the student is distilled through task-aware filters, so only what a filter
keeps of a layer is transferred.

The case: linear teacher filters planted to keep the first half of a layer's dimensions and drop the second
(the "task-irrelevant" half), the student's filters copies of them (TED's default, App. A.4 Case 2.2). A student
whose mapped layers differ from the teacher's only in the dropped half has TED's distance at zero; the same
difference in the kept half is paid in full. TED's own ``terms`` computes both.
"""

from __future__ import annotations

import torch

from bert_kd.analysis.mechanisms import MechanismResult, mechanism
from bert_kd.analysis.mechanisms.toy import tiny_classifier

WIDTH, TEACHER_LAYERS, STUDENT_LAYERS, ROWS, TOKENS = 16, 4, 2, 4, 6


def filter_distances() -> dict[str, float]:
    """TED's filtered distance for a student that differs from the teacher in the dropped half, and in the kept
    half, of each mapped layer (the same perturbation size)."""
    from bert_kd.core.distill.methods import build_method
    from bert_kd.core.distill.outputs import Features
    from bert_kd.core.distill.ted_filters import TaskFilters

    teacher_model = tiny_classifier(layers=TEACHER_LAYERS, hidden=WIDTH, seed=1)
    filters = TaskFilters.build(teacher_model, [2, 4], "linear")
    keep = torch.diag(torch.cat([torch.ones(WIDTH // 2), torch.zeros(WIDTH - WIDTH // 2)]))
    with torch.no_grad():
        for task_filter in filters.filters:
            task_filter.body.weight.copy_(keep)
            task_filter.body.bias.zero_()
    method = build_method(
        {"method": "ted", "teacher_filters": filters, "student_filters": "copy"},
        tiny_classifier(layers=STUDENT_LAYERS, hidden=WIDTH),
        [teacher_model],
    )
    generator = torch.Generator().manual_seed(0)
    teacher_states = tuple(torch.randn(ROWS, TOKENS, WIDTH, generator=generator) for _ in range(TEACHER_LAYERS + 1))
    noise = torch.randn(ROWS, TOKENS, WIDTH, generator=generator)
    mask = torch.ones(ROWS, TOKENS, dtype=torch.long)
    logits, labels = torch.zeros(ROWS, 2), torch.zeros(ROWS, dtype=torch.long)
    teacher = Features(logits, mask, hidden_states=teacher_states)
    dropped = torch.arange(WIDTH) >= WIDTH // 2

    def distance(where: torch.Tensor) -> float:
        layers = [teacher_states[0]] + [teacher_states[m] + noise * where for m in method.mapping]
        student = Features(logits, mask, hidden_states=tuple(layers))
        with torch.no_grad():
            return float(method.terms(student, {0: teacher}, {"labels": labels})["ted"])

    return {"ted_distance_dropped_half": distance(dropped), "ted_distance_kept_half": distance(~dropped)}


@mechanism("ted")
def check() -> list[MechanismResult]:
    measured = filter_distances()
    holds = measured["ted_distance_dropped_half"] <= 1e-6 and measured["ted_distance_kept_half"] >= 0.1
    return [
        MechanismResult(
            method="ted",
            quantity="TED's filtered layer distance for a student off the teacher in what the filter drops / keeps",
            measured=measured,
            expected="0 for a difference the filter drops; ≥ 0.1 for the same difference where it keeps",
            holds=holds,
        )
    ]
