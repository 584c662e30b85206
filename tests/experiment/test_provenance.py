"""bert_kd.experiment.provenance: the commit and dirty flag of the project's own git checkout, else unknown."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bert_kd.experiment.provenance import (
    NOT_A_CHECKOUT,
    environment_info,
    git_commit_label,
    git_provenance,
    project_root,
)

KEDRO_PYPROJECT = '[tool.kedro]\npackage_name = "bert_kd"\nproject_name = "bert-kd"\n'


def _git(folder: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def _checkout(folder: Path) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    _git(folder, "init", "-q")
    (folder / "README.md").write_text("one\n")
    _git(folder, "add", "README.md")
    _git(folder, "commit", "-qm", "first")
    return _git(folder, "rev-parse", "HEAD")


@pytest.fixture
def outer_repository(tmp_path) -> tuple[Path, str]:
    """A work folder that is itself a git repository (the enclosing one)."""
    return tmp_path / "work", _checkout(tmp_path / "work")


def test_a_project_copy_inside_another_repository_has_unknown_provenance(outer_repository, monkeypatch):
    outer, outer_commit = outer_repository
    project = outer / "unpacked" / "bert-kd"
    (project / "conf").mkdir(parents=True)
    (project / "pyproject.toml").write_text(KEDRO_PYPROJECT)
    monkeypatch.chdir(project / "conf")  # anywhere inside the project
    assert project_root() == project.resolve()
    assert git_provenance() == {"commit": NOT_A_CHECKOUT, "dirty": "unknown"}
    assert git_commit_label() == "unknown (not a git checkout)"
    assert environment_info()["env.git_commit"] == NOT_A_CHECKOUT
    assert outer_commit not in str(environment_info())


def test_a_project_that_is_its_own_checkout_names_its_commit_and_dirt(tmp_path, monkeypatch):
    project = tmp_path / "bert-kd"
    commit = _checkout(project)
    (project / "pyproject.toml").write_text(KEDRO_PYPROJECT)
    _git(project, "add", "pyproject.toml")
    _git(project, "commit", "-qm", "kedro")
    commit = _git(project, "rev-parse", "HEAD")
    monkeypatch.chdir(project)
    assert git_provenance() == {"commit": commit, "dirty": "false"}
    (project / "new_output.json").write_text("{}")  # untracked outputs do not count
    assert git_provenance()["dirty"] == "false"
    (project / "README.md").write_text("two\n")  # a tracked file changed
    assert git_provenance() == {"commit": commit, "dirty": "true"}
    assert git_commit_label() == f"{commit} (dirty)"
    assert environment_info()["env.git_dirty"] == "true"
