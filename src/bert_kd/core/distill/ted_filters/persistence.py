"""On-disk format of TED filters: a directory with ``ted_filters.json`` (config, provenance, info)
and ``filters.safetensors`` (weights), always written atomically ([`bert_kd.core.files.write_atomically`][])."""

from __future__ import annotations

import json
from pathlib import Path

from safetensors.torch import load_file, save_file
from torch import Tensor

from bert_kd.core.files import write_atomically

#: File names inside a saved filters directory.
CONFIG_FILE = "ted_filters.json"
WEIGHTS_FILE = "filters.safetensors"
FORMAT_VERSION = 1


def write_filters_dir(path: str | Path, config: dict, state: dict[str, Tensor]) -> Path:
    """Write ``config`` (JSON, with the format version) and the ``state`` dict to ``path``."""
    path = Path(path)
    payload = {"format": FORMAT_VERSION, **config}

    def write(directory: Path) -> None:
        save_file(state, str(directory / WEIGHTS_FILE))
        (directory / CONFIG_FILE).write_text(json.dumps(payload, indent=2, default=str))

    return write_atomically(path, write)


def read_filters_dir(path: str | Path) -> tuple[dict, dict[str, Tensor]]:
    """The config (without the format version) and state dict written by [`write_filters_dir`][]."""
    path = Path(path)
    if not (path / CONFIG_FILE).exists() or not (path / WEIGHTS_FILE).exists():
        raise FileNotFoundError(f"{path} is not a saved TED filters directory (needs {CONFIG_FILE} and {WEIGHTS_FILE})")
    payload = json.loads((path / CONFIG_FILE).read_text())
    version = payload.pop("format", None)
    if version != FORMAT_VERSION:
        raise ValueError(f"{path}: unsupported TED filters format {version!r} (expected {FORMAT_VERSION})")
    return payload, load_file(str(path / WEIGHTS_FILE))
