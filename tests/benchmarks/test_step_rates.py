"""benchmarks/step_rates.py: its medians over timing windows, its ``auto`` decisions, and a tiny run of the loop's
own step."""

from __future__ import annotations

import importlib.util
import json

import pytest

from tests.conftest import REPO_ROOT

spec = importlib.util.spec_from_file_location("step_rates", REPO_ROOT / "benchmarks" / "step_rates.py")
rates = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rates)


def test_step_rates_report_medians_of_the_windows_after_the_first_and_decide_from_them():
    stats = rates.window_stats([0.0, 60.0, 61.0, 62.5, 63.5], steps=10, batch_size=32, warmup_windows=1)
    assert stats["first_window_s"] == 60.0 and stats["repeats"] == 3
    assert stats["examples_per_s"] == pytest.approx(320.0) and stats["step_ms"] == pytest.approx(100.0)
    assert stats["examples_per_s_min"] == pytest.approx(320 / 1.5) and stats["examples_per_s_max"] == 320.0
    rows = [
        {
            "work": "live_distill",
            "option": "eager-tf32",
            "examples_per_s": 1600,
            "step_ms": 20.0,
            "first_window_s": 1.0,
        },
        {"work": "live_distill", "option": "eager-bf16", "examples_per_s": 900, "step_ms": 35.0, "first_window_s": 1.0},
        {
            "work": "live_distill",
            "option": "compiled-bf16",
            "examples_per_s": 3200,
            "step_ms": 10.0,
            "first_window_s": 61.0,
        },
        {"work": "live_distill", "option": "compiled-tf32", "error": "failed"},
    ]
    decision = rates.decide(rows)
    assert decision["fastest_eager"] == "eager-tf32" and decision["fastest_compiled"] == "compiled-bf16"
    assert decision["break_even_steps"] == pytest.approx(60.0 / 0.010)
    assert decision["compiled_over_eager"] == pytest.approx(2.0)


def test_step_rates_time_the_loops_own_step_on_tiny_shapes(tmp_path):
    report = rates.main(
        ["--tiny", "--options", "eager-tf32", "--works", "teacher_finetune", "--steps", "1", "--repeats", "2"]
        + ["--json", str(tmp_path / "rates.json")]
    )
    (row,) = report["rows"]
    assert row["option"] == "eager-tf32" and row["mixed_precision"] == "no" and row["compile"] is False
    assert row["repeats"] == 2 and row["examples_per_s"] > 0 and "error" not in row
    assert json.loads((tmp_path / "rates.json").read_text())["rows"][0]["option"] == "eager-tf32"
