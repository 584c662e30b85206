"""GLUE test-set predictions in the GLUE server's format (the ``predict_glue`` pipeline).

The server (gluebenchmark.com) takes one zip of TSV files named after the tasks: ``CoLA.tsv``,
``SST-2.tsv``, ``MRPC.tsv``, ``STS-B.tsv``, ``QQP.tsv``, ``MNLI-m.tsv``, ``MNLI-mm.tsv``,
``QNLI.tsv``, ``RTE.tsv``, ``WNLI.tsv`` and ``AX.tsv`` (the diagnostic set, predicted by the
MNLI model), each with the columns ``index`` (the test file's own index) and ``prediction``:
the label as the task's files spell it (RTE/QNLI ``entailment``/``not_entailment``, MNLI and AX
``entailment``/``neutral``/``contradiction``, the others ``0``/``1``), a float in [0, 5] for STS-B.
Test files have an index column (``id`` for QQP) and no label.
"""

from __future__ import annotations

import csv
import io
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from bert_kd.data.glue import STSB_RANGE, GlueFormatError, _decoded_text, get_task, read_glue_tsv, tsv_label_names
from bert_kd.jobs import write_file_atomically

#: The zip the server takes.
ZIP_NAME = "submission.zip"
#: The diagnostic set in GLUE's download layout (predicted with the MNLI model).
AX_FILE = Path("diagnostic") / "diagnostic.tsv"


@dataclass(frozen=True)
class SubmissionFile:
    """One server file: its name, the test split it predicts and where that split lives under the GLUE root."""

    name: str
    split: str
    source: Path


def submission_files(task: str, glue_dir: str | Path, ax_file: str | Path | None = None) -> list[SubmissionFile]:
    """The server files of ``task``: one per test split; MNLI adds ``AX.tsv`` (``ax_file``, default
    ``<glue_dir>/diagnostic/diagnostic.tsv``)."""
    spec = get_task(task)
    root = Path(glue_dir)
    if spec.name == "mnli":
        files = [SubmissionFile("MNLI-m.tsv", "test_matched", root / spec.dir_name / spec.test_splits["test_matched"]),
                 SubmissionFile("MNLI-mm.tsv", "test_mismatched", root / spec.dir_name / spec.test_splits["test_mismatched"])]
        return files + [SubmissionFile("AX.tsv", "test_ax", Path(ax_file) if ax_file else root / AX_FILE)]
    return [SubmissionFile(f"{spec.dir_name}.tsv", "test", root / spec.dir_name / spec.test_splits["test"])]


def read_test_split(path: str | Path, task: str) -> pd.DataFrame:
    """A GLUE test file as bert-kd's split frame plus ``index``: the file's own ``index`` (QQP:
    ``id``) column, which the server matches predictions on."""
    frame = read_glue_tsv(path, task, "test")
    with io.StringIO(_decoded_text(Path(path)), newline="") as handle:
        rows = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(rows)
        column = next((c for c in ("index", "id") if c in header), None)
        if column is None:
            raise GlueFormatError(path, f"a test file needs an 'index' (QQP: 'id') column; found {header}", 1,
                                  fix="give GLUE's test.tsv (dev/train files have labels and, for some tasks, no index)")
        position = header.index(column)
        frame["index"] = [row[position] for row in rows]
    return frame


def prediction_strings(task: str, outputs: np.ndarray) -> list[str]:
    """Model outputs (logits, or scores for STS-B) as the server's ``prediction`` column."""
    spec = get_task(task)
    outputs = np.asarray(outputs)
    if spec.is_regression:
        scores = np.clip(outputs.reshape(len(outputs), -1)[:, 0].astype(float), *STSB_RANGE)
        return [f"{s:.3f}" for s in scores]
    names = tsv_label_names(spec.name)
    return [names[i] for i in outputs.reshape(len(outputs), -1).argmax(axis=1)]


def submission_frame(index: Sequence, predictions: Sequence[str]) -> pd.DataFrame:
    if len(index) != len(predictions):
        raise ValueError(f"{len(predictions)} predictions for {len(index)} test examples")
    return pd.DataFrame({"index": list(index), "prediction": list(predictions)})


def write_submission_tsv(frame: pd.DataFrame, path: Path) -> Path:
    """``index<TAB>prediction`` lines under a header, written atomically."""
    text = frame.to_csv(sep="\t", index=False, lineterminator="\n")
    write_file_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return path


def write_zip(directory: Path, names: Sequence[str] | None = None) -> Path:
    """``<directory>/submission.zip`` with the server files present there (``names``: only those),
    at the zip's top level as the server expects."""
    every = [f.name for s in ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli")
             for f in submission_files(s, ".")]
    files = [directory / n for n in (names or every) if (directory / n).is_file()]

    def write(tmp: Path) -> None:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for path in files:
                archive.write(path, arcname=path.name)

    target = directory / ZIP_NAME
    write_file_atomically(target, write)
    return target
