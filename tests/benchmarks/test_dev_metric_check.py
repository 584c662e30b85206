"""benchmarks/dev_metric_check.py: the paired table and the pooled difference, from CSV rows alone."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "benchmarks" / "dev_metric_check.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("dev_metric_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def run(task: str, model: str, seed: int, variant: str, accuracy: float) -> dict:
    return dict(
        task=task,
        model=model,
        seed=str(seed),
        variant=variant,
        rows="3000",
        epochs="3.0",
        accuracy=str(accuracy),
        seconds="10",
        padded_per_real="1.5",
    )


def test_pooled_difference_pairs_by_cell_and_seed(script):
    rows = [
        run("sst2", "teacher", 1, "random", 0.80),
        run("sst2", "teacher", 1, "grouped", 0.81),
        run("mrpc", "teacher", 1, "random", 0.70),
        run("mrpc", "teacher", 1, "grouped", 0.68),
        run("mrpc", "teacher", 2, "grouped", 0.99),
    ]  # no random run of seed 2: not a pair
    mean, low, high, n = script.pooled_difference(rows)
    assert n == 2
    assert mean == pytest.approx((1.0 - 2.0) / 2)
    assert low == pytest.approx(-2.0) and high == pytest.approx(1.0)  # two pairs: the bootstrap's extremes


def test_summary_states_the_pooled_line_and_skips_it_without_pairs(script):
    rows = [
        run("sst2", "student", seed, variant, 0.75 + 0.01 * seed + (0.005 if variant == "grouped" else 0))
        for seed in (1, 2, 3)
        for variant in ("random", "grouped")
    ]
    table = script.paired_summary(rows)
    assert "| sst2 | student | 3000 × 3.0 | 3 |" in table
    assert "All 3 pairs pooled: mean +0.50 points, bootstrap 95% CI [+0.50, +0.50]" in table
    assert script.pooled_difference([run("sst2", "student", 1, "random", 0.7)]) is None
    assert "pooled" not in script.paired_summary([run("sst2", "student", 1, "random", 0.7)])
