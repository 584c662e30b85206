"""Multi-teacher baselines (Shi & Guo 2023, Tables 2–3): OKD, multi-teacher PKD and RSE-KD."""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor, nn

from bert_kd.config.schema import NonNegativeInt, UnitFloat
from bert_kd.core.distill import losses
from bert_kd.core.distill.methods.base import register_method
from bert_kd.core.distill.methods.multi_teacher.base import PROJECTION_MODES, MultiTeacherBase, MultiTeacherOptions
from bert_kd.core.distill.methods.multi_teacher.reporting import describe_projection
from bert_kd.core.distill.outputs import Features
from bert_kd.core.layer_maps import layer_map
from bert_kd.core.training import task_loss


@register_method("okd")
class OnlineKD(MultiTeacherBase):
    """OKD: averaged soft labels of all teachers, L = (1−β)·CE + β·(1/K) Σ_k soft-CE(τ)·τ²."""

    term_names = ("ce", "pred")

    def terms(self, student, teachers, batch):
        return {"ce": task_loss(student.logits, batch["labels"]), "pred": self.prediction_terms(student, teachers)}

    def alignment_report(self) -> dict:
        return {name: dict(self.describe_teacher(k), level="prediction") for k, name in enumerate(self.teacher_names)}


class MultiPKDOptions(MultiTeacherOptions):
    alpha: UnitFloat | None = None
    mapping: Literal["pkd_skip", "pkd_last"] | None = None
    projection: Literal[PROJECTION_MODES] | None = None


@register_method("multi_pkd")
class MultiPKD(MultiTeacherBase):
    """Multi-teacher PKD: per teacher, a one-to-one [CLS] mapping (``pkd_skip`` by default,
    ``mapping: pkd_last``) with PKD's normalised [CLS] MSE, averaged over teachers:
    L = β(α·L_layer + (1−α)·L_pred) + (1−β)·L_CE. Summary tokens come from each model's own
    tokenization (``Features.cls()``), so heterogeneous tokenizers need no alignment. A
    learned projection per teacher maps the student's width to the teacher's when they differ
    (``projection: auto``; ``always`` projects for every teacher)."""

    term_names = ("ce", "pred", "layer")
    uses_alpha = True
    Options = MultiPKDOptions
    student_needs = {"cls": True}
    teacher_needs = {"cls": True}

    def __init__(self, config, student, teachers, regression=False):
        super().__init__(config, student, teachers, regression)
        strategy = self.config.get("mapping", "pkd_skip")
        if strategy not in ("pkd_skip", "pkd_last"):
            raise ValueError(f"multi_pkd mapping must be 'pkd_skip' or 'pkd_last', got {strategy!r}")
        projection = self.config.get("projection", "auto")
        if projection not in PROJECTION_MODES:
            raise ValueError(f"projection must be one of {PROJECTION_MODES}, got {projection!r}")
        self.mappings = []
        for k, m_k in enumerate(self.teacher_layers):
            try:
                self.mappings.append(layer_map(strategy, m_k, self.n_student))
            except ValueError as exc:
                raise ValueError(f"teacher {k} ({m_k} layers) with a {self.n_student}-layer student: {exc}") from exc
        d_s = self.student_width
        self.projections = nn.ModuleList(
            [nn.Identity() if projection == "auto" and d == d_s else nn.Linear(d_s, d) for d in self.teacher_widths]
        )

    @classmethod
    def derived_weights(cls, a, b):
        return {"ce": 1.0 - b, "pred": b * (1.0 - a), "layer": b * a}

    def layer_distance(self, k: int, student: Features, teacher: Features) -> Tensor:
        s, t = losses.gather_one_to_one(student.cls()[:, 1:], teacher.cls()[:, 1:], self.mappings[k])
        return losses.pkd_loss(self.projections[k](s), t)

    def terms(self, student, teachers, batch):
        result = {"ce": task_loss(student.logits, batch["labels"]), "pred": self.prediction_terms(student, teachers)}
        if self.wants("layer"):
            result["layer"] = torch.stack(
                [self.layer_distance(k, student, teachers[k]) for k in sorted(teachers)]
            ).mean()
        else:
            result["layer"] = student.logits.new_zeros(())
        return result

    def alignment_report(self) -> dict:
        return {
            name: dict(
                self.describe_teacher(k),
                level="summary token",
                mapping=[list(g) for g in self.mappings[k]],
                projection=describe_projection(self.projections[k], self.student_width, self.teacher_widths[k]),
            )
            for k, name in enumerate(self.teacher_names)
        }


class RSEKDOptions(MultiTeacherOptions):
    seed: NonNegativeInt | None = None  # of the per-batch teacher draw


@register_method("rse_kd")
class RandomSingleTeacherKD(MultiTeacherBase):
    """RSE-KD (Fukuda et al. 2017): each training mini-batch distils from ONE teacher drawn
    uniformly at random, L = (1−β)·CE + β·soft-CE(τ)·τ² to that teacher; evaluation and
    diagnostics use all teachers.

    Draw t uses ``torch.Generator().manual_seed(seed · 1_000_003 + t)`` with the draw counter
    ``t`` kept in a persistent buffer, so the sequence is reproducible from ``seed`` (pass the
    training seed) and continues correctly when a run resumes from a checkpoint.
    """

    term_names = ("ce", "pred")
    Options = RSEKDOptions

    def __init__(self, config, student, teachers, regression=False):
        super().__init__(config, student, teachers, regression)
        seed = self.config.get("seed", 42)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"seed must be an int, got {seed!r}")
        self.seed = int(seed)
        self.register_buffer("draw_step", torch.zeros((), dtype=torch.long))
        self.draw_counts = [0] * self.n_teachers

    def choose_teachers(self, n_teachers: int, training: bool) -> list[int]:
        if not training or n_teachers == 1:
            return list(range(n_teachers))
        step = int(self.draw_step)
        generator = torch.Generator().manual_seed((self.seed * 1_000_003 + step) % (2**63))
        k = int(torch.randint(n_teachers, (1,), generator=generator))
        self.draw_step.add_(1)
        self.draw_counts[k] += 1
        return [k]

    def terms(self, student, teachers, batch):
        return {"ce": task_loss(student.logits, batch["labels"]), "pred": self.prediction_terms(student, teachers)}

    def alignment_report(self) -> dict:
        total = sum(self.draw_counts)
        return {
            name: dict(
                self.describe_teacher(k),
                level="prediction",
                draws=self.draw_counts[k],
                draw_fraction=self.draw_counts[k] / total if total else None,
            )
            for k, name in enumerate(self.teacher_names)
        }

    def diagnostics(self):
        return {"draw_counts": list(self.draw_counts)}
