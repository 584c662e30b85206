"""[CLS]-level intermediate-layer methods of the ALP-KD paper: PKD, CKD and ALP (Eq. 3–7).

The rows of ALP-KD Tables 1–3 are these methods with a layer mapping: the recipe rows of
``distill_methods`` (``parameters_distill.yml``) and the sweep tables (``parameters_reproduce.yml``).
"""

from __future__ import annotations

import logging
import math
from typing import Literal, Mapping, Union

import torch
from pydantic import PositiveFloat
from torch import nn

from bert_kd.config.schema import LayerMapping, Recipe
from bert_kd.core.distill import losses
from bert_kd.core.distill.methods.base import Method, hidden_size, register_method
from bert_kd.core.layer_maps import check_strategy, connected_layers, layer_map
from bert_kd.core.models import num_layers

log = logging.getLogger(__name__)

#: α of a student layer counts as near one-hot when its mean entropy over dev examples is below this
#: fraction of the entropy of equal weights, ``log |A(j)|`` (0.1: for 6 teacher layers 0.18 nats, a
#: top weight of ≈ 0.97 or more); buckets of one teacher layer are one-hot by construction and skipped.
ONE_HOT_ENTROPY_FRACTION = 0.1


class LayerwiseOptions(Recipe):
    """``mapping``: a layer-map strategy or explicit teacher layers per student layer
    ([`bert_kd.core.layer_maps.layer_map`][]); ``projection``: a learned student → teacher width map
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


class ALPOptions(LayerwiseOptions):
    """``similarity``: the score whose softmax is α ([`alp_scores`][losses.alp_scores]: ``dot``, Eq. 5 as printed;
    ``scaled_dot``: ÷ √d; ``cosine``: of L2-normalised states; ``ln_scaled_dot``: of layer-normalised states,
    ÷ √d); unset: [`ALP_DEFAULT_SIMILARITY`][losses.ALP_DEFAULT_SIMILARITY]. ``similarity_temperature``
    divides the scores (default 1). The score enters a student's content key unless it is ``dot``
    ([`AttentionLayerProjection.key_config`][])."""

    similarity: Literal[losses.ALP_SIMILARITIES] | None = None
    similarity_temperature: PositiveFloat | None = None


@register_method("alp")
class AttentionLayerProjection(CLSLayerMethod):
    """ALP-KD (Eq. 5–7): each student layer distils from an attention-weighted mix of teacher
    layers (all of them by default; ``mapping: buckets_no`` / ``buckets_po`` for ALP-NO/-PO).
    With unequal widths the student state is projected by a learned linear map. α's score:
    ``similarity`` ([`ALPOptions`][])."""

    default_mapping = "all"
    observes = True
    Options = ALPOptions

    @classmethod
    def check_config(cls, config: dict) -> dict[str, float]:
        try:
            losses.alp_similarity(config.get("similarity"), config.get("similarity_temperature"))
        except ValueError as exc:
            raise ValueError(f"{exc} (method 'alp')") from None
        return super().check_config(config)

    @classmethod
    def key_config(cls, config: Mapping) -> dict:
        """``config`` as key material with its score written out: unset is the default score by name (so a
        change of default is a change of key), ``dot`` is left out (Eq. 5 as printed: every ALP key computed
        before the score was an option, whose recipes named none, keeps its value)."""
        result = dict(config)
        similarity = losses.alp_similarity(result.get("similarity"))
        if similarity == losses.ALP_LITERAL_SIMILARITY:
            result.pop("similarity", None)
        else:
            result["similarity"] = similarity
        return result

    def __init__(self, config, student, teachers, regression=False):
        super().__init__(config, student, teachers, regression)
        self.similarity = losses.alp_similarity(config.get("similarity"), config.get("similarity_temperature"))
        self.similarity_temperature = config.get("similarity_temperature")
        self._alpha_sum = None
        self._entropy_sum = None
        self._alpha_count = 0

    def layer_loss(self, student_cls, teacher_cls):
        return losses.alp_loss(student_cls, teacher_cls, self.mapping, self.similarity, self.similarity_temperature)

    def attention(self, student, teacher):
        """α per example (Eq. 5–6), ``(batch, student layers, teacher layers)``, between ``student``'s and
        ``teacher``'s [CLS] states ([`Features`][bert_kd.core.distill.outputs.Features]), as the loss weighs them."""
        return losses.alp_attention(
            self.student_layers(student),
            teacher.cls()[:, 1:],
            self.mapping,
            self.similarity,
            self.similarity_temperature,
        )

    @torch.no_grad()
    def observe(self, student, teachers, batch):
        """Accumulate α (student layer × teacher layer) and its entropy over an evaluation set (Figure 3)."""
        alpha = self.attention(student, next(iter(teachers.values())))
        total, entropy = alpha.sum(0).cpu(), losses.alp_entropy(alpha).sum(0).cpu()
        self._alpha_sum = total if self._alpha_sum is None else self._alpha_sum + total
        self._entropy_sum = entropy if self._entropy_sum is None else self._entropy_sum + entropy
        self._alpha_count += alpha.shape[0]

    def diagnostics(self):
        """Mean α and mean α entropy (nats) per student layer (None: unconnected); warns when α is
        near one-hot ([`one_hot_layers`][])."""
        if self._alpha_sum is None:
            return {}
        entropy = (self._entropy_sum / self._alpha_count).tolist()
        entropy = [value if self.mapping[j] else None for j, value in enumerate(entropy)]
        collapsed = one_hot_layers(entropy, self.mapping)
        if collapsed:
            log.warning(
                "ALP α is near one-hot (similarity %s) for student layer(s) %s: mean entropy %s nats < %.0f%% of "
                "log |A(j)|, so each such layer distils from one teacher layer (PKD with a softmax-chosen layer); "
                "the default similarity (%s) spreads α (docs/fidelity.md)",
                self.similarity,
                ", ".join(str(j) for j in collapsed),
                ", ".join(f"{entropy[j - 1]:.3f}" for j in collapsed),
                100 * ONE_HOT_ENTROPY_FRACTION,
                losses.ALP_DEFAULT_SIMILARITY,
            )
        return {"alp_attention": (self._alpha_sum / self._alpha_count).tolist(), "alp_alpha_entropy": entropy}


def one_hot_layers(entropy, mapping, fraction: float = ONE_HOT_ENTROPY_FRACTION) -> list[int]:
    """Student layers (1-based) whose mean α entropy is below ``fraction`` × ``log |A(j)|``, over
    buckets of two or more teacher layers."""
    return [
        j
        for j, (value, bucket) in enumerate(zip(entropy, mapping), start=1)
        if value is not None and len(bucket) > 1 and value < fraction * math.log(len(bucket))
    ]
