"""Tests for bert_kd.core.training's package: every name the project imports from it is re-exported."""

from __future__ import annotations

import ast
import importlib.util

import bert_kd.core.training
from tests.conftest import REPO_ROOT


def imported_from_the_package() -> set[str]:
    """Names in ``from bert_kd.core.training import …`` anywhere in src/, tests/, benchmarks/ and scripts/."""
    names = set()
    for folder in ("src", "tests", "benchmarks", "scripts"):
        for path in (REPO_ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ImportFrom) and node.module == "bert_kd.core.training":
                    names.update(alias.name for alias in node.names)
    return names


def test_every_imported_name_is_re_exported():
    names = {
        name
        for name in imported_from_the_package()  # submodules (distributed, seeding) go by their own names
        if importlib.util.find_spec(f"bert_kd.core.training.{name}") is None
    }
    assert {"fit", "TrainingConfig", "Collator", "SPAN_PAD", "task_loss"} <= names  # the scan finds imports
    assert sorted(name for name in names if not hasattr(bert_kd.core.training, name)) == []
    assert set(bert_kd.core.training.__all__) >= names
