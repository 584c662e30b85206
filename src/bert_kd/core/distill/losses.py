"""Distillation losses as pure functions of tensors (no ``nn.Module`` state).

Conventions
-----------
* Layer numbers are 1-based (= index into HF ``hidden_states``; index 0 = embeddings).
  Per-layer [CLS] tensors have shape ``(batch, layers, hidden)``; teacher layer ``k`` of a
  mapping is column ``k - 1`` of the teacher tensor.
* Reduction: mean over the batch, SUM over mapped student layers, "MSE" = mean over the
  hidden dimension (and over valid token positions for token-level terms).
* Token-level terms pool over all valid positions of the batch: ``sum(err * mask) /
  sum(mask)`` (each valid token weighs the same, whatever its sentence's length).
* Nothing here detaches the teacher: compute teacher tensors under ``torch.no_grad()``.
* Temperature scaling: [`kd_loss`][] multiplies by ``T**2`` (Hinton et al.);
  [`soft_cross_entropy`][], [`kl_div_loss`][], [`ted_kl`][] and
  [`multi_teacher_prediction_loss`][] do NOT unless ``scale_by_t2=True`` (they follow the
  TinyBERT / TED / multi-teacher formulas literally).

Equation numbers: "ALP" = Passban et al. 2021 (ALP-KD), "TED" = Liang et al. 2023,
"MT" = Shi et al. 2023 (multi-teacher one-to-many), "TinyBERT" = Jiao et al. 2020.
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "soft_cross_entropy",
    "kd_loss",
    "kl_div_loss",
    "logits_mse",
    "kd_regression_loss",
    "pkd_loss",
    "gather_one_to_one",
    "ALP_SIMILARITIES",
    "ALP_DEFAULT_SIMILARITY",
    "ALP_LITERAL_SIMILARITY",
    "alp_similarity",
    "alp_scores",
    "alp_attention",
    "alp_entropy",
    "alp_loss",
    "masked_mse",
    "attention_score_mse",
    "cosine_hidden_loss",
    "ted_mse",
    "ted_kl",
    "group_mean_mse",
    "multi_teacher_prediction_loss",
]


# ----------------------------------------------------------------------------- helpers


def _check_tensor(name: str, x: object, ndim: int | None = None) -> Tensor:
    if not isinstance(x, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if ndim is not None and x.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(x.shape)}")
    return x


def _check_same_shape(a_name: str, a: Tensor, b_name: str, b: Tensor) -> None:
    if a.shape != b.shape:
        raise ValueError(
            f"{a_name} has shape {tuple(a.shape)} but {b_name} has shape {tuple(b.shape)}; they must match"
        )


def _check_temperature(temperature: float) -> float:
    t = float(temperature)
    if not t > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    return t


def _check_logits(student_logits: Tensor, teacher_logits: Tensor) -> None:
    _check_tensor("student_logits", student_logits)
    _check_tensor("teacher_logits", teacher_logits)
    if student_logits.dim() < 1:
        raise ValueError("logits need a class dimension, got a 0-d tensor")
    _check_same_shape("student_logits", student_logits, "teacher_logits", teacher_logits)


def _check_mask(mask: Tensor | None, expected_shape: torch.Size, what: str) -> Tensor | None:
    """Return a bool mask of ``expected_shape`` (or ``None``)."""
    if mask is None:
        return None
    if not isinstance(mask, Tensor):
        raise ValueError(f"attention_mask must be a torch.Tensor, got {type(mask).__name__}")
    if mask.shape != expected_shape:
        raise ValueError(f"attention_mask has shape {tuple(mask.shape)} but {what} expects {tuple(expected_shape)}")
    return mask != 0


def _masked_mean(err: Tensor, mask: Tensor | None) -> Tensor:
    """Mean of ``err`` over positions where ``mask`` (broadcastable, bool) is true; 0 if none."""
    if mask is None:
        return err.mean()
    mask = mask.expand_as(err)
    total = torch.where(mask, err, torch.zeros((), dtype=err.dtype, device=err.device)).sum()
    count = mask.sum().clamp(min=1).to(err.dtype)
    return total / count


def _zero_where_masked(x: Tensor, mask: Tensor | None) -> Tensor:
    """Replace masked-out entries by 0 *before* arithmetic so -inf/NaN padding scores
    (HF uses dtype-min for masked keys) cannot leak NaN into values or gradients."""
    if mask is None:
        return x
    return torch.where(mask, x, torch.zeros((), dtype=x.dtype, device=x.device))


def _check_layer_list(name: str, xs: object) -> list[Tensor]:
    if isinstance(xs, Tensor) or not isinstance(xs, (list, tuple)):
        raise ValueError(f"{name} must be a list of tensors, got {type(xs).__name__}")
    for i, x in enumerate(xs):
        _check_tensor(f"{name}[{i}]", x)
    return list(xs)


def _mapping_mask(buckets: Sequence[Sequence[int]] | None, m: int, n: int, device: torch.device) -> Tensor:
    """Bool (m, n) mask: ``mask[j, k-1]`` true iff teacher layer k is in bucket of student j+1."""
    if buckets is None:
        return torch.ones(m, n, dtype=torch.bool, device=device)
    if isinstance(buckets, (str, bytes)) or not isinstance(buckets, (list, tuple)):
        raise ValueError(f"buckets must be a layer_map result (list of lists), got {buckets!r}")
    if len(buckets) != m:
        raise ValueError(f"student_cls has {m} layers but the buckets mapping has {len(buckets)} entries")
    mask = torch.zeros(m, n, dtype=torch.bool)
    for j, bucket in enumerate(buckets, start=1):
        if isinstance(bucket, (str, bytes)) or not isinstance(bucket, (list, tuple)):
            raise ValueError(f"buckets entry for student layer {j} must be a list, got {bucket!r}")
        for k in bucket:
            if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= n:
                raise ValueError(
                    f"buckets entry for student layer {j} = {list(bucket)!r} refers to teacher "
                    f"layer {k!r} but teacher_cls has layers 1..{n}"
                )
            mask[j - 1, k - 1] = True
    return mask.to(device)


# ----------------------------------------------------------------------------- prediction layer


def soft_cross_entropy(
    student_logits: Tensor, teacher_logits: Tensor, temperature: float = 1.0, scale_by_t2: bool = False
) -> Tensor:
    """Soft cross-entropy ``-sum_c softmax(t/T)_c log_softmax(s/T)_c``, mean over the batch.

    ALP-KD Eq. 2 / PKD ``L_DS`` / TinyBERT ``L_pred`` (Eq. 10 there) / MT Eq. 1 per teacher.
    Logits are ``(..., C)``; the mean runs over every leading dimension.  Multiplied by
    ``T**2`` only if ``scale_by_t2``.
    """
    _check_logits(student_logits, teacher_logits)
    t = _check_temperature(temperature)
    p_teacher = F.softmax(teacher_logits / t, dim=-1)
    log_p_student = F.log_softmax(student_logits / t, dim=-1)
    loss = -(p_teacher * log_p_student).sum(dim=-1).mean()
    return loss * (t * t) if scale_by_t2 else loss


def kd_loss(student_logits: Tensor, teacher_logits: Tensor, temperature: float) -> Tensor:
    """Hinton KD (ALP-KD Eq. 2): ``T**2 * mean_batch(-sum_c softmax(t/T)_c log_softmax(s/T)_c)``."""
    return soft_cross_entropy(student_logits, teacher_logits, temperature, scale_by_t2=True)


def kl_div_loss(
    student_logits: Tensor, teacher_logits: Tensor, temperature: float = 1.0, scale_by_t2: bool = False
) -> Tensor:
    """``KL(softmax(t/T) || softmax(s/T))`` summed over classes, mean over the batch.

    TED Eq. 1/7 ``D_pred`` ("batchmean").  NOT multiplied by ``T**2`` unless ``scale_by_t2``
    (TED writes the plain KL of the tempered distributions).
    """
    _check_logits(student_logits, teacher_logits)
    t = _check_temperature(temperature)
    log_p_teacher = F.log_softmax(teacher_logits / t, dim=-1)
    log_p_student = F.log_softmax(student_logits / t, dim=-1)
    kl = (log_p_teacher.exp() * (log_p_teacher - log_p_student)).sum(dim=-1).mean()
    return kl * (t * t) if scale_by_t2 else kl


def logits_mse(student_logits: Tensor, teacher_logits: Tensor) -> Tensor:
    """Tang et al. 2019 logit regression, L_distill = ||z_t - z_s||_2^2: the squared L2 distance
    over the classes (a sum, not a mean), averaged over the batch."""
    _check_logits(student_logits, teacher_logits)
    return (student_logits - teacher_logits).pow(2).sum(dim=-1).mean()


def kd_regression_loss(student_pred: Tensor, teacher_pred: Tensor) -> Tensor:
    """Prediction distillation for regression tasks (STS-B): MSE, mean over the batch.

    Replaces the soft cross-entropy of ALP-KD Eq. 2 when there is a single real output;
    ``(B,)`` and ``(B, 1)`` predictions may be mixed.
    """
    _check_tensor("student_pred", student_pred)
    _check_tensor("teacher_pred", teacher_pred)
    s, t = student_pred, teacher_pred
    if s.shape != t.shape:
        squeeze = lambda x: x.squeeze(-1) if x.dim() >= 2 and x.shape[-1] == 1 else x  # noqa: E731
        s, t = squeeze(s), squeeze(t)
        if s.shape != t.shape:
            raise ValueError(
                f"student_pred has shape {tuple(student_pred.shape)} but teacher_pred has shape "
                f"{tuple(teacher_pred.shape)}"
            )
    return F.mse_loss(s, t, reduction="mean")


# ----------------------------------------------------------------------------- [CLS] layer losses


def _check_cls_pair(student_cls: Tensor, teacher_cls: Tensor) -> None:
    _check_tensor("student_cls", student_cls, ndim=3)
    _check_tensor("teacher_cls", teacher_cls, ndim=3)
    if student_cls.shape[0] != teacher_cls.shape[0]:
        raise ValueError(
            f"student_cls has batch size {student_cls.shape[0]} but teacher_cls has {teacher_cls.shape[0]}"
        )


def gather_one_to_one(
    student_cls: Tensor, teacher_cls: Tensor, mapping: Sequence[Sequence[int]]
) -> tuple[Tensor, Tensor]:
    """Select the connected student layers and their single mapped teacher layers (PKD Eq. 3).

    ``student_cls`` is ``(B, n_s, H)`` (student layers 1..n_s), ``teacher_cls`` is
    ``(B, n_t, H')`` (teacher layers 1..n_t); ``mapping`` is a [`layer_map`][layer_maps.layer_map] result whose
    non-empty entries hold exactly one teacher layer.  Returns ``(student, teacher)`` of shapes
    ``(B, m, H)`` and ``(B, m, H')`` with ``m`` = number of connected student layers.
    """
    _check_cls_pair(student_cls, teacher_cls)
    n_s, n_t = student_cls.shape[1], teacher_cls.shape[1]
    if len(mapping) != n_s:
        raise ValueError(f"student_cls has {n_s} layers but the mapping has {len(mapping)} entries")
    s_idx, t_idx = [], []
    for j, entry in enumerate(mapping, start=1):
        if len(entry) == 0:
            continue
        if len(entry) != 1:
            raise ValueError(
                f"mapping entry for student layer {j} = {list(entry)!r} is not one-to-one "
                "(use alp_loss or group_mean_mse for many teacher layers)"
            )
        k = entry[0]
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= n_t:
            raise ValueError(
                f"mapping entry for student layer {j} refers to teacher layer {k!r} but teacher_cls has layers 1..{n_t}"
            )
        s_idx.append(j - 1)
        t_idx.append(k - 1)
    s_index = torch.tensor(s_idx, dtype=torch.long, device=student_cls.device)
    t_index = torch.tensor(t_idx, dtype=torch.long, device=teacher_cls.device)
    return student_cls.index_select(1, s_index), teacher_cls.index_select(1, t_index)


def pkd_loss(student_cls: Tensor, teacher_cls: Tensor) -> Tensor:
    """Patient KD (ALP-KD Eq. 3; PKD ``L_PT``): mean over batch of
    ``sum_j || s_j/||s_j|| - t_j/||t_j|| ||_2**2``.

    Inputs are already mapped: both ``(B, m, H)`` with matching layers (see
    [`gather_one_to_one`][]).  The paper's leading minus sign is a typo (the loss is a
    squared distance and is minimised).
    """
    _check_cls_pair(student_cls, teacher_cls)
    if student_cls.shape[1] != teacher_cls.shape[1]:
        raise ValueError(
            f"student_cls has {student_cls.shape[1]} layers but teacher_cls mapping expects {teacher_cls.shape[1]}"
        )
    if student_cls.shape[2] != teacher_cls.shape[2]:
        raise ValueError(
            f"student_cls has hidden size {student_cls.shape[2]} but teacher_cls has "
            f"{teacher_cls.shape[2]}; project the student first"
        )
    s = F.normalize(student_cls, p=2, dim=-1)
    t = F.normalize(teacher_cls, p=2, dim=-1)
    return (s - t).pow(2).sum(dim=(1, 2)).mean()


def _check_alp_inputs(student_cls: Tensor, teacher_cls: Tensor) -> None:
    _check_cls_pair(student_cls, teacher_cls)
    if student_cls.shape[2] != teacher_cls.shape[2]:
        raise ValueError(
            f"student_cls has hidden size {student_cls.shape[2]} but teacher_cls has "
            f"{teacher_cls.shape[2]}; ALP-KD needs equal widths (project the student first)"
        )


#: The scores α can be the softmax of ([`alp_scores`][]); ``dot`` is Eq. 5 as printed.
ALP_SIMILARITIES = ("dot", "scaled_dot", "cosine", "ln_scaled_dot")
#: α's score when a recipe names none: ALP-KD's Figure 3 shows α spread over the teacher's layers, which the
#: literal ``dot`` is not on MiniLM (one-hot on its largest-norm layer); ``ln_scaled_dot`` spreads it
#: (docs/fidelity.md, results/alp_alpha/scores.md). The one place the default is written.
ALP_DEFAULT_SIMILARITY = "ln_scaled_dot"
#: Eq. 5 as printed, the score of every ALP trial before the score was an option (kept out of key material).
ALP_LITERAL_SIMILARITY = "dot"


def alp_similarity(similarity: str | None = None, temperature: float | None = None) -> str:
    """The score a recipe's ``similarity`` names (``None``: [`ALP_DEFAULT_SIMILARITY`][]), after checking it and
    ``temperature`` (``None`` or a number > 0): the one check of both, for recipes and for the loss."""
    resolved = ALP_DEFAULT_SIMILARITY if similarity is None else similarity
    if resolved not in ALP_SIMILARITIES:
        raise ValueError(f"similarity must be one of {', '.join(ALP_SIMILARITIES)}, got {similarity!r}")
    if temperature is not None and (
        isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature > 0
    ):
        raise ValueError(f"similarity_temperature must be a number > 0, got {temperature!r}")
    return resolved


def alp_scores(
    student_cls: Tensor, teacher_cls: Tensor, similarity: str | None = None, temperature: float | None = None
) -> Tensor:
    """The scores ``(B, m, n)`` whose softmax over teacher layers is α (ALP-KD Eq. 5), divided by
    ``temperature`` (``None`` = 1); ``similarity`` ``None`` is [`ALP_DEFAULT_SIMILARITY`][]:

    * ``dot``: ``h_S^j · h_T^k``, Eq. 5 as printed (the paper's "dot product");
    * ``scaled_dot``: ``h_S^j · h_T^k / √d``, d the hidden width (Vaswani et al. 2017, Eq. 1);
    * ``cosine``: ``h_S^j · h_T^k / (‖h_S^j‖ ‖h_T^k‖)``, the L2-normalised states PKD compares
      (ALP-KD Eq. 3; Sun et al. 2019, Eq. 4);
    * ``ln_scaled_dot``: ``LN(h_S^j) · LN(h_T^k) / √d``, each state layer-normalised over its hidden
      dimension (no learned gain or bias) before the scaled dot product: √d times the states'
      centred cosine (their Pearson correlation over the hidden units), so neither their norms nor
      their means decide α, and the width sets the sharpness as in scaled dot-product attention.
    """
    similarity = alp_similarity(similarity, temperature)
    if similarity == "cosine":
        student_cls, teacher_cls = F.normalize(student_cls, p=2, dim=-1), F.normalize(teacher_cls, p=2, dim=-1)
    elif similarity == "ln_scaled_dot":
        width = (student_cls.shape[-1],)
        student_cls, teacher_cls = F.layer_norm(student_cls, width), F.layer_norm(teacher_cls, width)
    scores = torch.einsum("bmh,bnh->bmn", student_cls, teacher_cls)
    if similarity in ("scaled_dot", "ln_scaled_dot"):
        scores = scores / student_cls.shape[-1] ** 0.5
    return scores if temperature is None else scores / float(temperature)


def _alp_weights(
    student_cls: Tensor,
    teacher_cls: Tensor,
    buckets: Sequence[Sequence[int]] | None,
    similarity: str | None = None,
    temperature: float | None = None,
) -> tuple[Tensor, Tensor]:
    """Eq. 5-6 weights ``(B, m, n)`` and the float ``(m,)`` indicator of connected student layers."""
    m, n = student_cls.shape[1], teacher_cls.shape[1]
    mask = _mapping_mask(buckets, m, n, student_cls.device)  # (m, n)
    empty = ~mask.any(dim=1)  # (m,)
    # Empty rows get a dummy all-true mask so the softmax stays finite; they are zeroed after.
    soft_mask = mask | empty.unsqueeze(1)
    scores = alp_scores(student_cls, teacher_cls, similarity, temperature)
    scores = scores.masked_fill(~soft_mask, float("-inf"))
    connected = (~empty).to(scores.dtype)
    alpha = torch.softmax(scores, dim=-1) * connected.view(1, m, 1)
    return alpha, connected


def alp_attention(
    student_cls: Tensor,
    teacher_cls: Tensor,
    buckets: Sequence[Sequence[int]] | None = None,
    similarity: str | None = None,
    temperature: float | None = None,
) -> Tensor:
    """ALP-KD attention weights (Eq. 5-6): ``alpha[b, j, k] = softmax_{k in A(j)} score(h_S^j, h_T^k)``.

    ``student_cls`` ``(B, m, H)``, ``teacher_cls`` ``(B, n, H)`` -> ``(B, m, n)``.  ``buckets``
    is a [`layer_map`][layer_maps.layer_map] result of length ``m`` (teacher layer ``k`` = column ``k - 1``);
    ``None`` = every teacher layer for every student layer (Eq. 6).  Weights outside a bucket
    are 0; rows of unconnected student layers (empty bucket) are all 0.  ``similarity`` and
    ``temperature``: [`alp_scores`][] (``None``: [`ALP_DEFAULT_SIMILARITY`][]).
    """
    _check_alp_inputs(student_cls, teacher_cls)
    alpha, _ = _alp_weights(student_cls, teacher_cls, buckets, similarity, temperature)
    return alpha


def alp_entropy(alpha: Tensor) -> Tensor:
    """Entropy in nats of each α row (Eq. 6), ``(B, m, n)`` -> ``(B, m)``: 0 when one teacher layer
    takes all the weight, ``log |A(j)|`` when the bucket's layers share it equally (0 for an
    unconnected student layer's all-zero row)."""
    return -torch.special.xlogy(alpha, alpha).sum(dim=-1)


def alp_loss(
    student_cls: Tensor,
    teacher_cls: Tensor,
    buckets: Sequence[Sequence[int]] | None = None,
    similarity: str | None = None,
    temperature: float | None = None,
) -> Tensor:
    """ALP-KD loss (Eq. 7): mean over batch of ``sum_{connected j} MSE(h_S^j, C^j)`` with
    ``C^j = sum_k alpha_jk h_T^k`` (Eq. 5-6) and MSE = mean over the hidden dimension.

    Shapes, ``buckets``, ``similarity`` and ``temperature`` as in [`alp_attention`][]; widths must be equal.
    """
    _check_alp_inputs(student_cls, teacher_cls)
    alpha, connected = _alp_weights(student_cls, teacher_cls, buckets, similarity, temperature)
    context = torch.bmm(alpha, teacher_cls)  # (B, m, H): C^j
    per_layer = (student_cls - context).pow(2).mean(dim=-1)  # (B, m): MSE over hidden
    return (per_layer * connected).sum(dim=1).mean()


# ----------------------------------------------------------------------------- token-level losses


def _check_token_pair(student: Tensor, teacher: Tensor, attention_mask: Tensor | None) -> Tensor | None:
    """Validate same-shape ``(..., D)`` student/teacher tensors and their ``(...)`` mask."""
    _check_tensor("student", student)
    _check_tensor("teacher", teacher)
    if student.dim() < 1:
        raise ValueError("student must have a feature dimension")
    _check_same_shape("student", student, "teacher", teacher)
    return _check_mask(attention_mask, student.shape[:-1], f"student of shape {tuple(student.shape)}")


def masked_mse(student: Tensor, teacher: Tensor, attention_mask: Tensor | None = None) -> Tensor:
    """MSE between token-level tensors ``(B, L, D)`` (TinyBERT Eq. 8-9 ``L_hidn``/``L_embd``,
    TED Eq. 2, MT Eq. 2/11), mean over valid tokens (``attention_mask`` ``(B, L)`` of 0/1,
    pooled over the batch) and over ``D``.  Any ``(..., D)`` shape works with a mask of shape
    ``(...)``.  Padding entries are ignored, also in the gradient.
    """
    mask = _check_token_pair(student, teacher, attention_mask)
    if mask is not None:
        mask = mask.unsqueeze(-1)
        student = _zero_where_masked(student, mask)
        teacher = _zero_where_masked(teacher, mask)
    err = (student - teacher).pow(2)
    if mask is None:
        return err.mean()
    per_token = err.mean(dim=-1, keepdim=True)
    return _masked_mean(per_token, mask)


def attention_score_mse(student_scores: Tensor, teacher_scores: Tensor, attention_mask: Tensor | None = None) -> Tensor:
    """Attention-matrix MSE (TinyBERT ``L_attn``; MT Eq. 6-7): ``(B, Hs, L, L)`` vs ``(B, Ht, L, L)``.

    If ``Hs == Ht``: mean over heads of the per-head MSE.  Otherwise both are first averaged
    over heads, then compared.  With ``attention_mask`` ``(B, L)``, entries whose query or key
    is padding are excluded (pooled mean over the valid (query, key) pairs of the batch); the
    excluded entries may hold -inf / dtype-min without producing NaN.
    """
    _check_tensor("student_scores", student_scores, ndim=4)
    _check_tensor("teacher_scores", teacher_scores, ndim=4)
    b, hs, lq, lk = student_scores.shape
    bt, ht, lqt, lkt = teacher_scores.shape
    if (b, lq, lk) != (bt, lqt, lkt):
        raise ValueError(
            f"student_scores has shape {tuple(student_scores.shape)} but teacher_scores has shape "
            f"{tuple(teacher_scores.shape)}; batch and sequence dimensions must match"
        )
    if lq != lk:
        raise ValueError(f"attention scores must be square over the sequence, got {lq}x{lk}")
    mask = _check_mask(attention_mask, torch.Size((b, lq)), f"scores of shape {tuple(student_scores.shape)}")
    pair = None
    if mask is not None:
        pair = (mask.unsqueeze(2) & mask.unsqueeze(1)).unsqueeze(1)  # (B, 1, L, L)
        student_scores = _zero_where_masked(student_scores, pair)
        teacher_scores = _zero_where_masked(teacher_scores, pair)
    if hs != ht:
        student_scores = student_scores.mean(dim=1, keepdim=True)
        teacher_scores = teacher_scores.mean(dim=1, keepdim=True)
    err = (student_scores - teacher_scores).pow(2)
    # Every head has the same valid pairs, so the pooled mean = mean over heads of per-head MSE.
    return _masked_mean(err, pair)


def cosine_hidden_loss(student: Tensor, teacher: Tensor, attention_mask: Tensor | None = None) -> Tensor:
    """DistilBERT cosine-embedding loss (Sanh et al. 2019): mean over valid tokens of
    ``1 - cos(s, t)``; ``(B, L, D)`` with ``attention_mask`` ``(B, L)`` (or ``(..., D)`` with a
    ``(...)`` mask).  Widths must match.
    """
    mask = _check_token_pair(student, teacher, attention_mask)
    loss = 1.0 - F.cosine_similarity(student, teacher, dim=-1, eps=1e-8)
    return _masked_mean(loss, mask)


# ----------------------------------------------------------------------------- TED


def _paired_layers(t_name: str, teacher: object, s_name: str, student: object, what: str):
    """Two non-empty per-layer tensor lists of equal length (teacher first)."""
    t_list = _check_layer_list(t_name, teacher)
    s_list = _check_layer_list(s_name, student)
    if len(t_list) != len(s_list):
        raise ValueError(f"{s_name} has {len(s_list)} layers but {t_name} has {len(t_list)}")
    if not s_list:
        raise ValueError(f"{what} needs at least one layer")
    return t_list, s_list


def ted_mse(
    filtered_teacher: Sequence[Tensor], filtered_student: Sequence[Tensor], attention_mask: Tensor | None = None
) -> Tensor:
    """TED task-aware layer-wise loss (TED Eq. 6, used in Eq. 7):
    ``sum_k masked_mse(g_s^k(H_s^k), g_t^k(H_t^{M(k)}))`` over all (valid) token positions.

    Note the argument order: teacher list first.  Lists are aligned per student layer ``k``.
    """
    t_list, s_list = _paired_layers(
        "filtered_teacher", filtered_teacher, "filtered_student", filtered_student, "ted_mse"
    )
    return sum(masked_mse(s, t, attention_mask) for s, t in zip(s_list, t_list))


def ted_kl(
    teacher_filter_logits: Sequence[Tensor],
    student_filter_logits: Sequence[Tensor],
    temperature: float = 1.0,
    scale_by_t2: bool = False,
) -> Tensor:
    """TED KL variant (TED Remark 3.2, Sec. 6.6): ``sum_k KL(p_t^k || p_s^k)`` at temperature
    ``T`` from the filters' task heads, mean over the batch (see [`kl_div_loss`][]; no
    ``T**2`` unless ``scale_by_t2``).  Teacher list first.
    """
    t_list, s_list = _paired_layers(
        "teacher_filter_logits", teacher_filter_logits, "student_filter_logits", student_filter_logits, "ted_kl"
    )
    return sum(kl_div_loss(s, t, temperature, scale_by_t2=scale_by_t2) for s, t in zip(s_list, t_list))


# ----------------------------------------------------------------------------- multi-teacher


def group_mean_mse(
    student_states: Sequence[Tensor],
    teacher_states: Sequence[Tensor],
    groups: Sequence[Sequence[int]],
    attention_mask: Tensor | None = None,
    kind: str = "auto",
) -> Tensor:
    """One-to-many layer loss for ONE teacher (MT Eq. 2-4 hidden states, Eq. 7-9 attention):
    ``sum_i mean_{j in groups[i]} d(student_states[i], teacher_states[j - 1])``.

    ``groups`` is a [`layer_map`][layer_maps.layer_map] result (e.g. ``one_to_many``) with one entry per student
    layer; an empty group contributes 0.  The paper's ``1/(q-p)`` is off by one: this uses the
    plain mean over the group.  ``d`` is [`masked_mse`][] for hidden states (student already
    projected) or [`attention_score_mse`][] for 4-D attention scores; ``kind`` = ``"hidden"``,
    ``"attention"`` or ``"auto"`` (4-D tensors -> attention).  Average the result over teachers
    for MT Eq. 5/10.
    """
    s_list = _check_layer_list("student_states", student_states)
    t_list = _check_layer_list("teacher_states", teacher_states)
    if kind not in ("auto", "hidden", "attention"):
        raise ValueError(f"kind must be 'auto', 'hidden' or 'attention', got {kind!r}")
    if isinstance(groups, (str, bytes)) or not isinstance(groups, (list, tuple)):
        raise ValueError(f"groups must be a layer_map result (list of lists), got {groups!r}")
    if len(groups) != len(s_list):
        raise ValueError(f"student_states has {len(s_list)} layers but the groups mapping has {len(groups)} entries")
    if not s_list:
        raise ValueError("group_mean_mse needs at least one student layer")
    n_t = len(t_list)
    total = s_list[0].new_zeros(())
    for i, (s, group) in enumerate(zip(s_list, groups), start=1):
        if isinstance(group, (str, bytes)) or not isinstance(group, (list, tuple)):
            raise ValueError(f"groups entry for student layer {i} must be a list, got {group!r}")
        if len(group) == 0:
            continue
        terms = []
        for j in group:
            if isinstance(j, bool) or not isinstance(j, int) or not 1 <= j <= n_t:
                raise ValueError(
                    f"groups entry for student layer {i} = {list(group)!r} refers to teacher "
                    f"layer {j!r} but teacher_states has layers 1..{n_t}"
                )
            t = t_list[j - 1]
            use_attention = kind == "attention" or (kind == "auto" and s.dim() == 4)
            if use_attention:
                terms.append(attention_score_mse(s, t, attention_mask))
            else:
                terms.append(masked_mse(s, t, attention_mask))
        total = total + torch.stack(terms).mean()
    return total


def multi_teacher_prediction_loss(
    student_logits: Tensor,
    teacher_logits: Sequence[Tensor],
    temperature: float = 1.0,
    regression: bool = False,
    scale_by_t2: bool = False,
) -> Tensor:
    """Multi-teacher prediction loss (MT Eq. 1): ``(1/K) sum_k CE(softmax(z_k^T/T), softmax(z^S/T))``
    (soft cross-entropy; Eq. 1 as printed has no ``T**2``, ``scale_by_t2`` multiplies each term by
    it as Hinton et al. do), or ``(1/K) sum_k MSE`` when ``regression`` (temperature ignored).
    """
    t_list = _check_layer_list("teacher_logits", teacher_logits)
    if not t_list:
        raise ValueError("multi_teacher_prediction_loss needs at least one teacher")
    if regression:
        terms = [kd_regression_loss(student_logits, t) for t in t_list]
    else:
        terms = [soft_cross_entropy(student_logits, t, temperature, scale_by_t2=scale_by_t2) for t in t_list]
    return torch.stack(terms).mean()


# ----------------------------------------------------------------------------- DistilBERT (general distillation)


def masked_lm_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """BERT's masked-LM loss (DistilBERT's L_mlm): cross-entropy over the masked positions only
    (``labels`` -100 elsewhere), mean over those positions; ``logits`` ``(B, L, V)``, ``labels`` ``(B, L)``."""
    _check_tensor("logits", logits, ndim=3)
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)


def masked_soft_target_loss(
    student_logits: Tensor, teacher_logits: Tensor, labels: Tensor, temperature: float, positions: Tensor | None = None
) -> Tensor:
    """DistilBERT's L_ce (Sanh et al. 2019, Sec. 2; its ``distiller.py``): ``T**2 · KL(p_T ‖ p_S)`` of the
    temperature-``T`` vocabulary distributions, summed over the vocabulary and averaged over the selected
    positions: ``positions`` (a boolean mask, e.g. every non-pad token, the reference's default) or, without it,
    the masked ones (``labels`` != -100, the reference's ``restrict_ce_to_mask``). KL and the soft-target
    cross-entropy differ by the teacher's entropy, a constant: the same gradient."""
    _check_logits(student_logits, teacher_logits)
    t = _check_temperature(temperature)
    selected = labels != -100 if positions is None else positions.bool()
    s, te = student_logits[selected] / t, teacher_logits[selected] / t
    if s.shape[0] == 0:
        return student_logits.sum() * 0.0
    loss = F.kl_div(F.log_softmax(s, dim=-1), F.log_softmax(te, dim=-1), reduction="batchmean", log_target=True)
    return loss * (t * t)
