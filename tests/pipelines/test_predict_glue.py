"""``predict_glue``: server-format test predictions of a model, checked column by column."""

from __future__ import annotations

import zipfile

import numpy as np
import pandas as pd
import pytest

from bert_kd.config.errors import UserError
from bert_kd.core.data.glue import load_glue_task
from bert_kd.core.data.glue_submission import write_submission
from bert_kd.core.data.tokenize import tokenize_frame
from bert_kd.core.models import load_bundle
from bert_kd.core.training import SupervisedObjective, make_loader, predict_logits
from bert_kd.experiment.run_setup import collator_for
from bert_kd.pipelines.predict_glue.nodes import predict_glue_test
from tests.conftest import make_tiny_bert

NLI_COLUMNS = ["index", "promptID", "pairID", "genre", "sentence1", "sentence2"]


def test_format_from_dev(dev: pd.DataFrame, columns: list[str], first_index: int = 100) -> str:
    """A GLUE test file made from dev rows: the file's own ``index`` (not 0-based, to catch a
    predictor that writes row numbers), the text columns, no label."""
    lines = ["\t".join(columns)]
    for i, row in enumerate(dev.itertuples()):
        values = {
            "index": str(first_index + i),
            "promptID": "1",
            "pairID": "1n",
            "genre": "fiction",
            "sentence1": row.sentence1,
            "sentence2": row.sentence2,
        }
        lines.append("\t".join(values[c] for c in columns))
    return "\n".join(lines) + "\n"


test_format_from_dev.__test__ = False  # a helper, not a test


def logits_of(model_dir, frame: pd.DataFrame) -> np.ndarray:
    bundle = load_bundle(model_dir)
    loader = make_loader(
        tokenize_frame(frame, bundle.tokenizer, 128), 64, collator_for(bundle.tokenizer), shuffle=False
    )
    return predict_logits(SupervisedObjective(bundle.model), loader)[0]


@pytest.mark.parametrize("typed", [False, True], ids=["dicts", "hook_models"])
def test_rte_predictions_column_by_column(tmp_path, tiny_teacher_dir, tiny_glue_dir, typed):
    from bert_kd.config.schema import PredictGlue, Tracking

    dev = load_glue_task("rte", tiny_glue_dir, allow_download=False)["validation"]
    glue = tmp_path / "glue"
    (glue / "RTE").mkdir(parents=True)
    (glue / "RTE" / "test.tsv").write_text(test_format_from_dev(dev, ["index", "sentence1", "sentence2"]))
    out = tmp_path / "submission"
    settings, tracking = {"model": str(tiny_teacher_dir), "output_dir": str(out)}, {"enabled": False}
    if typed:  # what ValidateParametersHook hands the node in a kedro run
        settings, tracking = PredictGlue.model_validate(settings), Tracking.model_validate(tracking)
    summary = predict_glue_test(settings, "rte", str(glue), tracking)
    written = pd.read_csv(out / "RTE.tsv", sep="\t", dtype=str, keep_default_na=False)
    assert list(written.columns) == ["index", "prediction"]
    assert list(written["index"]) == [str(100 + i) for i in range(len(dev))]  # the test file's own index, in order
    expected = ["entailment", "not_entailment"]
    assert list(written["prediction"]) == [expected[i] for i in logits_of(tiny_teacher_dir, dev).argmax(axis=1)]
    assert summary["files"]["RTE.tsv"]["rows"] == len(dev)
    with zipfile.ZipFile(out / "submission.zip") as archive:
        assert archive.namelist() == ["RTE.tsv"]
        assert archive.read("RTE.tsv").decode() == (out / "RTE.tsv").read_text()


def test_mnli_writes_matched_mismatched_and_ax(tmp_path, tiny_glue_dir):
    model = make_tiny_bert(tmp_path / "mnli_model", num_labels=3)
    dev = load_glue_task("rte", tiny_glue_dir, allow_download=False)["validation"]
    glue = tmp_path / "glue"
    (glue / "MNLI").mkdir(parents=True)
    (glue / "diagnostic").mkdir()
    (glue / "MNLI" / "test_matched.tsv").write_text(test_format_from_dev(dev, NLI_COLUMNS, 0))
    (glue / "MNLI" / "test_mismatched.tsv").write_text(test_format_from_dev(dev.iloc[:5], NLI_COLUMNS, 0))
    (glue / "diagnostic" / "diagnostic.tsv").write_text(
        test_format_from_dev(dev.iloc[:3], ["index", "sentence1", "sentence2"], 0)
    )
    out = tmp_path / "submission"
    out.mkdir()
    earlier = pd.DataFrame({"index": ["0"], "prediction": ["entailment"]})
    write_submission(earlier, out / "RTE.tsv", {"model": "runs:/x/model"})  # an earlier run's task stays in the zip
    (out / "MRPC.tsv").write_text("garbage")  # a file predict_glue did not write does not
    summary = predict_glue_test({"model": str(model), "output_dir": str(out)}, "mnli", str(glue), {"enabled": False})
    assert list(summary["skipped"]) == ["MRPC.tsv"] and "no record" in summary["skipped"]["MRPC.tsv"]
    rows = {name: pd.read_csv(out / name, sep="\t", dtype=str) for name in ("MNLI-m.tsv", "MNLI-mm.tsv", "AX.tsv")}
    assert {name: len(frame) for name, frame in rows.items()} == {"MNLI-m.tsv": len(dev), "MNLI-mm.tsv": 5, "AX.tsv": 3}
    names = ["entailment", "neutral", "contradiction"]
    assert list(rows["AX.tsv"]["prediction"]) == [names[i] for i in logits_of(model, dev.iloc[:3]).argmax(axis=1)]
    for frame in rows.values():
        assert list(frame.columns) == ["index", "prediction"] and set(frame["prediction"]) <= set(names)
    with zipfile.ZipFile(out / "submission.zip") as archive:
        assert sorted(archive.namelist()) == ["AX.tsv", "MNLI-m.tsv", "MNLI-mm.tsv", "RTE.tsv"]


def test_stsb_predictions_are_clipped_scores(tmp_path, tiny_glue_dir):
    model = make_tiny_bert(tmp_path / "stsb_model", num_labels=1)
    dev = load_glue_task("rte", tiny_glue_dir, allow_download=False)["validation"]
    glue = tmp_path / "glue"
    (glue / "STS-B").mkdir(parents=True)
    (glue / "STS-B" / "test.tsv").write_text(test_format_from_dev(dev, ["index", "sentence1", "sentence2"]))
    predict_glue_test({"model": str(model), "output_dir": str(tmp_path / "out")}, "stsb", str(glue), {"enabled": False})
    written = pd.read_csv(tmp_path / "out" / "STS-B.tsv", sep="\t")
    raw = logits_of(model, dev)[:, 0]
    assert np.allclose(written["prediction"], np.clip(raw, 0, 5), atol=1e-3)
    assert written["prediction"].between(0, 5).all()


def test_a_missing_model_or_test_file_is_a_user_error(tmp_path, tiny_teacher_dir, tiny_glue_dir):
    with pytest.raises(UserError, match="predict_glue.model"):
        predict_glue_test({"model": None}, "rte", str(tiny_glue_dir), {"enabled": False})
    with pytest.raises(UserError, match="predict_glue.model"):
        predict_glue_test({"model": str(tmp_path / "nope")}, "rte", str(tiny_glue_dir), {"enabled": False})
    with pytest.raises(UserError, match="test.tsv"):  # the tiny folder has train/dev only
        predict_glue_test(
            {"model": str(tiny_teacher_dir), "output_dir": str(tmp_path)}, "rte", str(tiny_glue_dir), {"enabled": False}
        )


def _rte_test_folder(tmp_path, tiny_glue_dir):
    dev = load_glue_task("rte", tiny_glue_dir, allow_download=False)["validation"]
    glue = tmp_path / "glue"
    (glue / "RTE").mkdir(parents=True)
    (glue / "RTE" / "test.tsv").write_text(test_format_from_dev(dev, ["index", "sentence1", "sentence2"]))
    return glue


def test_each_file_is_written_with_its_record(tmp_path, tiny_teacher_dir, tiny_glue_dir):
    import json

    from bert_kd.core.files import file_sha256

    glue = _rte_test_folder(tmp_path, tiny_glue_dir)
    out = tmp_path / "out"
    predict_glue_test({"model": str(tiny_teacher_dir), "output_dir": str(out)}, "rte", str(glue), {"enabled": False})
    record = json.loads((out / "RTE.tsv.json").read_text())
    assert record["model"] == str(tiny_teacher_dir) and record["task"] == "rte"
    assert record["test_file"] == str(glue / "RTE" / "test.tsv")
    assert record["test_sha256"] == file_sha256(glue / "RTE" / "test.tsv") and record["rows"] == 24
    assert record["tsv_sha256"] == file_sha256(out / "RTE.tsv")


def test_an_output_dir_that_is_a_file_is_refused_before_predicting(tmp_path, tiny_teacher_dir, tiny_glue_dir):
    glue = _rte_test_folder(tmp_path, tiny_glue_dir)
    (tmp_path / "out").write_text("a file")
    with pytest.raises(UserError) as caught:
        predict_glue_test(
            {"model": str(tiny_teacher_dir), "output_dir": str(tmp_path / "out")}, "rte", str(glue), {"enabled": False}
        )
    assert caught.value.where == "predict_glue.output_dir" and "is a file" in caught.value.what
    assert (tmp_path / "out").read_text() == "a file"


def test_mnli_without_the_diagnostic_set_is_named_before_anything_is_written(tmp_path, tiny_glue_dir):
    model = make_tiny_bert(tmp_path / "mnli_model", num_labels=3)
    dev = load_glue_task("rte", tiny_glue_dir, allow_download=False)["validation"]
    glue = tmp_path / "glue"
    (glue / "MNLI").mkdir(parents=True)
    for name in ("test_matched.tsv", "test_mismatched.tsv"):
        (glue / "MNLI" / name).write_text(test_format_from_dev(dev, NLI_COLUMNS, 0))
    out = tmp_path / "out"
    with pytest.raises(UserError) as caught:
        predict_glue_test({"model": str(model), "output_dir": str(out)}, "mnli", str(glue), {"enabled": False})
    block = caught.value.block()
    assert "diagnostic/diagnostic.tsv" in block and "predict_glue.ax_file" in block and "fix:" in block
    assert not out.exists() or not any(out.iterdir())
