"""Each teacher's and each layer group's share of the MT loss (the figure "multi-teacher
per-teacher/group contributions").

The MT objective (Eq. 12–13) is a weighted sum of per-teacher pieces: the soft-label term of
Eq. 1 averages K per-teacher terms, L_hidden (Eq. 5) and L_emb (Eq. 11) average per-teacher
distances, L_attn (Eq. 10) averages the token- or span-aligned teachers' distances, and each hidden /
attention distance is a sum over student layers i of the group I_{k,i} (Eq. 3/8). So the loss
splits exactly into pieces (term, teacher k, student layer i) — weight × piece / (number of
teachers averaged) — which add up to the training loss. Their mean over the dev split at the
end of training, and each piece's share of the total, is what the method itself exposes: which
teacher and which group the student is still being pulled towards.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Mapping

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402
from torch import Tensor  # noqa: E402

from bert_kd.core.distill import losses  # noqa: E402
from bert_kd.core.distill.methods.base import Method  # noqa: E402
from bert_kd.core.distill.outputs import Features  # noqa: E402
from bert_kd.core.training import module_device, task_loss  # noqa: E402

#: The MT terms in plotting order (``ce`` is the student's own task loss, not a teacher's).
TERMS = ("ce", "pred", "hidden", "attn", "emb")


def _only_group(groups: list[list[int]], i: int) -> list[list[int]]:
    return [list(g) if j == i else [] for j, g in enumerate(groups)]


@torch.no_grad()
def batch_contributions(
    method: Method,
    weights: Mapping[str, float],
    student: Features,
    teachers: Mapping[int, Features],
    batch: dict[str, Tensor],
) -> dict[tuple, float]:
    """``{(term, teacher index or None, student layer or None): weighted loss}`` for one batch;
    the values add up to the objective's loss on that batch (all teachers, no sampling)."""
    order = sorted(teachers)
    n = len(order)
    w = {t: float(weights.get(t, 0.0)) for t in TERMS}
    out: dict[tuple, float] = {}
    if w["ce"]:
        out[("ce", None, None)] = w["ce"] * float(task_loss(student.logits, batch["labels"]))
    alignment = {k: method.alignment_of(k, batch) for k in order}
    n_positional = sum(a.level != "sentence" for a in alignment.values())
    for k in order:
        teacher = teachers[k]
        if w["pred"]:
            own = losses.multi_teacher_prediction_loss(
                student.logits, [teacher.logits], method.temperature, method.regression, scale_by_t2=method.scale_by_t2
            )
            out[("pred", k, None)] = w["pred"] * float(own) / n
        if w["emb"]:
            out[("emb", k, None)] = w["emb"] * float(method.embedding_distance(k, student, teacher, alignment[k])) / n
        for i, group in enumerate(method.groups[k]):
            if not group:
                continue
            only = _only_group(method.groups[k], i)
            if w["hidden"]:
                out[("hidden", k, i + 1)] = (
                    w["hidden"] * float(method.hidden_distance(k, student, teacher, alignment[k], only)) / n
                )
            if w["attn"] and alignment[k].level != "sentence":
                out[("attn", k, i + 1)] = (
                    w["attn"] * float(method.attention_distance(k, student, teacher, alignment[k], only)) / n_positional
                )
    return out


@torch.no_grad()
def dev_contributions(objective, loader) -> dict:
    """Mean [`batch_contributions`][] over ``loader`` (per example) for a
    [`DistillationObjective`][objective.DistillationObjective] whose method is MT; JSON-able:
    ``{"examples", "total", "rows": [{term, teacher, student_layer, teacher_layers, loss}]}``."""
    method = objective.method
    if method.name != "multi_teacher":
        raise TypeError(f"per-teacher/group contributions need method 'multi_teacher', got {method.name!r}")
    was_training = objective.training
    objective.eval()
    device = module_device(objective.model)
    sums: dict[tuple, float] = defaultdict(float)
    count = 0
    try:
        for batch in loader:
            batch = {k: v.to(device) for k, v in batch.items()}
            student = objective.student_features(batch)
            # live teachers: the cache holds training rows only
            teachers = {
                k: objective.teacher_features(k, batch, allow_cache=False) for k in range(len(objective.teacher_specs))
            }
            size = int(batch["labels"].shape[0])
            for key, value in batch_contributions(method, objective.weights, student, teachers, batch).items():
                sums[key] += value * size
            count += size
    finally:
        objective.train(was_training)
    if not count:
        raise ValueError("dev_contributions: the loader yielded no examples")
    rows = []
    for (term, k, layer), total in sorted(
        sums.items(), key=lambda item: (TERMS.index(item[0][0]), item[0][1] or 0, item[0][2] or 0)
    ):
        rows.append(
            {
                "term": term,
                "teacher": None if k is None else method.teacher_names[k],
                "student_layer": layer,
                "teacher_layers": None if layer is None else list(method.groups[k][layer - 1]),
                "loss": total / count,
            }
        )
    return {"examples": count, "total": float(sum(r["loss"] for r in rows)), "rows": rows}


def contributions_table(contributions: Mapping) -> pd.DataFrame:
    """The rows of [`dev_contributions`][] with each piece's share of the total loss (%)."""
    frame = pd.DataFrame(contributions["rows"], columns=["term", "teacher", "student_layer", "teacher_layers", "loss"])
    total = float(contributions["total"])
    frame["share_%"] = (100.0 * frame["loss"] / total).round(2) if total > 0 else np.nan
    frame["teacher_layers"] = frame["teacher_layers"].map(lambda g: None if g is None else "-".join(str(j) for j in g))
    frame["loss"] = frame["loss"].round(6)
    return frame


def contributions_figure(table: pd.DataFrame, title: str):
    """Left: share of the loss per teacher, stacked by term (the student's CE as its own bar);
    right: share per (teacher, student layer) group of the hidden + attention terms."""
    teachers = [t for t in dict.fromkeys(table["teacher"].dropna())]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.0, 3.8), gridspec_kw={"width_ratios": [1.1, 1.0]})
    bars = ["student CE", *teachers]
    bottom = np.zeros(len(bars))
    colors = dict(zip(TERMS, ["#8C8C8C", "#4C72B0", "#C44E52", "#55A868", "#CCB974"]))
    for term in TERMS:
        rows = table[table["term"] == term]
        if rows.empty:
            continue
        heights = np.array(
            [
                rows["share_%"].sum()
                if b == "student CE" and term == "ce"
                else rows.loc[rows["teacher"] == b, "share_%"].sum()
                for b in bars
            ]
        )
        left.bar(bars, heights, bottom=bottom, color=colors[term], label=term)
        bottom += heights
    for x, y in enumerate(bottom):
        left.text(x, y, f"{y:.1f}%", ha="center", va="bottom", fontsize=8)
    left.set_ylabel("share of the dev loss (%)")
    left.set_title("per teacher, by term", fontsize=9)
    left.legend(fontsize=7, frameon=False)
    groups = table[table["term"].isin(["hidden", "attn"])]
    if groups.empty:
        right.axis("off")
        right.text(0.5, 0.5, "no layer-group terms (hidden / attn weights are 0)", ha="center", va="center", fontsize=8)
    else:
        layers = sorted(int(v) for v in groups["student_layer"].dropna().unique())
        grid = np.full((len(teachers), len(layers)), np.nan)
        labels = [["" for _ in layers] for _ in teachers]
        for (teacher, layer), part in groups.groupby(["teacher", "student_layer"]):
            r, c = teachers.index(teacher), layers.index(int(layer))
            grid[r, c] = part["share_%"].sum()
            labels[r][c] = f"{grid[r, c]:.1f}%\nT{part['teacher_layers'].iloc[0]}"
        image = right.imshow(grid, cmap="Blues", aspect="auto")
        for r in range(len(teachers)):
            for c in range(len(layers)):
                right.text(c, r, labels[r][c], ha="center", va="center", fontsize=7)
        right.set_xticks(range(len(layers)), [f"student {j}" for j in layers], fontsize=8)
        right.set_yticks(range(len(teachers)), teachers, fontsize=8)
        right.set_title("per layer group I_{k,i} (hidden + attn)", fontsize=9)
        fig.colorbar(image, ax=right, label="share (%)")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
