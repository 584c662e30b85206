"""``evaluate`` verifies a store entry before it reads the model, and names the damage."""

from __future__ import annotations

import shutil

import pytest

from bert_kd.config.errors import DamagedModelError, ModelNotFoundError
from bert_kd.core.files import write_atomically
from bert_kd.experiment.jobs import Job, content_key
from bert_kd.pipelines.evaluate.nodes import resolve_model_source


@pytest.fixture
def stored_teacher(tmp_path, tiny_teacher_dir):
    """The tiny teacher as a store entry ``<store>/teacher/<key>`` with its manifest."""
    job = Job("teacher", {"seed": 7}, tmp_path / "store")
    write_atomically(
        job.store_dir,
        lambda d: shutil.copytree(tiny_teacher_dir, d, dirs_exist_ok=True),
        {"kind": "teacher", "key": job.key, "schema_version": 2, "spec": {"seed": 7}},
    )
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


def test_the_hooks_evaluate_model_and_its_dict_give_the_same_evaluation(
    tmp_path, monkeypatch, tiny_teacher_dir, tiny_glue_dir
):
    from bert_kd.config.schema import Evaluate, Tracking
    from bert_kd.pipelines.evaluate.nodes import evaluate_model_source

    monkeypatch.chdir(tmp_path)
    settings = {"model": str(tiny_teacher_dir), "max_seq_length": 32}
    args = ("rte", str(tiny_glue_dir), 10, 0)
    from_dict = evaluate_model_source(settings, *args, {"enabled": False})
    from_models = evaluate_model_source(Evaluate.model_validate(settings), *args, Tracking(enabled=False))
    assert from_models["metrics"] == from_dict["metrics"] and from_models["examples"] == {"validation": 10}
    assert from_models["model"] == from_dict["model"] == str(tiny_teacher_dir)


# ---------------------------------------------------------------- a model is used only for its own task


def _model_for(directory, task, num_labels=2):
    """The tiny model saved as bert-kd saves one, recording ``task``."""
    from bert_kd.core.models import ModelBundle, load_bundle, save_bundle

    bundle = load_bundle(directory)
    bundle.info = {"role": "teacher", "task": task}
    return save_bundle(ModelBundle(bundle.model, bundle.tokenizer, bundle.info), directory.parent / f"{task}_model")


def test_a_saved_model_records_its_task_labels_and_label_count(tmp_path, tiny_teacher_dir):
    import json

    shutil.copytree(tiny_teacher_dir, tmp_path / "copy")
    info = json.loads((_model_for(tmp_path / "copy", "rte") / "bert_kd.json").read_text())
    assert (info["task"], info["label_names"], info["num_labels"]) == ("rte", ["entailment", "not_entailment"], 2)


def test_a_model_for_another_task_is_refused_unless_allowed(tmp_path, monkeypatch, tiny_teacher_dir, tiny_glue_dir):
    from bert_kd.config.errors import UserError
    from bert_kd.pipelines.evaluate.nodes import evaluate_model_source

    monkeypatch.chdir(tmp_path)
    shutil.copytree(tiny_teacher_dir, tmp_path / "copy")
    mrpc = _model_for(tmp_path / "copy", "mrpc")  # two labels, as RTE: only the recorded task tells them apart
    settings = {"model": str(mrpc), "max_seq_length": 32}
    with pytest.raises(UserError) as caught:
        evaluate_model_source(settings, "rte", str(tiny_glue_dir), 4, 0, {"enabled": False})
    block = caught.value.block()
    assert "trained for mrpc" in block and "task=rte" in block and "evaluate.allow_task_mismatch=true" in block
    allowed = evaluate_model_source(
        {**settings, "allow_task_mismatch": True}, "rte", str(tiny_glue_dir), 4, 0, {"enabled": False}
    )
    assert allowed["task"] == "rte" and allowed["model_task"] == "mrpc"


def test_evaluate_max_seq_length_beyond_the_models_positions_is_refused_before_anything_runs(tiny_teacher_dir):
    from bert_kd.config.errors import ParameterError
    from bert_kd.experiment.parameters import cross_check, validate_parameters

    for block in ("evaluate", "predict_glue"):
        params = validate_parameters({"task": "rte", block: {"model": str(tiny_teacher_dir), "max_seq_length": 4096}})
        with pytest.raises(ParameterError) as caught:
            cross_check(params, {block})
        assert f"{block}.max_seq_length" in caught.value.block() and "exceeds the 128 positions" in caught.value.block()
        cross_check(
            validate_parameters({"task": "rte", block: {"model": str(tiny_teacher_dir), "max_seq_length": 128}}),
            {block},
        )


@pytest.mark.parametrize(
    "spoil, words",
    [
        (lambda d: next(d.glob("*.safetensors")).rename(d / "pytorch_model.bin"), "no safetensors weights"),
        (lambda d: (d / "tokenizer.json").unlink(), "no tokenizer"),
        (
            lambda d: (d / "config.json").write_text(
                (d / "config.json")
                .read_text()
                .replace("{", '{"auto_map": {"AutoModelForSequenceClassification": "modeling.Evil"}, ', 1)
            ),
            "custom code",
        ),
    ],
)
def test_a_folder_without_the_projects_model_files_is_refused_before_loading(tmp_path, tiny_teacher_dir, spoil, words):
    model = tmp_path / "model"
    shutil.copytree(tiny_teacher_dir, model)
    spoil(model)
    with pytest.raises(ModelNotFoundError, match=words) as caught:
        resolve_model_source(str(model))
    assert "evaluate.model" in caught.value.block()


def test_an_empty_model_is_answered_with_uris_that_name_current_models():
    # models are logged as <row>-<task>-student and registered with @champion: the old runs:/<id>/model
    # hint named a folder that models logged by the current code do not have
    with pytest.raises(ModelNotFoundError) as caught:
        resolve_model_source("")
    block = caught.value.block()
    assert "models:/bert_kd-<task>-student@champion" in block and "runs:/<run id>/<row>-<task>-student" in block
    assert "runs:/<run id>/model" not in block


def test_an_mlflow_uris_download_is_removed_once_evaluated(tmp_path, monkeypatch, tiny_teacher_dir, tiny_glue_dir):
    """evaluate of an MLflow URI left its download (61 MB for MiniLM) in the temporary folder: it is removed once
    the model is in memory, the evaluation done."""
    import tempfile
    from pathlib import Path

    from bert_kd.experiment import tracker
    from bert_kd.pipelines.evaluate import nodes

    copy = Path(tempfile.mkdtemp(prefix=tracker.DOWNLOAD_PREFIX)) / "copy"
    download = _model_for(Path(shutil.copytree(tiny_teacher_dir, copy)), "rte")  # <download>/rte_model

    class Sources:
        def local_directory(self, source, key):
            return download

        def recorded_task(self, source):
            return None, ""

    monkeypatch.setattr(nodes, "model_sources", lambda: Sources())
    monkeypatch.chdir(tmp_path)
    settings = {"model": "runs:/0123456789abcdef/teacher-rte", "max_seq_length": 32}
    evaluation = nodes.evaluate_model_source(settings, "rte", str(tiny_glue_dir), 4, 0, {"enabled": False})
    assert evaluation["task"] == "rte" and not download.parent.exists()
