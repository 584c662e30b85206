"""bert_kd.tracking (the package): every name the project imports from it, and ``python -m bert_kd.tracking``."""

import ast
import importlib.util
import runpy
from pathlib import Path

import pytest

import bert_kd.tracking
from tests.conftest import migrated_mlflow_db

ROOT = Path(__file__).resolve().parents[2]


def names_imported_from_the_package() -> set[str]:
    """``from bert_kd.tracking import X`` and ``tracking.X`` (after ``from bert_kd import tracking``)
    anywhere in the project's code, scripts, benchmarks and tests."""
    names = set()
    for path in [p for folder in ("src", "scripts", "benchmarks", "tests") for p in (ROOT / folder).rglob("*.py")]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        as_module = {
            alias.asname or alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == "bert_kd"
            for alias in node.names
            if alias.name == "tracking"
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "bert_kd.tracking":
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in as_module:
                names.add(node.attr)
    return names


def test_every_name_the_project_imports_from_the_package_is_there():
    used = names_imported_from_the_package()
    assert {"RunLogger", "tracked_run", "name_parent_run"} <= used  # the scan sees them
    submodules = {name for name in used if importlib.util.find_spec(f"bert_kd.tracking.{name}") is not None}
    assert submodules <= {
        "distill",
        "logged_models",
        "run_status",
        "kedro_hooks",
        "jobs",
    }  # imported by their own names (not re-exported)
    assert sorted(name for name in used - submodules if not hasattr(bert_kd.tracking, name)) == []
    assert sorted(name for name in bert_kd.tracking.__all__ if not hasattr(bert_kd.tracking, name)) == []


def test_python_m_bert_kd_tracking_ui_prints_the_runs_table_url(tmp_path, monkeypatch, capsys):
    store = migrated_mlflow_db(tmp_path / "mlflow.db")
    monkeypatch.setattr(
        "sys.argv",
        [
            "python -m bert_kd.tracking",
            "ui",
            "--backend-store-uri",
            store,
            "--experiment",
            "bert_kd_cli",
            "--port",
            "5077",
            "--print-only",
        ],
    )
    runpy.run_module("bert_kd.tracking", run_name="__main__")
    assert "http://127.0.0.1:5077/#/experiments/" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        monkeypatch.setattr("sys.argv", ["python -m bert_kd.tracking"])
        runpy.run_module("bert_kd.tracking", run_name="__main__")
