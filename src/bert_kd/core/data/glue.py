"""GLUE task metadata, a strict reader for the original GLUE TSV files, and an
optional Hugging Face download that writes the same original layout.

Every returned split is a DataFrame with exactly the columns
``idx`` (0-based example index in file order), ``sentence1``, ``sentence2``
(``None`` for single-sentence tasks) and ``label`` (int64 class id in
``nyu-mll/glue`` order, or float64 score for STS-B).
"""

from __future__ import annotations

import csv
import io
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bert_kd.config.errors import DataFileError
from bert_kd.core.files import write_file_atomically

logger = logging.getLogger(__name__)

COLUMNS = ["idx", "sentence1", "sentence2", "label"]
HF_DATASET = "nyu-mll/glue"
DEFAULT_GLUE_DIR = "data/01_raw/glue"
STSB_RANGE = (0.0, 5.0)


@dataclass(frozen=True)
class TaskSpec:
    """Static description of one GLUE task."""

    name: str  # canonical lowercase name, e.g. "sst2"
    dir_name: str  # original GLUE folder, e.g. "SST-2"
    hf_config: str  # config name in ``nyu-mll/glue``
    label_names: list[str]  # in HF label id order; empty for STS-B
    is_regression: bool
    has_pair: bool
    primary_metric: str
    dev_splits: dict[str, str]  # split name -> file name
    train_file: str = "train.tsv"
    test_splits: dict[str, str] = field(default_factory=lambda: {"test": "test.tsv"})
    num_labels: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "num_labels", 1 if self.is_regression else len(self.label_names))

    @property
    def split_files(self) -> dict[str, str]:
        """All known split names mapped to their file names (train, dev, test)."""
        return {"train": self.train_file, **self.dev_splits, **self.test_splits}


_DEV = {"validation": "dev.tsv"}
TASKS: dict[str, TaskSpec] = {
    t.name: t
    for t in [
        TaskSpec(
            "cola", "CoLA", "cola", ["unacceptable", "acceptable"], False, False, "matthews_correlation", dict(_DEV)
        ),
        TaskSpec("sst2", "SST-2", "sst2", ["negative", "positive"], False, False, "accuracy", dict(_DEV)),
        TaskSpec("mrpc", "MRPC", "mrpc", ["not_equivalent", "equivalent"], False, True, "combined", dict(_DEV)),
        TaskSpec("stsb", "STS-B", "stsb", [], True, True, "combined", dict(_DEV)),
        TaskSpec("qqp", "QQP", "qqp", ["not_duplicate", "duplicate"], False, True, "combined", dict(_DEV)),
        TaskSpec(
            "mnli",
            "MNLI",
            "mnli",
            ["entailment", "neutral", "contradiction"],
            False,
            True,
            "accuracy",
            {"validation_matched": "dev_matched.tsv", "validation_mismatched": "dev_mismatched.tsv"},
            test_splits={"test_matched": "test_matched.tsv", "test_mismatched": "test_mismatched.tsv"},
        ),
        TaskSpec("qnli", "QNLI", "qnli", ["entailment", "not_entailment"], False, True, "accuracy", dict(_DEV)),
        TaskSpec("rte", "RTE", "rte", ["entailment", "not_entailment"], False, True, "accuracy", dict(_DEV)),
        TaskSpec("wnli", "WNLI", "wnli", ["not_entailment", "entailment"], False, True, "accuracy", dict(_DEV)),
    ]
}


@dataclass(frozen=True)
class _Layout:
    """Where the text/label live in the original TSV of a labelled split.

    Column references are header names, or positions for the headerless CoLA files.
    ``tsv_labels[i]`` is how class id ``i`` is spelled in the file.
    """

    sentence1: str | int
    sentence2: str | int | None
    label: str | int
    tsv_labels: list[str] | None  # None -> float score (STS-B)
    n_fields: int | None = None  # only for headerless files


_DIGITS = ["0", "1"]
_LAYOUTS: dict[str, _Layout] = {
    "cola": _Layout(3, None, 1, _DIGITS, n_fields=4),
    "sst2": _Layout("sentence", None, "label", _DIGITS),
    "mrpc": _Layout("#1 String", "#2 String", "Quality", _DIGITS),
    "stsb": _Layout("sentence1", "sentence2", "score", None),
    "qqp": _Layout("question1", "question2", "is_duplicate", _DIGITS),
    "mnli": _Layout("sentence1", "sentence2", "gold_label", TASKS["mnli"].label_names),
    "qnli": _Layout("question", "sentence", "label", TASKS["qnli"].label_names),
    "rte": _Layout("sentence1", "sentence2", "label", TASKS["rte"].label_names),
    "wnli": _Layout("sentence1", "sentence2", "label", _DIGITS),
}

# Original headers, used when writing downloaded splits.
_MNLI_BASE = [
    "index",
    "promptID",
    "pairID",
    "genre",
    "sentence1_binary_parse",
    "sentence2_binary_parse",
    "sentence1_parse",
    "sentence2_parse",
    "sentence1",
    "sentence2",
]
_HEADERS: dict[str, list[str] | None] = {
    "cola": None,
    "sst2": ["sentence", "label"],
    "mrpc": ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"],
    "stsb": [
        "index",
        "genre",
        "filename",
        "year",
        "old_index",
        "source1",
        "source2",
        "sentence1",
        "sentence2",
        "score",
    ],
    "qqp": ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
    "mnli": _MNLI_BASE + ["label1", "gold_label"],
    "qnli": ["index", "question", "sentence", "label"],
    "rte": ["index", "sentence1", "sentence2", "label"],
    "wnli": ["index", "sentence1", "sentence2", "label"],
}
_MNLI_DEV_HEADER = _MNLI_BASE + [f"label{i}" for i in range(1, 6)] + ["gold_label"]
# Text fields of each ``nyu-mll/glue`` config.
_HF_TEXT: dict[str, tuple[str, str | None]] = {
    "cola": ("sentence", None),
    "sst2": ("sentence", None),
    "mrpc": ("sentence1", "sentence2"),
    "stsb": ("sentence1", "sentence2"),
    "qqp": ("question1", "question2"),
    "mnli": ("premise", "hypothesis"),
    "qnli": ("question", "sentence"),
    "rte": ("sentence1", "sentence2"),
    "wnli": ("sentence1", "sentence2"),
}


class GlueFormatError(DataFileError, ValueError):
    """A GLUE file is missing or malformed; the message names file, line and column.

    ``where`` (the terminal block) is ``file:line:column`` (column = 1-based character position,
    or the TSV column's name); ``str()`` reads ``file, line N, column 'c': message``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        message: str,
        line: int | None = None,
        column: str | int | None = None,
        fix: str | None = None,
    ) -> None:
        self.path, self.line, self.column = Path(path), line, column
        where = str(path) + (f":{line}" if line is not None else "") + (f":{column}" if column is not None else "")
        super().__init__(message, where, fix)

    def one_line(self) -> str:
        where = str(self.path)
        if self.line is not None:
            where += f", line {self.line}"
        if self.column is not None:
            where += f", column {self.column!r}"
        return f"{where}: {self.what}" + (f" ({self.fix})" if self.fix else "")


class GlueFileNotFoundError(GlueFormatError, FileNotFoundError):
    """A required GLUE file (or the GLUE directory) does not exist."""


class GlueDownloadError(DataFileError, RuntimeError):
    """GLUE could not be downloaded from the Hugging Face hub (offline, unreachable …)."""


#: Signatures of files that are not text (compressed archives, parquet, …).
_BINARY_MAGIC = {
    b"\x1f\x8b": "gzip-compressed",
    b"PK\x03\x04": "a zip archive",
    b"PAR1": "a Parquet file",
    b"BZh": "bzip2-compressed",
    b"\xfd7zXZ": "xz-compressed",
}
_TEXT_FIX_ENCODINGS = ("cp1252", "latin-1")


def _decoded_text(path: Path) -> str:
    """The file's text (UTF-8, BOM tolerated); [`GlueFormatError`][] naming file:line:column for
    binary files and bytes that are not UTF-8 (with the encoding they decode as)."""
    data = path.read_bytes()
    for magic, kind in _BINARY_MAGIC.items():
        if data.startswith(magic):
            raise GlueFormatError(
                path,
                f"this is {kind}, not a tab-separated text file",
                1,
                fix="decompress or convert it to the original GLUE .tsv first",
            )
    nul = data.find(b"\x00", 0, 1 << 16)
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise GlueFormatError(
            path,
            "binary file (NUL byte), not a tab-separated text file",
            line,
            nul - (data.rfind(b"\n", 0, nul) + 1) + 1,
            fix="give the original GLUE .tsv (UTF-8 text)",
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        start = exc.start
        line = data.count(b"\n", 0, start) + 1
        column = start - (data.rfind(b"\n", 0, start) + 1) + 1
        guess = next((enc for enc in _TEXT_FIX_ENCODINGS if _decodes(data, enc)), None)
        raise GlueFormatError(
            path,
            f"byte {data[start : start + 1]!r} is not valid UTF-8",
            line,
            column,
            fix=(
                f"the file looks {guess}-encoded: convert it with `iconv -f {guess} -t utf-8`"
                if guess
                else "convert the file to UTF-8"
            ),
        ) from None


def _decodes(data: bytes, encoding: str) -> bool:
    try:
        data.decode(encoding)
    except UnicodeDecodeError:
        return False
    return True


def normalize_task(name: str) -> str:
    """Map any common spelling ("SST-2", "sts-b", "MNLI", "sst2") to the canonical name."""
    key = str(name).strip().lower().replace("-", "").replace("_", "")
    if key in TASKS:
        return key
    raise ValueError(
        f"Unknown GLUE task {name!r}; valid names: {', '.join(TASKS)} "
        f"(or their GLUE folder names {', '.join(t.dir_name for t in TASKS.values())})"
    )


def get_task(name: str) -> TaskSpec:
    """Return the [`TaskSpec`][] for any accepted spelling of a task name."""
    return TASKS[normalize_task(name)]


# --------------------------------------------------------------------------- reading


def _parse_label(raw: str, layout: _Layout, path: Path, line: int, column: str | int) -> Any:
    if layout.tsv_labels is None:
        try:
            score = float(raw)
        except ValueError:
            raise GlueFormatError(path, f"STS-B score {raw!r} is not a number", line, column) from None
        lo, hi = STSB_RANGE
        if not lo <= score <= hi:  # also rejects nan
            raise GlueFormatError(path, f"STS-B score {raw!r} is outside [{lo:g}, {hi:g}]", line, column)
        return score
    try:
        return layout.tsv_labels.index(raw)
    except ValueError:
        raise GlueFormatError(
            path, f"unknown label {raw!r}; allowed values: {', '.join(layout.tsv_labels)}", line, column
        ) from None


def read_glue_tsv(path: str | os.PathLike[str], task: str, split: str = "train") -> pd.DataFrame:
    """Read one original GLUE TSV file strictly (quotes are literal, BOM tolerated).

    ``split`` only matters for test files (names starting with "test"), which have no
    labels: their ``label`` is -1 (NaN for STS-B). Raises [`GlueFormatError`][].
    """
    spec = get_task(task)
    layout = _LAYOUTS[spec.name]
    path = Path(path)
    labelled = not split.startswith("test")
    if path.is_dir():
        raise GlueFormatError(path, "is a directory, not a GLUE .tsv file")
    if not path.is_file():
        raise GlueFileNotFoundError(path, "file does not exist")
    # CoLA train/dev have no header; every other file (including CoLA test) has one.
    headerless = layout.n_fields is not None and labelled
    s1_col: str | int = layout.sentence1 if labelled or spec.name != "cola" else "sentence"
    s2_col, label_col = layout.sentence2, layout.label

    idxs: list[int] = []
    s1s: list[str] = []
    s2s: list[str | None] = []
    labels: list[Any] = []
    n_empty = 0
    with io.StringIO(_decoded_text(path), newline="") as fh:
        reader = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
        rows = _rows(reader, path)
        if headerless:
            n_fields = layout.n_fields
            assert n_fields is not None
            pos = {c: c for c in (s1_col, s2_col, label_col) if isinstance(c, int)}
        else:
            header = next(rows, None)
            if header is None:
                raise GlueFormatError(path, "file is empty (no header line)", 1)
            wanted = [c for c in (s1_col, s2_col, label_col if labelled else None) if c is not None]
            missing = [c for c in wanted if c not in header]
            if missing:
                raise GlueFormatError(
                    path, f"header lacks required column(s) {', '.join(map(repr, missing))}; found {header}", 1
                )
            n_fields = len(header)
            pos = {c: header.index(c) for c in wanted}
        for row in rows:
            line = reader.line_num
            if len(row) != n_fields:
                raise GlueFormatError(path, f"expected {n_fields} tab-separated fields, got {len(row)}", line)
            s1 = row[pos[s1_col]]
            s2 = row[pos[s2_col]] if s2_col is not None else None
            n_empty += (s1 == "") + (s2 == "")
            if labelled:
                labels.append(_parse_label(row[pos[label_col]], layout, path, line, label_col))
            idxs.append(len(idxs))
            s1s.append(s1)
            s2s.append(s2)
    if not idxs:
        raise GlueFormatError(path, f"no examples in split {split!r}")
    if n_empty:
        logger.warning("%s: %d empty sentence field(s)", path, n_empty)
    if not labelled:
        labels = [np.nan if spec.is_regression else -1] * len(idxs)
    return pd.DataFrame(
        {
            "idx": np.asarray(idxs, dtype=np.int64),
            "sentence1": pd.Series(s1s, dtype=object),
            "sentence2": pd.Series(s2s, dtype=object),
            "label": np.asarray(labels, dtype=np.float64 if spec.is_regression else np.int64),
        }
    )


def _rows(reader, path: Path):
    """``reader``'s rows; a csv error (e.g. a field over the csv field limit) names file:line."""
    while True:
        try:
            yield next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            line = reader.line_num
            if "field larger than field limit" in str(exc):
                raise GlueFormatError(
                    path,
                    f"a field is longer than {csv.field_size_limit():,} characters (csv field limit)",
                    line,
                    fix="a line is probably missing its newline; check the file there",
                ) from None
            raise GlueFormatError(path, f"unreadable TSV line: {exc}", line) from None


# --------------------------------------------------------------------------- locating


def resolve_glue_dir(glue_dir: str | os.PathLike[str] | None, default: str = DEFAULT_GLUE_DIR) -> tuple[Path, bool]:
    """Pick the GLUE root: a named ``glue_dir`` > env ``GLUE_DIR`` (if non-empty) > ``default``.

    Explicit beats implicit: ``GLUE_DIR`` only replaces the default folder (``glue_dir`` None,
    empty or ``default``). A ``kedro run`` applies ``--params`` > ``GLUE_DIR`` > conf before the
    nodes see ``glue_dir`` ([`bert_kd.kedro_project.run_params.apply_glue_dir_precedence`][]).

    Returns ``(path, user_named)``; ``user_named`` is False only when the default is
    in use, i.e. downloading is allowed.
    """
    if glue_dir is not None and str(glue_dir).strip() and Path(glue_dir) != Path(default):
        return Path(glue_dir), True
    env = os.environ.get("GLUE_DIR", "").strip()
    if env:
        return Path(env), True
    return Path(default), False


def _layout_help(spec: TaskSpec, root: Path) -> str:
    files = [spec.train_file, *spec.dev_splits.values()]
    return "Expected the original GLUE layout: " + ", ".join(str(root / spec.dir_name / f) for f in files) + "."


def _guidance(spec: TaskSpec, root: Path) -> str:
    files = ", ".join([spec.train_file, *spec.dev_splits.values()])
    return (
        f"To provide the data: put the original GLUE TSVs under "
        f"{root / spec.dir_name}/ ({files}), or pass --params glue_dir=<dir with "
        f"{spec.dir_name}/>, or set the GLUE_DIR environment variable, or go online "
        f"so '{HF_DATASET}' can be downloaded from the Hugging Face hub."
    )


def load_glue_task(
    task: str, glue_dir: str | os.PathLike[str], allow_download: bool, splits: Sequence[str] | None = None
) -> dict[str, pd.DataFrame]:
    """Load the train and dev split(s) of ``task`` from ``<glue_dir>/<dir_name>/``.

    Missing files are downloaded (see [`download_glue_task`][]) only when
    ``allow_download``; otherwise a clear `FileNotFoundError` is raised.
    ``splits`` defaults to ``["train", *spec.dev_splits]``.
    """
    spec = get_task(task)
    root = Path(glue_dir)
    wanted = list(splits) if splits is not None else ["train", *spec.dev_splits]
    files = spec.split_files
    unknown = [s for s in wanted if s not in files]
    if unknown:
        raise ValueError(f"Unknown split(s) {unknown} for task {spec.name}; valid: {list(files)}")
    paths = {s: root / spec.dir_name / files[s] for s in wanted}
    missing = [s for s, p in paths.items() if not p.is_file()]
    for p in paths.values():
        if p.is_dir():
            raise GlueFormatError(p, "is a directory, not a GLUE .tsv file")
    if root.is_file():
        raise GlueFormatError(
            root,
            "glue_dir is a file, not a directory",
            fix=f"give the directory that holds {spec.dir_name}/ (--params glue_dir=<dir>)",
        )
    if missing:
        if not allow_download:
            if not root.is_dir():
                raise GlueFileNotFoundError(
                    root, f"GLUE directory {root} does not exist. {_layout_help(spec, root)} {_guidance(spec, root)}"
                )
            raise GlueFileNotFoundError(
                paths[missing[0]],
                f"GLUE files missing for {spec.name}: "
                + ", ".join(str(paths[s]) for s in missing)
                + f". {_layout_help(spec, root)}",
            )
        downloadable = [s for s in missing if s == "train" or s in spec.dev_splits]
        if len(downloadable) < len(missing):
            raise FileNotFoundError(
                "Test split files cannot be downloaded; provide "
                + ", ".join(str(paths[s]) for s in missing if s not in downloadable)
            )
        download_glue_task(spec.name, root, splits=downloadable)
    return {s: read_glue_tsv(p, spec.name, s) for s, p in paths.items()}


# --------------------------------------------------------------------------- download


def _clean(text: str) -> str:
    """Tabs/newlines would break the TSV layout; replace them with spaces."""
    return text.replace("\t", " ").replace("\r", " ").replace("\n", " ")


def tsv_label_names(task: str) -> list[str] | None:
    """How the task's files spell class id ``i`` (``["0", "1"]``, ``["entailment", "not_entailment"]``…);
    the GLUE server takes predictions in the same spelling. None for STS-B (a score)."""
    labels = _LAYOUTS[get_task(task).name].tsv_labels
    return list(labels) if labels is not None else None


def _label_text(spec: TaskSpec, label: Any) -> str:
    layout = _LAYOUTS[spec.name]
    if layout.tsv_labels is None:
        return repr(round(float(label), 5))
    label = int(label)
    if not 0 <= label < len(layout.tsv_labels):
        raise ValueError(f"{spec.name}: label id {label} outside 0..{len(layout.tsv_labels) - 1}")
    return layout.tsv_labels[label]


def _original_rows(
    spec: TaskSpec, split: str, examples: Iterable[Mapping[str, Any]]
) -> tuple[list[str] | None, list[list[str]]]:
    """Convert HF examples to (header, rows) in the original GLUE layout.

    Fields the HF dataset does not carry (ids, genres, parses, annotator labels)
    are written empty; the reader does not use them.
    """
    name = spec.name
    header = _MNLI_DEV_HEADER if name == "mnli" and split != "train" else _HEADERS[name]
    k1, k2 = _HF_TEXT[name]
    rows: list[list[str]] = []
    for i, ex in enumerate(examples):
        s1 = _clean(str(ex[k1]))
        s2 = _clean(str(ex[k2])) if k2 else ""
        lab = _label_text(spec, ex["label"])
        idx = str(ex.get("idx", i))
        if name == "cola":
            row = ["hf", lab, "" if lab == "1" else "*", s1]
        elif name == "sst2":
            row = [s1, lab]
        elif name == "mrpc":
            row = [lab, idx, idx, s1, s2]
        elif name == "stsb":
            row = [idx, "", "", "", "", "", "", s1, s2, lab]
        elif name == "qqp":
            row = [idx, "", "", s1, s2, lab]
        elif name == "mnli":
            assert header is not None
            row = [idx] + [""] * 7 + [s1, s2, lab] + [""] * (len(header) - 12) + [lab]
        else:  # qnli, rte, wnli
            row = [idx, s1, s2, lab]
        rows.append(row)
    return header, rows


def _write_tsv_atomic(path: Path, header: list[str] | None, rows: list[list[str]], bom: bool = False) -> None:
    """Write a TSV all at once ([`bert_kd.core.files.write_file_atomically`][])."""

    def write(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8-sig" if bom else "utf-8", newline="") as fh:
            for row in ([header] if header else []) + rows:
                fh.write("\t".join(row) + "\n")

    write_file_atomically(path, write)


def _offline_env() -> list[str]:
    return [
        v
        for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
        if os.environ.get(v, "").strip().lower() in {"1", "true", "yes", "on"}
    ]


def download_glue_task(
    task: str, glue_dir: str | os.PathLike[str], splits: Sequence[str] | None = None, overwrite: bool = False
) -> dict[str, Path]:
    """Fetch ``nyu-mll/glue`` and write train/dev splits as original GLUE TSVs.

    Writes ``<glue_dir>/<dir_name>/<file>`` for each split (default: train + dev
    splits), skipping existing files unless ``overwrite``. Any failure to load the
    dataset (offline, hub unreachable, ...) raises `RuntimeError` with guidance.
    """
    spec = get_task(task)
    root = Path(glue_dir)
    wanted = list(splits) if splits is not None else ["train", *spec.dev_splits]
    files = {"train": spec.train_file, **spec.dev_splits}
    bad = [s for s in wanted if s not in files]
    if bad:
        raise ValueError(f"Cannot download split(s) {bad} for {spec.name}; valid: {list(files)}")
    out = {s: root / spec.dir_name / files[s] for s in wanted}
    todo = [s for s in wanted if overwrite or not out[s].is_file()]
    if not todo:
        return out
    try:
        import datasets

        ds = datasets.load_dataset(HF_DATASET, spec.hf_config)
    except Exception as exc:  # noqa: BLE001 - any failure means "no data available"
        offline = _offline_env()
        why = f" ({', '.join(offline)} set)" if offline else ""
        raise GlueDownloadError(
            f"Could not load GLUE task {spec.name} from the Hugging Face hub"
            f"{why}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
            str(root / spec.dir_name),
            _guidance(spec, root),
        ) from exc
    for s in todo:
        if s not in ds:
            raise RuntimeError(
                f"{HF_DATASET}/{spec.hf_config} has no split {s!r} (has {list(ds)}). {_guidance(spec, root)}"
            )
        header, rows = _original_rows(spec, s, ds[s])
        _write_tsv_atomic(out[s], header, rows, bom=spec.name == "mrpc")
        logger.info("Wrote %d %s/%s examples to %s", len(rows), spec.name, s, out[s])
    return out


# --------------------------------------------------------------------------- sampling


def subsample(df: pd.DataFrame, max_samples: int | None, seed: int) -> pd.DataFrame:
    """Deterministic random subset of at most ``max_samples`` rows (file order, ``idx`` kept)."""
    if max_samples is None:
        return df
    if isinstance(max_samples, bool) or int(max_samples) != max_samples or max_samples <= 0:
        raise ValueError(f"max_samples must be a positive integer or None, got {max_samples!r}")
    if max_samples >= len(df):
        return df.reset_index(drop=True)
    rng = np.random.default_rng(seed)
    keep = np.sort(rng.choice(len(df), size=int(max_samples), replace=False))
    return df.iloc[keep].reset_index(drop=True)
