"""Provenance of a run: the machine, library versions, the project folder and its git commit."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path


def environment_info() -> dict[str, str]:
    """Device, GPU name, library versions and git commit of this run."""
    import torch
    import transformers

    info = {
        "env.device": "cuda" if torch.cuda.is_available() else "cpu",
        "env.gpu_name": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
        "env.torch": torch.__version__,
        "env.transformers": transformers.__version__,
        "env.python": platform.python_version(),
        "env.cpu_threads": str(torch.get_num_threads()),
    }
    provenance = git_provenance()
    info["env.git_commit"] = provenance["commit"]
    info["env.git_dirty"] = provenance["dirty"]
    return info


#: What provenance says when the project folder is not itself a git checkout.
NOT_A_CHECKOUT = "unknown (not a git checkout)"


def project_root(start: str | os.PathLike[str] | None = None) -> Path:
    """The Kedro project folder of this run: the nearest folder from ``start`` (the working
    directory) upwards whose ``pyproject.toml`` has a ``[tool.kedro]`` table; else ``start``."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        manifest = folder / "pyproject.toml"
        try:
            if manifest.is_file() and "[tool.kedro]" in manifest.read_text(encoding="utf-8", errors="replace"):
                return folder
        except OSError:
            continue
    return here


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_provenance(root: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """``{"commit": …, "dirty": "true" | "false" | "unknown"}`` of the project's own checkout.

    Read only when ``root`` (default: [`project_root`][]) is the top level of a git work
    tree: a copy of the project unpacked inside another repository gets
    ``unknown (not a git checkout)``, never the enclosing repository's commit. ``dirty`` means
    tracked files differ from the commit (untracked outputs, e.g. new result JSONs, do not count).
    """
    root = Path(root).resolve() if root is not None else project_root()
    toplevel = _git(root, "rev-parse", "--show-toplevel")
    commit = _git(root, "rev-parse", "HEAD") if toplevel and Path(toplevel).resolve() == root else None
    if not commit:
        return {"commit": NOT_A_CHECKOUT, "dirty": "unknown"}
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": "unknown" if status is None else str(bool(status)).lower()}


def git_commit_label(root: str | os.PathLike[str] | None = None) -> str:
    """The commit as provenance lines print it: ``<sha>``, ``<sha> (dirty)`` or ``unknown (not a git checkout)``."""
    provenance = git_provenance(root)
    return f"{provenance['commit']} (dirty)" if provenance["dirty"] == "true" else provenance["commit"]
