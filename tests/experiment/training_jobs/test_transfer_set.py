"""The transfer-set job: keyed by what makes its rows, refused for another task or tokenizer, never half-written."""

from __future__ import annotations

import pytest

from bert_kd.config.errors import ParameterError
from bert_kd.core.data.augment import NO_LABEL
from bert_kd.core.data.glue import load_glue_task
from bert_kd.core.models import ModelBundle, load_classifier, load_tokenizer
from bert_kd.experiment.training_jobs import transfer_set as job
from bert_kd.pipelines.augment_glue.nodes import build_transfer_set, with_transfer_set


@pytest.fixture(scope="module")
def teacher(tiny_teacher_dir):
    return ModelBundle(load_classifier(str(tiny_teacher_dir), 2), load_tokenizer(str(tiny_teacher_dir)), {"key": "t"})


@pytest.fixture(scope="module")
def train(tiny_glue_dir):
    return load_glue_task("rte", tiny_glue_dir, allow_download=False)["train"]


def _block(tmp_path, **extra):
    return {"copies": 2, "max_source_rows": 8, "directory": str(tmp_path / "sets"), **extra}


def test_the_same_settings_reuse_the_set_and_a_new_seed_makes_another(tmp_path, teacher, train):
    first = job.transfer_set_job(train, teacher, _block(tmp_path), "rte", 32)
    again = job.transfer_set_job(train, teacher, _block(tmp_path), "rte", 32)
    other = job.transfer_set_job(train, teacher, _block(tmp_path, seed=1), "rte", 32)
    assert first.path == again.path and first.key == again.key != other.key
    assert 8 < len(first.rows) + 8 <= 8 * 3 and set(first.rows["labels"]) == {NO_LABEL}
    assert set(first.rows["source_idx"]) <= set(train["idx"].head(8))


@pytest.mark.parametrize(("task", "length", "problem"), [("sst2", 32, "task 'rte'"), ("rte", 16, "tokenizer")])
def test_a_set_of_another_task_or_tokenizer_is_refused(tmp_path, teacher, train, task, length, problem):
    made = job.transfer_set_job(train, teacher, _block(tmp_path), "rte", 32)
    with pytest.raises(ParameterError) as error:
        build_transfer_set(train, teacher, _block(tmp_path, path=str(made.path)), length, task)
    assert "augment.path" in error.value.block() and problem in error.value.block()


def test_a_failed_build_leaves_no_store_entry(tmp_path, teacher, train, monkeypatch):
    def fail(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(job.rules, "augment_frame", fail)
    with pytest.raises(RuntimeError):
        job.transfer_set_job(train, teacher, _block(tmp_path), "rte", 32)
    assert not list((tmp_path / "sets").glob("transfer_set/*"))


def test_the_training_split_gets_the_set_after_its_own_rows(tmp_path, teacher, train, tiny_glue_dir):
    from bert_kd.core.data.tokenize import tokenize_splits

    tokenized = tokenize_splits(load_glue_task("rte", tiny_glue_dir, allow_download=False), teacher.tokenizer, 32)
    made = job.transfer_set_job(train, teacher, _block(tmp_path), "rte", 32)
    merged = with_transfer_set(tokenized, made)
    assert len(merged["train"]) == len(tokenized["train"]) + len(made.rows)
    assert merged["train"]["idx"][: len(train)] == tokenized["train"]["idx"]
    assert len(set(merged["train"]["idx"])) == len(merged["train"])  # the teacher cache's lookup key stays unique
    assert merged["validation"] is tokenized["validation"]


def _replace_rows(shard):
    """Rewrite a shard as valid Arrow with one row's tokens changed (what an edit after the set was made leaves)."""
    from datasets import Dataset

    rows = Dataset.from_file(str(shard)).to_dict()
    rows["input_ids"][0] = list(reversed(rows["input_ids"][0]))
    edited = Dataset.from_dict(rows)
    shard.unlink()
    from bert_kd.core.data.shards import ShardWriter

    writer = ShardWriter(shard.parent / "edit")
    writer.add(edited.to_dict())
    (made,) = writer.close()
    made.rename(shard)
    (shard.parent / "edit").rmdir()


@pytest.mark.parametrize("damage", ["rows replaced", "manifest deleted", "file added"])
def test_a_set_given_by_path_is_checked_against_its_manifest(tmp_path, teacher, train, damage):
    made = job.transfer_set_job(train, teacher, _block(tmp_path), "rte", 32)
    assert build_transfer_set(train, teacher, _block(tmp_path, path=str(made.path)), 32, "rte").key == made.key
    copy = tmp_path / "copied"
    import shutil

    shutil.copytree(made.path, copy)
    if damage == "rows replaced":
        _replace_rows(sorted(copy.glob("shard-*.arrow"))[0])
    elif damage == "manifest deleted":
        (copy / "manifest.json").unlink()
    else:
        (copy / "shard-00099.arrow").write_bytes((copy / "shard-00000.arrow").read_bytes())
    with pytest.raises(ParameterError) as error:
        build_transfer_set(train, teacher, _block(tmp_path, path=str(copy)), 32, "rte")
    block = error.value.block()
    assert "augment.path" in block and str(copy) in block and "manifest" in block and "fix:" in block


def test_copies_are_bounded_and_a_long_augmentation_says_how_far_it_is(tmp_path, teacher, train, monkeypatch, caplog):
    """augment.copies=1e9 ran 1e9 draws per row with no word: above the bound it is one parameter error, and
    augmenting prints the draws up front and a progress line with an estimate while it runs."""
    from bert_kd.config.schema import MAX_AUGMENT_COPIES

    for copies in (10**9, MAX_AUGMENT_COPIES + 1):
        with pytest.raises(ParameterError) as error:
            job.transfer_set_job(train, teacher, _block(tmp_path, copies=copies), "rte", 32)
        assert "augment.copies" in error.value.block() and str(MAX_AUGMENT_COPIES) in error.value.block()
    assert not (tmp_path / "sets").exists()
    monkeypatch.setattr(job, "PROGRESS_EVERY_S", 0.0)
    with caplog.at_level("INFO", logger=job.log.name):
        job.transfer_set_job(train, teacher, _block(tmp_path, copies=3), "rte", 32)
    assert "8 source rows x 3 copies (24 draws" in caplog.text
    assert "of 8 source rows" in caplog.text and "left" in caplog.text


def test_a_missing_glove_file_and_a_damaged_stored_shard(tmp_path, teacher, train, caplog):
    """A missing GloVe file is one parameter block (it was a traceback); a stored set whose shard was cut is set
    aside with a warning and built again, never read."""
    with pytest.raises(ParameterError) as error:
        job.transfer_set_job(train, teacher, _block(tmp_path, glove=str(tmp_path / "glove.840B.300d.txt")), "rte", 32)
    assert "augment.glove" in error.value.block() and "no such file" in error.value.block()
    made = job.transfer_set_job(train, teacher, _block(tmp_path), "rte", 32)
    shard = sorted(made.path.glob("shard-*.arrow"))[0]
    shard.write_bytes(shard.read_bytes()[:100])
    with caplog.at_level("WARNING"):
        again = job.transfer_set_job(train, teacher, _block(tmp_path), "rte", 32)
    assert again.key == made.key and len(again.rows) == len(made.rows) and "damaged" in caplog.text
    assert list(made.path.parent.glob(f"{made.path.name}.corrupt-*"))
