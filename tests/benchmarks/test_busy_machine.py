"""benchmarks/busy_machine.py: per state, the chosen threads' examples/s over the best fixed count's, and a
record that says when the machine was not idle."""

from __future__ import annotations

import importlib.util

from tests.conftest import REPO_ROOT

spec = importlib.util.spec_from_file_location("busy_machine_benchmark", REPO_ROOT / "benchmarks" / "busy_machine.py")
busy_machine = importlib.util.module_from_spec(spec)
spec.loader.exec_module(busy_machine)


def cell(state, policy, threads, rate, others=0.0):
    return {
        "state": state,
        "policy": policy,
        "threads": threads,
        "examples_per_s": rate,
        "other_cores_at_start": others,
        "load_at_start": 1.9,
        "load_rule_threads": 1,
    }


ROWS = [
    cell("after burst", "auto", 2, 90.0),
    cell("after burst", "1", 1, 60.0),
    cell("after burst", "2", 2, 100.0),
    cell("2 busy", "auto", 1, 30.0, 2.0),
    cell("2 busy", "1", 1, 30.0, 2.0),
    cell("2 busy", "2", 2, 15.0, 2.0),
    cell("idle", "auto", 2, 99.0),  # a state missing a fixed count is left out of the summary
]


def test_each_state_compares_the_choice_with_the_best_fixed_count():
    summary = busy_machine.ratios(ROWS)
    assert [(s["state"], s["chosen_threads"], s["chosen_over_best_fixed"]) for s in summary] == [
        ("after burst", 2, 0.9),
        ("2 busy", 1, 1.0),
    ]
    record = {
        "command": "python benchmarks/busy_machine.py",
        "date": "2026-12-07",
        "machine": {"processor": "cpu", "cores": 2, "other_cores_before": 0.8, "load_before": 3.0},
        "steps": 5,
        "burst_s": 60,
        "summary": summary,
    }
    text = busy_machine.markdown(record)
    assert "| after burst | 2 (1) | 0.0 | 1.9 | 90.0 | 60.0 | 100.0 | 0.90 |" in text
    assert "**The machine was not idle**" in text
    record["machine"]["other_cores_before"] = 0.1
    assert "not idle" not in busy_machine.markdown(record)
