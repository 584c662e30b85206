"""Module size: a module in ``src/`` holds at most 500 lines, or ``docs/decisions.md`` names it (its path under
``src/bert_kd/``, in backticks, in the "Module size" section) with the reason it stays whole. A name there whose
module is back under the limit fails too, so the list only shrinks."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "bert_kd"
DECISIONS = ROOT / "docs" / "decisions.md"
LIMIT = 500
SECTION = "## Module size"


def long_modules(package: Path = PACKAGE, limit: int = LIMIT) -> dict[str, int]:
    """``path under the package`` → its line count, for every module over ``limit`` lines."""
    counts = {
        path.relative_to(package).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted(package.rglob("*.py"))
    }
    return {name: lines for name, lines in counts.items() if lines > limit}


def named_modules(text: str) -> set[str]:
    """The module paths (``config/schema.py``) the "Module size" section names at the start of a bullet."""
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    section = text[start : end if end != -1 else len(text)]
    return set(re.findall(r"^- `([\w/]+\.py)`", section, flags=re.MULTILINE))


def problems(long: dict[str, int], named: set[str], exists) -> list[str]:
    """One line per module over the limit without a reason, and per reason whose module is no longer long."""
    out = [
        f"src/bert_kd/{name} has {lines} lines (> {LIMIT}): split it, or say in docs/decisions.md ({SECTION}) "
        f"why it stays whole"
        for name, lines in long.items()
        if name not in named
    ]
    out += [
        f"docs/decisions.md ({SECTION}) names {name}, which "
        + ("no longer exists" if not exists(name) else f"has {LIMIT} lines or fewer")
        + ": take it off the list"
        for name in sorted(named)
        if name not in long
    ]
    return out


def test_every_module_over_the_limit_has_a_reason_in_the_decisions():
    named = named_modules(DECISIONS.read_text(encoding="utf-8"))
    assert problems(long_modules(), named, lambda name: (PACKAGE / name).is_file()) == []


def test_a_long_module_without_a_reason_and_a_stale_reason_both_fail(tmp_path):
    package = tmp_path / "bert_kd"
    (package / "core").mkdir(parents=True)
    (package / "core" / "long.py").write_text("x = 1\n" * (LIMIT + 1))
    (package / "core" / "short.py").write_text("x = 1\n" * LIMIT)
    long = long_modules(package)
    assert long == {"core/long.py": LIMIT + 1}
    text = (
        f"# Decisions\n\n{SECTION}\n\n- `core/short.py` (≈ 500): a reason.\n\n## Next\n\n- `core/long.py` elsewhere\n"
    )
    found = problems(long, named_modules(text), lambda name: (package / name).is_file())
    assert len(found) == 2
    assert found[0].startswith("src/bert_kd/core/long.py has 501 lines")
    assert "names core/short.py, which has 500 lines or fewer" in found[1]
    reasons = f"{SECTION}\n\n- `core/long.py` (≈ 500): a reason.\n"
    assert problems(long, named_modules(reasons), lambda name: (package / name).is_file()) == []
