"""Distillation losses (bert_kd.core.distill.losses) on tiny hand-computed tensors."""

import math

import pytest
import torch

from bert_kd.core.distill.losses import (
    alp_attention,
    alp_loss,
    attention_score_mse,
    cosine_hidden_loss,
    gather_one_to_one,
    group_mean_mse,
    kd_loss,
    kd_regression_loss,
    kl_div_loss,
    logits_mse,
    masked_mse,
    multi_teacher_prediction_loss,
    pkd_loss,
    soft_cross_entropy,
    ted_kl,
    ted_mse,
)
from bert_kd.core.layer_maps import layer_map

LN2, LN3 = math.log(2.0), math.log(3.0)


def t(x, grad=False):
    return torch.tensor(x, dtype=torch.float64, requires_grad=grad)


def close(a, b, tol=1e-9):
    a = a.detach() if isinstance(a, torch.Tensor) else a
    b = b.detach() if isinstance(b, torch.Tensor) else b
    return abs(float(a) - float(b)) < tol


# ----------------------------------------------------------------------------- Hinton KD


def test_kd_loss_hand_computed_t1():
    # row 1: s = (0, 0) -> p_s = (1/2, 1/2); t = (0, ln3) -> p_t = (1/4, 3/4)
    #        CE = -(1/4 + 3/4) * ln(1/2) = ln 2
    # row 2: s = (ln3, 0) -> p_s = (3/4, 1/4); t = (0, ln3) -> p_t = (1/4, 3/4)
    #        CE = -(1/4 ln(3/4) + 3/4 ln(1/4)) = ln4 - ln3/4
    s = t([[0.0, 0.0], [LN3, 0.0]])
    te = t([[0.0, LN3], [0.0, LN3]])
    expected = (LN2 + (2 * LN2 - LN3 / 4)) / 2
    assert close(kd_loss(s, te, 1.0), expected)
    assert close(soft_cross_entropy(s, te, 1.0, False), expected)


def test_kd_loss_multiplies_by_t_squared():
    # uniform student -> CE = ln 2 at any temperature; kd_loss = T^2 ln 2
    s = t([[0.0, 0.0]])
    te = t([[0.0, 2 * LN3]])
    assert close(soft_cross_entropy(s, te, 2.0, scale_by_t2=False), LN2)
    assert close(soft_cross_entropy(s, te, 2.0, scale_by_t2=True), 4 * LN2)
    assert close(kd_loss(s, te, 2.0), 4 * LN2)
    assert close(kd_loss(s, te, 3.0), 9 * LN2)


def test_kd_loss_temperature_softens_teacher():
    # s = (ln3, 0), t = (0, 2 ln3); at T=2: t/T = (0, ln3) -> p_t = (1/4, 3/4);
    # s/T = (ln3/2, 0) -> p_s = (sqrt3/(1+sqrt3), 1/(1+sqrt3))
    s = t([[LN3, 0.0]])
    te = t([[0.0, 2 * LN3]])
    r3 = math.sqrt(3.0)
    ce = -(0.25 * math.log(r3 / (1 + r3)) + 0.75 * math.log(1 / (1 + r3)))
    assert close(kd_loss(s, te, 2.0), 4 * ce)


def test_kd_loss_gradient_and_errors():
    s = t([[0.3, -0.2, 1.0]], grad=True)
    kd_loss(s, t([[1.0, 0.0, 0.0]]), 2.0).backward()
    assert s.grad is not None and torch.isfinite(s.grad).all() and s.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="shape"):
        kd_loss(t([[0.0, 1.0]]), t([[0.0, 1.0, 2.0]]), 1.0)
    with pytest.raises(ValueError, match="temperature"):
        kd_loss(t([[0.0, 1.0]]), t([[0.0, 1.0]]), 0.0)


def test_kl_div_loss_hand_computed_and_t2_option():
    # p_t = (1/4, 3/4), p_s = (1/2, 1/2): KL = 1/4 ln(1/2) + 3/4 ln(3/2)
    kl = 0.25 * math.log(0.5) + 0.75 * math.log(1.5)
    s = t([[0.0, 0.0]])
    assert close(kl_div_loss(s, t([[0.0, LN3]]), 1.0), kl)
    # same distributions at T=2 -> same KL; default does NOT multiply by T^2
    assert close(kl_div_loss(s, t([[0.0, 2 * LN3]]), 2.0), kl)
    assert close(kl_div_loss(s, t([[0.0, 2 * LN3]]), 2.0, scale_by_t2=True), 4 * kl)
    # batchmean: a second identical-distribution row (KL 0) halves the mean
    s2 = t([[0.0, 0.0], [5.0, 5.0]])
    te2 = t([[0.0, LN3], [1.0, 1.0]])
    assert close(kl_div_loss(s2, te2, 1.0), kl / 2)
    assert close(kl_div_loss(te2, te2, 1.0), 0.0)


def test_logits_mse_and_regression():
    # ((1-0)^2 + (2-0)^2) / 2 = 2.5 ; mean over batch and classes
    # Tang et al.: ||z_t - z_s||_2^2, summed over the classes, mean over the batch
    assert close(logits_mse(t([[1.0, 2.0]]), t([[0.0, 0.0]])), 5.0)
    assert close(logits_mse(t([[1.0, 2.0], [0.0, 0.0]]), t([[0.0, 0.0], [0.0, 0.0]])), 2.5)
    three = t([[1.0, 2.0, -2.0]])
    assert close(logits_mse(three, torch.zeros(1, 3)), 9.0)  # grows with the number of classes
    # STS-B: (B,1) vs (B,) allowed: ((1-0)^2 + (2-0)^2)/2
    assert close(kd_regression_loss(t([[1.0], [2.0]]), t([0.0, 0.0])), 2.5)
    assert close(kd_regression_loss(t([1.0, 2.0]), t([1.0, 4.0])), 2.0)
    with pytest.raises(ValueError):
        kd_regression_loss(t([1.0, 2.0]), t([1.0, 2.0, 3.0]))


# ----------------------------------------------------------------------------- PKD


def test_pkd_loss_hand_computed():
    # example 1: s1=(3,4)->(.6,.8), t1=(1,0): |(-.4,.8)|^2 = .8 ; s2=(0,2), t2=(0,5): 0  -> 0.8
    # example 2: s=(1,0),(1,0); t=(0,1),(-1,0): |(1,-1)|^2=2, |(2,0)|^2=4 -> 6
    # mean over batch, sum over layers: (0.8 + 6) / 2 = 3.4
    s = t([[[3.0, 4.0], [0.0, 2.0]], [[1.0, 0.0], [1.0, 0.0]]], grad=True)
    te = t([[[1.0, 0.0], [0.0, 5.0]], [[0.0, 1.0], [-1.0, 0.0]]])
    loss = pkd_loss(s, te)
    assert close(loss, 3.4)
    loss.backward()
    assert torch.isfinite(s.grad).all() and s.grad.abs().sum() > 0
    # scale invariance of both sides
    assert close(pkd_loss(s.detach() * 7.0, te * 0.1), 3.4)


def test_pkd_loss_shape_errors():
    with pytest.raises(ValueError, match="student_cls has 3 layers but teacher_cls mapping expects 2"):
        pkd_loss(torch.zeros(1, 3, 4), torch.zeros(1, 2, 4))
    with pytest.raises(ValueError, match="hidden size"):
        pkd_loss(torch.zeros(1, 2, 4), torch.zeros(1, 2, 5))
    with pytest.raises(ValueError, match="3 dimensions"):
        pkd_loss(torch.zeros(2, 4), torch.zeros(2, 4))


def test_gather_one_to_one_with_pkd_skip():
    student = torch.arange(6.0).view(1, 6, 1)  # student layer j holds j-1
    teacher = torch.arange(12.0).view(1, 12, 1)  # teacher layer k holds k-1
    s, te = gather_one_to_one(student, teacher, layer_map("pkd_skip", 12, 6))
    assert s.flatten().tolist() == [0, 1, 2, 3, 4]  # student layers 1..5
    assert te.flatten().tolist() == [1, 3, 5, 7, 9]  # teacher layers 2,4,6,8,10
    with pytest.raises(ValueError, match="not one-to-one"):
        gather_one_to_one(student[:, :4], teacher, layer_map("buckets_no", 12, 4))
    with pytest.raises(ValueError, match="6 layers but the mapping has 4"):
        gather_one_to_one(student, teacher, layer_map("pkd_skip", 12, 4))


# ----------------------------------------------------------------------------- ALP-KD


def test_alp_attention_hand_computed_all_layers():
    # s1 = (1, 0) picks the first component of each teacher layer: scores (0, ln2, ln5)
    #   -> alpha_1 = (1, 2, 5) / 8
    # s2 = (0, 1) picks the second component: scores (0, 0, 0) -> alpha_2 = (1/3, 1/3, 1/3)
    s = t([[[1.0, 0.0], [0.0, 1.0]]])
    te = t([[[0.0, 0.0], [LN2, 0.0], [math.log(5.0), 0.0]]])
    a = alp_attention(s, te, similarity="dot")  # Eq. 5 as printed, computed by hand
    assert a.shape == (1, 2, 3)
    assert torch.allclose(a[0, 0], t([1 / 8, 2 / 8, 5 / 8]))
    assert torch.allclose(a[0, 1], t([1 / 3, 1 / 3, 1 / 3]))


def test_alp_attention_buckets_zero_outside_and_unconnected():
    s = t([[[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]]])
    te = t([[[0.0, 0.0], [LN2, 0.0], [math.log(5.0), 0.0]]])
    a = alp_attention(s, te, buckets=[[1, 2], [2, 3], []], similarity="dot")
    # row 1 over {1, 2}: softmax(0, ln2) = (1/3, 2/3), 0 for layer 3
    assert torch.allclose(a[0, 0], t([1 / 3, 2 / 3, 0.0]))
    # row 2 over {2, 3}: scores (0, 0) -> (0, 1/2, 1/2)
    assert torch.allclose(a[0, 1], t([0.0, 0.5, 0.5]))
    # unconnected student layer: all zeros, no NaN
    assert torch.equal(a[0, 2], t([0.0, 0.0, 0.0]))


def test_alp_attention_rows_sum_to_one_within_buckets():
    torch.manual_seed(0)
    s = torch.randn(3, 4, 5)
    te = torch.randn(3, 12, 5)
    buckets = layer_map("buckets_po", 12, 4)
    a = alp_attention(s, te, buckets)
    assert a.shape == (3, 4, 12)
    for j, bucket in enumerate(buckets):
        inside = [k - 1 for k in bucket]
        outside = [k for k in range(12) if k not in inside]
        if bucket:
            assert torch.allclose(a[:, j, inside].sum(-1), torch.ones(3))
            assert (a[:, j, inside] > 0).all()
        else:
            assert torch.equal(a[:, j], torch.zeros(3, 12))
        assert torch.equal(a[:, j, outside], torch.zeros(3, len(outside)))
    assert torch.allclose(alp_attention(s, te).sum(-1), torch.ones(3, 4))


def test_alp_loss_hand_computed():
    # H = 2. s1 = (1, 0); teacher t1 = (0, 2), t2 = (ln3, 2): scores (0, ln3) -> alpha = (1/4, 3/4)
    #   C1 = (3/4 ln3, 2); MSE = ((1 - 0.75 ln3)^2 + (0 - 2)^2) / 2
    # s2 = (0, 0): scores (0, 0) -> alpha = (1/2, 1/2); C2 = (ln3/2, 2); MSE = ((ln3/2)^2 + 4) / 2
    s = t([[[1.0, 0.0], [0.0, 0.0]]], grad=True)
    te = t([[[0.0, 2.0], [LN3, 2.0]]])
    mse1 = ((1 - 0.75 * LN3) ** 2 + 4.0) / 2
    mse2 = ((LN3 / 2) ** 2 + 4.0) / 2
    loss = alp_loss(s, te, similarity="dot")
    assert close(loss, mse1 + mse2)
    loss.backward()
    assert torch.isfinite(s.grad).all() and s.grad.abs().sum() > 0
    # bucket {2} for student 1, student 2 unconnected: C1 = (ln3, 2) only
    assert close(alp_loss(s.detach(), te, [[2], []], "dot"), ((1 - LN3) ** 2 + 4.0) / 2)
    # an unconnected student layer contributes nothing, whatever its value
    s_far = t([[[1.0, 0.0], [7.0, -9.0]]])
    assert close(alp_loss(s_far, te, [[2], []], "dot"), ((1 - LN3) ** 2 + 4.0) / 2)


def test_alp_loss_batch_mean():
    s1, te1 = t([[[1.0, 0.0]]]), t([[[0.0, 2.0], [LN3, 2.0]]])
    s2, te2 = t([[[0.0, 0.0]]]), t([[[0.0, 0.0], [0.0, 0.0]]])
    expected = (((1 - 0.75 * LN3) ** 2 + 4.0) / 2 + 0.0) / 2
    assert close(alp_loss(torch.cat([s1, s2]), torch.cat([te1, te2]), similarity="dot"), expected)


def test_alp_errors():
    with pytest.raises(ValueError, match="equal widths"):
        alp_loss(torch.zeros(1, 2, 3), torch.zeros(1, 4, 5))
    with pytest.raises(ValueError, match="student_cls has 3 layers but the buckets mapping has 2"):
        alp_attention(torch.zeros(1, 3, 4), torch.zeros(1, 4, 4), [[1], [2]])
    with pytest.raises(ValueError, match="teacher layer 5"):
        alp_attention(torch.zeros(1, 2, 4), torch.zeros(1, 4, 4), [[1], [5]])
    with pytest.raises(ValueError, match="batch size"):
        alp_loss(torch.zeros(2, 2, 4), torch.zeros(1, 4, 4))


# ----------------------------------------------------------------------------- token-level


def test_masked_mse_hand_computed():
    # B=1, L=2, D=2: token errors 1 and 25 -> unmasked mean 13, mask (1, 0) -> 1
    s = t([[[1.0, 1.0], [5.0, 5.0]]])
    z = torch.zeros_like(s)
    assert close(masked_mse(s, z), 13.0)
    assert close(masked_mse(s, z, torch.tensor([[1, 0]])), 1.0)
    assert close(masked_mse(s, z, torch.tensor([[True, False]])), 1.0)


def test_masked_mse_pools_over_valid_tokens_of_batch_and_ignores_padding():
    # per-token errors: (1, 4) and (9, 100[pad]) -> (1 + 4 + 9) / 3, not per-sentence means
    s = t([[[1.0], [2.0]], [[3.0], [10.0]]], grad=True)
    z = torch.zeros(2, 2, 1, dtype=torch.float64)
    z[1, 1, 0] = float("-inf")  # garbage at a padded position must not leak
    mask = torch.tensor([[1, 1], [1, 0]])
    loss = masked_mse(s, z, mask)
    assert close(loss, 14.0 / 3)
    loss.backward()
    assert torch.isfinite(s.grad).all()
    assert s.grad[1, 1, 0] == 0
    assert close(s.grad[0, 0, 0], 2 * 1.0 / 3)
    # all-padding -> 0 rather than NaN
    assert close(masked_mse(s.detach(), z, torch.zeros(2, 2)), 0.0)
    with pytest.raises(ValueError, match="attention_mask has shape"):
        masked_mse(s, z, torch.ones(2, 3))
    with pytest.raises(ValueError, match="shape"):
        masked_mse(s, torch.zeros(2, 2, 2))


def test_attention_score_mse_same_heads_mean_of_per_head_mse():
    # Hs = Ht = 2, L = 2: head 1 all ones, head 2 all threes, teacher zeros
    #  per-head MSE = 1 and 9 -> mean 5 (averaging heads first would give 4)
    s = torch.stack([torch.ones(2, 2), 3 * torch.ones(2, 2)]).unsqueeze(0).double()
    z = torch.zeros(1, 2, 2, 2, dtype=torch.float64)
    assert close(attention_score_mse(s, z), 5.0)


def test_attention_score_mse_head_mismatch_averages_heads_first():
    # Hs = 2, Ht = 1: student heads averaged -> all 2; MSE vs 0 = 4 (not 5)
    s = torch.stack([torch.ones(2, 2), 3 * torch.ones(2, 2)]).unsqueeze(0).double()
    z = torch.zeros(1, 1, 2, 2, dtype=torch.float64)
    assert close(attention_score_mse(s, z), 4.0)
    assert close(attention_score_mse(z, s), 4.0)


def test_attention_score_mse_masks_query_and_key_padding():
    # L = 2, mask (1, 0): only entry (q=0, k=0) counts
    s = t([[[[1.0, 2.0], [3.0, 4.0]]]], grad=True)
    te = torch.zeros(1, 1, 2, 2, dtype=torch.float64)
    te[..., 1] = torch.finfo(torch.float64).min  # HF-style masked keys
    te[..., 1, :] = float("-inf")
    assert close(attention_score_mse(s.detach(), torch.zeros_like(te)), 7.5)  # (1+4+9+16)/4
    loss = attention_score_mse(s, te, torch.tensor([[1, 0]]))
    assert close(loss, 1.0)
    loss.backward()
    assert torch.isfinite(s.grad).all()
    assert s.grad[0, 0, 0, 0] == 2.0 and s.grad[0, 0].flatten()[1:].abs().sum() == 0
    # batch of two with different lengths: pooled over valid pairs (1 + 4*4) / (1 + 4)
    s2 = torch.ones(2, 1, 2, 2, dtype=torch.float64)
    s2[1] = 2.0
    z2 = torch.zeros_like(s2)
    assert close(attention_score_mse(s2, z2, torch.tensor([[1, 0], [1, 1]])), 17.0 / 5)


def test_attention_score_mse_errors():
    with pytest.raises(ValueError, match="4 dimensions"):
        attention_score_mse(torch.zeros(1, 2, 2), torch.zeros(1, 2, 2))
    with pytest.raises(ValueError, match="sequence"):
        attention_score_mse(torch.zeros(1, 2, 3, 3), torch.zeros(1, 2, 2, 2))
    with pytest.raises(ValueError, match="attention_mask"):
        attention_score_mse(torch.zeros(1, 2, 2, 2), torch.zeros(1, 2, 2, 2), torch.ones(1, 3))


def test_cosine_hidden_loss():
    # token 1: (1,0) vs (0,1) -> cos 0 -> 1 ; token 2: (1,1) vs (2,2) -> cos 1 -> 0
    s = t([[[1.0, 0.0], [1.0, 1.0]]], grad=True)
    te = t([[[0.0, 1.0], [2.0, 2.0]]])
    assert close(cosine_hidden_loss(s, te), 0.5)
    assert close(cosine_hidden_loss(s, te, torch.tensor([[1, 0]])), 1.0)
    assert close(cosine_hidden_loss(s, te, torch.tensor([[0, 1]])), 0.0)
    cosine_hidden_loss(s, te, torch.tensor([[1, 0]])).backward()
    assert s.grad[0, 1].abs().sum() == 0 and s.grad[0, 0].abs().sum() > 0


# ----------------------------------------------------------------------------- TED


def test_ted_mse_sums_layers_and_masks():
    # layer 1: token errors (1, 25) ; layer 2: token errors (4, 100)
    s1, s2 = t([[[1.0], [5.0]]], grad=True), t([[[2.0], [10.0]]])
    z = torch.zeros(1, 2, 1, dtype=torch.float64)
    assert close(ted_mse([z, z], [s1, s2], None), 13.0 + 52.0)
    loss = ted_mse([z, z], [s1, s2], torch.tensor([[1, 0]]))
    assert close(loss, 1.0 + 4.0)
    loss.backward()
    assert s1.grad[0, 1, 0] == 0 and s1.grad[0, 0, 0] == 2.0
    # argument order is (teacher, student): swapping must not matter for MSE but the
    # list lengths are checked
    with pytest.raises(ValueError, match="filtered_student has 1 layers but filtered_teacher has 2"):
        ted_mse([z, z], [s1], None)
    with pytest.raises(ValueError, match="list"):
        ted_mse(z, s1, None)


def test_ted_kl_sums_over_filters():
    kl = 0.25 * math.log(0.5) + 0.75 * math.log(1.5)
    s = t([[0.0, 0.0]], grad=True)
    teach = [t([[0.0, LN3]]), t([[3.0, 3.0]])]  # second filter: identical distribution, KL 0
    loss = ted_kl(teach, [s, s], 1.0)
    assert close(loss, kl)
    loss.backward()
    assert s.grad.abs().sum() > 0
    assert close(ted_kl([t([[0.0, 2 * LN3]])], [s.detach()], 2.0), kl)
    assert close(ted_kl([t([[0.0, 2 * LN3]])], [s.detach()], 2.0, scale_by_t2=True), 4 * kl)
    # order matters for KL: teacher first
    assert not close(ted_kl([s.detach()], [t([[0.0, LN3]])], 1.0), kl, tol=1e-3)


# ----------------------------------------------------------------------------- multi-teacher


def test_group_mean_mse_hidden():
    # student 1 = 2 vs teacher layers 1 (=0) and 2 (=1): MSEs 4 and 1 -> mean 2.5
    #   (the paper's 1/(q-p) = 1/1 would give 5)
    # student 2 = 0 vs teacher layer 3 (=3): 9 -> total 11.5
    s = [t([[[2.0]]], grad=True), t([[[0.0]]], grad=True)]
    teach = [t([[[0.0]]]), t([[[1.0]]]), t([[[3.0]]])]
    loss = group_mean_mse(s, teach, [[1, 2], [3]])
    assert close(loss, 11.5)
    loss.backward()
    assert close(s[0].grad.item(), 0.5 * (2 * 2.0 + 2 * 1.0))
    # empty group contributes 0
    assert close(group_mean_mse([x.detach() for x in s], teach, [[1, 2], []]), 2.5)
    with pytest.raises(ValueError, match="teacher layer 4"):
        group_mean_mse(s, teach, [[1, 2], [4]])
    with pytest.raises(ValueError, match="2 layers but the groups mapping has 1"):
        group_mean_mse(s, teach, [[1, 2]])


def test_group_mean_mse_masked_and_one_to_many_mapping():
    # L = 2, mask (1, 0): padded token (value 100) ignored
    s = [t([[[2.0], [100.0]]])]
    teach = [t([[[0.0], [0.0]]]), t([[[1.0], [0.0]]])]
    groups = layer_map("one_to_many", 2, 1)  # [[1, 2]]
    assert close(group_mean_mse(s, teach, groups, torch.tensor([[1, 0]])), 2.5)


def test_group_mean_mse_attention_uses_attention_score_mse():
    # student (1, 2 heads, 2, 2): heads all 1 and all 3; teacher layers 1 head-count 1 (zeros)
    # and 2 (2 heads, zeros). Layer 1: heads averaged -> 4; layer 2: per-head mean -> 5; mean 4.5
    s = [torch.stack([torch.ones(2, 2), 3 * torch.ones(2, 2)]).unsqueeze(0).double()]
    teach = [torch.zeros(1, 1, 2, 2, dtype=torch.float64), torch.zeros(1, 2, 2, 2, dtype=torch.float64)]
    assert close(group_mean_mse(s, teach, [[1, 2]]), 4.5)
    assert close(group_mean_mse(s, teach, [[1, 2]], kind="attention"), 4.5)
    with pytest.raises(ValueError, match="kind"):
        group_mean_mse(s, teach, [[1, 2]], kind="nope")


def test_multi_teacher_prediction_loss():
    # s = (ln3, 0) -> p_s = (3/4, 1/4); teachers p = (1/4, 3/4) and (3/4, 1/4)
    ce1 = -(0.25 * math.log(0.75) + 0.75 * math.log(0.25))
    ce2 = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    s = t([[LN3, 0.0]], grad=True)
    loss = multi_teacher_prediction_loss(s, [t([[0.0, LN3]]), t([[LN3, 0.0]])], 1.0)
    assert close(loss, (ce1 + ce2) / 2)
    loss.backward()
    assert s.grad.abs().sum() > 0
    # no T^2: uniform student at T=2 -> ln 2
    assert close(multi_teacher_prediction_loss(t([[0.0, 0.0]]), [t([[0.0, 5.0]])], 2.0), LN2)
    # regression: ((1-0)^2 + (1-3)^2) / 2 = 2.5
    assert close(multi_teacher_prediction_loss(t([[1.0]]), [t([0.0]), t([3.0])], 1.0, regression=True), 2.5)
    with pytest.raises(ValueError, match="at least one teacher"):
        multi_teacher_prediction_loss(s, [], 1.0)
