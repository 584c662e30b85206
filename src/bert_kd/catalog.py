"""Kedro datasets for what kedro-datasets cannot store: HF model directories and tokenized data.

The project's own catalog keeps models in memory (the content-keyed store under
``data/06_models/store`` is their one on-disk copy); these classes are for users who want a
versioned copy elsewhere."""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

from kedro.io import AbstractVersionedDataset
from kedro.io.core import Version

from bert_kd.jobs import write_atomically
from bert_kd.distill.ted import load_ted_filters, save_ted_filters
from bert_kd.models import ModelBundle, directory_size_bytes, load_bundle, save_bundle


class HFModelDataset(AbstractVersionedDataset[ModelBundle, ModelBundle]):
    """A :class:`~bert_kd.models.ModelBundle` as a versioned HF directory
    (``save_pretrained``, safetensors, tokenizer, provenance in ``bert_kd.json``).

    ```yaml
    teacher_model:
      type: bert_kd.catalog.HFModelDataset
      filepath: data/06_models/teacher
      versioned: true
    ```
    """

    def __init__(self, filepath: str, version: Version | None = None, metadata: dict | None = None):
        super().__init__(PurePosixPath(filepath), version)
        self.metadata = metadata

    def load(self) -> ModelBundle:
        return load_bundle(Path(str(self._get_load_path())))

    def save(self, data: ModelBundle) -> None:
        if not isinstance(data, ModelBundle):
            raise TypeError(f"HFModelDataset saves ModelBundle objects, got {type(data).__name__}")
        save_bundle(data, Path(str(self._get_save_path())))

    def _exists(self) -> bool:
        try:
            return (Path(str(self._get_load_path())) / "config.json").exists()
        except Exception:
            return False

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath), "version": self._version}

    def size_bytes(self) -> int:
        return directory_size_bytes(str(self._get_load_path()))


class TokenizedDataset(AbstractVersionedDataset):
    """A tokenized ``datasets.DatasetDict`` stored with ``save_to_disk`` (Arrow), versioned."""

    def __init__(self, filepath: str, version: Version | None = None, metadata: dict | None = None):
        super().__init__(PurePosixPath(filepath), version)
        self.metadata = metadata

    def load(self):
        from datasets import load_from_disk

        return load_from_disk(str(self._get_load_path()))

    def save(self, data) -> None:
        write_atomically(Path(str(self._get_save_path())), lambda directory: data.save_to_disk(str(directory)))

    def _exists(self) -> bool:
        try:
            return Path(str(self._get_load_path())).exists()
        except Exception:
            return False

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath), "version": self._version}


class TEDFiltersDataset(AbstractVersionedDataset):
    """TED Stage I output as a versioned folder: ``teacher/`` filters, optional ``student/``
    filters and, for the ``train`` route, the fine-tuned ``student_model/`` they were trained on."""

    def __init__(self, filepath: str, version: Version | None = None, metadata: dict | None = None):
        super().__init__(PurePosixPath(filepath), version)
        self.metadata = metadata

    def load(self) -> dict:
        return load_ted_filters(Path(str(self._get_load_path())))

    def save(self, data: dict) -> None:
        save_ted_filters(data, Path(str(self._get_save_path())))

    def _exists(self) -> bool:
        try:
            return (Path(str(self._get_load_path())) / "teacher").exists()
        except Exception:
            return False

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath), "version": self._version}


class FilesDataset(AbstractVersionedDataset):
    """A versioned folder of named binary files (``{"student.onnx": bytes, ...}``), written to
    ``<folder>.partial`` first."""

    def __init__(self, filepath: str, version: Version | None = None, metadata: dict | None = None):
        super().__init__(PurePosixPath(filepath), version)
        self.metadata = metadata

    def load(self) -> dict[str, bytes]:
        path = Path(str(self._get_load_path()))
        return {f.name: f.read_bytes() for f in sorted(path.iterdir()) if f.is_file()}

    def save(self, data: dict[str, bytes]) -> None:
        import shutil

        if not isinstance(data, dict) or not all(isinstance(v, bytes) for v in data.values()):
            raise TypeError("FilesDataset saves a dict of file name -> bytes")
        path = Path(str(self._get_save_path()))
        tmp = path.with_name(path.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for name, content in data.items():
            (tmp / Path(name).name).write_bytes(content)
        tmp.rename(path)

    def _exists(self) -> bool:
        try:
            return Path(str(self._get_load_path())).is_dir()
        except Exception:
            return False

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath), "version": self._version}


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
