"""bert_kd.experiment.lineage: a stored model's lineage as one frozen record, read from the ``info`` keys
``bert_kd.json`` has always used."""

from __future__ import annotations

import dataclasses
import json

import pytest

from bert_kd.experiment.lineage import INFO_KEYS, Lineage


def test_the_record_is_frozen_and_written_back_under_the_keys_it_was_read_from():
    info = {
        "key": "k1",
        "store_path": "data/06_models/store/student/k1",
        "reused": False,
        "teacher_key": "t1",
        "mlflow_run_id": "r-job",
        "trained_in_run_id": "r-train",
        "model_run_id": "r-model",
        "mlflow_model_id": "m-1",
        "task": "rte",  # not lineage: neither read nor written
    }
    lineage = Lineage.of(info)
    with pytest.raises(dataclasses.FrozenInstanceError):
        lineage.key = "other"  # type: ignore[misc]
    assert lineage.info() == {k: v for k, v in info.items() if k != "task"}
    assert Lineage.of(lineage.info()) == lineage  # readable both ways
    assert set(INFO_KEYS.values()) == set(lineage.info())


def test_an_entry_in_the_old_layout_still_reads(tmp_path):
    """A store entry whose ``bert_kd.json`` predates the key and teacher-key fields (they are in its
    manifest only) and that records no model run: its lineage reads from both files."""
    entry = tmp_path / "student" / "k-old"
    entry.mkdir(parents=True)
    (entry / "bert_kd.json").write_text(json.dumps({"role": "student", "task": "rte", "mlflow_run_id": "r-old"}))
    (entry / "manifest.json").write_text(json.dumps({"key": "k-old", "spec": {"teacher": "t-old"}}))
    lineage = Lineage.read(entry)
    assert (lineage.key, lineage.teacher_key, lineage.run_id) == ("k-old", "t-old", "r-old")
    assert lineage.model_run_id == lineage.training_run_id == "r-old" and lineage.model_id is None
    assert Lineage.read(tmp_path / "missing") == Lineage.of({})  # no files: nothing known, no error


@pytest.mark.parametrize(
    ("reused", "job_run", "trained_in", "stands_for"),
    [
        (False, "r-job", None, "r-job"),  # trained here: the job's run stands for it
        (True, "r-job", "r-stored", "r-stored"),  # reused: the run the entry recorded trained it
        (True, None, "r-stored", "r-stored"),  # reused, tracking off: no run of its own
        (False, None, None, "r-stored"),  # trained, tracking off: the entry's own record
    ],
)
def test_a_placed_job_names_the_run_that_stands_for_its_model(reused, job_run, trained_in, stands_for):
    stored = Lineage.of({"mlflow_run_id": "r-stored", "teacher_key": "t"})
    placed = stored.placed("k", "store/student/k", reused, job_run)
    assert (placed.key, placed.reused, placed.teacher_key) == ("k", reused, "t")
    assert placed.trained_in_run_id == trained_in and placed.model_run_id == stands_for
    assert placed.run_id == (job_run or "r-stored")
    logged = placed.with_model("m-1", "r-logged")
    assert (logged.model_id, logged.model_run_id) == ("m-1", "r-logged")
    assert placed.with_model() == placed
