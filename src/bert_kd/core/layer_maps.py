"""Student-to-teacher layer mappings.

A mapping is a ``list[list[int]]`` with one entry per student layer ``1..n_student``
(entry ``j - 1`` belongs to student layer ``j``) listing the 1-based teacher layers that
student layer learns from; ``[]`` means the student layer is unconnected.  Layer numbers
equal the index into HF ``hidden_states`` (index 0 = embedding output, never mapped here).

Strategies (``STRATEGIES``):

``pkd_skip``     PKD-Skip (Sun et al. 2019): student ``j`` <- teacher ``j * (n_t // n_s)``,
                 last student layer unconnected (12->6: 2,4,6,8,10; 12->4: 3,6,9).
``bucket_first`` ALP-KD's PKD baseline (Passban et al. 2021, Sec. 4, Table 1): the first layer of
                 each ``buckets_no`` bucket, last student layer unconnected (12->4: 1,5,9).
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
``teacher_layer:<l>``  PKD-l of ALP-KD Table 3: student layer 1 <- teacher layer ``l`` only, every
                 other student layer unconnected (2-layer student: ``[[l], []]``). A string, so
                 it can be given from YAML or ``--params`` (explicit lists work from YAML too).
"""

from __future__ import annotations

from typing import Sequence, Union

#: Names accepted by [`layer_map`][].
STRATEGIES: tuple[str, ...] = (
    "pkd_skip",
    "pkd_last",
    "bucket_first",
    "buckets_no",
    "buckets_po",
    "all",
    "one_to_many",
    "distilbert",
)

#: Prefix of the single-teacher-layer strategy ``teacher_layer:<l>`` (PKD-l).
TEACHER_LAYER_PREFIX = "teacher_layer:"

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
                f"explicit layer mapping entry for student layer {j} must be a list of teacher layers, got {entry!r}"
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


def _single_teacher_layer(strategy: str, value: str, n_teacher: int, n_student: int) -> Mapping:
    """``teacher_layer:<l>``: student layer 1 <- teacher layer l, the other student layers unconnected."""
    try:
        layer = int(value)
    except ValueError:
        raise ValueError(f"layer-mapping strategy {strategy!r}: {value!r} is not a teacher layer number") from None
    if not 1 <= layer <= n_teacher:
        raise ValueError(f"layer-mapping strategy {strategy!r}: teacher layer {layer} outside 1..{n_teacher}")
    if n_student < 2:
        raise ValueError(
            f"strategy {strategy!r} leaves the last student layer unconnected, so it needs n_student >= 2 "
            f"(got n_student={n_student})"
        )
    return [[layer]] + [[] for _ in range(n_student - 1)]


def layer_map(strategy: Union[str, Sequence[Sequence[int]]], n_teacher: int, n_student: int) -> Mapping:
    """Teacher layers (1-based) each student layer ``1..n_student`` distils from.

    PKD Eq. 3 / ALP-KD Eq. 3-6 (the set ``A(j)``), TED Eq. 2 (``M(k)``), multi-teacher
    Eq. 2-3 (groups ``p..q``).  ``strategy`` is one of [`STRATEGIES`][] or an explicit
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
    if name.startswith(TEACHER_LAYER_PREFIX):
        return _single_teacher_layer(strategy, name[len(TEACHER_LAYER_PREFIX) :], n_teacher, n_student)
    if name not in STRATEGIES:
        raise ValueError(
            f"unknown layer-mapping strategy {strategy!r}; valid strategies: {', '.join(STRATEGIES)} "
            f"(or {TEACHER_LAYER_PREFIX}<l>, or an explicit list of teacher-layer lists)"
        )
    if n_student > n_teacher:
        raise ValueError(
            f"strategy {name!r} needs n_student <= n_teacher, got n_student={n_student} > "
            f"n_teacher={n_teacher} (pass an explicit mapping instead)"
        )
    last_unconnected = name in ("pkd_skip", "pkd_last", "bucket_first", "buckets_no", "buckets_po", "all")
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
    if name == "bucket_first":
        return [[bucket[0]] for bucket in _even_groups(n_teacher, n_conn)] + [[]]
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


def check_strategy(strategy: Union[str, Sequence[Sequence[int]]]) -> None:
    """ValueError unless ``strategy`` names a strategy (or ``teacher_layer:<l>`` with an int l) or is a
    list of lists; the layer counts are checked later by [`layer_map`][]. For recipes checked
    before any model exists."""
    if isinstance(strategy, str):
        name = strategy.strip().lower().replace("-", "_")
        if name.startswith(TEACHER_LAYER_PREFIX):
            value = name[len(TEACHER_LAYER_PREFIX) :]
            if not value.isdigit() or int(value) < 1:
                raise ValueError(f"layer-mapping strategy {strategy!r}: {value!r} is not a teacher layer number")
            return
        if name not in STRATEGIES:
            raise ValueError(
                f"unknown layer-mapping strategy {strategy!r}; valid strategies: {', '.join(STRATEGIES)} "
                f"(or {TEACHER_LAYER_PREFIX}<l>, or an explicit list of teacher-layer lists)"
            )
        return
    if not isinstance(strategy, (list, tuple)) or any(
        isinstance(e, (str, bytes)) or not isinstance(e, (list, tuple)) for e in strategy
    ):
        raise ValueError(f"a layer mapping must be a strategy name or a list of teacher-layer lists, got {strategy!r}")


def connected_layers(mapping: Sequence[Sequence[int]]) -> list[int]:
    """1-based student layers whose mapping entry is non-empty (PKD/ALP-KD Eq. 3/7 sum over j)."""
    return [j for j, entry in enumerate(mapping, start=1) if len(entry) > 0]
