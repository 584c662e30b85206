"""Package-wide structure: import direction and no function-local imports of bert_kd."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import bert_kd

PACKAGE = Path(bert_kd.__file__).parent
#: Modules whose imports are already clean (extend as the other modules are cleaned).
CHECKED = ["core/distill", "core/layer_maps.py", "core/models.py", "kedro_project/datasets.py", "experiment/jobs.py",
           "tracking/run_status.py", "pipelines", "config", "experiment/parameters.py"]


def test_models_does_not_import_distill():
    code = "import sys, bert_kd.core.models; print(sorted(m for m in sys.modules if m.startswith('bert_kd.core.distill')))"
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


def test_catalog_and_jobs_do_not_import_pipelines_or_kedro_nodes():
    code = ("import sys, bert_kd.kedro_project.datasets, bert_kd.experiment.jobs; "
            "print(sorted(m for m in sys.modules if m.startswith('bert_kd.pipelines')), 'kedro' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[] True"  # catalog.py is a Kedro dataset module; it never loads node modules
    code = "import sys, bert_kd.experiment.jobs; print('kedro' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


def kedro_modules_after_importing(module: str) -> list[str]:
    """The ``kedro`` modules a fresh interpreter holds after ``import <module>``."""
    code = f"import sys, {module}; print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] == 'kedro')))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()


def test_the_core_imports_no_kedro():
    """The distillation body, training, tracking, the store, run set-up and evaluation run without Kedro
    (notebooks, benchmarks, sweep workers); only ``pipelines/`` (and the sweep trial, below) need it."""
    core = ["bert_kd.experiment.distill_job", "bert_kd.core.training", "bert_kd.tracking", "bert_kd.tracking.distill", "bert_kd.experiment.store",
            "bert_kd.experiment.run_setup", "bert_kd.experiment.evaluation", "bert_kd.experiment.sweep"]
    assert {module: kedro_modules_after_importing(module) for module in core} == {module: [] for module in core}


def test_a_sweep_trial_needs_only_kedro_pipeline_definitions():
    """A trial runs the pipeline's own definition, so it imports ``kedro.pipeline``, but no
    Kedro session, catalog, runner or framework."""
    loaded = kedro_modules_after_importing("bert_kd.experiment.sweep.trial")
    assert "kedro.pipeline" in loaded
    assert [m for m in loaded if not m.startswith(("kedro.pipeline", "kedro.utils")) and m != "kedro"] == []
