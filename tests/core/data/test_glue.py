"""Tests for bert_kd.core.data.glue (reader, task metadata, dir resolution, download path)."""

from __future__ import annotations

import logging
from pathlib import Path

import datasets
import numpy as np
import pandas as pd
import pytest

from bert_kd.core.data import glue
from bert_kd.core.data.glue import (
    TASKS,
    GlueFormatError,
    download_glue_task,
    load_glue_task,
    normalize_task,
    read_glue_tsv,
    resolve_glue_dir,
    subsample,
)

SHARED_GLUE = Path(__file__).resolve().parents[3] / ".." / "shared" / "glue"
QUOTE = 'he said "hi'


def write(path: Path, lines: list[str], bom: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8-sig" if bom else "utf-8")
    return path


def tsv(*fields: str) -> str:
    return "\t".join(fields)


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may reach the hub; GLUE_DIR from the caller's shell must not leak in."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.delenv("GLUE_DIR", raising=False)


# --------------------------------------------------------------------------- metadata


def test_tasks_metadata() -> None:
    assert set(TASKS) == {"cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli"}
    assert TASKS["sst2"].dir_name == "SST-2" and TASKS["stsb"].dir_name == "STS-B"
    assert TASKS["mnli"].label_names == ["entailment", "neutral", "contradiction"]
    assert TASKS["wnli"].label_names == ["not_entailment", "entailment"]
    assert TASKS["mnli"].dev_splits == {
        "validation_matched": "dev_matched.tsv",
        "validation_mismatched": "dev_mismatched.tsv",
    }
    assert TASKS["stsb"].num_labels == 1 and TASKS["stsb"].is_regression
    assert TASKS["stsb"].label_names == []
    assert TASKS["mnli"].num_labels == 3 and TASKS["rte"].num_labels == 2
    assert not TASKS["cola"].has_pair and not TASKS["sst2"].has_pair and TASKS["rte"].has_pair
    for name, spec in TASKS.items():
        assert spec.name == name and spec.hf_config == name


@pytest.mark.parametrize(
    "raw,expected",
    [
        ("SST-2", "sst2"),
        ("sst-2", "sst2"),
        ("sst2", "sst2"),
        ("STS-B", "stsb"),
        ("sts-b", "stsb"),
        ("stsb", "stsb"),
        ("MNLI", "mnli"),
        ("CoLA", "cola"),
        (" qqp ", "qqp"),
        ("WNLI", "wnli"),
    ],
)
def test_normalize_task(raw: str, expected: str) -> None:
    assert normalize_task(raw) == expected


def test_normalize_task_unknown_lists_valid_names() -> None:
    with pytest.raises(ValueError, match="valid names: cola, sst2, mrpc, stsb"):
        normalize_task("squad")


# --------------------------------------------------------------------------- reader: good files


def test_cola_headerless(tmp_path: Path) -> None:
    p = write(tmp_path / "dev.tsv", [tsv("gj04", "1", "", "Our friends won't buy this."), tsv("gj04", "0", "*", QUOTE)])
    df = read_glue_tsv(p, "CoLA", "validation")
    assert list(df.columns) == ["idx", "sentence1", "sentence2", "label"]
    assert df["idx"].tolist() == [0, 1]
    assert df["sentence1"].tolist() == ["Our friends won't buy this.", QUOTE]
    assert df["sentence2"].tolist() == [None, None]
    assert df["label"].tolist() == [1, 0] and df["label"].dtype == np.int64


def test_sst2_quote_survives(tmp_path: Path) -> None:
    p = write(tmp_path / "train.tsv", [tsv("sentence", "label"), tsv(QUOTE + " ", "1"), tsv('"quoted" start', "0")])
    df = read_glue_tsv(p, "sst-2")
    assert df["sentence1"].tolist() == [QUOTE + " ", '"quoted" start']
    assert df["label"].tolist() == [1, 0]
    assert df["sentence2"].isna().all()


def test_mrpc_bom_header(tmp_path: Path) -> None:
    p = write(
        tmp_path / "train.tsv",
        [
            tsv("Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"),
            tsv("1", "702876", "702977", QUOTE, 'Referring to him as " the witness "'),
            tsv("0", "1", "2", "a", "b"),
        ],
        bom=True,
    )
    assert p.read_bytes().startswith(b"\xef\xbb\xbf")
    df = read_glue_tsv(p, "MRPC")
    assert df["sentence1"].tolist() == [QUOTE, "a"]
    assert df["sentence2"].tolist() == ['Referring to him as " the witness "', "b"]
    assert df["label"].tolist() == [1, 0]


def test_mnli_dev_label_columns_and_gold_mapping(tmp_path: Path) -> None:
    header = glue._MNLI_DEV_HEADER
    assert header[-6:] == ["label1", "label2", "label3", "label4", "label5", "gold_label"]

    def row(i: int, gold: str) -> str:
        # label1..label5 deliberately disagree with gold_label: gold must win.
        return tsv(
            str(i),
            "p",
            "q",
            "fiction",
            "(bp)",
            "(bp)",
            "(p)",
            "(p)",
            f"prem {i}",
            f"hyp {i}",
            "neutral",
            "neutral",
            "contradiction",
            "entailment",
            "neutral",
            gold,
        )

    p = write(
        tmp_path / "dev_matched.tsv", [tsv(*header), row(0, "entailment"), row(1, "neutral"), row(2, "contradiction")]
    )
    df = read_glue_tsv(p, "MNLI", "validation_matched")
    assert df["label"].tolist() == [0, 1, 2]
    assert df["sentence1"].tolist() == ["prem 0", "prem 1", "prem 2"]
    assert df["sentence2"].tolist() == ["hyp 0", "hyp 1", "hyp 2"]


def test_mnli_train_fewer_columns(tmp_path: Path) -> None:
    header = glue._HEADERS["mnli"]
    assert header is not None
    p = write(
        tmp_path / "train.tsv",
        [tsv(*header), tsv("0", "1", "1e", "gov", "", "", "", "", "s1", "s2", "neutral", "neutral")],
    )
    assert read_glue_tsv(p, "mnli")["label"].tolist() == [1]


def test_stsb_floats(tmp_path: Path) -> None:
    header = glue._HEADERS["stsb"]
    assert header is not None
    p = write(
        tmp_path / "dev.tsv",
        [
            tsv(*header),
            tsv("0", "g", "f", "y", "0", "s", "s", "a", "b", "5.000"),
            tsv("1", "g", "f", "y", "1", "s", "s", "c", "d", "0"),
            tsv("2", "g", "f", "y", "2", "s", "s", "e", "f", "3.8"),
        ],
    )
    df = read_glue_tsv(p, "STS-B", "validation")
    assert df["label"].dtype == np.float64
    assert df["label"].tolist() == [5.0, 0.0, 3.8]


@pytest.mark.parametrize(
    "task,header,label,expected",
    [
        ("qnli", ["index", "question", "sentence", "label"], "not_entailment", 1),
        ("rte", ["index", "sentence1", "sentence2", "label"], "entailment", 0),
        ("wnli", ["index", "sentence1", "sentence2", "label"], "1", 1),
    ],
)
def test_pair_tasks(tmp_path: Path, task: str, header: list[str], label: str, expected: int) -> None:
    p = write(tmp_path / "dev.tsv", [tsv(*header), tsv("7", QUOTE, "x", label)])
    df = read_glue_tsv(p, task, "validation")
    assert df.to_dict("records") == [{"idx": 0, "sentence1": QUOTE, "sentence2": "x", "label": expected}]


def test_qqp(tmp_path: Path) -> None:
    p = write(
        tmp_path / "train.tsv",
        [tsv("id", "qid1", "qid2", "question1", "question2", "is_duplicate"), tsv("1", "2", "3", "q1?", "q2?", "1")],
    )
    assert read_glue_tsv(p, "QQP")["label"].tolist() == [1]


def test_header_columns_found_by_name_in_any_order(tmp_path: Path) -> None:
    p = write(
        tmp_path / "dev.tsv", [tsv("label", "sentence2", "sentence1", "index"), tsv("not_entailment", "b", "a", "0")]
    )
    df = read_glue_tsv(p, "rte", "validation")
    assert (df["sentence1"][0], df["sentence2"][0], df["label"][0]) == ("a", "b", 1)


def test_empty_sentence_allowed_and_warned(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    p = write(tmp_path / "train.tsv", [tsv("sentence", "label"), tsv("", "1"), tsv("ok", "0")])
    with caplog.at_level(logging.WARNING, logger="bert_kd.core.data.glue"):
        df = read_glue_tsv(p, "sst2")
    assert df["sentence1"].tolist() == ["", "ok"]
    assert "1 empty sentence" in caplog.text


def test_test_split_without_labels(tmp_path: Path) -> None:
    p = write(tmp_path / "test.tsv", [tsv("index", "sentence"), tsv("0", "a"), tsv("1", "b")])
    df = read_glue_tsv(p, "cola", "test")
    assert df["sentence1"].tolist() == ["a", "b"] and df["label"].tolist() == [-1, -1]


# --------------------------------------------------------------------------- reader: errors


def test_unknown_label_reports_line_column_value(tmp_path: Path) -> None:
    p = write(
        tmp_path / "dev.tsv",
        [
            tsv("index", "sentence1", "sentence2", "label"),
            tsv("0", "a", "b", "entailment"),
            tsv("1", "a", "b", "neutral"),
        ],
    )
    with pytest.raises(GlueFormatError) as err:
        read_glue_tsv(p, "rte", "validation")
    msg = str(err.value)
    assert str(p) in msg and "line 3" in msg and "'label'" in msg and "'neutral'" in msg
    assert "entailment, not_entailment" in msg
    assert err.value.line == 3 and err.value.column == "label"


def test_cola_unknown_label_line(tmp_path: Path) -> None:
    p = write(tmp_path / "train.tsv", [tsv("s", "1", "", "a"), tsv("s", "2", "", "b")])
    with pytest.raises(GlueFormatError, match=r"line 2, column 1: unknown label '2'"):
        read_glue_tsv(p, "cola")


def test_wrong_field_count(tmp_path: Path) -> None:
    p = write(tmp_path / "train.tsv", [tsv("sentence", "label"), tsv("a", "1"), tsv("b", "extra", "0")])
    with pytest.raises(GlueFormatError, match=r"line 3: expected 2 tab-separated fields, got 3"):
        read_glue_tsv(p, "sst2")


def test_blank_line_is_an_error_not_dropped(tmp_path: Path) -> None:
    p = write(tmp_path / "train.tsv", [tsv("sentence", "label"), tsv("a", "1"), "", tsv("b", "0")])
    with pytest.raises(GlueFormatError, match="line 3"):
        read_glue_tsv(p, "sst2")


def test_missing_column(tmp_path: Path) -> None:
    p = write(tmp_path / "dev.tsv", [tsv("index", "sentence1", "label"), tsv("0", "a", "entailment")])
    with pytest.raises(GlueFormatError, match=r"line 1: header lacks required column\(s\) 'sentence2'"):
        read_glue_tsv(p, "rte", "validation")


@pytest.mark.parametrize(
    "score,why", [("5.5", "outside"), ("-0.1", "outside"), ("nan", "outside"), ("high", "not a number")]
)
def test_stsb_bad_score(tmp_path: Path, score: str, why: str) -> None:
    header = glue._HEADERS["stsb"]
    assert header is not None
    p = write(
        tmp_path / "dev.tsv",
        [
            tsv(*header),
            tsv("0", "g", "f", "y", "0", "s", "s", "a", "b", "1.0"),
            tsv("1", "g", "f", "y", "1", "s", "s", "a", "b", score),
        ],
    )
    with pytest.raises(GlueFormatError, match=rf"line 3, column 'score': .*{why}"):
        read_glue_tsv(p, "stsb", "validation")


def test_empty_file(tmp_path: Path) -> None:
    p = tmp_path / "train.tsv"
    p.write_text("")
    with pytest.raises(GlueFormatError, match="empty"):
        read_glue_tsv(p, "rte")
    with pytest.raises(GlueFormatError, match="no examples"):
        read_glue_tsv(p, "cola")


def test_header_only_is_empty_split(tmp_path: Path) -> None:
    p = write(tmp_path / "train.tsv", [tsv("sentence", "label")])
    with pytest.raises(GlueFormatError, match="no examples in split 'train'"):
        read_glue_tsv(p, "sst2")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(GlueFormatError, match="does not exist") as err:
        read_glue_tsv(tmp_path / "nope.tsv", "rte")
    assert isinstance(err.value, FileNotFoundError)


# --------------------------------------------------------------------------- resolve / load


def test_resolve_glue_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert resolve_glue_dir(None) == (Path("data/01_raw/glue"), False)
    assert resolve_glue_dir("") == (Path("data/01_raw/glue"), False)
    assert resolve_glue_dir("data/01_raw/glue") == (Path("data/01_raw/glue"), False)
    assert resolve_glue_dir("/x/glue") == (Path("/x/glue"), True)
    assert resolve_glue_dir(None, default="d") == (Path("d"), False)
    monkeypatch.setenv("GLUE_DIR", str(tmp_path))
    assert resolve_glue_dir("/x/glue") == (Path("/x/glue"), True)  # a named folder beats the environment
    assert resolve_glue_dir(None) == (tmp_path, True)
    assert resolve_glue_dir("data/01_raw/glue") == (tmp_path, True)  # the environment replaces the default
    monkeypatch.setenv("GLUE_DIR", "")
    assert resolve_glue_dir(None) == (Path("data/01_raw/glue"), False)


def _rte_files(root: Path) -> None:
    header = tsv("index", "sentence1", "sentence2", "label")
    write(root / "RTE" / "train.tsv", [header, tsv("0", "a", "b", "entailment"), tsv("1", "c", "d", "not_entailment")])
    write(root / "RTE" / "dev.tsv", [header, tsv("0", "e", "f", "not_entailment")])


def test_load_glue_task_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _rte_files(tmp_path)
    monkeypatch.setattr(datasets, "load_dataset", _fail_load)  # must not be called
    out = load_glue_task("RTE", tmp_path, allow_download=True)
    assert list(out) == ["train", "validation"]
    assert out["train"]["label"].tolist() == [0, 1] and len(out["validation"]) == 1
    assert list(load_glue_task("rte", tmp_path, False, splits=["validation"])) == ["validation"]
    with pytest.raises(ValueError, match="Unknown split"):
        load_glue_task("rte", tmp_path, False, splits=["dev"])


def test_load_glue_task_via_glue_dir_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _rte_files(tmp_path / "env_glue")
    monkeypatch.setenv("GLUE_DIR", str(tmp_path / "env_glue"))
    root, user_named = resolve_glue_dir(None)
    assert (root, user_named) == (tmp_path / "env_glue", True)
    assert resolve_glue_dir(str(tmp_path / "param_glue")) == (tmp_path / "param_glue", True)
    assert len(load_glue_task("rte", root, allow_download=not user_named)["train"]) == 2


def test_user_named_missing_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(datasets, "load_dataset", _fail_load)
    missing = tmp_path / "no_such_glue"
    with pytest.raises(FileNotFoundError, match=r"no_such_glue does not exist.*RTE/train\.tsv"):
        load_glue_task("rte", missing, allow_download=False)
    assert not missing.exists()


def test_missing_task_folder_no_download(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"GLUE files missing for mrpc.*MRPC/dev\.tsv"):
        load_glue_task("mrpc", tmp_path, allow_download=False)


# --------------------------------------------------------------------------- download (mocked)


def _fake_glue(config: str) -> datasets.DatasetDict:
    """A tiny in-memory stand-in for nyu-mll/glue with the real field names."""
    q = 'he said "hi\tthere'  # tab must be sanitised, quote kept
    text = {
        "cola": {"sentence": [q, "b", "c"]},
        "sst2": {"sentence": [q, "b", "c"]},
        "mrpc": {"sentence1": [q, "b", "c"], "sentence2": ["x", "y", "z"]},
        "stsb": {"sentence1": [q, "b", "c"], "sentence2": ["x", "y", "z"]},
        "qqp": {"question1": [q, "b", "c"], "question2": ["x", "y", "z"]},
        "mnli": {"premise": [q, "b", "c"], "hypothesis": ["x", "y", "z"]},
        "qnli": {"question": [q, "b", "c"], "sentence": ["x", "y", "z"]},
        "rte": {"sentence1": [q, "b", "c"], "sentence2": ["x", "y", "z"]},
        "wnli": {"sentence1": [q, "b", "c"], "sentence2": ["x", "y", "z"]},
    }[config]
    labels = [3.8, 0.0, 5.0] if config == "stsb" else ([0, 1, 2] if config == "mnli" else [0, 1, 1])
    split = {**text, "label": labels, "idx": [0, 1, 2]}
    names = ["train", *TASKS[config].dev_splits]
    return datasets.DatasetDict({n: datasets.Dataset.from_dict(split) for n in names})


def _fail_load(*args: object, **kwargs: object) -> None:
    raise ConnectionError("offline: cannot reach huggingface.co")


@pytest.mark.parametrize("task", sorted(TASKS))
def test_download_writes_original_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, task: str) -> None:
    calls: list[tuple[str, str]] = []

    def fake_load(path: str, name: str, **kwargs: object) -> datasets.DatasetDict:
        calls.append((path, name))
        return _fake_glue(name)

    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    spec = TASKS[task]
    out = load_glue_task(task, tmp_path / "glue", allow_download=True)
    assert calls == [("nyu-mll/glue", spec.hf_config)]
    assert list(out) == ["train", *spec.dev_splits]
    for df in out.values():
        assert df["sentence1"].tolist() == ['he said "hi there', "b", "c"]
        if spec.has_pair:
            assert df["sentence2"].tolist() == ["x", "y", "z"]
        else:
            assert df["sentence2"].tolist() == [None, None, None]
        expected = [3.8, 0.0, 5.0] if task == "stsb" else ([0, 1, 2] if task == "mnli" else [0, 1, 1])
        assert df["label"].tolist() == pytest.approx(expected)
    folder = tmp_path / "glue" / spec.dir_name
    written = sorted(p.name for p in folder.iterdir())
    assert written == sorted([spec.train_file, *spec.dev_splits.values()])  # no temp files left
    # Re-read offline: load_dataset must not be called again.
    monkeypatch.setattr(datasets, "load_dataset", _fail_load)
    again = load_glue_task(task, tmp_path / "glue", allow_download=True)
    pd.testing.assert_frame_equal(again["train"], out["train"])


def test_download_layout_details(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(datasets, "load_dataset", lambda path, name, **kw: _fake_glue(name))
    for task in ("mrpc", "mnli", "cola", "rte", "stsb"):
        download_glue_task(task, tmp_path)
    mrpc = (tmp_path / "MRPC" / "train.tsv").read_bytes()
    assert mrpc.startswith(b"\xef\xbb\xbfQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n")
    mnli_dev = (tmp_path / "MNLI" / "dev_matched.tsv").read_text().splitlines()
    assert mnli_dev[0].split("\t") == glue._MNLI_DEV_HEADER
    assert mnli_dev[1].split("\t")[-1] == "entailment" and mnli_dev[3].split("\t")[-1] == "contradiction"
    mnli_train = (tmp_path / "MNLI" / "train.tsv").read_text().splitlines()
    assert mnli_train[0].split("\t")[-2:] == ["label1", "gold_label"]
    cola = (tmp_path / "CoLA" / "train.tsv").read_text().splitlines()
    assert cola[0].split("\t")[1:3] == ["0", "*"] and cola[1].split("\t")[1:3] == ["1", ""]
    rte = (tmp_path / "RTE" / "dev.tsv").read_text().splitlines()
    assert rte[0] == "index\tsentence1\tsentence2\tlabel"
    assert rte[1].split("\t")[-1] == "entailment" and rte[2].split("\t")[-1] == "not_entailment"
    stsb = (tmp_path / "STS-B" / "dev.tsv").read_text().splitlines()
    assert stsb[1].split("\t")[-1] == "3.8"


def test_download_skips_existing_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _rte_files(tmp_path)
    (tmp_path / "RTE" / "dev.tsv").unlink()
    monkeypatch.setattr(datasets, "load_dataset", lambda path, name, **kw: _fake_glue(name))
    out = load_glue_task("rte", tmp_path, allow_download=True)
    assert out["train"]["sentence1"].tolist() == ["a", "c"]  # local file untouched
    assert len(out["validation"]) == 3  # downloaded


def test_download_failure_gives_guidance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(datasets, "load_dataset", _fail_load)
    with pytest.raises(RuntimeError) as err:
        load_glue_task("sst2", tmp_path / "glue", allow_download=True)
    msg = str(err.value)
    assert "SST-2" in msg and "train.tsv" in msg and "dev.tsv" in msg
    assert "--params glue_dir=" in msg and "GLUE_DIR" in msg and "online" in msg
    assert "HF_HUB_OFFLINE" in msg and "cannot reach" in msg
    assert not (tmp_path / "glue").exists()  # nothing half-written


def test_atomic_write_leaves_no_partial_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def bad_rows(spec, split, examples):  # noqa: ANN001
        return ["index", "sentence1", "sentence2", "label"], [["0", "a", "b", object()]]

    monkeypatch.setattr(datasets, "load_dataset", lambda path, name, **kw: _fake_glue(name))
    monkeypatch.setattr(glue, "_original_rows", bad_rows)
    with pytest.raises(TypeError):
        download_glue_task("rte", tmp_path)
    assert list((tmp_path / "RTE").iterdir()) == []


# --------------------------------------------------------------------------- subsample


def test_subsample() -> None:
    df = pd.DataFrame(
        {
            "idx": np.arange(100),
            "sentence1": ["s"] * 100,
            "sentence2": [None] * 100,
            "label": np.zeros(100, dtype=np.int64),
        }
    )
    assert subsample(df, None, 0) is df
    a, b = subsample(df, 10, seed=3), subsample(df, 10, seed=3)
    pd.testing.assert_frame_equal(a, b)
    assert len(a) == 10 and a["idx"].is_monotonic_increasing and a["idx"].is_unique
    assert not a["idx"].equals(subsample(df, 10, seed=4)["idx"])
    assert a.index.tolist() == list(range(10))
    assert len(subsample(df, 1000, seed=0)) == 100
    for bad in (0, -1):
        with pytest.raises(ValueError):
            subsample(df, bad, 0)


# --------------------------------------------------------------------------- real GLUE files


def _real(dir_name: str, *files: str) -> Path:
    folder = SHARED_GLUE / dir_name
    absent = [f for f in files if not (folder / f).is_file()]
    if absent:
        pytest.skip(f"real GLUE files not available: {', '.join(str(folder / f) for f in absent)}")
    return folder


def test_real_rte() -> None:
    folder = _real("RTE", "train.tsv", "dev.tsv")
    out = load_glue_task("rte", folder.parent, allow_download=False)
    assert len(out["train"]) == 2490 and len(out["validation"]) == 277
    assert out["train"]["label"].value_counts().to_dict() == {0: 1249, 1: 1241}
    assert out["validation"]["label"].value_counts().to_dict() == {0: 146, 1: 131}
    first = (folder / "dev.tsv").read_text(encoding="utf-8").splitlines()[1].split("\t")
    assert out["validation"]["sentence1"][0] == first[1]
    assert out["validation"]["label"][0] == TASKS["rte"].label_names.index(first[3])


def test_real_sst2_train_count() -> None:
    folder = _real("SST-2", "train.tsv")
    df = read_glue_tsv(folder / "train.tsv", "sst2")
    assert len(df) == 67349
    assert df["label"].value_counts().to_dict() == {1: 37569, 0: 29780}


def test_real_mrpc_counts() -> None:
    folder = _real("MRPC", "train.tsv", "dev.tsv")
    out = load_glue_task("mrpc", folder.parent, allow_download=False)
    assert len(out["train"]) == 3668 and len(out["validation"]) == 408
    assert out["train"]["label"].value_counts().to_dict() == {1: 2474, 0: 1194}
    assert any('"' in s for s in out["train"]["sentence1"])  # quotes kept literally


def test_real_qnli_dev() -> None:
    folder = _real("QNLI", "dev.tsv")
    df = read_glue_tsv(folder / "dev.tsv", "qnli", "validation")
    assert len(df) == 5463 and df["label"].value_counts().to_dict() == {1: 2761, 0: 2702}
