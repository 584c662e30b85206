"""On-disk format of TED filters: a directory with ``ted_filters.json`` (config, provenance, info)
and ``filters.safetensors`` (weights), always written atomically (temp directory, then rename)."""

from __future__ import annotations

import json
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from safetensors.torch import load_file, save_file
from torch import Tensor

#: File names inside a saved filters directory.
CONFIG_FILE = "ted_filters.json"
WEIGHTS_FILE = "filters.safetensors"
FORMAT_VERSION = 1


@contextmanager
def atomic_directory(path: str | Path) -> Iterator[Path]:
    """Yield an empty ``<path>.partial`` directory to fill; on success it replaces ``path``,
    on error it is removed (so ``path`` is never half-written)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)


def write_filters_dir(path: str | Path, config: dict, state: dict[str, Tensor]) -> Path:
    """Write ``config`` (JSON, with the format version) and the ``state`` dict to ``path``."""
    path = Path(path)
    with atomic_directory(path) as tmp:
        save_file(state, str(tmp / WEIGHTS_FILE))
        payload = {"format": FORMAT_VERSION, **config}
        (tmp / CONFIG_FILE).write_text(json.dumps(payload, indent=2, default=str))
    return path


def read_filters_dir(path: str | Path) -> tuple[dict, dict[str, Tensor]]:
    """The config (without the format version) and state dict written by :func:`write_filters_dir`."""
    path = Path(path)
    if not (path / CONFIG_FILE).exists() or not (path / WEIGHTS_FILE).exists():
        raise FileNotFoundError(f"{path} is not a saved TED filters directory (needs {CONFIG_FILE} and {WEIGHTS_FILE})")
    payload = json.loads((path / CONFIG_FILE).read_text())
    version = payload.pop("format", None)
    if version != FORMAT_VERSION:
        raise ValueError(f"{path}: unsupported TED filters format {version!r} (expected {FORMAT_VERSION})")
    return payload, load_file(str(path / WEIGHTS_FILE))
