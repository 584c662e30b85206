"""MkDocs hook: the API reference, one page per module of ``src/bert_kd``, generated at build time.

Each package gets a page with its docstring, what its ``__init__`` defines and a table of its modules
and subpackages; each module gets a page of its own, rendered by mkdocstrings. The pages and the
``API reference`` section of the navigation follow the package as it is, so a module that is added,
moved or removed needs no edit here. (A hook is MkDocs' own mechanism, not a plugin to install.)
"""

from __future__ import annotations

import re
from pathlib import Path

import griffe
from mkdocs.structure.files import File, Files

PACKAGE = "bert_kd"
SECTION = "API reference"
#: The handwritten page that opens the section (it says how the pages are laid out).
INDEX = "reference/index.md"
#: The griffe extensions mkdocs.yml gives mkdocstrings, so the summaries here read the same docstrings.
EXTENSIONS = ["griffe_sphinx"]

#: A cross-reference, ``[title][identifier]`` or ``[title][]``.
CROSSREF = re.compile(r"\[((?:`[^`]*`|[^\[\]`])+)\]\[([\w.]*)\]")

_pages: dict[str, str] = {}


def _load(config) -> griffe.Module:
    src = Path(config.config_file_path).parent / "src"
    return griffe.load(
        PACKAGE,
        search_paths=[str(src)],
        extensions=griffe.load_extensions(*EXTENSIONS),
        resolve_aliases=False,
    )


def _documented_modules(package: griffe.Module) -> list[griffe.Module]:
    """The public submodules and subpackages of ``package``, in name order."""
    return sorted(
        (
            member
            for name, member in package.members.items()
            if not member.is_alias and member.is_module and not name.startswith("_")
        ),
        key=lambda module: (module.is_init_module, module.name),
    )


def _page_uri(module: griffe.Module) -> str:
    """``reference/bert_kd/core/index.md`` for a package, ``reference/bert_kd/core/metrics.md`` for a module."""
    folder = "/".join(["reference", *module.path.split(".")])
    return f"{folder}/index.md" if module.is_init_module else f"{folder}.md"


def _full_path(obj: griffe.Object, match: re.Match) -> str:
    """A docstring's scoped cross-reference (``[`fit`][]``) with the full path it names from ``obj``: in the
    Markdown of a generated page it has no scope to be resolved from."""
    title, identifier = match[1], match[2] or match[1].strip("`")
    head, dot, rest = identifier.partition(".")
    try:
        head = obj.resolve(head)
    except Exception:  # not a name in scope: already a full path (or a heading's anchor)
        return match[0]
    return f"[{title}][{head}{dot}{rest}]"


def _summary(obj: griffe.Object) -> str:
    """The docstring's first sentence, on one line, fit for a table cell (its cross-references with full paths)."""
    if not obj.docstring:
        return ""
    paragraph = obj.docstring.value.strip().split("\n\n")[0].replace("\n", " ")
    sentence, dot, _ = paragraph.partition(". ")
    sentence = CROSSREF.sub(lambda match: _full_path(obj, match), sentence + dot)
    return sentence.strip().replace("|", "\\|")


def _own_members(package: griffe.Module) -> list[str]:
    """Public, documented objects defined in the package's ``__init__`` itself (re-exports have their own page)."""
    return [
        name
        for name, member in package.members.items()
        if not member.is_alias and not member.is_module and not name.startswith("_") and member.has_docstring
    ]


def _link(name: str, alias: griffe.Alias) -> str:
    """A link to the object an import names (through any chain of re-exports), where the reference shows it."""
    try:
        target = alias.final_target
    except (griffe.AliasResolutionError, griffe.CyclicAliasError):
        return f"`{name}`"
    public = not any(part.startswith("_") for part in target.path.split("."))
    return f"[`{name}`][{target.path}]" if public and target.has_docstring else f"`{name}`"


def _page(module: griffe.Module) -> str:
    options = ["      show_root_heading: false", "      show_submodules: false"]
    lines = [f"# `{module.path}`", ""]
    if module.is_init_module:
        own = _own_members(module)
        options.append(f"      members: [{', '.join(own)}]" if own else "      members: false")
    lines += [f"::: {module.path}", "    options:", *options, ""]
    if module.is_init_module and (children := _documented_modules(module)):
        lines += ["## Modules", "", "| module | what it holds |", "| --- | --- |"]
        lines += [f"| [`{child.name}`][{child.path}] | {_summary(child)} |" for child in children]
        exported = sorted(name for name, member in module.members.items() if member.is_alias and member.is_exported)
        if exported:
            links = ", ".join(_link(name, module.members[name]) for name in exported)
            lines += ["", f"Re-exported here (each documented on its module's page): {links}."]
    return "\n".join(lines) + "\n"


def _nav(module: griffe.Module) -> list:
    """The navigation of ``module``'s pages: the package page first (the section's index), then its children."""
    entries: list = [_page_uri(module)]
    for child in _documented_modules(module):
        entries.append({child.path: _nav(child)} if child.is_init_module else {child.name: _page_uri(child)})
    return entries


def _walk(module: griffe.Module):
    yield module
    for child in _documented_modules(module):
        yield from _walk(child)


def on_config(config):
    """Generate the pages and put them under the ``API reference`` entry of the navigation."""
    package = _load(config)
    _pages.clear()
    _pages.update({_page_uri(module): _page(module) for module in _walk(package)})
    entry = _section(config.nav or [])
    if entry is None:
        raise ValueError(f"mkdocs.yml's nav has no {SECTION!r} entry for the generated reference pages")
    entry[SECTION] = [INDEX, {PACKAGE: _nav(package)}]
    return config


def _section(nav: list) -> dict | None:
    """The navigation entry named [`SECTION`][], at the top or inside a group (``Reference``)."""
    for entry in nav:
        if isinstance(entry, dict):
            if SECTION in entry:
                return entry
            for value in entry.values():
                found = _section(value) if isinstance(value, list) else None
                if found is not None:
                    return found
    return None


def on_files(files: Files, config) -> Files:
    for uri, content in _pages.items():
        files.append(File.generated(config, uri, content=content))
    return files
