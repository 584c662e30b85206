"""The size limits' list of offending files (``[tool.ruff.lint.per-file-ignores]``) only shrinks."""

from __future__ import annotations

import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
#: (file, rule) pairs listed when C901 and PLR0913 were turned on (2026-11-27); lower it as files come off.
OFFENDERS_WHEN_TURNED_ON = 46


def test_the_size_limits_offenders_list_only_shrinks():
    lint = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["ruff"]["lint"]
    assert {"C901", "PLR0913"} <= set(lint["select"])
    assert lint["mccabe"]["max-complexity"] == 10 and lint["pylint"]["max-args"] == 6
    ignored = lint["per-file-ignores"]
    assert all(set(rules) <= {"C901", "PLR0913"} for rules in ignored.values()), "only the size rules are listed"
    assert all((PYPROJECT.parent / path).is_file() for path in ignored), "a listed file no longer exists: drop it"
    assert sum(len(rules) for rules in ignored.values()) <= OFFENDERS_WHEN_TURNED_ON
