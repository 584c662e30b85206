"""benchmarks/alp_scores.py and benchmarks/alp_alpha_paired.py: α per score through the method's own function, and
the committed paired test spread − one-hot regenerated from the committed trials."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest
import torch

from bert_kd.core.distill.losses import alp_attention
from tests.conftest import REPO_ROOT


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def scores():
    yield load("alp_scores")
    sys.modules.pop("alp_scores", None)


def test_every_reading_is_a_distribution_and_the_methods_are_the_losses(scores):
    g = torch.Generator().manual_seed(0)
    teacher = torch.randn(12, 6, 16, generator=g, dtype=torch.float64) + 3.0
    student = teacher[:, :1]
    readings = scores.readings(student, teacher)
    assert len(readings) == 15 and len({name for name, _, _ in readings}) == 15
    for name, _where, alpha in readings:
        assert alpha.shape == (12, 6) and torch.allclose(alpha.sum(-1), torch.ones(12, dtype=torch.float64)), name
    by_name = {name: alpha for name, _, alpha in readings}
    assert torch.allclose(by_name["dot (Eq. 5 as printed)"], alp_attention(student, teacher, None, "dot")[:, 0])
    row = scores.summarise("x", "here", np.tile([[1.0, 0, 0, 0, 0, 0]], (4, 1)))
    assert row["H / log n"] == "0.000" and row["α's largest SD across sentences"] == "0.0000"
    assert row["top layer ≠ most common top"] == "0 / 4"


def test_the_committed_paired_test_is_what_the_committed_trials_give(capsys):
    paired = load("alp_alpha_paired")
    try:
        paired.main()
    finally:
        sys.modules.pop("alp_alpha_paired", None)
    committed = (REPO_ROOT / "results" / "alp_alpha" / "paired.md").read_text(encoding="utf-8")
    assert capsys.readouterr().out == committed
