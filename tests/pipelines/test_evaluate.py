"""``evaluate`` verifies a store entry before it reads the model, and names the damage."""

from __future__ import annotations

import shutil

import pytest

from bert_kd.errors import DamagedModelError, ModelNotFoundError
from bert_kd.jobs import Job, content_key, write_atomically
from bert_kd.pipelines.evaluate.nodes import resolve_model_source


@pytest.fixture
def stored_teacher(tmp_path, tiny_teacher_dir):
    """The tiny teacher as a store entry ``<store>/teacher/<key>`` with its manifest."""
    job = Job("teacher", {"seed": 7}, tmp_path / "store")
    write_atomically(job.store_dir, lambda d: shutil.copytree(tiny_teacher_dir, d, dirs_exist_ok=True),
                     {"kind": "teacher", "key": job.key, "schema_version": 2, "spec": {"seed": 7}})
    return job.store_dir


def test_a_sound_store_entry_is_used(stored_teacher):
    assert resolve_model_source(str(stored_teacher)) == stored_teacher


def test_a_damaged_store_entry_is_refused_naming_the_file(stored_teacher):
    weights = next(stored_teacher.glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(DamagedModelError) as caught:
        resolve_model_source(str(stored_teacher))
    assert str(weights) in caught.value.block() and "evaluate.model" in caught.value.block()


def test_a_store_entry_under_another_key_is_refused(stored_teacher):
    other = stored_teacher.with_name(content_key("teacher", {"seed": 42}))
    shutil.copytree(stored_teacher, other)
    with pytest.raises(DamagedModelError, match="a copied entry"):
        resolve_model_source(str(other))


def test_a_folder_without_a_model_is_a_user_error(tmp_path):
    with pytest.raises(ModelNotFoundError, match="no config.json"):
        resolve_model_source(str(tmp_path))


def test_the_hooks_evaluate_model_and_its_dict_give_the_same_evaluation(tmp_path, monkeypatch, tiny_teacher_dir,
                                                                         tiny_glue_dir):
    from bert_kd.pipelines.evaluate.nodes import evaluate_model_source
    from bert_kd.schema import Evaluate, Tracking

    monkeypatch.chdir(tmp_path)
    settings = {"model": str(tiny_teacher_dir), "max_seq_length": 32}
    args = ("rte", str(tiny_glue_dir), 10, 0)
    from_dict = evaluate_model_source(settings, *args, {"enabled": False})
    from_models = evaluate_model_source(Evaluate.model_validate(settings), *args, Tracking(enabled=False))
    assert from_models["metrics"] == from_dict["metrics"] and from_models["examples"] == {"validation": 10}
    assert from_models["model"] == from_dict["model"] == str(tiny_teacher_dir)
