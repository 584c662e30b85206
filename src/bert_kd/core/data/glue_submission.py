"""GLUE test-set predictions in the GLUE server's format (the ``predict_glue`` pipeline).

The server (gluebenchmark.com) takes one zip of TSV files named after the tasks: ``CoLA.tsv``,
``SST-2.tsv``, ``MRPC.tsv``, ``STS-B.tsv``, ``QQP.tsv``, ``MNLI-m.tsv``, ``MNLI-mm.tsv``,
``QNLI.tsv``, ``RTE.tsv``, ``WNLI.tsv`` and ``AX.tsv`` (the diagnostic set, predicted by the
MNLI model), each with the columns ``index`` (the test file's own index) and ``prediction``:
the label as the task's files spell it (RTE/QNLI ``entailment``/``not_entailment``, MNLI and AX
``entailment``/``neutral``/``contradiction``, the others ``0``/``1``), a float in [0, 5] for STS-B.
Test files have an index column (``id`` for QQP) and no label.

A submission is only what bert-kd predicted: a test file with a label column (a dev or train
file) or an empty or repeated index is refused; each TSV is written with a record
``<name>.json`` (model, task, test file and its sha256, rows, the TSV's sha256), and the zip
takes only the server files whose record matches them (others are named and left out).
"""

from __future__ import annotations

import csv
import io
import json
import logging
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from bert_kd.core.data.glue import (
    _LAYOUTS,
    STSB_RANGE,
    GlueFormatError,
    _decoded_text,
    get_task,
    read_glue_tsv,
    tsv_label_names,
)
from bert_kd.core.files import file_sha256, write_file_atomically

log = logging.getLogger(__name__)

#: The zip the server takes.
ZIP_NAME = "submission.zip"
#: The diagnostic set in GLUE's download layout (predicted with the MNLI model).
AX_FILE = Path("diagnostic") / "diagnostic.tsv"
#: Every task predict_glue writes (each server file's task: AX is MNLI's).
_TASKS = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli")
#: The record written beside each server file: ``RTE.tsv`` → ``RTE.tsv.json``.
RECORD_SUFFIX = ".json"


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
        files = [
            SubmissionFile("MNLI-m.tsv", "test_matched", root / spec.dir_name / spec.test_splits["test_matched"]),
            SubmissionFile(
                "MNLI-mm.tsv", "test_mismatched", root / spec.dir_name / spec.test_splits["test_mismatched"]
            ),
        ]
        return files + [SubmissionFile("AX.tsv", "test_ax", Path(ax_file) if ax_file else root / AX_FILE)]
    return [SubmissionFile(f"{spec.dir_name}.tsv", "test", root / spec.dir_name / spec.test_splits["test"])]


def _label_columns(task: str) -> set[str]:
    """Header names that hold a label in the task's labelled files (its dev/train ``label``,
    ``gold_label``, ``is_duplicate``, ``Quality``, ``score``)."""
    label = _LAYOUTS[get_task(task).name].label
    return {"label", "gold_label"} | ({label} if isinstance(label, str) else set())


def read_test_split(path: str | Path, task: str) -> pd.DataFrame:
    """A GLUE test file as bert-kd's split frame plus ``index``: the file's own ``index`` (QQP:
    ``id``) column, which the server matches predictions on. Refused ([`GlueFormatError`][]
    naming file and line): a label column (a dev or train file), an empty or repeated index."""
    frame = read_glue_tsv(path, task, "test")
    with io.StringIO(_decoded_text(Path(path)), newline="") as handle:
        rows = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(rows)
        labels = [c for c in header if c in _label_columns(task)]
        if labels:
            raise GlueFormatError(
                path,
                f"has a label column {labels[0]!r}: a dev or train file, not GLUE's unlabelled test file",
                1,
                labels[0],
                fix="give the task's test.tsv from the GLUE download (its dev.tsv is scored by the evaluate pipeline)",
            )
        column = next((c for c in ("index", "id") if c in header), None)
        if column is None:
            raise GlueFormatError(
                path,
                f"a test file needs an 'index' (QQP: 'id') column; found {header}",
                1,
                fix="give GLUE's test.tsv (dev/train files have labels and, for some tasks, no index)",
            )
        position = header.index(column)
        index, first_line = [], {}
        for row in rows:
            line, value = rows.line_num, row[position].strip()
            if not value:
                raise GlueFormatError(
                    path,
                    f"empty index ({column!r} column)",
                    line,
                    column,
                    fix="every test row needs the index the server matches its prediction on",
                )
            if value in first_line:
                raise GlueFormatError(
                    path,
                    f"index {value!r} repeats line {first_line[value]}",
                    line,
                    column,
                    fix="give GLUE's test file as downloaded: each row has its own index",
                )
            first_line[value] = line
            index.append(value)
    if len(index) != len(frame):
        raise GlueFormatError(path, f"{len(index)} indexed rows but {len(frame)} examples", None, column)
    frame["index"] = index
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


def record_path(path: Path) -> Path:
    """The record of server file ``path`` (``RTE.tsv`` → ``RTE.tsv.json``)."""
    return path.with_name(path.name + RECORD_SUFFIX)


def write_submission(frame: pd.DataFrame, path: Path, record: dict) -> Path:
    """The server file ``path`` and then its record: ``record`` (model, task, test file …) with the
    file's name, row count and sha256 — what [`submission_problem`][] checks before zipping."""
    path = Path(path)
    write_submission_tsv(frame, path)
    full = {**record, "file": path.name, "rows": len(frame), "tsv_sha256": file_sha256(path)}
    write_file_atomically(record_path(path), lambda tmp: tmp.write_text(json.dumps(full, indent=2), encoding="utf-8"))
    return path


def _server_files() -> dict[str, str]:
    """Each server file's name → the task whose labels it holds."""
    return {f.name: task for task in _TASKS for f in submission_files(task, ".")}


def submission_problem(path: Path) -> str | None:
    """Why server file ``path`` is not a submission bert-kd wrote (None when it is): its record is
    missing or unreadable, the file changed since (sha256), or its rows are not the record's count
    of unique, non-empty indexes with predictions the server accepts for its task."""
    path = Path(path)
    record_file = record_path(path)
    if not record_file.is_file():
        return f"no record {record_file.name} (not written by predict_glue)"
    try:
        record = json.loads(record_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"its record {record_file.name} is unreadable ({exc})"
    if not isinstance(record, dict) or record.get("file") != path.name:
        return f"its record {record_file.name} does not describe {path.name}"
    if record.get("tsv_sha256") != file_sha256(path):
        return "changed since predict_glue wrote it (its sha256 differs from its record's)"
    try:
        frame = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False, quoting=csv.QUOTE_NONE)
    except (ValueError, pd.errors.ParserError) as exc:
        return f"not a TSV ({exc})"
    if list(frame.columns) != ["index", "prediction"]:
        return f"columns {list(frame.columns)}, not ['index', 'prediction']"
    if len(frame) != record.get("rows"):
        return f"{len(frame)} rows, its record says {record.get('rows')}"
    if (frame["index"].str.strip() == "").any() or frame["index"].duplicated().any():
        return "empty or repeated index values"
    spec = get_task(_server_files().get(path.name, "rte"))
    if spec.is_regression:
        scores = pd.to_numeric(frame["prediction"], errors="coerce")
        bad = frame["prediction"][scores.isna() | ~scores.between(*STSB_RANGE)]
    else:
        bad = frame["prediction"][~frame["prediction"].isin(tsv_label_names(spec.name))]
    if len(bad):
        return f"prediction {bad.iloc[0]!r} is not one the server accepts for {spec.name}"
    return None


def submission_contents(directory: Path, names: Sequence[str] | None = None) -> tuple[list[str], dict[str, str]]:
    """The server files of ``directory`` (``names``: only those) that go into the zip, and those
    left out with the reason ([`submission_problem`][])."""
    included, skipped = [], {}
    for name in names or list(_server_files()):
        path = Path(directory) / name
        if not path.is_file():
            continue
        problem = submission_problem(path)
        if problem is None:
            included.append(name)
        else:
            skipped[name] = problem
    return included, skipped


def write_zip(directory: Path, names: Sequence[str] | None = None) -> Path:
    """``<directory>/submission.zip`` with the server files there whose record vouches for them
    (``names``: only those), at the zip's top level as the server expects; the others are left
    out with one warning line each."""
    directory = Path(directory)
    included, skipped = submission_contents(directory, names)
    for name, problem in skipped.items():
        log.warning("predict_glue: %s is left out of %s: %s", directory / name, ZIP_NAME, problem)

    def write(tmp: Path) -> None:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for name in included:
                archive.write(directory / name, arcname=name)

    target = directory / ZIP_NAME
    write_file_atomically(target, write)
    return target
