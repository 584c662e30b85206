"""``distill_general`` and ``tinybert_general`` as registered, and the task stage's start from a general student."""

from __future__ import annotations

import torch

from tests.conftest import make_wordpiece_tokenizer
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
