"""TinyBERT (Jiao et al., 2020; notes file) with DistilBERT's cosine loss as an optional term."""

from __future__ import annotations

from torch import nn

from bert_kd.config.schema import LayerMapping, Recipe
from bert_kd.core.distill import losses
from bert_kd.core.distill.methods.base import Method, hidden_size, register_method
from bert_kd.core.distill.outputs import attention_in_one_space
from bert_kd.core.layer_maps import layer_map
from bert_kd.core.models import num_layers


def uniform_map(n_teacher: int, n_student: int) -> list[list[int]]:
    """TinyBERT's g(m) = m · N/M: student layer m learns from teacher layer m·N/M (last to last)."""
    return [[max(1, round(m * n_teacher / n_student))] for m in range(1, n_student + 1)]


class TinyBERTOptions(Recipe):
    """``mapping``: ``uniform`` (g(m) = m·N/M, the default) or any [`bert_kd.core.layer_maps.layer_map`][]."""

    mapping: LayerMapping | None = None


@register_method("tinybert")
class TinyBERT(Method):
    """L = emb·MSE(E_S W_e, E_T) + hidden·Σ_m MSE(H_S^m W_h, H_T^{g(m)})
    + attn·Σ_m MSE(A_S^m, A_T^{g(m)}) (pre-softmax scores, heads averaged)
    + pred·soft-CE(z_T/T, z_S/T), optionally + ce·CE and + cos·(DistilBERT cosine on the mapped hidden states)."""

    term_names = ("ce", "pred", "emb", "hidden", "attn", "cos")
    default_weights = {"ce": 0.0, "pred": 1.0, "emb": 1.0, "hidden": 1.0, "attn": 1.0, "cos": 0.0}
    student_needs = {"hidden": True, "attention": True}
    teacher_needs = {"hidden": True, "attention": True}
    Options = TinyBERTOptions

    def __init__(self, config, student, teachers, regression=False):
        super().__init__(config, student, teachers, regression)
        teacher = teachers[0]
        n_s, n_t = num_layers(student), num_layers(teacher)
        mapping = config.get("mapping", "uniform")
        self.mapping = uniform_map(n_t, n_s) if mapping == "uniform" else layer_map(mapping, n_t, n_s)
        d_s, d_t = hidden_size(student), hidden_size(teacher)
        self.embedding_projection = nn.Linear(d_s, d_t)  # W_e
        self.hidden_projection = nn.Linear(d_s, d_t)  # W_h

    def terms(self, student, teachers, batch):
        result = super().terms(student, teachers, batch)
        teacher = teachers[0]
        mask = student.attention_mask
        result["pred"] = (
            losses.kd_regression_loss(student.logits, teacher.logits)
            if self.regression
            else losses.soft_cross_entropy(student.logits, teacher.logits, self.temperature)
        )
        result["emb"] = losses.masked_mse(
            self.embedding_projection(student.hidden_states[0]), teacher.hidden_states[0], mask
        )
        s_maps, t_maps, _ = attention_in_one_space(student, teacher)
        hidden = attn = cos = student.logits.new_zeros(())
        for m, group in enumerate(self.mapping, start=1):
            for k in group:
                s_h, t_h = student.hidden_states[m], teacher.hidden_states[k]
                hidden = hidden + losses.masked_mse(self.hidden_projection(s_h), t_h, mask)
                attn = attn + losses.attention_score_mse(s_maps[m - 1], t_maps[k - 1], mask)
                if self.wants("cos"):
                    cos = cos + losses.cosine_hidden_loss(self.hidden_projection(s_h), t_h, mask)
        result.update(hidden=hidden, attn=attn, cos=cos)
        return result
