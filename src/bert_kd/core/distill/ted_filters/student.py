"""Student filters copied from the teacher's at the mapped layers (TED App. A.4 Case 2.2): the
student is a subset of the teacher's layers, so the teacher filter at M(k) serves student layer k."""

from __future__ import annotations

import copy
from typing import Sequence, Union

from torch import nn

from bert_kd.core.distill.ted_filters.filters import TaskFilters, model_width
from bert_kd.core.distill.ted_filters.teacher_layers import ted_layer_map
from bert_kd.core.models import num_layers


def copy_filters_for_student(
    teacher_filters: TaskFilters,
    mapping: Union[str, Sequence[Sequence[int]], Sequence[int], None] = None,
    student: nn.Module | None = None,
    n_teacher: int | None = None,
) -> TaskFilters:
    """Student filters copied from the teacher filters at the mapped layers (App. A.4 Case 2.2).

    Student layer k gets a deep copy of the teacher filter reading teacher layer M(k). ``mapping``
    defaults to the layers the teacher filters were trained at (position k ↔ student layer k);
    a strategy name needs ``student`` (for its depth) and ``n_teacher``. With ``student`` the
    widths and depth are checked (copying needs student width == teacher width). The copies
    are trainable and keep the teacher's fingerprint (``copied_from="teacher"``).
    """
    if mapping is None:
        teacher_layers = list(teacher_filters.layers)
    else:
        if isinstance(mapping, str):
            if student is None or n_teacher is None:
                raise ValueError("a mapping strategy name needs student= and n_teacher=")
            teacher_layers = ted_layer_map(mapping, n_teacher, num_layers(student))
        else:
            flat = [e[0] if isinstance(e, (list, tuple)) and len(e) == 1 else e for e in mapping]
            if any(isinstance(e, (list, tuple)) for e in flat):
                raise ValueError(f"TED maps each student layer to exactly one teacher layer, got mapping {mapping!r}")
            teacher_layers = [int(e) for e in flat]
    position = {layer: k for k, layer in enumerate(teacher_filters.layers)}
    missing = [layer for layer in teacher_layers if layer not in position]
    if missing:
        raise ValueError(
            f"the mapping needs teacher filters at layer(s) {missing} but the teacher filters are at {teacher_filters.layers}"
        )
    if student is not None:
        n_student = num_layers(student)
        if n_student != len(teacher_layers):
            raise ValueError(f"the mapping has {len(teacher_layers)} entries but the student has {n_student} layers")
        width = model_width(student)
        if width != teacher_filters.in_width:
            raise ValueError(
                f"cannot copy teacher filters to the student: student width {width} != teacher width "
                f"{teacher_filters.in_width} (train student filters in Stage I instead)"
            )
    modules = [copy.deepcopy(teacher_filters.filters[position[layer]]) for layer in teacher_layers]
    result = TaskFilters(
        list(range(1, len(teacher_layers) + 1)),
        teacher_filters.in_width,
        teacher_filters.out_width,
        teacher_filters.num_labels,
        "linear",  # placeholder; replaced below so no skeleton layers are built
        task=teacher_filters.task,
        fingerprint=teacher_filters.fingerprint,
        role="student",
        pool=teacher_filters.pool,
        copied_from="teacher",
        info={"copied_from_teacher_layers": teacher_layers},
    )
    result.arch = teacher_filters.arch
    result.layer_config = teacher_filters.layer_config
    result.filters = nn.ModuleList(modules)
    for p in result.parameters():
        p.requires_grad_(True)
    device = next(teacher_filters.parameters()).device
    return result.to(device).train()
