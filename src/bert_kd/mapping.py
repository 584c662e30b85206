"""Student-to-teacher layer mappings.

A mapping is a ``list[list[int]]`` with one entry per student layer ``1..n_student``
(entry ``j - 1`` belongs to student layer ``j``) listing the 1-based teacher layers that
student layer learns from; ``[]`` means the student layer is unconnected.  Layer numbers
equal the index into HF ``hidden_states`` (index 0 = embedding output, never mapped here).

Strategies (``STRATEGIES``):

``pkd_skip``     PKD-Skip (Sun et al. 2019): student ``j`` <- teacher ``j * (n_t // n_s)``,
                 last student layer unconnected (12->6: 2,4,6,8,10).
``pkd_last``     PKD-Last: student ``j`` <- teacher ``n_t - n_s + j``, last unconnected
                 (12->6: 7..11).
``buckets_no``   ALP-KD / CKD "no overlap" (ALP-KD Eq. 4-5): the teacher layers split into
                 ``n_s - 1`` contiguous buckets, last student layer unconnected.
``buckets_po``   "partial overlap": as ``buckets_no`` but every bucket also takes the first
                 layer of the next bucket (shared boundary layer).
``all``          ALP-KD Eq. 6: every connected student layer attends over all teacher layers,
                 last student layer unconnected.
``one_to_many``  Multi-teacher one-to-many (Shi et al. 2023, Eq. 2-3): EVERY student layer
                 gets a contiguous group; sizes as even as possible (larger groups first),
                 each teacher layer used exactly once.
``distilbert``   Sanh et al. 2019 / TED (Liang et al. 2023, Sec. 4): ``M(k) = 2k - 1`` for
                 ``k <= K/2`` else ``2k``; every student layer connected.
"""

from __future__ import annotations

from typing import Sequence, Union

#: Names accepted by :func:`layer_map`.
STRATEGIES: tuple[str, ...] = (
    "pkd_skip",
    "pkd_last",
    "buckets_no",
    "buckets_po",
    "all",
    "one_to_many",
    "distilbert",
)

Mapping = list[list[int]]


def _check_count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an int, got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return value


def _even_groups(n_items: int, n_groups: int) -> Mapping:
    """Split ``1..n_items`` into ``n_groups`` contiguous groups whose sizes differ by <= 1.

    The first ``n_items % n_groups`` groups get the extra item (12 -> 5: 3,3,2,2,2).
    """
    base, extra = divmod(n_items, n_groups)
    groups: Mapping = []
    start = 1
    for g in range(n_groups):
        size = base + (1 if g < extra else 0)
        groups.append(list(range(start, start + size)))
        start += size
    return groups


def _round_half_up_ratio(num: int, den: int) -> int:
    """``round(num / den)`` with halves rounded up, in exact integer arithmetic."""
    return (2 * num + den) // (2 * den)


def _validate_explicit(strategy: Sequence, n_teacher: int, n_student: int) -> Mapping:
    if len(strategy) != n_student:
        raise ValueError(
            f"explicit layer mapping has {len(strategy)} entries but the student has "
            f"{n_student} layers (need one entry per student layer, [] = unconnected)"
        )
    mapping: Mapping = []
    for j, entry in enumerate(strategy, start=1):
        if isinstance(entry, (str, bytes)) or not isinstance(entry, (list, tuple)):
            raise ValueError(
                f"explicit layer mapping entry for student layer {j} must be a list of "
                f"teacher layers, got {entry!r}"
            )
        layers: list[int] = []
        for k in entry:
            if isinstance(k, bool) or not isinstance(k, int):
                raise ValueError(
                    f"explicit layer mapping entry for student layer {j} = {list(entry)!r} "
                    f"contains non-int teacher layer {k!r}"
                )
            if not 1 <= k <= n_teacher:
                raise ValueError(
                    f"explicit layer mapping entry for student layer {j} = {list(entry)!r} "
                    f"contains teacher layer {k} outside 1..{n_teacher}"
                )
            if k in layers:
                raise ValueError(
                    f"explicit layer mapping entry for student layer {j} = {list(entry)!r} "
                    f"lists teacher layer {k} twice"
                )
            layers.append(k)
        mapping.append(layers)
    return mapping


def layer_map(strategy: Union[str, Sequence[Sequence[int]]], n_teacher: int, n_student: int) -> Mapping:
    """Teacher layers (1-based) each student layer ``1..n_student`` distils from.

    PKD Eq. 3 / ALP-KD Eq. 3-6 (the set ``A(j)``), TED Eq. 2 (``M(k)``), multi-teacher
    Eq. 2-3 (groups ``p..q``).  ``strategy`` is one of :data:`STRATEGIES` or an explicit
    mapping (a list of ``n_student`` lists of ints in ``1..n_teacher``), which is validated
    and returned as a fresh ``list[list[int]]``.

    Raises ``ValueError`` for unknown strategies, bad layer counts, more student than teacher
    layers (named strategies only) and strategies that need ``n_student >= 2`` (those that
    leave the last student layer unconnected).
    """
    n_teacher = _check_count("n_teacher", n_teacher)
    n_student = _check_count("n_student", n_student)

    if not isinstance(strategy, str):
        if isinstance(strategy, (list, tuple)):
            return _validate_explicit(strategy, n_teacher, n_student)
        raise ValueError(
            f"strategy must be one of {', '.join(STRATEGIES)} or an explicit list of "
            f"teacher-layer lists, got {strategy!r}"
        )

    name = strategy.strip().lower().replace("-", "_")
    if name not in STRATEGIES:
        raise ValueError(
            f"unknown layer-mapping strategy {strategy!r}; valid strategies: {', '.join(STRATEGIES)} "
            "(or an explicit list of teacher-layer lists)"
        )
    if n_student > n_teacher:
        raise ValueError(
            f"strategy {name!r} needs n_student <= n_teacher, got n_student={n_student} > "
            f"n_teacher={n_teacher} (pass an explicit mapping instead)"
        )
    last_unconnected = name in ("pkd_skip", "pkd_last", "buckets_no", "buckets_po", "all")
    if last_unconnected and n_student < 2:
        raise ValueError(
            f"strategy {name!r} leaves the last student layer unconnected, so it needs "
            f"n_student >= 2 (got n_student={n_student}); use 'one_to_many' or 'distilbert'"
        )

    n_conn = n_student - 1
    if name == "pkd_skip":
        step = n_teacher // n_student
        return [[j * step] for j in range(1, n_student)] + [[]]
    if name == "pkd_last":
        offset = n_teacher - n_student
        return [[offset + j] for j in range(1, n_student)] + [[]]
    if name == "buckets_no":
        return _even_groups(n_teacher, n_conn) + [[]]
    if name == "buckets_po":
        buckets = _even_groups(n_teacher, n_conn)
        overlapped = [b + [buckets[i + 1][0]] for i, b in enumerate(buckets[:-1])] + [buckets[-1]]
        return overlapped + [[]]
    if name == "all":
        return [list(range(1, n_teacher + 1)) for _ in range(n_conn)] + [[]]
    if name == "one_to_many":
        return _even_groups(n_teacher, n_student)
    # distilbert: M(k) = round(r k) - 1 for k <= K/2 else round(r k), r = n_t / n_s.
    # Halves round up; results are clamped to >= 1 and made strictly increasing (a tie is
    # bumped to previous + 1), which never exceeds n_teacher and gives the identity when
    # n_student == n_teacher.
    mapping: Mapping = []
    prev = 0
    for k in range(1, n_student + 1):
        m = _round_half_up_ratio(n_teacher * k, n_student)
        if 2 * k <= n_student:
            m -= 1
        m = max(m, 1, prev + 1)
        mapping.append([m])
        prev = m
    return mapping


def connected_layers(mapping: Sequence[Sequence[int]]) -> list[int]:
    """1-based student layers whose mapping entry is non-empty (PKD/ALP-KD Eq. 3/7 sum over j)."""
    return [j for j, entry in enumerate(mapping, start=1) if len(entry) > 0]
