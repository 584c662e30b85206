"""Package-wide structure: import direction and no function-local imports of bert_kd."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import bert_kd

PACKAGE = Path(bert_kd.__file__).parent
#: Modules whose imports are already clean (extend as the other modules are cleaned).
CHECKED = ["distill", "mapping.py", "models.py", "catalog.py"]


def test_models_does_not_import_distill():
    code = "import sys, bert_kd.models; print(sorted(m for m in sys.modules if m.startswith('bert_kd.distill')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_no_function_local_bert_kd_imports():
    files = [f for entry in CHECKED for f in ([PACKAGE / entry] if entry.endswith(".py") else (PACKAGE / entry).rglob("*.py"))]
    local = []
    for path in files:
        for func in ast.walk(ast.parse(path.read_text())):
            if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(func):
                    if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bert_kd"):
                        local.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert len(files) > 20 and local == []
