"""ALP-KD Figure 3 per score of α: which variant shows the paper's picture (results/alp_alpha/README.md's table).

Reads the Figure 3 tables ``figure3_<similarity>_<n>layers.csv`` that ``benchmarks/alp_alpha.sh`` copies from
``kedro run --pipelines=distill_alp`` (α of the trained student's first layer over every teacher layer, 10 SST-2 dev
examples, each with α's entropy in nats) and prints, per variant and depth: the mean entropy as a fraction of the
entropy of equal weights (log n), how many examples put ≥ 0.9 of α on one teacher layer, α's mass on the teacher's
first half, α's largest standard deviation across the examples (over the teacher layers: how much α varies with
the input), and whether that is ALP-KD's picture (Sec. "Analysis", Figure 3): α spread over the teacher's layers
("all teacher layers participate") with the first half more active (2- and 4-layer students). The thresholds:

* one-hot: mean entropy < 0.1 log n (the run's warning, ``ONE_HOT_ENTROPY_FRACTION``);
* near-uniform: mean entropy > 0.95 log n (α ≈ 1/n: a plain average of the teacher's layers, no layer preferred);
* spread: in between, with mean entropy ≥ 0.5 log n; first half more active: its mean mass > 0.5.

    .venv/bin/python benchmarks/alp_alpha.py results/alp_alpha     # prints the Markdown table and the statement
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import pandas as pd

from bert_kd.core.distill.methods.layerwise import ONE_HOT_ENTROPY_FRACTION

NAME = re.compile(r"figure3_(?P<similarity>\w+?)_(?P<layers>\d+)layers\.csv$")
UNIFORM_FRACTION, SPREAD_FRACTION, PEAK = 0.95, 0.5, 0.9
VARIANTS = ("dot", "scaled_dot", "cosine", "ln_scaled_dot")


def summarise(path: Path) -> dict:
    """One row: the student's first layer against every teacher layer, over the table's examples."""
    match = NAME.search(path.name)
    table = pd.read_csv(path)
    first = table[(table["student_layer"] == 1) & table["connected"]]
    alpha = first.pivot(index="example", columns="teacher_layer", values="alpha")
    entropy = first.groupby("example")["entropy"].first()
    n = alpha.shape[1]
    fraction = float(entropy.mean()) / math.log(n)
    first_half = float(alpha[[k for k in alpha.columns if k <= n // 2]].sum(axis=1).mean())
    spread_across_examples = float(alpha.std(ddof=0).max())
    if fraction < ONE_HOT_ENTROPY_FRACTION:
        shape = "one-hot"
    elif fraction > UNIFORM_FRACTION:
        shape = "near-uniform"
    elif fraction >= SPREAD_FRACTION:
        shape = "spread"
    else:
        shape = "concentrated"
    return {
        "similarity": match["similarity"],
        "student layers": int(match["layers"]),
        "examples": len(entropy),
        "mean H (nats)": round(float(entropy.mean()), 3),
        "H / log n": round(fraction, 2),
        "examples with max α ≥ 0.9": int((alpha.max(axis=1) >= PEAK).sum()),
        "top teacher layer (mean α)": f"{int(alpha.mean().idxmax())} ({alpha.mean().max():.2f})",
        "α on first half": round(first_half, 2),
        "α's largest SD across examples": round(spread_across_examples, 4),
        "α": shape,
        "paper's picture": "yes" if shape == "spread" and first_half > 0.5 else "no",
    }


def statement(rows: pd.DataFrame) -> str:
    """Which variants show ALP-KD's Figure 3 at every depth drawn, and which do not, with why."""
    lines = []
    for similarity, group in rows.groupby("similarity", sort=False):
        depths = ", ".join(f"{d}-layer" for d in group["student layers"])
        said = "; ".join(
            f"{r['student layers']} layers: α {r['α']} (H = {r['H / log n']:.2f} log n), first half {r['α on first half']:.2f}"
            for _, r in group.iterrows()
        )
        verdict = "matches" if (group["paper's picture"] == "yes").all() else "does not match"
        lines.append(f"- **{similarity}** {verdict} the paper's Figure 3 ({depths} students): {said}.")
    return "\n".join(lines)


def combined_figure(paths: list[Path], out: Path) -> None:
    """One panel per (depth, variant): α of the student's first layer, rows = examples with their entropy H."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bert_kd.core.distill.alp_figures import save_figure

    found = {(int(NAME.search(p.name)["layers"]), NAME.search(p.name)["similarity"]): p for p in paths}
    depths = sorted({d for d, _ in found})
    variants = [v for v in VARIANTS if any(v == s for _, s in found)]
    fig, axes = plt.subplots(
        len(depths), len(variants), figsize=(4.0 * len(variants), 3.4 * len(depths)), squeeze=False
    )
    for i, depth in enumerate(depths):
        for j, variant in enumerate(variants):
            ax = axes[i][j]
            if (depth, variant) not in found:
                ax.axis("off")
                continue
            table = pd.read_csv(found[(depth, variant)])
            first = table[(table["student_layer"] == 1) & table["connected"]]
            alpha = first.pivot(index="example", columns="teacher_layer", values="alpha")
            entropy = first.groupby("example")["entropy"].first()
            image = ax.imshow(alpha.to_numpy(), cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto")
            ax.set_xticks(range(alpha.shape[1]), [str(int(k)) for k in alpha.columns], fontsize=7)
            ax.set_yticks(range(len(alpha)), [f"ex {e}  H {entropy[e]:.2f}" for e in alpha.index], fontsize=6)
            ax.set_title(f"{variant}, {depth} layers, mean H {entropy.mean():.2f}", fontsize=8)
            ax.set_xlabel("teacher layer", fontsize=7)
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.6, label="α")
    fig.suptitle("ALP-KD Figure 3 after training: α of student layer 1, 10 SST-2 dev examples", fontsize=9)
    save_figure(fig, out)


def main(folder: str) -> None:
    paths = sorted(Path(folder).glob("figure3_*layers.csv"))
    combined_figure(paths, Path(folder) / "figure3_variants.png")
    rows = pd.DataFrame([summarise(p) for p in paths])
    order = {name: i for i, name in enumerate(VARIANTS)}
    rows = rows.sort_values(
        ["similarity", "student layers"], key=lambda c: c.map(order) if c.name == "similarity" else c
    )
    print("| " + " | ".join(rows.columns) + " |")
    print("|" + "---|" * len(rows.columns))
    for _, row in rows.iterrows():
        print("| " + " | ".join(str(v) for v in row) + " |")
    print()
    print(statement(rows))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "results/alp_alpha")
