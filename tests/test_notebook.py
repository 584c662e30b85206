"""notebooks/distill_without_kedro.ipynb runs: every cell, on a tiny model and tiny data, so the library calls
it shows stay true."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "distill_without_kedro.ipynb"
SRC = Path(__file__).resolve().parents[1] / "src"


def tiny_settings(glue_dir: Path, teacher_dir: Path) -> str:
    return (
        f"TASK = 'rte'\nGLUE_DIR = {str(glue_dir)!r}\nTEACHER = {str(teacher_dir)!r}\n"
        "TRAIN_ROWS = 32\nMAX_LENGTH = 32\nEPOCHS = 1\n"
    )


def test_the_notebook_has_one_settings_cell_that_names_every_setting_it_uses():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    settings = [cell for cell in notebook.cells if "parameters" in cell.metadata.get("tags", [])]
    assert len(settings) == 1, "tag exactly one code cell 'parameters' (the test replaces it)"
    names = {line.split("=", 1)[0].strip() for line in settings[0].source.splitlines() if "=" in line}
    assert names == {"TASK", "GLUE_DIR", "TEACHER", "TRAIN_ROWS", "MAX_LENGTH", "EPOCHS"}


@pytest.mark.slow  # every cell, ~17 s
def test_every_cell_of_the_notebook_runs_on_tiny_data(tmp_path, monkeypatch, tiny_glue_dir, tiny_teacher_dir):
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    settings = next(cell for cell in notebook.cells if "parameters" in cell.metadata.get("tags", []))
    settings.source = tiny_settings(tiny_glue_dir, tiny_teacher_dir)
    # the kernel imports this checkout's package, whatever the venv's editable install points at
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    client = nbclient.NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # raises CellExecutionError naming the cell that failed
    outputs = {
        index: "".join(str(output.get("data", {}).get("text/plain", "")) for output in cell.get("outputs", []))
        for index, cell in enumerate(notebook.cells)
        if cell.cell_type == "code"
    }
    fit_cell = next(index for index, cell in enumerate(notebook.cells) if re.search(r"fit\(\s*objective", cell.source))
    assert "accuracy" in outputs[fit_cell], "the fit cell shows the student's dev metrics"
    assert not any(
        output.get("output_type") == "error" for cell in notebook.cells for output in cell.get("outputs", [])
    )
