"""Kedro datasets for what kedro-datasets cannot store: HF model directories and tokenized data."""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

from kedro.io import AbstractVersionedDataset
from kedro.io.core import Version

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
        import shutil

        path = Path(str(self._get_save_path()))
        tmp = path.with_name(path.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        data.save_to_disk(str(tmp))
        tmp.rename(path)

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
