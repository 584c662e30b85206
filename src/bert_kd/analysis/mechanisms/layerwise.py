"""PKD (Sun et al. 2019; ALP-KD Eq. 3): each student layer's [CLS] state is pulled toward its mapped teacher
layer's, compared after L2 normalisation.

The case: planted [CLS] states of a 4-layer teacher and a 3-layer student under PKD-Skip (student layer j ←
teacher layer j·⌊4/3⌋ = j; the last student layer is left to the prediction terms). A student whose connected
layers are the mapped teacher layers times 3 has PKD's layer term at zero (the normalisation makes scale
irrelevant); a student whose layers are the teacher's other layers pays for it. PKD's own ``terms`` computes both.
"""

from __future__ import annotations

import torch

from bert_kd.analysis.mechanisms import MechanismResult, mechanism
from bert_kd.analysis.mechanisms.toy import tiny_classifier

WIDTH, TEACHER_LAYERS, STUDENT_LAYERS, ROWS = 16, 4, 3, 8


def layer_terms() -> dict[str, float]:
    """PKD's layer term for a student equal to its mapped teacher layers up to scale, and for one holding the
    teacher's unmapped layers instead."""
    from bert_kd.core.distill.methods import build_method
    from bert_kd.core.distill.outputs import Features

    method = build_method(
        {"method": "pkd", "mapping": "pkd_skip"},
        tiny_classifier(layers=STUDENT_LAYERS, hidden=WIDTH),
        [tiny_classifier(layers=TEACHER_LAYERS, hidden=WIDTH, seed=1)],
    )
    generator = torch.Generator().manual_seed(0)
    teacher_cls = torch.randn(ROWS, TEACHER_LAYERS + 1, WIDTH, generator=generator)
    # the teacher layer each student layer reads (1-based; an unconnected student layer: any, it is not compared)
    mapped = [m[0] if m else 1 for m in method.mapping]
    other = [TEACHER_LAYERS + 1 - layer for layer in mapped]  # a different teacher layer per connected layer
    logits, mask, labels = torch.zeros(ROWS, 2), torch.ones(ROWS, 1), torch.zeros(ROWS, dtype=torch.long)
    teacher = Features(logits, mask, extras={"cls": teacher_cls})

    def layer_term(layers: list[int]) -> float:
        student_cls = torch.cat([teacher_cls[:, :1], 3.0 * teacher_cls[:, layers]], dim=1)
        student = Features(logits, mask, extras={"cls": student_cls})
        with torch.no_grad():
            return float(method.terms(student, {0: teacher}, {"labels": labels})["layer"])

    return {"layer_term_mapped_layers_scaled": layer_term(mapped), "layer_term_other_layers": layer_term(other)}


@mechanism("layerwise")
def check() -> list[MechanismResult]:
    measured = layer_terms()
    holds = measured["layer_term_mapped_layers_scaled"] <= 1e-6 and measured["layer_term_other_layers"] >= 0.1
    return [
        MechanismResult(
            method="pkd",
            quantity="PKD's layer term (normalised [CLS] MSE over the PKD-Skip map)",
            measured=measured,
            expected="0 for a student equal to its mapped teacher layers up to scale; ≥ 0.1 for other layers",
            holds=holds,
        )
    ]
