"""Heterogeneous teachers end to end through build_multi_teacher_objective and fit (multi_teacher.objective)."""

from __future__ import annotations

import copy

import pytest
import torch

from bert_kd.core.distill.methods.multi_teacher import build_multi_teacher_objective
from bert_kd.core.training import TrainingConfig, make_loader
from tests.core.distill.methods.multi_teacher.helpers import fit_briefly


def test_heterogeneous_teachers_token_terms_on_tokens_or_shared_spans(hetero):
    """RoBERTa (byte-level BPE) and BERT (other WordPiece) teachers + a BERT student: a few
    training steps with every term of every teacher non-zero and finite."""
    student = hetero.student()
    before = [copy.deepcopy(t.model.state_dict()) for t in hetero.teachers]
    objective = build_multi_teacher_objective(
        student, hetero.teachers, {"method": "multi_teacher", "alpha": 0.5, "beta": 0.5, "temperature": 2.0}
    )
    result, logged = fit_briefly(objective, hetero)
    assert result.global_step == 3 and "accuracy" in result.best_metrics
    report = objective.method.alignment_report()
    assert set(report) == {"bert_same_vocab", "roberta_bpe", "bert_other_vocab"}
    aligned = report["bert_same_vocab"]
    assert aligned["token_aligned"] is True and aligned["token_aligned_fraction"] == 1.0 and aligned["batches"] == 3
    assert aligned["attention"] == "used" and aligned["hidden_level"] == "token"
    assert (aligned["layers"], aligned["width"], aligned["heads"]) == (4, 32, 4)
    assert aligned["groups"] == [[1, 2], [3, 4]]
    for name, groups in (("roberta_bpe", [[1, 2], [3]]), ("bert_other_vocab", [[1, 2, 3], [4, 5]])):
        info = report[name]
        assert info["token_aligned"] is False and info["span_aligned_fraction"] == 1.0
        assert info["attention"] == "used" and info["hidden_level"] == "span" and info["embedding_level"] == "span"
        assert info["shared_spans_per_example"] > 5
        assert info["groups"] == groups
    assert report["roberta_bpe"]["model_type"] == "roberta" and report["roberta_bpe"]["heads"] == 3
    for m in logged:  # per-batch terms: every teacher contributes to every term
        assert m["train/aligned_t0"] == 1.0 and m["train/span_aligned_t1"] == 1.0 and m["train/span_aligned_t2"] == 1.0
        for k in range(3):
            for term in ("hidden", "attn", "emb"):
                assert 0 < m[f"train/{term}_t{k}"] < float("inf"), (term, k)
        assert m["train/attn"] == pytest.approx(sum(m[f"train/attn_t{k}"] for k in range(3)) / 3, rel=1e-5)
    metrics = objective.method.alignment_metrics()
    assert metrics["align/roberta_bpe/token_aligned_fraction"] == 0.0
    assert metrics["align/roberta_bpe/span_aligned_fraction"] == 1.0
    for spec, state in zip(hetero.teachers, before):  # teachers never change
        for key, value in spec.model.state_dict().items():
            assert torch.equal(value, state[key]), key


def test_sentence_alignment_compares_sentence_vectors_without_attention(hetero):
    objective = build_multi_teacher_objective(
        hetero.student(), hetero.teachers, {"method": "multi_teacher", "alignment": "sentence"}
    )
    _, logged = fit_briefly(objective, hetero, steps=2)
    report = objective.method.alignment_report()
    for info in report.values():
        assert info["hidden_level"] == "sentence" and info["attention"] == "skipped"
    for m in logged:
        assert m["train/attn"] == 0.0 and m["train/hidden_t1"] > 0 and m["train/emb_t2"] > 0


def test_a_batch_without_span_columns_is_an_error_naming_the_option(hetero):
    objective = build_multi_teacher_objective(hetero.student(), hetero.teachers, {"method": "multi_teacher"})
    rows = hetero.ds["train"].remove_columns(["t1_span_ids", "t1_student_span_ids"])
    batch = next(iter(make_loader(rows, 4, hetero.collator, shuffle=False)))
    with pytest.raises(ValueError, match="roberta_bpe.*t1_span_ids.*alignment: sentence"):
        objective.training_step(batch)


def test_gradients_reach_student_and_projections_never_teachers(hetero):
    student = hetero.student()
    objective = build_multi_teacher_objective(student, hetero.teachers, {"method": "multi_teacher"})
    objective.train()
    batch = next(iter(make_loader(hetero.ds["train"], 8, hetero.collator, shuffle=False)))
    out = objective.training_step(batch)
    out["loss"].backward()
    grads = [p.grad for p in student.parameters() if p.requires_grad]
    assert sum(g is not None and bool(g.abs().sum() > 0) for g in grads) > 0.8 * len(grads)
    method = objective.method
    for k in range(3):
        for proj in (method.hidden_projections[k], method.embedding_projections[k]):
            assert proj.weight.grad is not None and proj.weight.grad.abs().sum() > 0
    for spec in objective.teachers:
        assert all(not p.requires_grad and p.grad is None for p in spec.parameters())
    aux = {id(p) for g in objective.parameter_groups(TrainingConfig()) for p in g["params"]}
    assert id(method.hidden_projections[1].weight) in aux
    assert not any(id(p) in aux for t in objective.teachers for p in t.parameters())
