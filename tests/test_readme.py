"""README.md stays a front page: short, its links resolve, and its layout tree names every folder of the package
(down to the core's and the experiment's sub-folders; docs/architecture.md has the full tree)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PACKAGE = ROOT / "src" / "bert_kd"


def layout_block(text: str) -> str:
    return text.split("## Layout", 1)[1].split("```", 2)[1]


def test_the_readme_is_at_most_200_lines():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 200


def test_every_relative_link_of_the_readme_resolves():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text(encoding="utf-8"))
    missing = [link for link in links if "://" not in link and not (ROOT / link).exists()]
    assert links and not missing, missing


def test_the_layout_tree_names_every_folder_of_the_package():
    block = layout_block(README.read_text(encoding="utf-8"))
    named = {line.split()[0].rstrip("/") for line in block.splitlines() if line.strip()}
    packages = [path for path in PACKAGE.iterdir() if (path / "__init__.py").exists()]
    expected = {path.name for path in packages}
    expected |= {
        child.name
        for path in packages
        if path.name != "pipelines"
        for child in path.iterdir()
        if (child / "__init__.py").exists()
    }
    assert expected <= named, f"add to README's layout, with its role: {sorted(expected - named)}"


def test_the_layout_check_reads_a_tree():
    assert layout_block("## Layout\n\n```\nsrc/  x\n  core/  y\n```\n") == "\nsrc/  x\n  core/  y\n"


def test_the_first_screen_names_no_commit_and_no_date():
    """Before "## Run it" the README says what the project does and what its main job gives on one machine; the
    commits, dates and other machines of its measurements are in docs/benchmarks-main-job.md."""
    first = README.read_text(encoding="utf-8").split("## Run it")[0]
    hashes = re.findall(r"(?<![\w/.-])[0-9a-f]{7,40}(?![\w-])", first)
    dates = re.findall(
        r"\b20\d\d-\d\d-\d\d\b|\b\d{1,2} (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\w* 20\d\d", first
    )
    assert not [h for h in hashes if re.search(r"[a-f]", h)] and not dates, (hashes, dates)


def test_each_changelog_entry_is_at_most_five_lines():
    """A changelog entry says what changed for a user; the detail lives on the page it links to."""
    long = []
    lines = (ROOT / "docs" / "changelog.md").read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines):
        if line.startswith("- "):
            size = 1 + next(
                (k for k, rest in enumerate(lines[number + 1 :]) if not rest.startswith("  ")), len(lines) - number - 1
            )
            if size > 5:
                long.append(f"docs/changelog.md:{number + 1} ({size} lines)")
    assert not long, f"changelog entries over 5 lines (move the detail to the page it links to): {long}"


def test_the_pipelines_table_gives_every_registered_pipeline_a_row_and_one_command(monkeypatch):
    """Each pipeline of the registry is a row of the README's table (``distill_<row>`` stands for every recipe
    row), and each row gives one command that runs that pipeline."""
    from kedro.framework.startup import bootstrap_project

    monkeypatch.chdir(ROOT)
    bootstrap_project(ROOT)
    from bert_kd.pipeline_registry import register_pipelines

    table = README.read_text(encoding="utf-8").split("## Pipelines\n", 1)[1].split("\n## ", 1)[0]
    patterns, problems = [], []
    for row in (line for line in table.splitlines() if line.startswith("| `")):
        cells = re.split(r"(?<!\\)\|", row)[1:-1]
        names = re.findall(r"`([^`]+)`", cells[0])
        commands = re.findall(r"`(kedro [^`]+)`", cells[-1])
        if len(commands) != 1:
            problems.append(f"{cells[0].strip()}: {len(commands)} commands")
        for name in names:
            pattern = re.escape(name).replace(re.escape("<row>"), "[a-z0-9_]+")
            patterns.append(pattern)
            if not any(re.search(rf"--pipelines?[= ]{pattern}\b", c) for c in commands):
                problems.append(f"{name}: its command runs another pipeline")
    missing = [n for n in register_pipelines() if n != "__default__" and not any(re.fullmatch(p, n) for p in patterns)]
    assert not missing and not problems, (missing, problems)
    assert "`__default__`" in table
