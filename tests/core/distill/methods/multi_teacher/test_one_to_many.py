"""The MT method: one-to-many groups and each loss term by hand (multi_teacher.one_to_many)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from bert_kd.core.distill import losses
from bert_kd.core.distill.methods import build_method
from bert_kd.core.distill.objective import DistillationObjective, Teacher
from bert_kd.core.distill.outputs import forward_features
from bert_kd.core.layer_maps import layer_map
from tests.core.distill.methods.multi_teacher.helpers import (
    manual_attention_mse,
    manual_masked_mse,
    manual_mean_pool,
    random_features,
    soft_ce,
    tiny_bert,
)


@pytest.mark.parametrize(
    "n_t, n_s, expected",
    [
        (12, 5, [[1, 2, 3], [4, 5, 6], [7, 8], [9, 10], [11, 12]]),
        (6, 4, [[1, 2], [3, 4], [5], [6]]),
    ],
)
def test_one_to_many_groups_uneven_depths(n_t, n_s, expected):
    groups = layer_map("one_to_many", n_t, n_s)
    assert groups == expected
    flat = [j for g in groups for j in g]
    assert flat == list(range(1, n_t + 1))  # in order, each teacher layer exactly once
    assert all(g == list(range(g[0], g[-1] + 1)) for g in groups)  # contiguous
    sizes = [len(g) for g in groups]
    assert max(sizes) - min(sizes) <= 1 and min(sizes) >= 1


def test_method_builds_one_group_set_per_teacher():
    student = tiny_bert(5, 8, 2)
    method = build_method({"method": "multi_teacher"}, student, [tiny_bert(12, 8, 2), tiny_bert(6, 12, 3)])
    assert method.groups == [layer_map("one_to_many", 12, 5), layer_map("one_to_many", 6, 5)]
    report = method.alignment_report()
    assert report["teacher_1"]["groups"] == [[1, 2], [3], [4], [5], [6]]
    assert report["teacher_1"]["width"] == 12 and report["teacher_1"]["heads"] == 3
    assert report["teacher_0"]["token_aligned"] is None  # nothing seen yet


def manual_span_scores(a, spans):
    """Hand span pooling of one row's (H, L, L) scores: query mean of key log-Σ-exp."""
    return torch.stack(
        [
            torch.stack(
                [torch.stack([torch.logsumexp(a[:, i, kspan], dim=-1) for i in qspan]).mean(0) for kspan in spans],
                dim=-1,
            )
            for qspan in spans
        ],
        dim=-2,
    )  # (H, S, S)


def test_each_term_matches_the_formulas(hand_setup):
    s = hand_setup
    config = {"method": "multi_teacher", "alpha": 0.1, "beta": 0.7, "temperature": 5.0, "teacher_prefixes": ["", "t1_"]}
    method = build_method(config, s.models.student, [s.models.t0, s.models.t1])
    terms = method.terms(s.student, s.teachers, s.batch)
    st, t0, t1 = s.student, s.teachers[0], s.teachers[1]
    Wh, We = method.hidden_projections, method.embedding_projections
    # shared spans of teacher 1 (conftest): (row, student tokens, teacher tokens)
    spans = [(0, [1], [1, 2]), (0, [2], [3]), (1, [1], [1])]
    with torch.no_grad():
        # Eq. 1: mean over teachers of soft-CE at temperature, times τ² (scale_by_t2 default)
        pred = 25.0 * (soft_ce(st.logits, t0.logits, 5.0) + soft_ce(st.logits, t1.logits, 5.0)) / 2
        # Eq. 2-4, teacher 0 (token level), groups [[1, 2], [3]]: group MEAN, sum over student layers
        h = [Wh[0](x) for x in st.hidden_states]
        hidden0 = (
            manual_masked_mse(h[1], t0.hidden_states[1], s.mask) + manual_masked_mse(h[1], t0.hidden_states[2], s.mask)
        ) / 2 + manual_masked_mse(h[2], t0.hidden_states[3], s.mask)

        # teacher 1 tokenizes differently: sub-token states averaged per shared span, groups [[1, 2, 3], [4, 5]]
        def span_mse(s_states, t_states, project):
            return sum(
                ((project(s_states[r, ss].mean(0)) - t_states[r, ts].mean(0)) ** 2).mean() for r, ss, ts in spans
            ) / len(spans)

        d = lambda i, j: span_mse(st.hidden_states[i], t1.hidden_states[j], Wh[1])  # noqa: E731
        hidden1 = (d(1, 1) + d(1, 2) + d(1, 3)) / 3 + (d(2, 4) + d(2, 5)) / 2
        # Eq. 6-9 (3 heads vs 2: head-averaged), padding entries (1e4) ignored
        a = lambda i, j: manual_attention_mse(st.attention_scores[i - 1], t0.attention_scores[j - 1], s.mask)  # noqa: E731
        attn0 = (a(1, 1) + a(1, 2)) / 2 + a(2, 3)

        def span_attention(i, j):  # same heads (2): mean over heads and the 4 + 1 span pairs
            errors = []
            for row, rows_spans in ((0, spans[:2]), (1, spans[2:])):
                ps = manual_span_scores(st.attention_scores[i - 1][row], [ss for _, ss, _ in rows_spans])
                pt = manual_span_scores(t1.attention_scores[j - 1][row], [ts for _, _, ts in rows_spans])
                errors.append(((ps - pt) ** 2).flatten(1))
            return torch.cat(errors, dim=1).mean()

        attn1 = (span_attention(1, 1) + span_attention(1, 2) + span_attention(1, 3)) / 3 + (
            span_attention(2, 4) + span_attention(2, 5)
        ) / 2
        # Eq. 11: token level for teacher 0, span level for teacher 1
        emb0 = manual_masked_mse(We[0](st.hidden_states[0]), t0.hidden_states[0], s.mask)
        emb1 = span_mse(st.hidden_states[0], t1.hidden_states[0], We[1])
        ce = F.cross_entropy(st.logits, s.batch["labels"])
    expected = {
        "ce": ce,
        "pred": pred,
        "hidden": (hidden0 + hidden1) / 2,
        "attn": (attn0 + attn1) / 2,
        "emb": (emb0 + emb1) / 2,
        "hidden_t0": hidden0,
        "hidden_t1": hidden1,
        "attn_t0": attn0,
        "attn_t1": attn1,
        "emb_t0": emb0,
        "emb_t1": emb1,
        "aligned_t0": 1.0,
        "aligned_t1": 0.0,
        "span_aligned_t0": 0.0,
        "span_aligned_t1": 1.0,
    }
    for name, value in expected.items():
        assert float(torch.as_tensor(terms[name]).detach()) == pytest.approx(float(value), rel=1e-5, abs=1e-6), name
    # Eq. 12-13 expressed as weights: L = β(αH + A + E + (1−α)P) + (1−β)CE
    w = method.weights
    assert w == pytest.approx({"ce": 0.3, "pred": 0.7 * 0.9, "hidden": 0.7 * 0.1, "attn": 0.7, "emb": 0.7})
    total = sum(w[k] * terms[k] for k in w)
    paper = 0.7 * (0.1 * terms["hidden"] + terms["attn"] + terms["emb"] + 0.9 * terms["pred"]) + 0.3 * terms["ce"]
    assert float(total.detach()) == pytest.approx(float(paper.detach()), rel=1e-6)
    report = method.alignment_report()["teacher_1"]
    assert report["attention"] == "used" and report["hidden_level"] == "span"
    assert report["shared_spans_per_example"] == pytest.approx(1.5)


@pytest.mark.parametrize("sentence_repr", ["mean", "summary"])
def test_sentence_alignment_formulas(hand_setup, sentence_repr):
    s = hand_setup
    config = {
        "method": "multi_teacher",
        "alignment": "sentence",
        "sentence_repr": sentence_repr,
        "teacher_prefixes": ["", "t1_"],
    }
    method = build_method(config, s.models.student, [s.models.t0, s.models.t1])
    assert not method.student_needs.get("attention") and not method.teacher_needs.get("attention")
    terms = method.terms(s.student, s.teachers, s.batch)
    st, t1 = s.student, s.teachers[1]
    Wh, We = method.hidden_projections, method.embedding_projections
    with torch.no_grad():
        if sentence_repr == "mean":
            sv = [manual_mean_pool(x, s.mask) for x in st.hidden_states]
            tv = [manual_mean_pool(x, s.mask1) for x in t1.hidden_states]
        else:
            sv = [x[:, 0] for x in st.hidden_states]
            tv = [x[:, 0] for x in t1.hidden_states]
        d = lambda i, j: ((Wh[1](sv[i]) - tv[j]) ** 2).mean()  # noqa: E731
        hidden1 = (d(1, 1) + d(1, 2) + d(1, 3)) / 3 + (d(2, 4) + d(2, 5)) / 2
        emb1 = (
            (We[1](manual_mean_pool(st.hidden_states[0], s.mask)) - manual_mean_pool(t1.hidden_states[0], s.mask1)) ** 2
        ).mean()
    assert float(terms["hidden_t1"]) == pytest.approx(float(hidden1), rel=1e-5)
    assert float(terms["emb_t1"]) == pytest.approx(float(emb1), rel=1e-5)
    assert float(terms["attn"]) == 0.0 and float(terms["aligned_t0"]) == 0.0
    assert method.alignment_report()["teacher_1"]["attention"] == "skipped"


def test_invalid_alignment_is_a_clear_error(hand_setup):
    s = hand_setup
    with pytest.raises(
        ValueError, match="alignment of method 'multi_teacher' must be one of \\('token', 'sentence'\\)"
    ):
        build_method({"method": "multi_teacher", "alignment": "auto"}, s.models.student, [s.models.t0])


def test_regression_prediction_term_is_mse_to_each_teacher():
    student, t0, t1 = (
        tiny_bert(2, 8, 2, num_labels=1),
        tiny_bert(2, 8, 2, num_labels=1),
        tiny_bert(4, 8, 2, num_labels=1),
    )
    method = build_method({"method": "multi_teacher"}, student, [t0, t1], regression=True)
    mask = torch.ones(3, 4, dtype=torch.long)
    s, a, b = (random_features(3, 4, n, 8, 2, mask, classes=1, seed=i) for i, n in enumerate((2, 2, 4)))
    batch = {
        "input_ids": torch.zeros(3, 4, dtype=torch.long),
        "attention_mask": mask,
        "labels": torch.tensor([0.5, 1.0, 4.0]),
    }
    terms = method.terms(s, {0: a, 1: b}, batch)
    expected = (((s.logits - a.logits) ** 2).mean() + ((s.logits - b.logits) ** 2).mean()) / 2
    assert float(terms["pred"]) == pytest.approx(float(expected), rel=1e-6)
    assert float(terms["ce"]) == pytest.approx(float(((s.logits.squeeze(-1) - batch["labels"]) ** 2).mean()), rel=1e-6)


def test_projection_auto_uses_identity_for_equal_widths():
    method = build_method(
        {"method": "multi_teacher", "projection": "auto"}, tiny_bert(2, 8, 2), [tiny_bert(2, 8, 2), tiny_bert(2, 12, 3)]
    )
    assert isinstance(method.hidden_projections[0], nn.Identity)
    assert isinstance(method.hidden_projections[1], nn.Linear)
    paper = build_method({"method": "multi_teacher"}, tiny_bert(2, 8, 2), [tiny_bert(2, 8, 2)])
    assert isinstance(paper.hidden_projections[0], nn.Linear)  # W_{h,k} always, as in the paper


def test_single_teacher_reduces_to_direct_computation():
    student, teacher = tiny_bert(2, 16, 2, seed=1), tiny_bert(4, 32, 4, seed=2)
    g = torch.Generator().manual_seed(0)
    batch = {
        "input_ids": torch.randint(5, 40, (3, 7), generator=g),
        "attention_mask": torch.tensor([[1] * 7, [1] * 5 + [0] * 2, [1] * 3 + [0] * 4]),
        "labels": torch.tensor([0, 1, 1]),
    }
    config = {"method": "multi_teacher", "alpha": 0.5, "beta": 0.2, "temperature": 10.0}
    method = build_method(config, student, [teacher])
    objective = DistillationObjective(student, [Teacher(teacher)], method, method.weights)
    got = objective.training_step(batch)

    s = forward_features(student, batch, hidden_states=True, attention_scores=True)
    with torch.no_grad():
        t = forward_features(teacher, batch, hidden_states=True, attention_scores=True)
    mask, groups = batch["attention_mask"], [[1, 2], [3, 4]]
    Wh, We = method.hidden_projections[0], method.embedding_projections[0]
    pred = losses.soft_cross_entropy(s.logits, t.logits, 10.0, scale_by_t2=True)
    hidden = losses.group_mean_mse([Wh(h) for h in s.hidden_states[1:]], list(t.hidden_states[1:]), groups, mask)
    attn = losses.group_mean_mse(s.attention_scores, t.attention_scores, groups, mask)
    emb = losses.masked_mse(We(s.hidden_states[0]), t.hidden_states[0], mask)
    ce = F.cross_entropy(s.logits, batch["labels"])
    direct = 0.2 * (0.5 * hidden + attn + emb + 0.5 * pred) + 0.8 * ce
    assert float(got["loss"].detach()) == pytest.approx(float(direct.detach()), rel=1e-5)

    # Two copies of the same teacher (with the same projections) give the same loss as K = 1.
    twin = build_method(config, student, [teacher, teacher])
    for k in range(2):
        twin.hidden_projections[k].load_state_dict(Wh.state_dict())
        twin.embedding_projections[k].load_state_dict(We.state_dict())
    twin_obj = DistillationObjective(student, [Teacher(teacher), Teacher(teacher)], twin, twin.weights)
    twin_loss = twin_obj.training_step(batch)["loss"].detach()
    assert float(twin_loss) == pytest.approx(float(got["loss"].detach()), rel=1e-5)
