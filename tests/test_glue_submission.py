"""bert_kd.glue_submission: the GLUE server's file names, columns and label spellings."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest

from bert_kd.data.glue import GlueFormatError
from bert_kd.glue_submission import prediction_strings, read_test_split, submission_files, write_zip


def test_every_task_has_its_server_file_and_mnli_adds_ax(tmp_path):
    names = [f.name for t in ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli")
             for f in submission_files(t, tmp_path)]
    assert names == ["CoLA.tsv", "SST-2.tsv", "MRPC.tsv", "STS-B.tsv", "QQP.tsv", "MNLI-m.tsv", "MNLI-mm.tsv", "AX.tsv",
                     "QNLI.tsv", "RTE.tsv", "WNLI.tsv"]
    mnli = submission_files("mnli", tmp_path)
    assert [f.source for f in mnli] == [tmp_path / "MNLI/test_matched.tsv", tmp_path / "MNLI/test_mismatched.tsv",
                                        tmp_path / "diagnostic/diagnostic.tsv"]
    assert submission_files("mnli", tmp_path, ax_file=tmp_path / "AX.tsv")[-1].source == tmp_path / "AX.tsv"


def test_label_names_as_the_server_expects():
    two = np.array([[0.9, 0.1], [0.2, 0.8]])
    assert prediction_strings("rte", two) == ["entailment", "not_entailment"]
    assert prediction_strings("qnli", two) == ["entailment", "not_entailment"]
    for task in ("sst2", "mrpc", "cola", "qqp", "wnli"):
        assert prediction_strings(task, two) == ["0", "1"]
    three = np.array([[3.0, 0, 0], [0, 3.0, 0], [0, 0, 3.0]])
    assert prediction_strings("mnli", three) == ["entailment", "neutral", "contradiction"]
    assert prediction_strings("stsb", np.array([[-0.7], [2.25], [5.6]])) == ["0.000", "2.250", "5.000"]  # clipped to [0, 5]


def test_test_files_keep_their_own_index_qqp_calls_it_id(tmp_path):
    (tmp_path / "qqp.tsv").write_text("id\tquestion1\tquestion2\n7\twhy not\twhy\n3\twho\twhat\n")
    frame = read_test_split(tmp_path / "qqp.tsv", "qqp")
    assert list(frame["index"]) == ["7", "3"] and list(frame["sentence2"]) == ["why", "what"]
    (tmp_path / "cola.tsv").write_text("index\tsentence\n0\tthe dog sat\n1\tsat dog the\n")
    assert list(read_test_split(tmp_path / "cola.tsv", "cola")["sentence1"]) == ["the dog sat", "sat dog the"]
    (tmp_path / "dev.tsv").write_text("sentence\tlabel\ngood\t1\n")  # SST-2 dev: a label, no index
    with pytest.raises(GlueFormatError, match="'index'"):
        read_test_split(tmp_path / "dev.tsv", "sst2")


def test_the_zip_holds_the_server_files_at_its_top_level(tmp_path):
    for name in ("RTE.tsv", "MNLI-m.tsv", "notes.txt"):
        (tmp_path / name).write_text("index\tprediction\n0\tentailment\n")
    with zipfile.ZipFile(write_zip(tmp_path)) as archive:
        assert sorted(archive.namelist()) == ["MNLI-m.tsv", "RTE.tsv"]
