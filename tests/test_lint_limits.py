"""Size limits per function: every finding of ruff's size rules is in a committed baseline and may only fall.

ruff runs the size rules (complexity, arguments, branches, statements; limits in ``pyproject.toml``) over the
whole tree with ``noqa`` comments ignored; each finding is keyed by (file, function qualname, rule) and compared
with ``tests/lint_limits_baseline.json``. A new finding fails, a value above its baseline fails, and a baseline
entry that is now lower or gone fails with "lower the baseline", so the baseline only ever falls.

Regenerate the baseline (after a merge, or after a function got smaller)::

    .venv/bin/python tests/test_lint_limits.py --write
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "tests" / "lint_limits_baseline.json"
SIZE_RULES = ("C901", "PLR0912", "PLR0913", "PLR0915")
_VALUE = re.compile(r"\((\d+) > \d+\)")


def _ruff() -> str:
    local = Path(sys.executable).with_name("ruff")
    return str(local) if local.is_file() else "ruff"


def _qualnames(path: Path) -> dict[int, str]:
    """Line of each ``def`` → its qualified name (``Class.method``, ``outer.inner``)."""
    names: dict[int, str] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    names[child.lineno] = name
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text(encoding="utf-8")), "")
    return names


def findings() -> dict[str, int]:
    """``"file::qualname::rule"`` → the measured value, for every function over a size limit."""
    cmd = [_ruff(), "check", "--select", ",".join(SIZE_RULES), "--ignore-noqa", "--output-format", "json", "."]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"ruff failed ({proc.returncode}): {proc.stderr}")
    out: dict[str, int] = {}
    cache: dict[Path, dict[int, str]] = {}
    for item in json.loads(proc.stdout):
        path = Path(item["filename"])
        names = cache.setdefault(path, _qualnames(path))
        row = item["location"]["row"]
        qualname = names.get(row, f"<line {row}>")
        value = int(_VALUE.search(item["message"]).group(1))
        out[f"{path.relative_to(ROOT).as_posix()}::{qualname}::{item['code']}"] = value
    return dict(sorted(out.items()))


def compare(found: dict[str, int], baseline: dict[str, int]) -> list[str]:
    """The problems, each one line; empty when ``found`` matches ``baseline`` exactly."""
    problems = [
        f"new: {key} = {value} (make the function smaller)" for key, value in found.items() if key not in baseline
    ]
    problems += [
        f"grew: {key} = {found[key]} > baseline {baseline[key]} (make the function smaller)"
        for key in found
        if key in baseline and found[key] > baseline[key]
    ]
    problems += [
        f"lower the baseline: {key} is {found.get(key, 'within the limit')} < baseline {value} "
        f"(run `python tests/test_lint_limits.py --write`)"
        for key, value in baseline.items()
        if found.get(key, 0) < value
    ]
    return problems


def test_the_size_rules_are_configured_without_file_waivers():
    lint = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["ruff"]["lint"]
    assert lint["mccabe"]["max-complexity"] == 10 and lint["pylint"]["max-args"] == 6
    waived = {rule for rules in lint.get("per-file-ignores", {}).values() for rule in rules}
    assert not waived & set(SIZE_RULES), "no per-file waivers of the size rules: the baseline holds each function"


def test_every_function_over_a_size_limit_is_in_the_baseline_and_only_falls():
    baseline = json.loads(BASELINE.read_text(encoding="utf-8"))
    problems = compare(findings(), baseline)
    assert not problems, "\n".join(problems)


def test_compare_refuses_new_grown_and_stale_entries():
    base = {"a.py::f::C901": 12, "a.py::g::PLR0913": 8}
    assert compare(dict(base), base) == []
    assert compare({**base, "b.py::h::C901": 11}, base)[0].startswith("new: b.py::h::C901")
    assert compare({**base, "a.py::f::C901": 13}, base)[0].startswith("grew: a.py::f::C901")
    assert compare({"a.py::f::C901": 12}, base)[0].startswith("lower the baseline: a.py::g::PLR0913")
    assert compare({**base, "a.py::f::C901": 11}, base)[0].startswith("lower the baseline: a.py::f::C901")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_lint_limits.py --write   (rewrites tests/lint_limits_baseline.json)")
    BASELINE.write_text(json.dumps(findings(), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {BASELINE.relative_to(ROOT)}")
