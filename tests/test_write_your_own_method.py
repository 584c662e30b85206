"""docs/write-your-own-method.md runs as written: its module is discovered as a method, its recipe row passes
the parameter check and makes a ``distill_<row>`` pipeline, and its Python block trains one step."""

from __future__ import annotations

import contextlib
import io
import re
import sys

import pytest
import yaml

from tests.conftest import REPO_ROOT

PAGE = REPO_ROOT / "docs" / "write-your-own-method.md"
METHODS_FOLDER = "src/bert_kd/core/distill/methods/"
BLOCK = re.compile(r'^```(\w+)(?: title="([^"]*)")?\n(.*?)^```', re.S | re.M)


def page_blocks() -> list[tuple[str, str, str]]:
    """(language, title, code) of every fenced block of the page, in order."""
    return BLOCK.findall(PAGE.read_text(encoding="utf-8"))


def block(language: str, title: str | None = None) -> str:
    """The one block in ``language`` whose title starts with ``title`` (``None``: the untitled one)."""
    found = [
        code
        for lang, name, code in page_blocks()
        if lang == language and (name.startswith(title) if title is not None else not name)
    ]
    assert len(found) == 1, f"the page should have one {language} block titled {title!r}"
    return found[0]


@pytest.fixture
def page_method(tmp_path, monkeypatch):
    """The page's module, saved under its title's file name in a folder added to the methods package."""
    from bert_kd.core.distill import methods
    from bert_kd.core.distill.methods import METHODS, discover_methods
    from bert_kd.experiment.parameters import parameters_model

    title = next(name for lang, name, _ in page_blocks() if lang == "python" and name.startswith(METHODS_FOLDER))
    parameters_model()  # the schema built before the module arrived, as in a long-lived process
    (tmp_path / title.removeprefix(METHODS_FOLDER)).write_text(block("python", METHODS_FOLDER))
    monkeypatch.setattr(methods, "__path__", [*methods.__path__, str(tmp_path)])
    before = set(METHODS)
    discover_methods()
    added = set(METHODS) - before
    yield added
    module = "bert_kd.core.distill.methods." + title.removeprefix(METHODS_FOLDER).removesuffix(".py")
    for name in added:
        METHODS.pop(name)
    sys.modules.pop(module, None)


def test_the_page_has_a_module_a_recipe_row_and_a_python_block():
    languages = [(lang, bool(name)) for lang, name, _ in page_blocks()]
    assert ("python", True) in languages and ("yaml", True) in languages and ("python", False) in languages


def test_the_recipe_row_passes_the_check_and_makes_its_pipeline(page_method):
    from bert_kd.experiment.parameters import validate_parameters
    from bert_kd.pipelines.distill.pipeline import create_pipeline

    rows = yaml.safe_load(block("yaml", "conf/base/parameters_distill.yml"))["distill_methods"]
    assert {row["method"] for row in rows.values()} <= page_method
    checked = validate_parameters({"task": "rte", "distill_methods": rows}).distill_methods
    assert set(checked) == set(rows)
    names = {node.name for node in create_pipeline(rows).nodes}
    assert {f"alp_kd.{row}.distill" for row in rows} <= names


def test_the_python_block_trains_one_step(page_method):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(block("python"), str(PAGE), "exec"), {"__name__": "page"})
    losses = {k: float(v) for k, v in re.findall(r"'(\w+)': ([-0-9.e]+)", printed.getvalue())}
    assert set(losses) == {"loss", "ce", "kd"} and losses["kd"] > 0
