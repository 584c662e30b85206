"""Package-wide structure: no import cycle among bert_kd modules (function-local imports counted),
the core imports neither Kedro nor MLflow, and the package root holds Kedro's entry points and folders."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import bert_kd
from tests import fresh_interpreter

PACKAGE = Path(bert_kd.__file__).parent


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def bert_kd_imports() -> dict[str, set[str]]:
    """Every bert_kd module → the bert_kd modules it imports anywhere in its file (top level,
    function-local, under ``if``): ``from a import b`` counts ``a.b`` when that is a module, else ``a``."""
    paths = {module_name(path): path for path in PACKAGE.rglob("*.py")}

    def known(name: str) -> str:
        while name not in paths:
            name = name.rpartition(".")[0]
        return name

    graph = {}
    for module, path in paths.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        imported = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported.update(known(alias.name) for alias in node.names if alias.name.split(".")[0] == "bert_kd")
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
                if base.split(".")[0] == "bert_kd":
                    imported.update(
                        f"{base}.{a.name}" if f"{base}.{a.name}" in paths else known(base) for a in node.names
                    )
        graph[module] = imported - {module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_scan_sees_top_level_and_function_local_imports():
    graph = bert_kd_imports()
    assert "bert_kd.config.schema" in graph["bert_kd.core.training.config"]  # top level
    assert "bert_kd.config.errors" in graph["bert_kd.analysis.cli"]  # inside a function
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle_among_bert_kd_modules():
    assert cycles(bert_kd_imports()) == []


def test_the_config_leaf_imports_no_other_bert_kd_room():
    graph = bert_kd_imports()
    leaf = {
        module: sorted(m for m in imported if not m.startswith("bert_kd.config"))
        for module, imported in graph.items()
        if module.startswith("bert_kd.config")
    }
    assert leaf == {module: [] for module in leaf}


def test_a_fresh_interpreter_starts_without_bert_kd_kedro_or_mlflow_and_sees_what_it_imports():
    """The import checks below run in :mod:`tests.fresh_interpreter`'s forks: each starts with none
    of the watched packages loaded, and a check that imports one finds it (the checks can fail)."""
    code = (
        "import sys; print(sorted({m.split('.')[0] for m in sys.modules} & {'bert_kd', 'kedro', 'mlflow', 'optuna'}))"
    )
    assert fresh_interpreter.check_output(code).strip() == "[]"
    loaded = (
        "import sys, bert_kd.experiment.tracker, kedro.pipeline; print('kedro' in sys.modules, 'mlflow' in sys.modules)"
    )
    assert fresh_interpreter.check_output(loaded).split() == ["True", "False"]
    assert fresh_interpreter.check_output(code).strip() == "[]"  # the previous check's imports stayed in its fork
    failed = fresh_interpreter.run("import sys; print('out'); sys.exit(3)", "an-argument")
    assert (failed.returncode, failed.stdout) == (3, "out\n")


def test_the_core_loads_neither_kedro_nor_mlflow():
    code = (
        "import sys, bert_kd.core.training, bert_kd.core.distill, bert_kd.core.models, bert_kd.core.data, "
        "bert_kd.core.distill.methods, bert_kd.config.schema; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'kedro', 'mlflow'}), 'bert_kd.kedro_project' in sys.modules)"
    )
    assert fresh_interpreter.check_output(code).strip() == "[] False"  # the package root loads no Kedro shell either


def test_the_package_root_holds_entry_points_and_folders_only():
    entries = sorted(p.name for p in PACKAGE.iterdir() if p.name != "__pycache__")
    modules = {name for name in entries if name.endswith(".py")}
    assert modules <= {"__init__.py", "__main__.py", "cli.py", "settings.py", "pipeline_registry.py", "hooks.py"}
    assert all((PACKAGE / name).is_dir() for name in set(entries) - modules) and len(entries) <= 13


def test_models_does_not_import_distill():
    code = (
        "import sys, bert_kd.core.models; print(sorted(m for m in sys.modules if m.startswith('bert_kd.core.distill')))"
    )
    assert fresh_interpreter.check_output(code).strip() == "[]"


def test_catalog_and_jobs_do_not_import_pipelines_or_kedro_nodes():
    code = (
        "import sys, bert_kd.kedro_project.datasets, bert_kd.experiment.jobs; "
        "print(sorted(m for m in sys.modules if m.startswith('bert_kd.pipelines')), 'kedro' in sys.modules)"
    )
    out = fresh_interpreter.check_output(code)
    assert out.strip() == "[] True"  # catalog.py is a Kedro dataset module; it never loads node modules
    code = "import sys, bert_kd.experiment.jobs; print('kedro' in sys.modules)"
    assert fresh_interpreter.check_output(code).strip() == "False"


def kedro_modules_after_importing(module: str) -> list[str]:
    """The ``kedro`` modules a fresh interpreter holds after ``import <module>``."""
    code = f"import sys, {module}; print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] == 'kedro')))"
    return fresh_interpreter.check_output(code).split()


def kedro_modules_after_importing_each(modules: list[str]) -> dict[str, list[str]]:
    """The ``kedro`` modules one fresh interpreter holds after ``import <module>`` of each of ``modules`` in
    turn. Imports only add modules, so a module that loads Kedro shows it from its own entry on (one
    interpreter pays the shared imports once, not once per module)."""
    code = (
        "import importlib, json, sys\n"
        "loaded = {}\n"
        "for modules in sys.argv[1:]:\n"
        "    for name in modules.split(', '):\n"
        "        importlib.import_module(name)\n"
        "    loaded[modules] = sorted(m for m in sys.modules if m.split('.')[0] == 'kedro')\n"
        "print(json.dumps(loaded))"
    )
    return json.loads(fresh_interpreter.check_output(code, *modules).strip().splitlines()[-1])


def test_the_core_imports_no_kedro():
    """The job bodies, training, tracking, the store, run set-up and evaluation run without Kedro
    (notebooks, benchmarks, sweep workers); only ``pipelines/`` (and the sweep trial, below) need it."""
    core = [
        "bert_kd.experiment.training_jobs.teacher, bert_kd.experiment.training_jobs.ted_filters",  # and student
        "bert_kd.core.training",
        "bert_kd.tracking",
        "bert_kd.tracking.distill",
        "bert_kd.experiment.store",
        "bert_kd.experiment.run_setup",
        "bert_kd.experiment.evaluation",
        "bert_kd.sweeps",
        "bert_kd.sweeps.trial_identity",
        "bert_kd.sweeps.trial_results",
    ]
    assert kedro_modules_after_importing_each(core) == {module: [] for module in core}


def test_a_sweep_trial_needs_only_kedro_pipeline_definitions():
    """A trial runs the pipeline's own definition, so it imports ``kedro.pipeline``, but no
    Kedro session, catalog, runner or framework."""
    loaded = kedro_modules_after_importing("bert_kd.sweeps.trial")
    assert "kedro.pipeline" in loaded
    assert [m for m in loaded if not m.startswith(("kedro.pipeline", "kedro.utils")) and m != "kedro"] == []


def documented_folders(markdown: str) -> set[str]:
    """The folders of the first tree (```text block) under '## Layout', as paths under src/bert_kd."""
    block = markdown.split("## Layout", 1)[1].split("```text", 1)[1].split("```", 1)[0]
    folders, stack = set(), []
    for line in block.splitlines():
        marker = next((m for m in ("├── ", "└── ") if m in line), None)
        if marker is None:
            continue
        depth = line.index(marker) // 4
        name = line[line.index(marker) + len(marker) :].split()[0]
        del stack[depth:]
        if name.endswith("/"):
            stack.append(name.rstrip("/"))
            folders.add("/".join(stack))
    return folders


def test_the_architecture_page_lists_every_folder_of_the_package():
    page = (PACKAGE.parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert documented_folders("## Layout\n```text\n├── a/  x\n│   └── b/  y\n└── c/  z\n```") == {"a", "a/b", "c"}
    actual = {
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*")
        if path.is_dir() and path.name != "__pycache__" and (path / "__init__.py").exists()
    }
    assert documented_folders(page) == actual
