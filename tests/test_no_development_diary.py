"""The project speaks of the project: no tracked text names a work period (the word "session" followed by a
number) or cites an issue number a reader cannot open (the word "issue" followed by a number), and no file
cites "(#N)". Say what a thing is, or why it is so; give a date where history matters (docs/changelog.md).
Kedro's own session objects are fine: no number follows them."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DIARY = re.compile(r"[Ss]essions? [0-9]|[Ii]ssues? [0-9]|\(#[0-9]+\)")
#: Third-party files committed as they are published (scripts/vendor_mathjax.sh): not the project's words.
VENDORED = ("docs/javascripts/mathjax/",)


def tracked_text_files() -> list[Path]:
    try:
        listing = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: no list of tracked files")
    files = []
    for name in filter(None, listing.decode("utf-8").split("\0")):
        path = ROOT / name
        if name.startswith(VENDORED):
            continue
        if path.is_file() and b"\0" not in path.read_bytes()[:8192]:  # text, not binary (PNGs, databases)
            files.append(path)
    return files


def diary_lines(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8", errors="replace")
    return [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}"
        for number, line in enumerate(text.splitlines(), start=1)
        if DIARY.search(line)
    ]


def test_the_pattern_finds_what_it_must_and_spares_kedro_sessions():
    for phrase in (
        "until session " + "15",
        "Sessions " + "17–22",
        "since issue " + "19",
        "Issue " + "22: nodes",
        "fixed (#" + "12)",
    ):
        assert DIARY.search(phrase), phrase
    for phrase in (
        "with KedroSession.create() as session:",
        "a Kedro session",
        "sessions run in parallel",
        "an issue with the cache",
        "optuna/optuna#6844",
    ):
        assert not DIARY.search(phrase), phrase


def test_no_tracked_text_file_narrates_development():
    found = [line for path in tracked_text_files() for line in diary_lines(path)]
    assert not found, (
        "say what the thing is or why, or give a date, instead of a work period or an issue "
        "number:\n" + "\n".join(found)
    )
