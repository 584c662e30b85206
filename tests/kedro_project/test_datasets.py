"""The project's Kedro datasets (bert_kd.kedro_project.datasets): versioned folders written atomically."""

from __future__ import annotations

import pytest
from kedro.io import DatasetError
from kedro.io.core import Version

from bert_kd.kedro_project.datasets import FilesDataset


def test_files_dataset_round_trip_is_atomic_and_versioned(tmp_path):
    dataset = FilesDataset(str(tmp_path / "exported"), version=Version(None, "2026-01-01T00.00.00.000Z"))
    assert not dataset.exists()
    dataset.save({"student.onnx": b"\x00\x01", "nested/name.txt": b"x"})
    assert dataset.exists()
    assert dataset.load() == {"student.onnx": b"\x00\x01", "name.txt": b"x"}  # the manifest is not a payload file
    assert [p.name for p in (tmp_path / "exported").iterdir()] == ["2026-01-01T00.00.00.000Z"]


def test_files_dataset_refuses_anything_but_bytes(tmp_path):
    with pytest.raises(DatasetError, match="dict of file name -> bytes"):
        FilesDataset(str(tmp_path / "x")).save({"a": "text"})
    assert not (tmp_path / "x").exists()
