"""The MT method (Shi & Guo 2023, Eq. 1–13): one-to-many layer groups per teacher, hidden,
attention, embedding and soft-label terms, on tokens, on shared character spans for teachers with
another tokenizer ([`spans`][]), or on sentence vectors (``alignment: sentence``)."""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor, nn

from bert_kd.config.schema import UnitFloat
from bert_kd.core.distill import losses
from bert_kd.core.distill.methods.base import register_method
from bert_kd.core.distill.methods.multi_teacher.alignment import (
    ALIGNMENT_MODES,
    LEVELS,
    SENTENCE,
    SENTENCE_REPRS,
    TOKEN,
    TeacherAlignment,
    span_pooling,
    tokens_aligned,
)
from bert_kd.core.distill.methods.multi_teacher.base import PROJECTION_MODES, MultiTeacherBase, MultiTeacherOptions
from bert_kd.core.distill.methods.multi_teacher.contributions import dev_contributions
from bert_kd.core.distill.methods.multi_teacher.reporting import alignment_metrics, one_to_many_report
from bert_kd.core.distill.methods.multi_teacher.spans import pool_attention_log_probs, pool_attention_scores
from bert_kd.core.distill.outputs import Features, attention_in_one_space
from bert_kd.core.layer_maps import layer_map
from bert_kd.core.training import task_loss


class OneToManyOptions(MultiTeacherOptions):
    alpha: UnitFloat | None = None
    sentence_repr: Literal[SENTENCE_REPRS] | None = None
    alignment: Literal[ALIGNMENT_MODES] | None = None
    projection: Literal[PROJECTION_MODES] | None = None


@register_method("multi_teacher")
class MultiTeacherOneToMany(MultiTeacherBase):
    """MT Eq. 1–13 with one-to-many groups per teacher, across tokenizers.

    Options: ``alpha``, ``beta``, ``temperature``, ``alignment`` (``token`` = token positions, or
    shared spans where the tokenizations differ | ``sentence``), ``sentence_repr`` (``mean`` |
    ``summary``, for ``alignment: sentence``), ``projection`` (``always`` = W_{h,k}, W_{e,k} for
    every teacher as in the paper | ``auto`` = identity when the widths match),
    ``teacher_prefixes``.
    """

    term_names = ("ce", "pred", "hidden", "attn", "emb")
    uses_alpha = True
    Options = OneToManyOptions
    student_needs = {"hidden": True, "attention": True}
    teacher_needs = {"hidden": True, "attention": True}

    def __init__(self, config, student, teachers, regression=False):
        super().__init__(config, student, teachers, regression)
        self.sentence_repr = str(self.config.get("sentence_repr", "mean"))
        if self.sentence_repr not in SENTENCE_REPRS:
            raise ValueError(f"sentence_repr must be one of {SENTENCE_REPRS}, got {self.sentence_repr!r}")
        self.alignment = str(self.config.get("alignment", "token"))
        if self.alignment not in ALIGNMENT_MODES:
            raise ValueError(
                f"option alignment of method {self.name!r} must be one of {ALIGNMENT_MODES}, got {self.alignment!r}"
            )
        projection = self.config.get("projection", "always")
        if projection not in PROJECTION_MODES:
            raise ValueError(f"projection must be one of {PROJECTION_MODES}, got {projection!r}")
        if self.alignment == "sentence":  # no positional term can run: skip attention scores
            self.student_needs = {"hidden": True}
            self.teacher_needs = {"hidden": True}
        self.groups: list[list[list[int]]] = []
        for k, m_k in enumerate(self.teacher_layers):
            if m_k < self.n_student:
                raise ValueError(
                    f"teacher {k} has {m_k} layers, fewer than the student's {self.n_student}: the one-to-many "
                    f"mapping needs every teacher at least as deep as the student"
                )
            self.groups.append(layer_map("one_to_many", m_k, self.n_student))
        d_s = self.student_width

        def make(d_t: int) -> nn.Module:
            return nn.Identity() if projection == "auto" and d_t == d_s else nn.Linear(d_s, d_t)

        self.hidden_projections = nn.ModuleList([make(d) for d in self.teacher_widths])  # W_{h,k}
        self.embedding_projections = nn.ModuleList([make(d) for d in self.teacher_widths])  # W_{e,k}
        self._seen = [0] * self.n_teachers
        self._levels = [dict.fromkeys(LEVELS, 0) for _ in range(self.n_teachers)]
        self._spans = [0.0] * self.n_teachers  # Σ over span-level batches of the mean shared spans per example

    @classmethod
    def derived_weights(cls, a, b):
        return {"ce": 1.0 - b, "pred": b * (1.0 - a), "hidden": b * a, "attn": b, "emb": b}

    # ------------------------------------------------------------------ alignment
    def alignment_of(self, k: int, batch: dict[str, Tensor]) -> TeacherAlignment:
        """The level teacher k's terms run at in this batch (the rule in the module docstring):
        ``sentence`` under ``alignment: sentence``; else ``token`` when its token positions equal
        the student's, and ``span`` (shared character spans) when they do not."""
        if self.alignment == "sentence":
            return SENTENCE
        prefix = self.prefix_of(k, batch)
        if prefix and prefix + "input_ids" not in batch:
            raise KeyError(
                f"teacher {k} ({self.teacher_names[k]}) reads column {prefix + 'input_ids'!r}, which the batch lacks"
            )
        if tokens_aligned(batch, prefix):
            return TOKEN
        return TeacherAlignment("span", span_pooling(batch, prefix, f"teacher {k} ({self.teacher_names[k]})"))

    def token_aligned(self, k: int, batch: dict[str, Tensor]) -> bool:
        """Whether teacher k's token positions equal the student's for this batch (never under
        ``alignment: sentence``)."""
        return self.alignment_of(k, batch).level == "token"

    def sentence_states(self, features: Features) -> Tensor:
        """Per-layer sentence vectors (B, layers + 1, H) under ``sentence_repr``."""
        return features.cls() if self.sentence_repr == "summary" else features.mean_pooled()

    # ------------------------------------------------------------------ per-teacher distances
    def hidden_distance(
        self,
        k: int,
        student: Features,
        teacher: Features,
        alignment: TeacherAlignment,
        groups: list[list[int]] | None = None,
    ) -> Tensor:
        """D_k^h (Eq. 2–4): Σ_i mean_{j ∈ I_{k,i}} MSE(h_i^S W_{h,k}, h_j^{T,k}) over tokens, shared
        spans (sub-token states averaged per span on both sides) or per-layer sentence vectors
        (``groups``: another grouping, e.g. one group kept and the others emptied, for a
        per-group contribution)."""
        project = self.hidden_projections[k]
        if alignment.level == "token":
            s_states = [project(h) for h in student.hidden_states[1:]]
            t_states = list(teacher.hidden_states[1:])
            mask = student.attention_mask
        elif alignment.level == "span":
            spans = alignment.spans
            s_states = [project(spans.pool_student(h)) for h in student.hidden_states[1:]]
            t_states = [spans.pool_teacher(h) for h in teacher.hidden_states[1:]]
            mask = spans.mask
        else:
            s_states = list(project(self.sentence_states(student)[:, 1:]).unbind(1))
            t_states = list(self.sentence_states(teacher)[:, 1:].unbind(1))
            mask = None
        return losses.group_mean_mse(
            s_states, t_states, self.groups[k] if groups is None else groups, mask, kind="hidden"
        )

    def attention_distance(
        self,
        k: int,
        student: Features,
        teacher: Features,
        alignment: TeacherAlignment,
        groups: list[list[int]] | None = None,
    ) -> Tensor:
        """D_k^a (Eq. 6–9): Σ_i mean_{j ∈ I_{k,i}} head-averaged MSE of QKᵀ/√δ over token pairs, or
        over shared-span pairs ([`pool_attention_scores`][];
        log-probabilities, an XLNet's, renormalised over the shared spans:
        [`pool_attention_log_probs`][]); none at sentence level."""
        if alignment.level == "sentence":
            raise ValueError("the attention term needs token or span alignment")
        s_scores, t_scores, space = attention_in_one_space(student, teacher)  # XLNet: log-probabilities
        mask = student.attention_mask
        if alignment.level == "span":
            spans = alignment.spans
            pool = pool_attention_log_probs if space == "log_probs" else pool_attention_scores
            s_scores = [pool(a, spans.student) for a in s_scores]
            t_scores = [pool(a, spans.teacher) for a in t_scores]
            mask = spans.mask
        return losses.group_mean_mse(
            s_scores, t_scores, self.groups[k] if groups is None else groups, mask, kind="attention"
        )

    def embedding_distance(self, k: int, student: Features, teacher: Features, alignment: TeacherAlignment) -> Tensor:
        """Eq. 11 for one teacher: MSE(E^S W_{e,k}, E^{T,k}) over tokens or shared spans;
        mean-pooled embeddings at sentence level."""
        project = self.embedding_projections[k]
        if alignment.level == "token":
            return losses.masked_mse(
                project(student.hidden_states[0]), teacher.hidden_states[0], student.attention_mask
            )
        if alignment.level == "span":
            spans = alignment.spans
            return losses.masked_mse(
                project(spans.pool_student(student.hidden_states[0])),
                spans.pool_teacher(teacher.hidden_states[0]),
                spans.mask,
            )
        return losses.masked_mse(project(student.mean_pooled()[:, 0]), teacher.mean_pooled()[:, 0])

    # ------------------------------------------------------------------ terms
    def terms(self, student, teachers, batch):
        result = {"ce": task_loss(student.logits, batch["labels"])}
        result["pred"] = self.prediction_terms(student, teachers)
        zero = student.logits.new_zeros(())
        hidden, attn, emb = [], [], []
        for k in sorted(teachers):
            teacher = teachers[k]
            alignment = self.alignment_of(k, batch)
            self._seen[k] += 1
            self._levels[k][alignment.level] += 1
            if alignment.spans is not None:
                self._spans[k] += float(alignment.spans.mask.sum()) / alignment.spans.mask.shape[0]
            positional = alignment.level != "sentence"
            h = self.hidden_distance(k, student, teacher, alignment) if self.wants("hidden") else zero
            e = self.embedding_distance(k, student, teacher, alignment) if self.wants("emb") else zero
            a = self.attention_distance(k, student, teacher, alignment) if positional and self.wants("attn") else zero
            hidden.append(h)
            emb.append(e)
            if positional:
                attn.append(a)
            result[f"aligned_t{k}"] = zero + float(alignment.level == "token")
            result[f"span_aligned_t{k}"] = zero + float(alignment.level == "span")
            result[f"hidden_t{k}"] = h.detach()
            result[f"attn_t{k}"] = a.detach()
            result[f"emb_t{k}"] = e.detach()
        result["hidden"] = torch.stack(hidden).mean()
        result["emb"] = torch.stack(emb).mean()
        result["attn"] = torch.stack(attn).mean() if attn else zero
        return result

    # ------------------------------------------------------------------ reporting
    def alignment_report(self) -> dict:
        """Per teacher: the alignment seen so far and the levels the terms ran at ([`one_to_many_report`][])."""
        return one_to_many_report(self)

    def dev_contributions(self, objective, loader) -> dict:
        """Each teacher's and layer group's mean loss share over ``loader`` ([`dev_contributions`][contributions.dev_contributions])."""
        return dev_contributions(objective, loader)

    def alignment_metrics(self) -> dict[str, float]:
        """Flat numeric view of [`alignment_report`][] for MLflow ([`alignment_metrics`][])."""
        return alignment_metrics(self.alignment_report())

    def diagnostics(self):
        return {"alignment": self.alignment_report()}
