"""The mechanism checks' registry and the ``bert-kd mechanisms`` command: every module registers itself, results
print one line each (or one JSON list) and a failing check makes the command exit 1."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from bert_kd.analysis import mechanisms
from bert_kd.analysis.mechanisms import CHECKS, MechanismResult, mechanism, run_checks
from bert_kd.analysis.mechanisms_cli import format_line
from bert_kd.analysis.mechanisms_cli import mechanisms as command

FAMILIES = {"rl_kd", "ted", "one_to_many", "layerwise", "distilbert"}


def test_every_method_family_registers_its_check():
    assert set(CHECKS) >= FAMILIES


@pytest.fixture
def planted(monkeypatch):
    """Two fake checks in place of the real ones: one that holds, one that does not."""
    fake = {
        "holding": lambda: [MechanismResult("holding", "a share", {"a": 0.9, "b": 0.1}, "a ≥ 0.8", True)],
        "failing": lambda: [MechanismResult("failing", "a gap", 0.01, "≥ 0.5", False)],
    }
    monkeypatch.setattr(mechanisms, "CHECKS", fake)
    return fake


def test_the_command_prints_a_line_per_result_and_exits_0_when_all_hold(planted):
    result = CliRunner().invoke(command, ["holding"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "holding: a share = a 0.9, b 0.1; expected a ≥ 0.8: holds"


def test_a_result_that_does_not_hold_makes_the_command_exit_1(planted):
    result = CliRunner().invoke(command, [])
    assert result.exit_code == 1
    assert "failing: a gap = 0.01; expected ≥ 0.5: DOES NOT HOLD" in result.output.splitlines()


def test_json_is_one_list_of_the_results(planted):
    result = CliRunner().invoke(command, ["--json", "failing", "holding"])
    assert result.exit_code == 1
    assert json.loads(result.output) == [
        {"method": "failing", "quantity": "a gap", "measured": 0.01, "expected": "≥ 0.5", "holds": False},
        {
            "method": "holding",
            "quantity": "a share",
            "measured": {"a": 0.9, "b": 0.1},
            "expected": "a ≥ 0.8",
            "holds": True,
        },
    ]


def test_an_unknown_method_is_a_usage_error_naming_the_known_ones(planted):
    result = CliRunner().invoke(command, ["alp_kd"])
    assert result.exit_code == 2 and "alp_kd" in result.output and "failing, holding" in result.output
    with pytest.raises(KeyError, match="known: failing, holding"):
        run_checks(["alp_kd"])


def test_a_name_registers_once():
    def check():
        return []

    mechanism("twice-registered")(check)
    try:
        with pytest.raises(ValueError, match="registered twice"):
            mechanism("twice-registered")(lambda: [])
    finally:
        CHECKS.pop("twice-registered")


def test_the_line_says_what_was_measured_and_expected():
    line = format_line(MechanismResult("m", "q", 0.12345, "≤ 0.2", True))
    assert line == "m: q = 0.123; expected ≤ 0.2: holds"


def test_bert_kd_dispatches_mechanisms_and_lists_it_in_its_help(capsys):
    from bert_kd.__main__ import main

    with pytest.raises(SystemExit) as done:
        main(["mechanisms", "--help"])
    assert done.value.code == 0 and "Usage: bert-kd mechanisms [OPTIONS] [METHODS]..." in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "bert-kd mechanisms [METHOD ...] [--json]" in capsys.readouterr().out


def test_json_on_stdout_is_the_list_alone():
    """Run as a user runs it (a fresh interpreter, ``python -m bert_kd``): stdout parses as JSON, nothing logged
    before it."""
    import os
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "bert_kd", "mechanisms", "layerwise", "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    (result,) = json.loads(done.stdout)
    assert result["method"] == "pkd" and result["holds"] is True
