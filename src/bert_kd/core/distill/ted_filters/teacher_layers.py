"""TED's layer mapping M(·): one teacher layer per student layer (Liang et al., 2023, Sec. 4)."""

from __future__ import annotations

from typing import Sequence, Union

from bert_kd.core.layer_maps import layer_map


def ted_layer_map(
    strategy: Union[str, Sequence[Sequence[int]], Sequence[int]] = "distilbert",
    n_teacher: int | None = None,
    n_student: int | None = None,
) -> list[int]:
    """TED's M(·) as a flat list: entry k-1 is the ONE teacher layer of student layer k.

    ``strategy`` is any [`bert_kd.core.layer_maps.layer_map`][] strategy or explicit mapping
    (``[[1], [4]]``), or already a flat list of teacher layers (``[1, 4]``). Every student layer
    must map to exactly one teacher layer within ``1..n_teacher`` (ValueError otherwise).
    """
    if n_teacher is None or n_student is None:
        raise ValueError("ted_layer_map needs n_teacher and n_student")
    if not isinstance(strategy, str) and all(isinstance(x, int) and not isinstance(x, bool) for x in strategy):
        strategy = [[int(x)] for x in strategy]
    mapping = layer_map(strategy, n_teacher, n_student)
    flat = []
    for k, entry in enumerate(mapping, start=1):
        if len(entry) != 1:
            raise ValueError(
                f"TED maps each student layer to exactly one teacher layer, but the mapping "
                f"{strategy!r} gives student layer {k} the teacher layers {entry}"
            )
        flat.append(entry[0])
    return flat
