"""Figures people would rather look at than read: α heatmaps, per-layer metrics, comparisons.

A comparison with a floor (the majority class) spans the floor to the teacher and draws a one-seed
table's noise band, so gaps within the noise do not look large; other charts zoom their value axis
to the data (a 0.549–0.563 spread is invisible from 0) and say so in the axis label; unconnected
layers are drawn as such, never as zeros.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import matplotlib
import matplotlib.ticker
import matplotlib.transforms

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from bert_kd.core.reports.markdown_tables import rounded  # noqa: E402

BAR_COLOR = "#4C72B0"
NOT_CONNECTED = "#d9d9d9"


def zoomed_limits(values: Sequence[float], minimum_span: float = 0.01, margin: float = 0.25) -> tuple[float, float]:
    """Axis limits around ``values`` with ``margin`` of their spread on each side (at least
    ``minimum_span`` wide, so equal values still get a visible band)."""
    finite = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not finite:
        raise ValueError("no finite value to plot")
    low, high = min(finite), max(finite)
    pad = max((high - low) * margin, minimum_span / 2)
    return low - pad, high + pad


def comparison_title(table: str | None, task: str | None, metric: str, split: str = "dev") -> str:
    """``distill_baselines · SST2 dev accuracy``."""
    parts = [p for p in (table, f"{task.upper()} {split} {metric}" if task else f"{split} {metric}") if p]
    return " · ".join(parts)


def comparison_bars(
    names: Sequence[str],
    scores: Sequence[float],
    reference: float | None,
    metric: str,
    title: str,
    errors: Sequence[float] | None = None,
    counts: Sequence[int] | None = None,
    reference_label: str = "teacher",
    floor: float | None = None,
    noise: float | None = None,
):
    """Dev score per method as horizontal bars, best on top, with ± ``errors`` (e.g. the std over
    seeds, ``n`` from ``counts``) and the teacher as a dashed line.

    With ``floor`` (the majority class) the score axis runs from the floor to the teacher, both
    drawn, so gaps between students look as large as they are against what there was to learn;
    ``noise`` (a one-seed table's ±band, [`bert_kd.core.reports.verdict.noise_tolerance`][]) is drawn as error
    bars on every bar and as a shaded band around the top score: rows reaching into it tie with
    the top. Without a floor the axis is zoomed to the data, and the axis label says so. The legend
    sits outside the bars."""
    if len(names) != len(scores):
        raise ValueError(f"comparison_bars: {len(names)} names but {len(scores)} scores")
    if errors is not None and len(errors) != len(scores):
        raise ValueError(f"comparison_bars: {len(errors)} errors for {len(scores)} scores")
    errors_list = (
        [0.0 if e is None or not math.isfinite(float(e)) else float(e) for e in errors] if errors is not None else None
    )
    order = sorted(range(len(scores)), key=lambda i: float(scores[i]))  # barh draws bottom-up: best on top
    labels = [str(names[i]).replace("\n", " ") for i in order]
    values = [float(scores[i]) for i in order]
    spreads = [errors_list[i] for i in order] if errors_list else None
    band = float(noise) if noise and math.isfinite(float(noise)) and not spreads else 0.0
    if band:
        spreads = [band] * len(values)
    if counts is not None:
        labels = [f"{label} (n={counts[i]})" for label, i in zip(labels, order)]

    extent = values + (
        [v - e for v, e in zip(values, spreads)] + [v + e for v, e in zip(values, spreads)] if spreads else []
    )
    anchored = floor is not None and math.isfinite(float(floor))
    if anchored:
        on_axis = extent + [float(floor)] + ([float(reference)] if reference is not None else [])
        low, high = min(on_axis), max(on_axis)
        pad = max(0.03 * (high - low), 0.005)
        low, high = low - pad, high + pad
        reference_on_scale = reference is not None
    else:
        low, high = zoomed_limits(extent)
        reference_on_scale = reference is not None and low - (high - low) <= reference <= high + (high - low)
        if reference_on_scale:
            low, high = zoomed_limits(extent + [reference])
    span = high - low
    width = max(8.0 if anchored else 6.0, 4.0 + 0.09 * max(len(s) for s in labels))
    fig, ax = plt.subplots(figsize=(width, (2.4 if anchored else 1.4) + 0.45 * len(values)))
    positions = np.arange(len(values))
    ax.barh(
        positions,
        [v - low for v in values],
        left=low,
        color=BAR_COLOR,
        height=0.6,
        xerr=spreads,
        error_kw={"ecolor": "black", "capsize": 4, "elinewidth": 1.2},
    )
    ax.set_yticks(positions, labels)
    # A value column at the right edge, clear of bars, error bars and the teacher line.
    ax.set_xlim(low, high + 0.32 * span)
    ax.axvspan(high, high + 0.32 * span, color="white", zorder=2)
    for y, value, spread in zip(positions, values, spreads or [0.0] * len(values)):
        text = rounded(value, 3) + (f" ± {spread:.3f}" if spreads and spread > 0 and not band else "")
        ax.text(
            0.99,
            y,
            text,
            va="center",
            ha="right",
            fontsize=8,
            zorder=3,
            transform=matplotlib.transforms.blended_transform_factory(ax.transAxes, ax.transData),
        )
    student_label = "students" + (" (mean ± std)" if spreads and not band else "")
    if band:
        student_label += f" (± {band:.3f}: noise of one dev-set run)"
    handles = [Patch(color=BAR_COLOR, label=student_label)]
    if band:
        top = max(values)
        handles.append(
            ax.axvspan(
                top - band,
                min(top + band, high),
                color=BAR_COLOR,
                alpha=0.15,
                zorder=0,
                label=f"within ± {band:.3f} of the top score",
            )
        )
    if reference is not None:
        label = f"{reference_label} {reference:.3f}" + ("" if reference_on_scale else " (off this scale)")
        line = ax.axvline(reference, color="black", linestyle="--", linewidth=1.2, label=label, zorder=1)
        if not reference_on_scale:
            line.set_visible(False)
            line = plt.Line2D([], [], color="black", linestyle="--", label=label)
        handles.append(line)
    if anchored:
        handles.append(
            ax.axvline(
                float(floor),
                color="#C44E52",
                linestyle=":",
                linewidth=1.5,
                zorder=1,
                label=f"majority class {float(floor):.3f}",
            )
        )
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(5))
    ticks = [t for t in ax.get_xticks() if low <= t <= high]
    ax.set_xticks(ticks)
    if anchored:
        ax.set_xlabel(f"{metric} (axis {low:.2f}–{high:.2f}: from the majority class to the teacher)")
    else:
        ax.set_xlabel(f"{metric} (axis zoomed to the data)")
    ax.set_title(title, loc="left", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    if anchored:  # below the axis: the bars keep the figure's width
        ax.legend(
            handles=handles,
            loc="upper left",
            bbox_to_anchor=(0.0, -0.12 - 0.6 / len(values)),
            ncol=2,
            frameon=False,
            fontsize=8,
        )
    else:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    fig.tight_layout()
    return fig


def attention_heatmap(
    alpha: Sequence[Sequence[float]],
    title: str = "ALP attention α",
    mapping: Sequence[Sequence[int]] | None = None,
):
    """Student layer × teacher layer weights averaged over the dev set (ALP-KD Figure 3).

    Student layers with no teacher layer (``mapping`` entry ``[]``, or an all-zero row when no
    mapping is given) are drawn hatched grey and labelled "not connected"; with a mapping, teacher
    layers outside a student layer's set are blank rather than 0.00.
    """
    values = np.asarray(alpha, dtype=float)
    if values.ndim != 2:
        raise ValueError(f"alpha must be a student × teacher matrix, got shape {values.shape}")
    n_student, n_teacher = values.shape
    if mapping is not None and len(mapping) != n_student:
        raise ValueError(f"mapping has {len(mapping)} entries but alpha has {n_student} student layers")
    allowed = np.ones_like(values, dtype=bool)
    if mapping is not None:
        allowed[:] = False
        for j, entry in enumerate(mapping):
            for k in entry:
                allowed[j, k - 1] = True
    connected = allowed.any(axis=1) & (np.nan_to_num(values).sum(axis=1) > 0 if mapping is None else True)
    shown = np.where(allowed & connected[:, None], values, np.nan)

    fig, ax = plt.subplots(figsize=(2.2 + 0.75 * n_teacher, 1.3 + 0.6 * n_student))
    cmap = matplotlib.colormaps["Blues"].with_extremes(bad="white")
    top = float(np.nanmax(shown)) if np.isfinite(shown).any() else 1.0
    vmax = min(1.0, max(0.2, math.ceil(top * 10) / 10))  # colour range fitted to the data for contrast
    image = ax.imshow(shown, cmap=cmap, vmin=0.0, vmax=vmax, aspect="auto")
    for j in range(n_student):
        if not connected[j]:
            ax.add_patch(
                plt.Rectangle(
                    (-0.5, j - 0.5), n_teacher, 1, facecolor=NOT_CONNECTED, hatch="///", edgecolor="white", linewidth=0
                )
            )
            ax.text(
                (n_teacher - 1) / 2,
                j,
                "not connected",
                ha="center",
                va="center",
                fontsize=9,
                color="#404040",
                bbox={"facecolor": NOT_CONNECTED, "edgecolor": "none", "pad": 1.5},
            )
            continue
        for k in range(n_teacher):
            if allowed[j, k]:
                value = values[j, k]
                ax.text(
                    k,
                    j,
                    f"{value:.2f}",
                    ha="center",
                    va="center",
                    fontsize=9,
                    color="white" if value >= 0.6 * vmax else "black",
                )
    ax.set_xticks(range(n_teacher), [str(k + 1) for k in range(n_teacher)])
    ax.set_yticks(range(n_student), [str(j + 1) for j in range(n_student)])
    restricted = bool((~allowed & connected[:, None]).any())
    ax.set_xlabel("teacher layer" + (" (blank: not in that student layer's teacher set)" if restricted else ""))
    ax.set_ylabel("student layer")
    ax.set_title(title, fontsize=10)
    fig.colorbar(image, ax=ax, label="α (rows sum to 1)", fraction=0.05, pad=0.03)
    fig.tight_layout()
    return fig


def per_layer_metric(values: Mapping[str, Mapping], metric: str, title: str):
    """Grouped bars per layer, one colour per model (TED Stage I: dev ``metric`` of each layer's
    task filter), value on each bar, score axis zoomed to the data.

    When the models list the same number of layers under different numbers (teacher layers M(k)
    vs student layers k), the k-th layers are grouped and each tick names both."""
    models = list(values)
    per_model = {m: sorted((int(k), float(v)) for k, v in values[m].items()) for m in models}
    if not any(per_model.values()):
        raise ValueError("per_layer_metric: no layer values")
    counts = {len(layers) for layers in per_model.values()}
    key_sets = {tuple(k for k, _ in layers) for layers in per_model.values()}
    paired = len(models) > 1 and len(counts) == 1 and len(key_sets) > 1
    if paired:
        n_groups = counts.pop()
        ticks = ["\n".join(f"{m} {per_model[m][i][0]}" for m in models) for i in range(n_groups)]
        positions = {m: {i: i for i in range(n_groups)} for m in models}
        xlabel = "layer (k-th layer of each model)"
    else:
        layers = sorted({k for layers in per_model.values() for k, _ in layers})
        ticks = [str(layer) for layer in layers]
        positions = {m: {i: layers.index(k) for i, (k, _) in enumerate(per_model[m])} for m in models}
        xlabel = "layer"
    low, high = zoomed_limits([v for layers in per_model.values() for _, v in layers])
    width = 0.8 / len(models)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, ax = plt.subplots(figsize=(max(4.5, 1.6 + 0.6 * len(ticks) * len(models)), 3.6))
    for m, model in enumerate(models):
        xs = [positions[model][i] + (m - (len(models) - 1) / 2) * width for i in range(len(per_model[model]))]
        ys = [v for _, v in per_model[model]]
        ax.bar(xs, [y - low for y in ys], bottom=low, width=width * 0.95, label=model, color=colors[m % len(colors)])
        for x, y in zip(xs, ys):
            ax.text(x, y, f"{y:.3f}", ha="center", va="bottom", fontsize=7, rotation=90 if len(models) > 2 else 0)
    ax.set_xticks(range(len(ticks)), ticks)
    ax.set_ylim(low, high + 0.15 * (high - low))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"{metric} (axis zoomed)")
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    fig.tight_layout()
    return fig


def per_epoch_lines(observed: Mapping[int, Mapping[str, float]], title: str, ylabel: str):
    """One line per statistic over the training epochs (``{epoch: {name: value}}``), markers at each epoch:
    RL-KD's share of each epoch's examples for which its agents chose each teacher."""
    epochs = sorted(int(e) for e in observed)
    names = sorted({name for values in observed.values() for name in values})
    if not epochs or not names:
        raise ValueError("per_epoch_lines: no values")
    fig, ax = plt.subplots(figsize=(max(4.5, 2.5 + 0.4 * len(epochs)), 3.4))
    for name in names:
        points = [(e, observed[e][name]) for e in epochs if name in observed[e]]
        ax.plot([e for e, _ in points], [v for _, v in points], marker="o", label=name.split("/")[-1])
    ax.set_xticks(epochs)
    ax.set_xlabel("epoch")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    fig.tight_layout()
    return fig
