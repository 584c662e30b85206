"""Tang et al.'s BiLSTM student: padding-free encodings, siamese pairs, Auto classes, ONNX."""

from __future__ import annotations

import torch

from bert_kd.config.schema import BiLSTM
from bert_kd.core.bilstm import BiLSTMConfig, BiLSTMForSequenceClassification, bilstm_student

IDS = torch.tensor([[1, 5, 6, 2, 7, 8, 9, 2, 0, 0], [1, 5, 2, 7, 2, 0, 0, 0, 0, 0]])
TYPES = torch.tensor([[0, 0, 0, 0, 1, 1, 1, 1, 0, 0], [0, 0, 0, 1, 1, 0, 0, 0, 0, 0]])


def _model(siamese=True):
    torch.manual_seed(0)
    config = BiLSTMConfig(vocab_size=50, embedding_size=8, hidden_size=6, classifier_size=5, siamese=siamese)
    return BiLSTMForSequenceClassification(config).eval()


def test_logits_do_not_depend_on_padding_or_batch_neighbours():
    model = _model()
    logits = model(IDS, (IDS > 0).long(), TYPES).logits
    padded = torch.nn.functional.pad(IDS, (0, 5))
    assert torch.allclose(logits, model(padded, (padded > 0).long(), torch.nn.functional.pad(TYPES, (0, 5))).logits)
    alone = model(IDS[1:, :5], (IDS[1:, :5] > 0).long(), TYPES[1:, :5]).logits
    assert torch.allclose(logits[1:], alone, atol=1e-6)


def test_siamese_features_are_symmetric_in_the_compare_terms():
    model = _model()
    h1 = model.encode(IDS, (IDS > 0) & (TYPES == 0))
    h2 = model.encode(IDS, (IDS > 0) & (TYPES == 1))
    assert h1.shape == (2, 12) and not torch.allclose(h1, h2)
    assert model.classifier[1].in_features == 4 * 12  # [h1, h2, h1 ⊙ h2, |h1 − h2|]
    assert _model(siamese=False).classifier[1].in_features == 12


def test_student_copies_the_teacher_embeddings_and_round_trips(tmp_path, tiny_teacher_dir):
    from transformers import AutoModelForSequenceClassification

    from bert_kd.core.models import load_classifier
    from bert_kd.core.onnx_export import export_onnx

    teacher = load_classifier(str(tiny_teacher_dir), 2)
    student = bilstm_student(teacher, BiLSTM(hidden_size=4, classifier_size=4), 2, siamese=True).eval()
    assert torch.equal(student.embeddings.weight, teacher.get_input_embeddings().weight)
    assert BiLSTM().hidden_size == 300  # the paper's size by default
    student.save_pretrained(tmp_path / "m")
    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path / "m").eval()
    ids = IDS.clamp(max=student.config.vocab_size - 1)
    expected = student(ids, (ids > 0).long(), TYPES).logits
    assert torch.allclose(loaded(ids, (ids > 0).long(), TYPES).logits, expected)
    import onnxruntime

    path = export_onnx(student, tmp_path / "m.onnx")
    session = onnxruntime.InferenceSession(str(path))
    for rows in (1, 2):  # a batch size other than the traced one's
        feed = {"input_ids": ids[:rows].numpy(), "attention_mask": (ids[:rows] > 0).long().numpy()}
        feed["token_type_ids"] = TYPES[:rows].numpy()
        assert abs(session.run(None, feed)[0] - expected[:rows].detach().numpy()).max() < 1e-5


def test_the_configs_default_sizes_are_the_schemas():
    """Tang et al.'s sizes (300 units per direction, a 400-unit ReLU layer): ``config.schema.BiLSTM`` trains with
    them, and the model's config (shipped as a pushed model's own code, so it imports nothing of bert_kd) writes
    the same numbers, so a config.json without them loads with the sizes the schema trains."""
    config, schema = BiLSTMConfig(), BiLSTM()
    assert (config.hidden_size, config.classifier_size, config.dropout) == (
        schema.hidden_size,
        schema.classifier_size,
        schema.dropout,
    )
    assert (config.hidden_size, config.classifier_size, config.dropout) == (300, 400, 0.0)
