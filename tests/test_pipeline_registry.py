"""The project's pipelines come from its recipe rows: one ``distill_<row>`` per row (pipeline_registry)."""

from __future__ import annotations

import shutil

import pytest
import yaml

from tests.conftest import REPO_ROOT


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A scratch project (pyproject + conf/base) bootstrapped in ``tmp_path``."""
    from kedro.framework.startup import bootstrap_project

    shutil.copy(REPO_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(REPO_ROOT / "conf" / "base", tmp_path / "conf" / "base")
    (tmp_path / "conf" / "local").mkdir()
    (tmp_path / "src").mkdir()
    monkeypatch.chdir(tmp_path)
    bootstrap_project(tmp_path)
    return tmp_path


def conf_rows(root, name: str, block: str) -> list[str]:
    return list(yaml.safe_load((root / "conf" / "base" / name).read_text())[block])


def test_every_recipe_row_has_its_pipeline(project):
    from bert_kd.pipeline_registry import register_pipelines

    pipelines = register_pipelines()
    distill_rows = conf_rows(project, "parameters_distill.yml", "distill_methods")
    ted_rows = conf_rows(project, "parameters_ted.yml", "ted_methods")
    assert "tinybert_one_stage" in distill_rows  # a row that once had no pipeline
    for row in distill_rows + ted_rows:
        assert f"distill_{row}" in pipelines, row
    compared = {n.name.split(".")[1] for n in pipelines["distill_baselines"].nodes if n.name.endswith(".distill")}
    assert compared == set(distill_rows)
    figure3 = {
        n.name.split(".")[1] for n in pipelines["distill_baselines"].nodes if n.name.endswith(".alp_attention_figure")
    }
    assert figure3 == {"alp", "alp_no", "alp_po"}  # the rows whose recipe runs ALP


def test_a_removed_row_takes_its_pipeline_with_it(project):
    from bert_kd.pipeline_registry import register_pipelines

    path = project / "conf" / "base" / "parameters_distill.yml"
    parameters = yaml.safe_load(path.read_text())
    del parameters["distill_methods"]["ckd_po"]
    path.write_text(yaml.safe_dump(parameters, sort_keys=False))
    pipelines = register_pipelines()
    assert "distill_ckd_po" not in pipelines and "distill_ckd" in pipelines
    assert not any(".ckd_po." in n.name for n in pipelines["distill_baselines"].nodes)


def test_the_default_pipeline_is_the_main_job(project):
    """A bare ``kedro run`` and kedro-viz's first screen are ``distill_alp``; ``all`` holds every block."""
    from bert_kd.pipeline_registry import register_pipelines

    pipelines = register_pipelines()
    assert pipelines["__default__"] is pipelines["distill_alp"]
    assert set(pipelines["distill_baselines"].nodes) | set(pipelines["distill_ted"].nodes) <= set(
        pipelines["all"].nodes
    )
    assert len(pipelines["__default__"].nodes) < len(pipelines["all"].nodes)


def node_functions(func):
    """What a node calls: the function Kedro wraps, and the plain functions behind it (a
    :func:`~bert_kd.pipelines.common.reads_run_settings` wrapper, a bound ``partial``)."""
    import functools

    seen = [func]
    while True:
        inner = getattr(seen[-1], "__wrapped__", None) or (
            seen[-1].func if isinstance(seen[-1], functools.partial) else None
        )
        if inner is None or inner in seen:
            return seen
        seen.append(inner)


def test_no_node_takes_more_than_six_arguments_or_inputs(project):
    """Nodes read the run settings as one input; none takes more than 6 parameters, and none reads more
    than 6 inputs (a comparison's students are gathered in the paper's group, at most 6 per node, into one
    ``<table>_evaluations`` input of its compare and register nodes)."""
    import inspect

    from bert_kd.pipeline_registry import register_pipelines

    wide = {}
    for pipeline in register_pipelines().values():
        for node in pipeline.nodes:
            if len(node.inputs) > 6:
                wide[f"node {node.name}"] = len(node.inputs)
            for func in node_functions(node.func):
                count = len(inspect.signature(func, follow_wrapped=False).parameters)
                name = f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', repr(func))}"
                if count > 6:
                    wide[name] = count
    assert wide == {}
