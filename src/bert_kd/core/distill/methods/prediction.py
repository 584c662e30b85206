"""Prediction-layer methods: NKD (no KD), RKD (Hinton KD) and Tang et al.'s logits MSE
(options: the shared recipe keys only)."""

from __future__ import annotations

from bert_kd.core.distill import losses
from bert_kd.core.distill.methods.base import Method, register_method


@register_method("nkd")
class NoKD(Method):
    """NKD: the student fine-tuned on the labels alone (cross-entropy; MSE for STS-B)."""

    uses_teachers = False


@register_method("rkd")
class HintonKD(Method):
    """RKD (ALP-KD Eq. 1–2): β·CE + η·T²·soft-CE(teacher/T, student/T); K teachers are averaged
    (with K > 1 this is OKD, averaged soft labels)."""

    term_names = ("ce", "kd")
    default_weights = {"ce": 0.5, "kd": 0.5}
    ce_is_complement = True

    def terms(self, student, teachers, batch):
        result = super().terms(student, teachers, batch)
        result["kd"] = self.prediction_loss(student, teachers)
        return result


@register_method("logits_mse")
class LogitsMSE(Method):
    """Tang et al. (2019): regress the teacher's logits with MSE, plus the task loss."""

    term_names = ("ce", "logits_mse")
    default_weights = {"ce": 0.5, "logits_mse": 0.5}
    ce_is_complement = True

    def terms(self, student, teachers, batch):
        result = super().terms(student, teachers, batch)
        values = [losses.logits_mse(student.logits, t.logits) for t in teachers.values()]
        result["logits_mse"] = sum(values) / len(values)
        return result
