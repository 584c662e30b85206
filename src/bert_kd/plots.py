"""Figures people would rather look at than read: α heatmaps, per-layer metrics, comparisons."""

from __future__ import annotations

from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def attention_heatmap(alpha: Sequence[Sequence[float]], title: str = "ALP attention α"):
    """Student layer × teacher layer weights averaged over the dev set (ALP-KD Figure 3)."""
    fig, ax = plt.subplots(figsize=(1.0 + 0.6 * len(alpha[0]), 1.0 + 0.5 * len(alpha)))
    image = ax.imshow(alpha, cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(alpha[0])), [str(k + 1) for k in range(len(alpha[0]))])
    ax.set_yticks(range(len(alpha)), [str(j + 1) for j in range(len(alpha))])
    ax.set_xlabel("teacher layer")
    ax.set_ylabel("student layer")
    for j, row in enumerate(alpha):
        for k, value in enumerate(row):
            ax.text(k, j, f"{value:.2f}", ha="center", va="center", fontsize=7, color="black" if value < 0.6 else "white")
    ax.set_title(title)
    fig.colorbar(image, ax=ax)
    fig.tight_layout()
    return fig


def per_layer_metric(values: dict, metric: str, title: str):
    """A line per model: dev metric of each layer's task filter (TED Stage I)."""
    fig, ax = plt.subplots(figsize=(5, 3.2))
    all_layers = sorted({int(k) for per_layer in values.values() for k in per_layer})
    for label, per_layer in values.items():
        layers = sorted(per_layer, key=int)
        ax.plot([int(k) for k in layers], [per_layer[k] for k in layers], marker="o", label=label)
    ax.set_xticks(all_layers)
    ax.set_xlabel("layer")
    ax.set_ylabel(metric)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return fig


def comparison_bars(names: Sequence[str], scores: Sequence[float], reference: float | None, metric: str, title: str):
    """Dev score per method, with the teacher as a dashed line."""
    fig, ax = plt.subplots(figsize=(1.5 + 0.8 * len(names), 3.4))
    ax.bar(names, scores, color="#4C72B0")
    if reference is not None:
        ax.axhline(reference, color="black", linestyle="--", label="teacher")
        ax.legend()
    for i, score in enumerate(scores):
        ax.text(i, score, f"{score:.3f}", ha="center", va="bottom", fontsize=8)
    ax.set_ylabel(metric)
    ax.set_title(title)
    ax.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    return fig
