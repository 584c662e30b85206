"""bert_kd.core.data.glue_submission: the GLUE server's file names, columns and label spellings."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest

from bert_kd.core.data.glue import GlueFormatError
from bert_kd.core.data.glue_submission import prediction_strings, read_test_split, submission_files, write_zip


def test_every_task_has_its_server_file_and_mnli_adds_ax(tmp_path):
    names = [
        f.name
        for t in ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli")
        for f in submission_files(t, tmp_path)
    ]
    assert names == [
        "CoLA.tsv",
        "SST-2.tsv",
        "MRPC.tsv",
        "STS-B.tsv",
        "QQP.tsv",
        "MNLI-m.tsv",
        "MNLI-mm.tsv",
        "AX.tsv",
        "QNLI.tsv",
        "RTE.tsv",
        "WNLI.tsv",
    ]
    mnli = submission_files("mnli", tmp_path)
    assert [f.source for f in mnli] == [
        tmp_path / "MNLI/test_matched.tsv",
        tmp_path / "MNLI/test_mismatched.tsv",
        tmp_path / "diagnostic/diagnostic.tsv",
    ]
    assert submission_files("mnli", tmp_path, ax_file=tmp_path / "AX.tsv")[-1].source == tmp_path / "AX.tsv"


def test_label_names_as_the_server_expects():
    two = np.array([[0.9, 0.1], [0.2, 0.8]])
    assert prediction_strings("rte", two) == ["entailment", "not_entailment"]
    assert prediction_strings("qnli", two) == ["entailment", "not_entailment"]
    for task in ("sst2", "mrpc", "cola", "qqp", "wnli"):
        assert prediction_strings(task, two) == ["0", "1"]
    three = np.array([[3.0, 0, 0], [0, 3.0, 0], [0, 0, 3.0]])
    assert prediction_strings("mnli", three) == ["entailment", "neutral", "contradiction"]
    assert prediction_strings("stsb", np.array([[-0.7], [2.25], [5.6]])) == [
        "0.000",
        "2.250",
        "5.000",
    ]  # clipped to [0, 5]


def test_test_files_keep_their_own_index_qqp_calls_it_id(tmp_path):
    (tmp_path / "qqp.tsv").write_text("id\tquestion1\tquestion2\n7\twhy not\twhy\n3\twho\twhat\n")
    frame = read_test_split(tmp_path / "qqp.tsv", "qqp")
    assert list(frame["index"]) == ["7", "3"] and list(frame["sentence2"]) == ["why", "what"]
    (tmp_path / "cola.tsv").write_text("index\tsentence\n0\tthe dog sat\n1\tsat dog the\n")
    assert list(read_test_split(tmp_path / "cola.tsv", "cola")["sentence1"]) == ["the dog sat", "sat dog the"]
    (tmp_path / "dev.tsv").write_text("sentence\tlabel\ngood\t1\n")  # SST-2 dev: a label, no index
    with pytest.raises(GlueFormatError, match="a dev or train file"):
        read_test_split(tmp_path / "dev.tsv", "sst2")
    (tmp_path / "unindexed.tsv").write_text("sentence\ngood\n")
    with pytest.raises(GlueFormatError, match="'index'"):
        read_test_split(tmp_path / "unindexed.tsv", "sst2")


def _recorded(directory, name, rows):
    """A server file written as predict_glue writes one: the TSV and its record."""
    import pandas as pd

    from bert_kd.core.data.glue_submission import write_submission

    frame = pd.DataFrame({"index": [str(i) for i in range(rows)], "prediction": ["entailment"] * rows})
    return write_submission(frame, directory / name, {"model": "runs:/abc/model", "task": "rte"})


def test_the_zip_holds_the_server_files_at_its_top_level(tmp_path):
    for name in ("RTE.tsv", "MNLI-m.tsv"):
        _recorded(tmp_path, name, 2)
    (tmp_path / "notes.txt").write_text("index\tprediction\n0\tentailment\n")
    with zipfile.ZipFile(write_zip(tmp_path)) as archive:
        assert sorted(archive.namelist()) == ["MNLI-m.tsv", "RTE.tsv"]


def test_a_written_submission_carries_its_record(tmp_path):
    import json

    from bert_kd.core.files import file_sha256

    path = _recorded(tmp_path, "RTE.tsv", 3)
    record = json.loads((tmp_path / "RTE.tsv.json").read_text())
    assert (record["file"], record["rows"], record["model"]) == ("RTE.tsv", 3, "runs:/abc/model")
    assert record["tsv_sha256"] == file_sha256(path)


def test_files_without_a_valid_record_are_left_out_of_the_zip_and_named(tmp_path, caplog):
    """A stray server-named file, a garbage one, one edited after it was written, and one whose record
    says another row count are never zipped; each is named with its reason."""
    from bert_kd.core.data.glue_submission import submission_contents

    _recorded(tmp_path, "RTE.tsv", 2)
    (tmp_path / "CoLA.tsv").write_text("index\tprediction\n0\t1\n")  # a stray file: no record
    (tmp_path / "MRPC.tsv").write_text("garbage")
    _recorded(tmp_path, "WNLI.tsv", 2).write_text("index\tprediction\n0\tentailment\n0\tentailment\n")
    _recorded(tmp_path, "QNLI.tsv", 2)
    (tmp_path / "QNLI.tsv.json").write_text((tmp_path / "QNLI.tsv.json").read_text().replace('"rows": 2', '"rows": 5'))
    included, skipped = submission_contents(tmp_path)
    assert included == ["RTE.tsv"]
    assert sorted(skipped) == ["CoLA.tsv", "MRPC.tsv", "QNLI.tsv", "WNLI.tsv"]
    assert "no record" in skipped["CoLA.tsv"] and "no record" in skipped["MRPC.tsv"]
    assert "changed since" in skipped["WNLI.tsv"] and "rows" in skipped["QNLI.tsv"]
    with (
        caplog.at_level("WARNING", logger="bert_kd.core.data.glue_submission"),
        zipfile.ZipFile(write_zip(tmp_path)) as archive,
    ):
        assert archive.namelist() == ["RTE.tsv"]
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert all(name in warned for name in ("CoLA.tsv", "MRPC.tsv", "QNLI.tsv", "WNLI.tsv"))


@pytest.mark.parametrize(
    "lines, words, line",
    [
        (["index\tsentence1\tsentence2\tlabel", "0\ta\tb\tentailment"], "label column 'label'", 1),
        (["index\tsentence1\tsentence2", "0\ta\tb", "1\tc\td", "0\te\tf"], "index '0' repeats line 2", 4),
        (["index\tsentence1\tsentence2", "0\ta\tb", "\tc\td"], "empty index", 3),
    ],
)
def test_a_test_file_with_labels_or_bad_indexes_is_refused(tmp_path, lines, words, line):
    (tmp_path / "test.tsv").write_text("\n".join(lines) + "\n")
    with pytest.raises(GlueFormatError, match=words) as caught:
        read_test_split(tmp_path / "test.tsv", "rte")
    assert caught.value.line == line
