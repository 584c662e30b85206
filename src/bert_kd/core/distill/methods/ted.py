"""TED Stage II (Liang et al., 2023, Eq. 6–7, Sec. 6.6) and its KD / LWD baselines (Eq. 1–3).

``kd``      L = ce + α1·D_pred                                    (Eq. 1; DistilBERT-style KD)
``lwd``     L = ce + α1·D_pred + α2·Σ_k MSE(H_t^{M(k)}, H_s^k W_s^k)  (Eq. 2–3; learned W_s^k per layer)
``ted``     L = ce + α1·D_pred + α2·Σ_k MSE(g_t^k(H_t^{M(k)}), g_s^k(H_s^k))  (Eq. 6–7; heads dropped)
``ted_kl``  as ``ted`` but Σ_k KL(head_t^k ‖ head_s^k) of the filters' task heads (Sec. 6.6)

Weights: ``ce`` (task loss on the student's own head), ``pred`` (D_pred = KL(p_t/T ‖ p_s/T),
[`losses.kl_div_loss`][], not T²-scaled; MSE to the teacher's score for STS-B) and
``layer`` (lwd) / ``ted`` (ted, ted_kl). Defaults: T = 2 (paper), α1 = 1 and α2 = 100 — the
middle of the paper's GLUE grid [`TED_GRID`][] (Sec. 5.3); ted_kl uses α2 = 1 (a KL between
label distributions is on a different scale than a hidden-state MSE). Hidden-state MSEs are
mean over valid (attention-masked) tokens and dimensions, summed over the K student layers.

Layer mapping M(·) (option ``mapping``): default ``distilbert`` for ``lwd``; for ``ted``/``ted_kl``
the layers the teacher filters were trained at (a given mapping must agree with them). Every
student layer maps to exactly one teacher layer; teacher and student must share a tokenization.

Filters come through the method config: ``teacher_filters`` (a [`TaskFilters`][ted_filters.filters.TaskFilters] or the path
of a saved one; required) and ``student_filters`` (a [`TaskFilters`][ted_filters.filters.TaskFilters] trained in Stage I on the
student, ``"copy"`` = copies of the teacher filters at the mapped layers (default; App. A.4 Case
2.2, needs equal widths) or ``"random"`` = freshly initialised ones (Table 6 ablation)). The
method checks provenance with [`TaskFilters.check_compatible`][ted_filters.filters.TaskFilters.check_compatible]: the teacher filters must
come from THIS teacher (fingerprint) and, if option ``task`` is given, this task; option
``allow_filter_mismatch: true`` turns the refusal into a warning. The teacher filters are a
frozen deep copy (requires_grad False, always in eval mode, even when the objective trains);
the student filters are trained in place (``ted``: their unused heads are frozen).

Teachers: ``lwd``/``ted``/``ted_kl`` take exactly one teacher; ``kd`` averages over teachers and
reads only logits, so it can use a [`TeacherCache`][objective.TeacherCache].
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch
from torch import nn

from bert_kd.config.schema import LayerMapping, Recipe
from bert_kd.core.distill import losses
from bert_kd.core.distill.methods.base import Method, hidden_size, register_method
from bert_kd.core.distill.ted_filters import TaskFilters, copy_filters_for_student, ted_layer_map
from bert_kd.core.models import num_layers, parameters_fingerprint

#: The paper's GLUE search grid (Sec. 5.3): α1 (D_pred), α2 (D_TED) and the fixed temperature.
TED_GRID: dict[str, tuple[float, ...]] = {
    "alpha1": (1.0, 2.5, 5.0, 10.0),
    "alpha2": (10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0),
    "temperature": (2.0,),
}

#: TED's temperature T (Sec. 4.3, 5.3).
DEFAULT_TEMPERATURE = 2.0


class LayerMappingOptions(Recipe):
    """``mapping``: M(k), a [`ted_layer_map`][ted_filters.teacher_layers.ted_layer_map] strategy or list of teacher layers."""

    mapping: LayerMapping | None = None


class TEDOptions(LayerMappingOptions):
    """TED's filters and their provenance check (module docstring). The TED pipeline fills
    ``teacher_filters``, ``student_filters`` and ``task`` from Stage I unless the recipe sets them."""

    teacher_filters: Any = None  # TaskFilters or the path of saved ones
    student_filters: Any = None  # copy (default) | random | TaskFilters | the path of saved ones
    task: str | None = None
    allow_filter_mismatch: bool | None = None


class _TEDFamily(Method):
    """Shared: T = 2 by default and D_pred = KL(teacher/T ‖ student/T) (MSE for regression)."""

    term_names = ("ce", "pred")
    default_weights = {"ce": 1.0, "pred": 1.0}
    student_needs = {"hidden": True}
    teacher_needs = {"hidden": True}
    Options = LayerMappingOptions
    single_teacher = True
    default_temperature = DEFAULT_TEMPERATURE

    @classmethod
    def check_layer_map(cls, mapping, n_teacher: int, n_student: int) -> None:
        ted_layer_map(mapping, n_teacher, n_student)

    def __init__(self, config, student, teachers, regression=False):
        super().__init__(config, student, teachers, regression)
        if self.single_teacher and len(teachers) != 1:
            raise ValueError(f"method {self.name!r} distils from exactly one teacher, got {len(teachers)}")

    def pred_loss(self, student, teachers):
        """D_pred (Eq. 6): KL(teacher/T ‖ student/T), no T² (MSE for regression)."""
        return self.prediction_loss(student, teachers, soft_loss=losses.kl_div_loss)

    def terms(self, student, teachers, batch):
        result = super().terms(student, teachers, batch)
        result["pred"] = self.pred_loss(student, teachers)
        return result

    @staticmethod
    def _only_teacher(student, teachers):
        (teacher,) = teachers.values()
        s_len, t_len = student.hidden_states[0].shape[1], teacher.hidden_states[0].shape[1]
        if s_len != t_len:
            raise ValueError(
                f"token-level distillation needs the teacher and the student to share a tokenization "
                f"(student sequence length {s_len}, teacher {t_len})"
            )
        return teacher


@register_method("kd")
class TEDKD(_TEDFamily):
    """KD baseline of TED (Eq. 1): ce + α1·KL(p_t/T ‖ p_s/T), T = 2. Reads logits only
    (teacher cache allowed; several teachers are averaged)."""

    student_needs: dict[str, bool] = {}
    teacher_needs: dict[str, bool] = {}
    Options = Recipe
    single_teacher = False


@register_method("lwd")
class LayerWiseDistillation(_TEDFamily):
    """LWD baseline (Eq. 2–3): ce + α1·D_pred + α2·Σ_k MSE(H_t^{M(k)}, H_s^k W_s^k), with a
    randomly initialised learnable projection W_s^k (d_s → d_t) per student layer; token MSE
    over valid positions. Mapping default ``distilbert``."""

    term_names = ("ce", "pred", "layer")
    default_weights = {"ce": 1.0, "pred": 1.0, "layer": 100.0}

    def __init__(self, config, student, teachers, regression=False):
        super().__init__(config, student, teachers, regression)
        teacher = teachers[0]
        self.mapping = ted_layer_map(config.get("mapping", "distilbert"), num_layers(teacher), num_layers(student))
        d_s, d_t = hidden_size(student), hidden_size(teacher)
        self.projections = nn.ModuleList(nn.Linear(d_s, d_t) for _ in self.mapping)

    def terms(self, student, teachers, batch):
        result = super().terms(student, teachers, batch)
        teacher = self._only_teacher(student, teachers)
        mask = student.attention_mask
        layer = student.logits.new_zeros(())
        for k, t_layer in enumerate(self.mapping, start=1):
            projected = self.projections[k - 1](student.hidden_states[k])
            layer = layer + losses.masked_mse(projected, teacher.hidden_states[t_layer], mask)
        result["layer"] = layer
        return result


def _as_filters(value, what: str) -> TaskFilters:
    if isinstance(value, TaskFilters):
        return value
    if isinstance(value, (str, Path)):
        return TaskFilters.load(value)
    raise ValueError(f"option {what} must be TaskFilters or the path of saved filters, got {type(value).__name__}")


@register_method("ted")
class TaskAwareDistillation(_TEDFamily):
    """TED (Eq. 7): ce + α1·D_pred + α2·Σ_k MSE(g_t^k(H_t^{M(k)}), g_s^k(H_s^k)) over valid tokens,
    filters without their task heads; teacher + teacher filters frozen, student filters trained."""

    term_names = ("ce", "pred", "ted")
    default_weights = {"ce": 1.0, "pred": 1.0, "ted": 100.0}
    Options = TEDOptions
    uses_heads = False

    def __init__(self, config, student, teachers, regression=False):
        super().__init__(config, student, teachers, regression)
        teacher = teachers[0]
        n_t, n_s = num_layers(teacher), num_layers(student)
        if config.get("teacher_filters") is None:
            raise ValueError(
                f"method {self.name!r} needs option teacher_filters (TaskFilters from Stage I, or their path)"
            )
        given = _as_filters(config["teacher_filters"], "teacher_filters")
        task = config.get("task")
        allow = bool(config.get("allow_filter_mismatch", False))
        given.check_model(teacher, "teacher")
        teacher_fp = parameters_fingerprint(teacher)
        given.check_compatible(task, teacher_fp, allow_mismatch=allow)
        if "mapping" in config:
            self.mapping = ted_layer_map(config["mapping"], n_t, n_s)
            if self.mapping != list(given.layers):
                raise ValueError(
                    f"the mapping M = {self.mapping} does not match the layers the teacher filters were "
                    f"trained at ({given.layers}); train teacher filters for this mapping"
                )
        else:
            if len(given.layers) != n_s:
                raise ValueError(
                    f"the teacher filters cover {len(given.layers)} layers ({given.layers}) but the student has "
                    f"{n_s} layers: TED needs one teacher filter per student layer"
                )
            self.mapping = list(given.layers)
        if self.uses_heads and regression != (given.num_labels == 1):
            raise ValueError(
                f"the teacher filter heads have {given.num_labels} outputs, which does not fit a "
                f"{'regression' if regression else 'classification'} task"
            )

        # teacher filters: a frozen copy, never trained, always in eval mode (see train()).
        self.teacher_filters = copy.deepcopy(given)
        for p in self.teacher_filters.parameters():
            p.requires_grad_(False)
        self.teacher_filters.eval()

        self.student_filters = self._student_filters(config, given, student, teacher_fp, task, allow)
        for p in self.student_filters.parameters():
            p.requires_grad_(True)
        if not self.uses_heads:  # heads are dropped in Stage II: keep them, but frozen
            for head in self.student_filters.heads():
                for p in head.parameters():
                    p.requires_grad_(False)

    def _student_filters(self, config, teacher_filters, student, teacher_fp, task, allow) -> TaskFilters:
        spec = config.get("student_filters", "copy")
        n_s = num_layers(student)
        if spec is teacher_filters or spec == "copy":
            return copy_filters_for_student(teacher_filters, student=student)
        if spec == "random":
            return TaskFilters.build(
                student,
                list(range(1, n_s + 1)),
                teacher_filters.arch,
                out_width=teacher_filters.out_width,
                num_labels=teacher_filters.num_labels,
                task=teacher_filters.task,
                role="student",
            )
        filters = _as_filters(spec, "student_filters")
        if any(p is q for p in filters.parameters() for q in teacher_filters.parameters()):
            filters = copy.deepcopy(filters)
        if list(filters.layers) != list(range(1, n_s + 1)):
            raise ValueError(f"student filters must read student layers 1..{n_s} in order, got {filters.layers}")
        filters.check_model(student, "student")
        if filters.out_width != teacher_filters.out_width:
            raise ValueError(
                f"student filters output width {filters.out_width} != teacher filters output width "
                f"{teacher_filters.out_width}: the filtered spaces must match"
            )
        if self.uses_heads and filters.num_labels != teacher_filters.num_labels:
            raise ValueError(
                f"student filter heads have {filters.num_labels} outputs, teacher filter heads {teacher_filters.num_labels}"
            )
        fingerprint = teacher_fp if filters.copied_from == "teacher" else parameters_fingerprint(student)
        filters.check_compatible(task, fingerprint, allow_mismatch=allow)
        return filters

    def train(self, mode: bool = True):
        super().train(mode)
        self.teacher_filters.eval()
        return self

    def terms(self, student, teachers, batch):
        result = super().terms(student, teachers, batch)
        teacher = self._only_teacher(student, teachers)
        mask = student.attention_mask
        with torch.no_grad():
            t_filtered = self.teacher_filters.filtered(teacher.hidden_states, teacher.attention_mask)
        s_filtered = self.student_filters.filtered(student.hidden_states, mask)
        result["ted"] = self.filter_distance(t_filtered, s_filtered, mask)
        return result

    def filter_distance(self, t_filtered, s_filtered, mask):
        """D_TED (Eq. 6): Σ_k masked token MSE of the filtered representations."""
        return losses.ted_mse(t_filtered, s_filtered, mask)


@register_method("ted_kl")
class TaskAwareDistillationKL(TaskAwareDistillation):
    """TED with the filters' task heads kept (Remark 3.2, Sec. 6.6): the ``ted`` term is
    Σ_k KL(head_t^k/T ‖ head_s^k/T) (same T as D_pred, not T²-scaled); for a regression head
    (STS-B) Σ_k MSE of the head outputs. Student filter heads are trained."""

    default_weights = {"ce": 1.0, "pred": 1.0, "ted": 1.0}
    uses_heads = True

    def filter_distance(self, t_filtered, s_filtered, mask):
        with torch.no_grad():
            t_logits = self.teacher_filters.head_logits(t_filtered, mask)
        s_logits = self.student_filters.head_logits(s_filtered, mask)
        if self.regression:
            return sum(losses.kd_regression_loss(s, t) for s, t in zip(s_logits, t_logits))
        return losses.ted_kl(t_logits, s_logits, self.temperature)
