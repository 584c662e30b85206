"""Rewrite Sphinx roles in docstrings (:func:`x`, :class:`~a.b.C`, ...) as mkdocs-autorefs cross-references.

The API reference is rendered by mkdocstrings-python, which links Markdown references of the form
[`name`][bert_kd.module.name]; Sphinx roles are shown as raw text there. Each role is resolved with Griffe
the way Sphinx would (the enclosing class, the module, its parent packages, then a unique match in the
package) and written with the object's canonical path, so the link lands where the object is documented.
A target the reference does not render (outside bert_kd, private, or without a docstring) becomes plain
code. Only docstrings are rewritten; the run lists what it could not resolve and what it left alone.

    python scripts/sphinx_roles_to_crossrefs.py            # rewrite src/ in place
    python scripts/sphinx_roles_to_crossrefs.py --check    # exit 1 if any role is left in a docstring
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import sys
from pathlib import Path

import griffe

ROLE = re.compile(r":(?:py:)?(func|class|mod|meth|attr|data|exc|obj|const):`(~?)([^`<>]+?)(\(\))?`")
PACKAGE = "bert_kd"


def docstring_lines(source: str) -> set[int]:
    """Line numbers (1-based) of docstrings: string statements and the `#:` comments that document attributes."""
    lines = {n for n, line in enumerate(source.splitlines(), start=1) if line.lstrip().startswith("#:")}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            lines.update(range(node.lineno, node.end_lineno + 1))
    return lines


def enclosing_scopes(source: str, module_path: str) -> list[tuple[int, int, str]]:
    """(first line, last line, dotted path) of every class and function, for looking names up in scope."""
    scopes: list[tuple[int, int, str]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                path = f"{prefix}.{child.name}"
                scopes.append((child.lineno, child.end_lineno, path))
                visit(child, path)

    visit(ast.parse(source), module_path)
    return scopes


class Resolver:
    """Finds the Griffe object a role names, from the scope the role is written in."""

    def __init__(self, package: griffe.Module) -> None:
        self.package = package
        self.by_name: dict[str, list[griffe.Object]] = {}
        self._index(package)

    def _index(self, obj: griffe.Object) -> None:
        for member in obj.members.values():
            if member.is_alias:
                continue
            self.by_name.setdefault(member.name, []).append(member)
            if member.is_module or member.is_class:
                self._index(member)

    def get(self, path: str) -> griffe.Object | None:
        if path == PACKAGE:
            return self.package
        if not path.startswith(PACKAGE + "."):
            return None
        try:
            found = self.package[path[len(PACKAGE) + 1 :]]
        except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
            return None
        try:
            return found.final_target if found.is_alias else found
        except (griffe.AliasResolutionError, griffe.CyclicAliasError):
            return None

    def resolve(self, target: str, scopes: list[str]) -> griffe.Object | None:
        """The object `target` names when written inside the innermost-first `scopes` (dotted paths)."""
        if target.startswith("."):
            stripped = target.lstrip(".")
            for scope in scopes:
                if (found := self.get(f"{scope}.{stripped}")) is not None:
                    return found
            return None
        if (found := self.get(target)) is not None:
            return found
        for scope in scopes:
            if (found := self.get(f"{scope}.{target}")) is not None:
                return found
        head, _, rest = target.partition(".")
        candidates = [obj for obj in self.by_name.get(head, []) if obj.path.startswith(PACKAGE)]
        if len(candidates) > 1:  # the name nearest the scope, as a reader of that module would take it
            nearness = [len(os.path.commonprefix([obj.path.split("."), scopes[0].split(".")])) for obj in candidates]
            candidates = [obj for obj, near in zip(candidates, nearness) if near == max(nearness)]
        if len(candidates) == 1:
            return self.get(f"{candidates[0].path}.{rest}") if rest else candidates[0]
        return None


def rendered(obj: griffe.Object) -> bool:
    """Whether the API reference renders `obj` (public, documented, inside the package)."""
    node = obj
    while node is not None and node.path != PACKAGE:
        if node.name.startswith("_") and not (node.name.startswith("__") and node.name.endswith("__")):
            return False
        node = node.parent
    return obj.is_module or obj.has_docstring


def rewrite_file(path: Path, src_root: Path, resolver: Resolver, report: list[str]) -> str:
    source = path.read_text()
    module_path = ".".join(path.relative_to(src_root).with_suffix("").parts)
    if module_path.endswith(".__init__"):
        module_path = module_path[: -len(".__init__")]
    package_path = module_path if path.name == "__init__.py" else module_path.rpartition(".")[0]
    in_docstring = docstring_lines(source)
    scopes = enclosing_scopes(source, module_path)
    lines = source.splitlines(keepends=True)

    for index, line in enumerate(lines):
        lineno = index + 1
        if not ROLE.search(line):
            continue
        if lineno not in in_docstring:
            report.append(f"left (not a docstring) {path}:{lineno}: {line.strip()}")
            continue
        inner = sorted((scope for scope in scopes if scope[0] <= lineno <= scope[1]), key=lambda s: s[0], reverse=True)
        chain = [scope[2] for scope in inner] + [module_path]
        parent = package_path
        while parent:
            if parent != module_path:
                chain.append(parent)
            parent = parent.rpartition(".")[0]

        def replace(match: re.Match[str], chain: list[str] = chain, lineno: int = lineno) -> str:
            _role, tilde, target, parens = match.groups()
            display = target.rpartition(".")[2] if tilde else target.lstrip(".")
            display += parens or ""
            obj = resolver.resolve(target, chain)
            if obj is None:
                report.append(f"plain (unresolved) {path}:{lineno}: {match.group(0)}")
                return f"`{display}`"
            if not rendered(obj):
                report.append(f"plain (not rendered) {path}:{lineno}: {match.group(0)} -> {obj.path}")
                return f"`{display}`"
            return f"[`{display}`][{obj.path}]"

        lines[index] = ROLE.sub(replace, line)
    return "".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=Path("src"))
    parser.add_argument("--check", action="store_true", help="only report docstrings that still hold roles")
    args = parser.parse_args()
    files = sorted((args.src / PACKAGE).rglob("*.py"))
    if args.check:
        left = [
            f"{path}:{n}"
            for path in files
            for n in docstring_lines(path.read_text())
            if ROLE.search(path.read_text().splitlines()[n - 1])
        ]
        print("\n".join(left) or "no Sphinx roles in docstrings")
        return 1 if left else 0
    resolver = Resolver(
        griffe.load(
            PACKAGE,
            search_paths=[str(args.src)],
            extensions=griffe.load_extensions("griffe_sphinx"),
            resolve_aliases=False,
        )
    )
    report: list[str] = []
    changed = 0
    for path in files:
        new = rewrite_file(path, args.src, resolver, report)
        if new != path.read_text():
            path.write_text(new)
            changed += 1
    print("\n".join(report))
    print(f"{changed} files rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
