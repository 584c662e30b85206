"""The documentation site: docstrings cross-reference in the form mkdocstrings links, the API reference has a
page per module, and the built site works offline (no script, style or font from a CDN; every picture it
shows is a committed file)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "bert_kd"


def load_reference_hook():
    spec = importlib.util.spec_from_file_location("reference_hook", ROOT / "docs" / "hooks" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_sphinx_role_is_left_in_a_docstring():
    check = subprocess.run(
        [sys.executable, "scripts/sphinx_roles_to_crossrefs.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, f"run scripts/sphinx_roles_to_crossrefs.py:\n{check.stdout}"


def test_the_role_check_finds_a_role(tmp_path):
    module = tmp_path / "bert_kd" / "example.py"
    module.parent.mkdir()
    module.write_text('"""Runs :func:`fit`."""\n')
    check = subprocess.run(
        [sys.executable, ROOT / "scripts" / "sphinx_roles_to_crossrefs.py", "--check", "--src", tmp_path],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 1 and "example.py:1" in check.stdout


def test_the_reference_has_a_page_per_module_and_the_nav_lists_them():
    hook = load_reference_hook()
    config = SimpleNamespace(config_file_path=str(ROOT / "mkdocs.yml"), nav=[{"API reference": "x.md"}])
    hook.on_config(config)
    modules = {
        ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        for path in PACKAGE.rglob("*.py")
        if not any(part.startswith("_") and part != "__init__.py" for part in path.relative_to(PACKAGE).parts)
    }
    pages = {
        uri.removeprefix("reference/").removesuffix(".md").removesuffix("/index").replace("/", ".")
        for uri in hook._pages
    }
    assert pages == modules
    listed = re.findall(r"'(reference/[^']+\.md)'", repr(config.nav))
    assert set(listed) == set(hook._pages) | {hook.INDEX}
