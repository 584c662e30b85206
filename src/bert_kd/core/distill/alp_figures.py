"""ALP-KD's qualitative figures as plain functions of models and a batch (no Kedro).

* Figure 3 ([`alp_attention_per_example`][], [`alp_attention_figure`][]): the ALP weights
  α (Eq. 5–6) between a student layer and every teacher layer, one row per dev example (not
  averaged); student layers with no teacher layer (empty bucket) are drawn as "not connected",
  not as zeros.
* Figure 4 ([`layer_alignment`][], [`layer_alignment_figure`][]): a 2-D PCA of student layer
  outputs and their teacher layers for the same dev examples (ALP and PKD students), and the
  per-example cosine distance of each student layer to its teacher layer.

Layers are 1-based (index into HF ``hidden_states``); states are the [CLS]/summary states the
ALP and PKD losses use ([`Features.cls`][outputs.Features.cls]).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402
from sklearn.decomposition import PCA  # noqa: E402
from torch import Tensor, nn  # noqa: E402

from bert_kd.core.distill.losses import alp_attention  # noqa: E402
from bert_kd.core.distill.outputs import forward_features  # noqa: E402
from bert_kd.core.files import write_file_atomically  # noqa: E402
from bert_kd.core.layer_maps import layer_map  # noqa: E402
from bert_kd.core.models import num_layers  # noqa: E402
from bert_kd.core.training import module_device  # noqa: E402

TEACHER_COLOR, ALP_COLOR, PKD_COLOR = "#55A868", "#C44E52", "#4C72B0"  # as in the paper: green, red, blue


def pick_examples(n_available: int, n: int, seed: int = 0) -> np.ndarray:
    """``n`` distinct random example indices (sorted), all of them when fewer are available."""
    if n_available < 1:
        raise ValueError("the batch holds no examples")
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n_available, size=min(n, n_available), replace=False))


def dev_examples(dataset, n: int, collator, seed: int = 0) -> tuple[dict[str, Tensor], np.ndarray]:
    """``n`` random rows of a tokenized split (all when fewer) as one collated batch, and their
    row indices in ``dataset``: only those rows are padded and run through the models."""
    index = pick_examples(len(dataset), n, seed)
    return collator(list(dataset.select(index.tolist()))), index


def _select(batch: Mapping[str, Tensor], index: np.ndarray) -> dict[str, Tensor]:
    rows = torch.as_tensor(index, dtype=torch.long)
    return {k: v.index_select(0, rows) if isinstance(v, Tensor) and v.dim() > 0 else v for k, v in batch.items()}


@torch.no_grad()
def layer_states(model: nn.Module, batch: Mapping[str, Tensor], prefix: str = "") -> Tensor:
    """[CLS] states of layers 1..L, shape (batch, L, hidden), on ``model``'s device (the batch is moved there)."""
    was_training = model.training
    model.eval()
    device = module_device(model)
    try:
        inputs = {k: v.to(device) if isinstance(v, Tensor) else v for k, v in batch.items()}
        return forward_features(model, inputs, hidden_states=True, prefix=prefix).cls()[:, 1:]
    finally:
        model.train(was_training)


@dataclass(frozen=True)
class AlphaPerExample:
    alpha: np.ndarray  # (examples, student layers, teacher layers); rows of unconnected layers are NaN
    connected: list[bool]  # per student layer
    examples: np.ndarray  # indices into the batch
    bucket_sizes: tuple[int, ...] | None = None  # teacher layers per student layer, |A(j)|; None: all of them

    @property
    def normalised_entropy(self) -> np.ndarray:
        """(examples, student layers): α's entropy over ``log |A(j)|``, the entropy of equal weights (1: uniform,
        0: one-hot); NaN where unconnected or the bucket has one layer."""
        sizes = np.asarray(self.bucket_sizes or [self.alpha.shape[2]] * self.alpha.shape[1], dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(sizes > 1, self.entropy / np.log(np.where(sizes > 1, sizes, 2.0)), np.nan)

    def summary(self) -> pd.DataFrame:
        """Per connected student layer: the examples, α's mean normalised entropy, α's largest standard deviation
        across examples over the teacher layers (how much α varies with the input) and the mean α per teacher
        layer (Figure 3 as the paper reads it: spread, and different from one example to the next)."""
        rows = []
        for j, connected in enumerate(self.connected):
            if not connected:
                continue
            alpha = self.alpha[:, j, :]
            rows.append(
                {
                    "student_layer": j + 1,
                    "examples": int(alpha.shape[0]),
                    "mean_normalised_entropy": round(float(np.nanmean(self.normalised_entropy[:, j])), 4),
                    "alpha_sd_across_examples_max": round(float(alpha.std(axis=0).max()), 4),
                    "mean_alpha": " ".join(f"{v:.3f}" for v in alpha.mean(axis=0)),
                }
            )
        return pd.DataFrame(rows)

    @property
    def entropy(self) -> np.ndarray:
        """(examples, student layers): α's entropy in nats ([`alp_entropy`][losses.alp_entropy]); NaN where unconnected."""
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(self.alpha > 0, self.alpha * np.log(np.where(self.alpha > 0, self.alpha, 1.0)), 0.0)
        out = -terms.sum(axis=-1)
        out[:, [j for j, c in enumerate(self.connected) if not c]] = np.nan
        return out


@dataclass(frozen=True)
class AlphaScore:
    """How α is scored: ``projection`` maps student states to the teacher's width when they differ (the ALP
    method's learned projection); ``similarity`` and ``temperature``: the recipe's ``similarity`` and
    ``similarity_temperature`` ([`alp_scores`][losses.alp_scores]; ``None``: the method's default score)."""

    projection: Callable[[Tensor], Tensor] | None = None
    similarity: str | None = None
    temperature: float | None = None


def alp_attention_per_example(
    student: nn.Module,
    teacher: nn.Module,
    batch: Mapping[str, Tensor],
    mapping: str | Sequence[Sequence[int]] = "all",
    *,
    score: AlphaScore = AlphaScore(),
    n_examples: int = 10,
    seed: int = 0,
    teacher_prefix: str = "",
) -> AlphaPerExample:
    """α of Eq. 5–6 for ``n_examples`` random examples of ``batch``, scored as ``score`` says
    ([`AlphaScore`][])."""
    mapping = layer_map(mapping, num_layers(teacher), num_layers(student))
    index = pick_examples(int(batch["input_ids"].shape[0]), n_examples, seed)
    sub = _select(batch, index)
    s = layer_states(student, sub)
    t = layer_states(teacher, sub, prefix=teacher_prefix)
    if score.projection is not None:
        with torch.no_grad():
            s = score.projection(s)
    # The two models need not share a device (a trained student handed back on the CPU, its live teacher
    # still on the GPU): α is computed where the student's states are.
    alpha = (
        alp_attention(s, t.to(s.device), mapping, score.similarity, score.temperature).cpu().numpy().astype(np.float64)
    )
    connected = [len(entry) > 0 for entry in mapping]
    alpha[:, [j for j, c in enumerate(connected) if not c], :] = np.nan
    return AlphaPerExample(alpha, connected, index, tuple(len(entry) for entry in mapping))


def alp_attention_figure(result: AlphaPerExample, title: str = "ALP-KD α per example (Figure 3)"):
    """One panel per student layer: rows = examples (each with α's entropy H in nats), columns = teacher layers;
    each panel's title gives α's mean normalised entropy and its largest SD across examples ([`AlphaPerExample.summary`][])."""
    n_examples, n_student, n_teacher = result.alpha.shape
    entropy = result.entropy
    summary = {int(row.student_layer): row for row in result.summary().itertuples()}
    fig, axes = plt.subplots(
        1, n_student, figsize=(1.2 + (0.45 * n_teacher + 0.6) * n_student, 1.2 + 0.35 * n_examples), squeeze=False
    )
    image = None
    for j, ax in enumerate(axes[0]):
        if not result.connected[j]:
            ax.set_facecolor("#EEEEEE")
            ax.text(
                0.5,
                0.5,
                "not connected\n(no teacher layer)",
                ha="center",
                va="center",
                transform=ax.transAxes,
                fontsize=8,
            )
            ax.set_xticks([])
            ax.set_yticks([])
        else:
            image = ax.imshow(result.alpha[:, j, :], cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto")
            ax.set_xticks(range(n_teacher), [str(k + 1) for k in range(n_teacher)], fontsize=7)
            ticks = [f"ex {i}  H {h:.2f}" for i, h in zip(result.examples, entropy[:, j])]
            ax.set_yticks(range(n_examples), ticks, fontsize=7)
            ax.set_xlabel("teacher layer")
        if j + 1 in summary:
            row = summary[j + 1]
            ax.set_title(
                f"student layer {j + 1}\nH / log n {row.mean_normalised_entropy:.2f}, "
                f"SD over examples ≤ {row.alpha_sd_across_examples_max:.3f}",
                fontsize=8,
            )
        else:
            ax.set_title(f"student layer {j + 1}", fontsize=9)
    if image is not None:
        fig.colorbar(image, ax=list(axes[0]), shrink=0.8, label="α")
    fig.suptitle(title, fontsize=10)
    return fig


@dataclass(frozen=True)
class LayerAlignment:
    student_layer: int
    teacher_layer: int
    points: dict[str, np.ndarray]  # name -> (examples, 2) PCA coordinates; "teacher" included
    cosine_distance: dict[str, np.ndarray]  # student name -> (examples,) 1 − cos(student, teacher)
    explained_variance: tuple[float, float]


def layer_alignment(
    teacher: nn.Module,
    students: Mapping[str, nn.Module],
    batch: Mapping[str, Tensor],
    pairs: Sequence[tuple[int, int]],
    *,
    projections: Mapping[str, Callable[[Tensor], Tensor]] | None = None,
    n_examples: int = 100,
    seed: int = 0,
    teacher_prefix: str = "",
) -> list[LayerAlignment]:
    """For each (student layer, teacher layer) pair: a PCA fitted on the teacher's and every
    student's states of those layers for the same examples, and each student's per-example
    cosine distance to the teacher (ALP-KD Figure 4: pairs (2, 5) and (3, 9) for 12→4)."""
    index = pick_examples(int(batch["input_ids"].shape[0]), n_examples, seed)
    sub = _select(batch, index)
    t_states = layer_states(teacher, sub, prefix=teacher_prefix)
    s_states = {}
    for name, model in students.items():
        states = layer_states(model, sub)
        if projections and name in projections:
            with torch.no_grad():
                states = projections[name](states)
        s_states[name] = states
    out = []
    for s_layer, t_layer in pairs:
        if not 1 <= t_layer <= t_states.shape[1]:
            raise ValueError(f"pairs: teacher layer {t_layer} outside 1..{t_states.shape[1]}")
        teacher_x = t_states[:, t_layer - 1].double().cpu().numpy()
        xs = {"teacher": teacher_x}
        for name, states in s_states.items():
            if not 1 <= s_layer <= states.shape[1]:
                raise ValueError(f"pairs: student layer {s_layer} outside 1..{states.shape[1]} of {name!r}")
            x = states[:, s_layer - 1].double().cpu().numpy()
            if x.shape[1] != teacher_x.shape[1]:
                raise ValueError(
                    f"student {name!r} width {x.shape[1]} != teacher width {teacher_x.shape[1]}: "
                    "pass its projection in `projections`"
                )
            xs[name] = x
        pca = PCA(n_components=2, random_state=seed).fit(np.concatenate(list(xs.values())))
        points = {name: pca.transform(x) for name, x in xs.items()}
        distances = {}
        for name, x in xs.items():
            if name == "teacher":
                continue
            cos = (x * teacher_x).sum(1) / (np.linalg.norm(x, axis=1) * np.linalg.norm(teacher_x, axis=1)).clip(1e-12)
            distances[name] = 1.0 - cos
        out.append(LayerAlignment(s_layer, t_layer, points, distances, tuple(pca.explained_variance_ratio_)))
    return out


def layer_alignment_figure(alignments: Sequence[LayerAlignment], title: str = "Student vs teacher layers (Figure 4)"):
    """Top row: PCA scatter per layer pair; bottom row: per-example cosine distance to the teacher."""
    colors = {"teacher": TEACHER_COLOR}
    palette = iter([ALP_COLOR, PKD_COLOR, "#8172B2", "#CCB974", "#64B5CD"])
    for a in alignments:
        for name in a.points:
            if name not in colors:
                colors[name] = (
                    ALP_COLOR if "alp" in name.lower() else PKD_COLOR if "pkd" in name.lower() else next(palette)
                )
    fig, axes = plt.subplots(2, len(alignments), figsize=(max(6.5, 0.5 + 4.0 * len(alignments)), 6.4), squeeze=False)
    for col, a in enumerate(alignments):
        top, bottom = axes[0][col], axes[1][col]
        for name, xy in a.points.items():
            label = f"teacher h{a.teacher_layer}" if name == "teacher" else f"{name} h{a.student_layer}"
            top.scatter(xy[:, 0], xy[:, 1], s=10, alpha=0.7, color=colors[name], label=label)
        top.set_title(f"student layer {a.student_layer} vs teacher layer {a.teacher_layer}", fontsize=9)
        top.set_xlabel(f"PC1 ({100 * a.explained_variance[0]:.0f}%)")
        top.set_ylabel(f"PC2 ({100 * a.explained_variance[1]:.0f}%)")
        top.legend(fontsize=7)
        top.ticklabel_format(style="sci", scilimits=(-2, 3))
        for name, d in a.cosine_distance.items():
            bottom.plot(range(len(d)), d, color=colors[name], linewidth=1, label=f"{name} (mean {d.mean():.3g})")
        bottom.set_xlabel("example")
        bottom.set_ylabel("cosine distance to teacher")
        bottom.legend(fontsize=7)
        bottom.grid(alpha=0.3)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


ALPHA_COLUMNS = [
    "example",
    "student_layer",
    "connected",
    "teacher_layer",
    "alpha",
    "entropy",
    "normalised_entropy",
]


def alpha_table(result: AlphaPerExample) -> pd.DataFrame:
    """Figure 3 as rows (example, student layer, teacher layer, α, the example's α entropy in nats and over
    ``log |A(j)|``); an unconnected student layer is one row per example with ``connected`` False and α empty,
    not zeros."""
    rows = []
    entropy, normalised = result.entropy, result.normalised_entropy
    n_examples, n_student, n_teacher = result.alpha.shape
    for e, example in enumerate(result.examples):
        for j in range(n_student):
            if not result.connected[j]:
                rows.append(
                    {
                        "example": int(example),
                        "student_layer": j + 1,
                        "connected": False,
                        "teacher_layer": None,
                        "alpha": None,
                        "entropy": None,
                        "normalised_entropy": None,
                    }
                )
                continue
            rows += [
                {
                    "example": int(example),
                    "student_layer": j + 1,
                    "connected": True,
                    "teacher_layer": k + 1,
                    "alpha": round(float(result.alpha[e, j, k]), 6),
                    "entropy": round(float(entropy[e, j]), 6),
                    "normalised_entropy": None if np.isnan(normalised[e, j]) else round(float(normalised[e, j]), 6),
                }
                for k in range(n_teacher)
            ]
    return pd.DataFrame(rows, columns=ALPHA_COLUMNS)


def alignment_table(alignments: Sequence[LayerAlignment], examples: Sequence[int] | None = None) -> pd.DataFrame:
    """Figure 4 as rows (layer pair, model, example, PC1, PC2, cosine distance to the teacher;
    empty for the teacher itself); ``examples`` are the dev row indices of the points."""
    rows = []
    for a in alignments:
        for name, xy in a.points.items():
            distance = a.cosine_distance.get(name)
            for i, (x, y) in enumerate(xy):
                rows.append(
                    {
                        "student_layer": a.student_layer,
                        "teacher_layer": a.teacher_layer,
                        "model": name,
                        "example": int(examples[i]) if examples is not None else i,
                        "pc1": round(float(x), 6),
                        "pc2": round(float(y), 6),
                        "cosine_distance": None if distance is None else round(float(distance[i]), 6),
                    }
                )
    return pd.DataFrame(rows)


def alignment_pairs(mapping: Sequence[Sequence[int]]) -> list[tuple[int, int]]:
    """(student layer, teacher layer) of every one-to-one connection of a PKD map (Figure 4 draws
    ALP-KD's PKD pairs: (2, 5) and (3, 9) of ``bucket_first`` 12→4, besides (1, 1))."""
    return [(j, entry[0]) for j, entry in enumerate(mapping, start=1) if len(entry) == 1]


def unavailable_figure(title: str, reason: str):
    """A figure saying why it could not be drawn (kept in the report instead of a missing file)."""
    fig, ax = plt.subplots(figsize=(6.0, 2.0))
    ax.axis("off")
    ax.text(0.5, 0.5, reason, ha="center", va="center", wrap=True, fontsize=9, transform=ax.transAxes)
    fig.suptitle(title, fontsize=10)
    return fig


def save_figure(fig, path) -> None:
    """Write ``fig`` as PNG atomically ([`bert_kd.core.files.write_file_atomically`][]) and close it."""
    try:
        write_file_atomically(path, lambda tmp: fig.savefig(tmp, dpi=120, format="png"))
    finally:
        plt.close(fig)
