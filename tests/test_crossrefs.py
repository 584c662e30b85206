"""Every cross-reference in a docstring or a docs page lands on something the API reference renders.

mkdocstrings renders an object only when it is public and documented (``show_if_no_docstring: false``),
inside a rendered parent; a package page shows only what its ``__init__`` defines. A reference to anything
else has no anchor, and the strict build fails on it (``docs/hooks/strict.py``). This check finds the same
references without building the site: Griffe loads the package as mkdocstrings does, each identifier is
expanded as mkdocstrings' relative and scoped cross-references expand it, and the target must be in the
set of rendered objects.
"""

from __future__ import annotations

import re
from pathlib import Path

import griffe
import pytest
import yaml

from tests.test_docs import ROOT, load_reference_hook

#: ``[title][identifier]`` or ``[title][]``; a title may hold code spans (``[`fit`][bert_kd.core…]``).
CROSSREF = re.compile(r"\[((?:`[^`\n]*`|[^\[\]`\n])+)\]\[([A-Za-z_.][\w.]*)?\]")
#: A Sphinx role (``:func:`x```): mkdocstrings shows it as raw text, never as a link.
ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|attr|data|exc|obj|const):`")
#: mkdocstrings-python's default member filter: no ``_private`` names (``__dunder__`` ones stay).
PRIVATE = re.compile(r"^_[^_]")


def python_options() -> dict:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8").replace("!!python", "#"))
    for plugin in config["plugins"]:
        if isinstance(plugin, dict) and "mkdocstrings" in plugin:
            return plugin["mkdocstrings"]["handlers"]["python"]["options"]
    raise AssertionError("mkdocs.yml has no mkdocstrings python handler")


@pytest.fixture(scope="module")
def package() -> griffe.Module:
    hook = load_reference_hook()
    return hook._load(type("Config", (), {"config_file_path": str(ROOT / "mkdocs.yml")})())


def shown(member, keep_undocumented: bool) -> bool:
    return not PRIVATE.search(member.name) and (keep_undocumented or member.has_docstrings)


def rendered(package: griffe.Module, keep_undocumented: bool) -> set[str]:
    """The paths the reference gives an anchor: the module pages (``docs/hooks/reference.py``) and their members."""
    hook = load_reference_hook()
    found: set[str] = set()

    def members(obj, only: list[str] | None = None) -> None:
        for name, member in obj.members.items():
            if member.is_alias or member.is_module or member.kind is griffe.Kind.FUNCTION and obj.is_function:
                continue
            if (name in only) if only is not None else shown(member, keep_undocumented):
                found.add(member.path)
                if member.is_class:
                    members(member)

    for module in hook._walk(package):
        found.add(module.path)
        members(module, hook._own_members(module) if module.is_init_module else None)
    return found


def expand(identifier: str, obj, options: dict) -> str:
    """The identifier as mkdocstrings' cross-reference hook expands it in ``obj``'s docstring."""
    if options.get("relative_crossrefs") and identifier.startswith("."):
        identifier, scope = identifier[1:], obj
        while identifier.startswith("."):
            identifier, scope = identifier[1:], scope.parent or scope
        identifier = f"{scope.path}.{identifier}" if identifier else scope.path
    if options.get("scoped_crossrefs"):
        head, dot, rest = identifier.partition(".")
        try:
            head = obj.resolve(head)
        except Exception:  # not a name in scope: the identifier is already a full path
            pass
        identifier = head + dot + rest
    return identifier


def target(package: griffe.Module, identifier: str) -> str | None:
    """The canonical path ``identifier`` names in the package, or None. A re-export is followed at the end of
    the path only: mkdocstrings finds ``pkg.Name`` re-exported from ``pkg.mod`` but not ``pkg.Name.method``."""
    if identifier != package.path and not identifier.startswith(package.path + "."):
        return None
    obj = package
    try:
        for part in identifier.split(".")[1:]:
            if obj.is_alias:
                return None
            obj = obj.members[part]
        return obj.final_target.path if obj.is_alias else obj.path
    except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
        return None


def references(text: str):
    for title, identifier in CROSSREF.findall(re.sub(r"``.*?``", "", text, flags=re.S)):
        yield identifier or title.strip("`")


def docstring_references(package: griffe.Module, options: dict):
    """(where, identifier as written, expanded identifier) of every reference in every docstring."""

    def walk(obj):
        if obj.docstring:
            for identifier in references(obj.docstring.value):
                yield f"{obj.filepath}:{obj.docstring.lineno}", identifier, expand(identifier, obj, options)
        for member in obj.members.values():
            if not member.is_alias:
                yield from walk(member)

    yield from walk(package)


def unrendered(package, options, found) -> list[str]:
    missing = []
    for where, written, identifier in docstring_references(package, options):
        path = target(package, identifier)  # a docstring links API objects only
        if path is None or path not in found:
            missing.append(f"{Path(where).relative_to(ROOT)}: [{written}] → {identifier}")
    for page in sorted((ROOT / "docs").rglob("*.md")):
        for identifier in references(page.read_text(encoding="utf-8")):
            if identifier.startswith(package.path + "."):
                path = target(package, identifier)
                if path is None or path not in found:
                    missing.append(f"{page.relative_to(ROOT)}: {identifier}")
    return missing


def test_every_cross_reference_lands_on_a_rendered_object(package):
    options = python_options()
    found = rendered(package, options.get("show_if_no_docstring", False))
    missing = unrendered(package, options, found)
    assert not missing, "cross-references to objects the reference does not render (give the target a "
    "docstring or a #: comment, or link what is rendered):\n" + "\n".join(missing)


def test_the_check_finds_a_reference_to_an_undocumented_attribute(package):
    options = python_options()
    module = package["experiment.comparison"]
    found = rendered(package, False) - {f"{module.path}.DECIMALS"}
    assert any("DECIMALS" in line for line in unrendered(package, options, found))
    assert expand("DECIMALS", module["display_frame"], {"scoped_crossrefs": True}) == f"{module.path}.DECIMALS"
    assert expand(".display_frame", module, {"relative_crossrefs": True}) == f"{module.path}.display_frame"


def test_no_docstring_writes_a_sphinx_role(package):
    def walk(obj):
        if obj.docstring and ROLE.search(obj.docstring.value):
            yield f"{Path(obj.filepath).relative_to(ROOT)}:{obj.docstring.lineno}"
        for member in obj.members.values():
            if not member.is_alias:
                yield from walk(member)

    assert not list(walk(package)), "write [`name`][path] (a mkdocstrings cross-reference), not a Sphinx role"
