"""[CLS]-level intermediate-layer methods of the ALP-KD paper: PKD, CKD and ALP (Eq. 3–7).

The rows of ALP-KD Tables 1–3 are these methods with a layer mapping: the recipe rows of
``distill_methods`` (``parameters_distill.yml``) and the sweep tables (``parameters_reproduce.yml``).
"""

from __future__ import annotations

from typing import Literal, Union

import torch
from torch import nn

from bert_kd.config.schema import LayerMapping, Recipe
from bert_kd.core.distill import losses
from bert_kd.core.distill.methods.base import Method, hidden_size, register_method
from bert_kd.core.layer_maps import check_strategy, connected_layers, layer_map
from bert_kd.core.models import num_layers


class LayerwiseOptions(Recipe):
    """``mapping``: a layer-map strategy or explicit teacher layers per student layer
    ([`bert_kd.core.layer_maps.layer_map`][bert_kd.core.layer_maps.layer_map]); ``projection``: a learned student → teacher width map
    (``auto``: when the widths differ)."""

    mapping: LayerMapping | None = None
    projection: Union[bool, Literal["auto"]] | None = None


class CLSLayerMethod(Method):
    """Shared set-up: a layer mapping over [CLS] states and an optional student projection."""

    term_names = ("ce", "kd", "layer")
    default_weights = {"ce": 0.3, "kd": 0.5, "layer": 0.2}
    ce_is_complement = True
    student_needs = {"cls": True}
    teacher_needs = {"cls": True}
    Options = LayerwiseOptions
    default_mapping = "pkd_skip"

    @classmethod
    def check_config(cls, config: dict) -> dict[str, float]:
        check_strategy(config.get("mapping", cls.default_mapping))
        return super().check_config(config)

    @classmethod
    def check_layer_map(cls, mapping, n_teacher: int, n_student: int) -> None:
        layer_map(mapping, n_teacher, n_student)

    def __init__(self, config, student, teachers, regression=False):
        super().__init__(config, student, teachers, regression)
        teacher = teachers[0]
        self.n_student, self.n_teacher = num_layers(student), num_layers(teacher)
        self.mapping = layer_map(config.get("mapping", self.default_mapping), self.n_teacher, self.n_student)
        self.connected = connected_layers(self.mapping)
        self.student_width, self.teacher_width = hidden_size(student), hidden_size(teacher)
        projection = config.get("projection", "auto")
        needs_projection = self.student_width != self.teacher_width and self.projects_student
        if projection is True or (projection == "auto" and needs_projection):
            self.projection = nn.Linear(self.student_width, self.teacher_width)
        elif needs_projection:
            raise ValueError(
                f"student width {self.student_width} != teacher width {self.teacher_width}: "
                f"set projection: auto (a learned linear map) for method {self.name!r}"
            )
        else:
            self.projection = None

    projects_student = True

    def student_layers(self, student):
        """Student [CLS] states of layers 1..m, projected to the teacher's width when needed."""
        states = student.cls()[:, 1:]
        return self.projection(states) if self.projection is not None else states

    def terms(self, student, teachers, batch):
        result = super().terms(student, teachers, batch)
        result["kd"] = self.prediction_loss(student, teachers)
        layer_terms = [self.layer_loss(self.student_layers(student), t.cls()[:, 1:]) for t in teachers.values()]
        result["layer"] = sum(layer_terms) / len(layer_terms)
        return result

    def layer_loss(self, student_cls, teacher_cls):
        raise NotImplementedError


@register_method("pkd")
class PatientKD(CLSLayerMethod):
    """PKD (ALP-KD Eq. 3): normalised [CLS] MSE on a one-to-one mapping. Default ``pkd_skip``
    (Sun et al. 2019); ALP-KD's baseline is ``bucket_first`` and PKD-l is ``teacher_layer:<l>``."""

    def layer_loss(self, student_cls, teacher_cls):
        s, t = losses.gather_one_to_one(student_cls, teacher_cls, self.mapping)
        return losses.pkd_loss(s, t)


@register_method("ckd")
class CombinatorialKD(CLSLayerMethod):
    """CKD (ALP-KD Sec. 2): each bucket's teacher [CLS] states concatenated and projected by
    one linear map per student layer, then MSE to the student state. Buckets: NO or PO."""

    default_mapping = "buckets_no"
    projects_student = False

    def __init__(self, config, student, teachers, regression=False):
        super().__init__(config, student, teachers, regression)
        self.combiners = nn.ModuleDict(
            {
                str(j): nn.Linear(len(self.mapping[j - 1]) * self.teacher_width, self.student_width)
                for j in self.connected
            }
        )

    def layer_loss(self, student_cls, teacher_cls):
        total = student_cls.new_zeros(())
        for j in self.connected:
            bucket = [k - 1 for k in self.mapping[j - 1]]
            combined = self.combiners[str(j)](teacher_cls[:, bucket].flatten(1))
            total = total + losses.masked_mse(student_cls[:, j - 1], combined)
        return total


@register_method("alp")
class AttentionLayerProjection(CLSLayerMethod):
    """ALP-KD (Eq. 5–7): each student layer distils from an attention-weighted mix of teacher
    layers (all of them by default; ``mapping: buckets_no`` / ``buckets_po`` for ALP-NO/-PO).
    With unequal widths the student state is projected by a learned linear map."""

    default_mapping = "all"
    observes = True

    def __init__(self, config, student, teachers, regression=False):
        super().__init__(config, student, teachers, regression)
        self._alpha_sum = None
        self._alpha_count = 0

    def layer_loss(self, student_cls, teacher_cls):
        return losses.alp_loss(student_cls, teacher_cls, self.mapping)

    @torch.no_grad()
    def observe(self, student, teachers, batch):
        """Accumulate α (student layer × teacher layer) over an evaluation set (Figure 3)."""
        t = next(iter(teachers.values()))
        alpha = losses.alp_attention(self.student_layers(student), t.cls()[:, 1:], self.mapping)
        total = alpha.sum(0).cpu()
        self._alpha_sum = total if self._alpha_sum is None else self._alpha_sum + total
        self._alpha_count += alpha.shape[0]

    def diagnostics(self):
        if self._alpha_sum is None:
            return {}
        return {"alp_attention": (self._alpha_sum / self._alpha_count).tolist()}
