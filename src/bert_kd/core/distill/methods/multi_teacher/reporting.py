"""What a multi-teacher method chose per teacher (alignment, levels, groups, projections), as a
JSON-able report and as flat MLflow metrics."""

from __future__ import annotations

from torch import nn


def describe_projection(module: nn.Module, d_s: int, d_t: int) -> str:
    """``identity`` or ``linear d_s->d_t``."""
    return "identity" if isinstance(module, nn.Identity) else f"linear {d_s}->{d_t}"


def _level(counts: dict[str, int]) -> str | None:
    used = [level for level, n in counts.items() if n]
    return None if not used else used[0] if len(used) == 1 else "mixed"


def one_to_many_report(method) -> dict:
    """Per teacher of a [`MultiTeacherOneToMany`][]
    (keyed by name): the alignment seen so far — ``token_aligned`` True / False when every / no
    training batch had the student's token positions, ``"mixed"`` otherwise, None before the first
    batch; the batch counts per level (``token``, ``span`` = shared character spans,
    ``sentence``) and the level the terms ran at (``mixed`` when it changed); the mean number of
    shared spans per example; heads, width, depth, groups and projections."""
    report = {}
    for k, name in enumerate(method.teacher_names):
        seen, counts = method._seen[k], dict(method._levels[k])
        fraction = counts["token"] / seen if seen else None
        flag = None if fraction is None else True if fraction == 1.0 else False if fraction == 0.0 else "mixed"
        level = _level(counts)
        span_batches = counts["span"]
        info = method.describe_teacher(k)
        d_s, d_t = method.student_width, method.teacher_widths[k]
        info.update(
            token_aligned=flag,
            token_aligned_fraction=fraction,
            span_aligned_fraction=span_batches / seen if seen else None,
            batches=seen,
            batches_per_level=counts,
            shared_spans_per_example=method._spans[k] / span_batches if span_batches else None,
            hidden_level=level,
            attention=None
            if level is None
            else "skipped"
            if level == "sentence"
            else "used"
            if not counts["sentence"]
            else "mixed",
            embedding_level=level,
            sentence_repr=method.sentence_repr,
            alignment_rule=method.alignment,
            student_heads=method.student_heads,
            student_width=d_s,
            groups=[list(g) for g in method.groups[k]],
            hidden_projection=describe_projection(method.hidden_projections[k], d_s, d_t),
            embedding_projection=describe_projection(method.embedding_projections[k], d_s, d_t),
        )
        report[name] = info
    return report


def alignment_metrics(report: dict) -> dict[str, float]:
    """``align/<teacher>/<field>`` numbers of a report: token- and span-aligned fractions, shared spans per
    example, layers, width, heads."""
    metrics = {}
    for name, info in report.items():
        for key in ("token_aligned_fraction", "span_aligned_fraction", "shared_spans_per_example"):
            if info.get(key) is not None:
                metrics[f"align/{name}/{key}"] = float(info[key])
        for key in ("layers", "width", "heads"):
            if info.get(key) is not None:
                metrics[f"align/{name}/{key}"] = float(info[key])
    return metrics
