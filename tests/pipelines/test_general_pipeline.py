"""``distill_general`` and ``tinybert_general`` as registered, and the task stage's start from a general student."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.conftest import WORDS, make_wordpiece_tokenizer
from tests.pipelines.conftest import TINY_TRAINING
from tests.test_pipeline_registry import project  # noqa: F401  (the scratch-project fixture)


def test_tinybert_general_feeds_the_general_student_to_the_task_stage(project):  # noqa: F811
    from bert_kd.pipeline_registry import register_pipelines

    pipelines = register_pipelines()
    general = pipelines["distill_general"]
    assert {n.name for n in general.nodes} >= {"tokenize_corpus", "distill_general"}
    assert general.outputs() == {"general_student"}
    two_stage = pipelines["tinybert_general"]
    (start,) = [n for n in two_stage.nodes if n.name.endswith(".build_student")]
    assert "general_student" in start.inputs and start.name.startswith("tinybert_general.tinybert")
    assert any(n.name.endswith(".evaluate_student") for n in two_stage.nodes)


def test_the_task_stage_starts_from_the_general_students_weights_with_a_fresh_head(tmp_path):
    from transformers import BertConfig, BertModel

    from bert_kd.core.models import ModelBundle, load_classifier
    from bert_kd.pipelines.general.nodes import start_from_general

    tokenizer = make_wordpiece_tokenizer(tmp_path / "general")
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
    )
    torch.manual_seed(1)
    encoder = BertModel(config)
    encoder.save_pretrained(tmp_path / "general")
    teacher = load_classifier(str(tmp_path / "general"), 2)
    bundle = ModelBundle(teacher, tokenizer, {"task": "rte"})
    start = start_from_general(
        {"store_path": str(tmp_path / "general")},
        bundle,
        {"num_layers": 2, "init": "pretrained"},
        {"task": "rte", "seed": 0, "tracking": {"enabled": False}},
    )
    assert start.params.model == str(tmp_path / "general") and start.info["init"] is None
    layer = "encoder.layer.1.output.dense.weight"
    assert torch.equal(start.model.bert.state_dict()[layer], encoder.state_dict()[layer])
    assert start.model.classifier.out_features == 2


@pytest.mark.slow  # a teacher, a general student and a task-stage student: about a minute on 2 cores
def test_tinybert_end_to_end_general_stage_task_stage_evaluation(run_pipeline, tiny_teacher_dir, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(" ".join(WORDS[i : i + 6]) for i in range(40)) + "\n")
    general = {
        "teacher": str(tiny_teacher_dir),
        "max_seq_length": 16,
        "corpus": {"files": [str(corpus)], "glue_stand_in": False},  # conf/base's stand-in switched off
        "training": {"batch_size": 8, "max_steps": 3},
    }
    student = {"num_layers": 2, "training": {**TINY_TRAINING, "epochs": 2}}  # the tinybert row's two stages
    outputs, root, _ = run_pipeline("tinybert_general", general=general, student=student)
    stored = json.loads((root / "data/06_models/general_student.json").read_text())
    assert stored["global_step"] == 3 and Path(stored["store_path"]).parent.name == "general_student"
    students = list((root / "data/06_models/store/student").iterdir())
    assert len(students) == 1
    spec = json.loads((students[0] / "manifest.json").read_text())["spec"]
    assert "model" in spec["start"]  # keyed on the general student's files, not on the teacher's layers
    metrics = sorted((root / "data/08_reporting/students/tinybert_metrics.json").iterdir())[-1]
    assert json.loads((metrics / "tinybert_metrics.json").read_text())["metrics"]
