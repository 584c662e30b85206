"""Kedro datasets for what kedro-datasets cannot store: HF model directories and folders of files.

The project's own catalog keeps models in memory (the content-keyed store under
``data/06_models/store`` is their one on-disk copy); these classes are for users who want a
versioned copy elsewhere."""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

from kedro.io import AbstractVersionedDataset
from kedro.io.core import Version

from bert_kd.core.files import MANIFEST, write_atomically
from bert_kd.core.models import ModelBundle, directory_size_bytes, load_bundle, save_bundle


class _VersionedFolder(AbstractVersionedDataset):
    """A versioned folder; it exists when `marker` (a file or folder inside it) does."""

    marker = "."

    def __init__(self, filepath: str, version: Version | None = None, metadata: dict | None = None):
        super().__init__(PurePosixPath(filepath), version)
        self.metadata = metadata

    def _folder(self, load: bool = True) -> Path:
        return Path(str(self._get_load_path() if load else self._get_save_path()))

    def _exists(self) -> bool:
        try:
            return (self._folder() / self.marker).exists()
        except Exception:
            return False

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath), "version": self._version}


class HFModelDataset(_VersionedFolder):
    """A [`ModelBundle`][] as a versioned HF directory
    (``save_pretrained``, safetensors, tokenizer, provenance in ``bert_kd.json``).

    ```yaml
    teacher_model:
      type: bert_kd.kedro_project.datasets.HFModelDataset
      filepath: data/06_models/teacher
      versioned: true
    ```
    """

    marker = "config.json"

    def load(self) -> ModelBundle:
        return load_bundle(self._folder())

    def save(self, data: ModelBundle) -> None:
        if not isinstance(data, ModelBundle):
            raise TypeError(f"HFModelDataset saves ModelBundle objects, got {type(data).__name__}")
        save_bundle(data, self._folder(load=False))

    def size_bytes(self) -> int:
        return directory_size_bytes(str(self._get_load_path()))


class FilesDataset(_VersionedFolder):
    """A versioned folder of named binary files (``{"student.onnx": bytes, ...}``), written
    atomically ([`bert_kd.core.files.write_atomically`][]; its ``manifest.json`` is not one of them)."""

    def load(self) -> dict[str, bytes]:
        return {f.name: f.read_bytes() for f in sorted(self._folder().iterdir()) if f.is_file() and f.name != MANIFEST}

    def save(self, data: dict[str, bytes]) -> None:
        if not isinstance(data, dict) or not all(isinstance(v, bytes) for v in data.values()):
            raise TypeError("FilesDataset saves a dict of file name -> bytes")

        def write(directory: Path) -> None:
            for name, content in data.items():
                (directory / Path(name).name).write_bytes(content)

        write_atomically(self._folder(load=False), write)


def rank_zero_catalog_class():
    """The catalog class for processes other than rank 0 of a torchrun / ``accelerate launch``
    job: what their nodes output stays in memory (read back by later nodes of the same
    process), so only rank 0 writes files and versions."""
    from kedro.io import DataCatalog

    class RankLocalCatalog(DataCatalog):
        def save(self, ds_name: str, data: Any) -> None:
            self.__dict__.setdefault("_rank_local_outputs", {})[ds_name] = data

        def load(self, ds_name: str, version: str | None = None) -> Any:
            local = self.__dict__.get("_rank_local_outputs", {})
            if ds_name in local:
                return local[ds_name]
            return super().load(ds_name, version)

    return RankLocalCatalog
