"""Alignment reports and their MLflow metrics (multi_teacher.reporting)."""

from __future__ import annotations

from torch import nn

from bert_kd.core.distill.methods.multi_teacher.reporting import alignment_metrics, describe_projection


def test_alignment_metrics_flatten_numbers_and_skip_unknowns():
    report = {
        "bert": {"token_aligned_fraction": 0.25, "layers": 4, "width": 32, "heads": None},
        "okd_like": {"layers": 3, "width": 24, "heads": 3},
    }
    assert alignment_metrics(report) == {
        "align/bert/token_aligned_fraction": 0.25,
        "align/bert/layers": 4.0,
        "align/bert/width": 32.0,
        "align/okd_like/layers": 3.0,
        "align/okd_like/width": 24.0,
        "align/okd_like/heads": 3.0,
    }


def test_describe_projection():
    assert describe_projection(nn.Identity(), 8, 8) == "identity"
    assert describe_projection(nn.Linear(8, 12), 8, 12) == "linear 8->12"
