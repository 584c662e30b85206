"""What a multi-teacher method chose per teacher (alignment, levels, groups, projections), as a
JSON-able report and as flat MLflow metrics."""

from __future__ import annotations

from torch import nn


def describe_projection(module: nn.Module, d_s: int, d_t: int) -> str:
    """``identity`` or ``linear d_s->d_t``."""
    return "identity" if isinstance(module, nn.Identity) else f"linear {d_s}->{d_t}"


def one_to_many_report(method) -> dict:
    """Per teacher of a :class:`~bert_kd.distill.methods.multi_teacher.MultiTeacherOneToMany`
    (keyed by name): token alignment seen so far (``token_aligned`` is True / False when every /
    no training batch aligned, ``"mixed"`` otherwise, None before the first batch), its fraction,
    the levels the terms ran at, heads, width, depth, groups and projections."""
    report = {}
    for k, name in enumerate(method.teacher_names):
        seen, aligned = method._seen[k], method._aligned[k]
        fraction = aligned / seen if seen else None
        if fraction is None:
            flag, level = None, None
        elif fraction == 1.0:
            flag, level = True, "token"
        elif fraction == 0.0:
            flag, level = False, "sentence"
        else:
            flag, level = "mixed", "mixed"
        info = method.describe_teacher(k)
        d_s, d_t = method.student_width, method.teacher_widths[k]
        info.update(
            token_aligned=flag,
            token_aligned_fraction=fraction,
            batches=seen,
            hidden_level=level,
            attention="used" if flag is True else ("skipped" if flag is False else flag),
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
    """``align/<teacher>/<field>`` numbers of a report: the token-aligned fraction, layers, width, heads."""
    metrics = {}
    for name, info in report.items():
        if info.get("token_aligned_fraction") is not None:
            metrics[f"align/{name}/token_aligned_fraction"] = float(info["token_aligned_fraction"])
        for key in ("layers", "width", "heads"):
            if info.get(key) is not None:
                metrics[f"align/{name}/{key}"] = float(info[key])
    return metrics
