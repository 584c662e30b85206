"""Every ``torch.load`` in the project says ``weights_only=True`` (safe whatever torch's default)."""

from __future__ import annotations

import ast

from tests.conftest import REPO_ROOT

SCANNED = ("src", "tests", "scripts", "benchmarks")


def _torch_load_calls(tree: ast.AST):
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "load"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "torch"
        ):
            yield node


def test_every_torch_load_passes_weights_only_true():
    unsafe = []
    for folder in SCANNED:
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            for call in _torch_load_calls(ast.parse(path.read_text(), filename=str(path))):
                explicit = {k.arg: k.value for k in call.keywords}
                value = explicit.get("weights_only")
                if not (isinstance(value, ast.Constant) and value.value is True):
                    unsafe.append(f"{path.relative_to(REPO_ROOT)}:{call.lineno}")
    assert not unsafe, f"torch.load without weights_only=True: {unsafe}"
