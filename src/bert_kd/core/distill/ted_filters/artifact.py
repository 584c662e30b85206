"""The TED Stage I artifact: teacher filters, optional student filters, optional fine-tuned
student model and the Stage I report, stored together in one directory (written atomically)."""

from __future__ import annotations

import json
from pathlib import Path

from bert_kd.core.distill.ted_filters.filters import TaskFilters
from bert_kd.core.files import write_atomically
from bert_kd.core.models import load_bundle, save_bundle

REPORT_FILE = "ted_stage1.json"


def save_ted_filters(filters: dict, path: Path) -> Path:
    """Write Stage I results atomically (``teacher/``, ``student/``, ``student_model/``, ``ted_stage1.json``)."""
    path = Path(path)

    def write(directory: Path) -> None:
        filters["teacher"].save(directory / "teacher")
        if filters.get("student") is not None:
            filters["student"].save(directory / "student")
        if filters.get("student_model") is not None:
            save_bundle(filters["student_model"], directory / "student_model")
        (directory / REPORT_FILE).write_text(json.dumps(filters.get("report", {}), indent=2, default=str))

    return write_atomically(path, write)


def load_ted_filters(path: Path) -> dict:
    """Read what [`save_ted_filters`][] wrote."""
    path = Path(path)
    if not (path / "teacher").exists():
        raise FileNotFoundError(f"{path} holds no TED teacher filters (run the train_ted_filters pipeline)")
    return {
        "teacher": TaskFilters.load(path / "teacher"),
        "student": TaskFilters.load(path / "student") if (path / "student").exists() else None,
        "student_model": load_bundle(path / "student_model") if (path / "student_model").exists() else None,
        "report": json.loads((path / REPORT_FILE).read_text()) if (path / REPORT_FILE).exists() else {},
    }
