"""The Stage I artifact directory (bert_kd.core.distill.ted_filters.artifact)."""

from __future__ import annotations

import pytest

from bert_kd.core.distill.ted_filters import TaskFilters, copy_filters_for_student, load_ted_filters, save_ted_filters
from tests.core.distill.ted_filters.helpers import identical, snapshot, tiny_bert


def test_round_trip_without_student_model(tmp_path):
    teacher_filters = TaskFilters.build(tiny_bert(), [1, 4], task="rte")
    stage1 = {
        "teacher": teacher_filters,
        "student": copy_filters_for_student(teacher_filters),
        "student_model": None,
        "report": {"mapping": [1, 4]},
    }
    save_ted_filters(stage1, tmp_path / "stage1")
    loaded = load_ted_filters(tmp_path / "stage1")
    assert loaded["report"] == {"mapping": [1, 4]} and loaded["student_model"] is None
    assert identical(snapshot(teacher_filters), loaded["teacher"])
    assert loaded["student"].copied_from == "teacher" and loaded["student"].layers == [1, 2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stage1"]


def test_failed_write_leaves_no_directory(tmp_path):
    class Broken:
        def save(self, path):
            raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        save_ted_filters({"teacher": Broken()}, tmp_path / "stage1")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(FileNotFoundError, match="no TED teacher filters"):
        load_ted_filters(tmp_path / "stage1")
