from __future__ import annotations

import pytest

from bert_kd.sweep.run import reproduce
from tests.sweep.conftest import RECIPES, fake_run_trial, tiny_reproduce


def test_reproduce_writes_the_table_files(tmp_path):
    params = {**tiny_reproduce(seeds="1"), "storage": f"sqlite:///{tmp_path}/optuna.db",
              "bootstrap": {"resamples": 50, "seed": 0}}
    report, paths = reproduce(params, RECIPES, fake_run_trial, tmp_path / "out")
    # the table has a learning-rate grid: the expected-best-score-vs-trials curve is written beside it
    assert sorted(p.name for p in paths.values()) == ["tiny.csv", "tiny.md", "tiny.png", "tiny_budget.csv", "tiny_budget.png"]
    assert "(1)" in report.wide.loc["ALP", "RTE"]


def test_unwired_runner_says_what_to_pass(tmp_path):
    params = {**tiny_reproduce(seeds="1", methods="nkd", tasks="rte"), "storage": f"sqlite:///{tmp_path}/o.db"}
    report, _ = reproduce(params, RECIPES, output_dir=tmp_path)  # failures are recorded, the table shows "–"
    assert report.wide.loc["NKD", "RTE"] == "–"
