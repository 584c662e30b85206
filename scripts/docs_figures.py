"""Regenerate the documentation's pictures (docs/images/) with the project's own code.

    python scripts/docs_figures.py                 # the architecture, the DAG and the comparison plot
    python scripts/docs_figures.py --alp-figure data/08_reporting/alp_kd_figure3_alp.png
    python scripts/docs_figures.py --dag             # the DAG alone

* ``architecture.png``: the import graph of ``src/bert_kd`` (grimp, the library import-linter checks the
  contracts with) as a matrix of module-to-module imports between packages, in the layers of
  ``[tool.importlinter]`` in ``pyproject.toml``.
* ``distill_baselines_dag.png``: the ``distill_baselines`` pipeline as the pipeline registry builds it and
  kedro-viz's default view groups it: a box per top-level node and per collapsed group (``alp_kd`` with one
  block per recipe row, ``compare``), 688 px wide (the docs' content width) with labels of 13 px.
* ``distill_baselines.png``: the comparison plot drawn by the comparison node's own function
  (``comparison_bars``) from the table of the documented CPU comparison in ``docs/compare-on-cpu.md``.
* ``alp_attention.png``: ALP-KD's Figure 3 as a ``distill_alp`` run writes it (``--alp-figure``: the PNG that
  run wrote, resized for the site).

Run from the repository root with ``PYTHONPATH=src``. Each file stays under 300 KB.
"""

from __future__ import annotations

import argparse
import re
import tomllib
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import networkx as nx  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "docs" / "images"
PACKAGE = "bert_kd"
MAX_BYTES = 300_000
BOX = "#e8eef7"
EDGE = "#4C72B0"


#: The docs' content width (MkDocs Material, px): a picture at most this wide is shown at its own size.
CONTENT_WIDTH = 688
#: The DAG picture's label size (pt at 110 dpi: 13.7 px, so at least 10 px at the content width).
DAG_FONT = 9.5


def draw_rows(rows: list[list[str]], edges, labels: dict[str, str], path: Path, title: str) -> None:
    """Boxes in ``rows`` (top to bottom; a box as tall as its label's lines), an arrow per ``(source, target)``
    edge, in a picture [`CONTENT_WIDTH`][] px wide at most."""
    line, pad = 0.3, 0.25
    heights = [max(labels.get(n, n).count("\n") + 1 for n in row) * line + pad for row in rows]
    tops = [-sum(heights[:i]) - 0.35 * i for i in range(len(rows))]
    fig, ax = plt.subplots(figsize=(CONTENT_WIDTH / 110 - 0.1, (-tops[-1] + heights[-1]) * 0.72 + 0.5))
    position, size = {}, {}
    for depth, row in enumerate(rows):
        for index, name in enumerate(row):
            position[name] = ((index + 0.5) / len(row), tops[depth] - heights[depth] / 2)
            size[name] = (0.9 / len(row), labels.get(name, name).count("\n") * line + line + pad * 0.6)
    depth = {name: d for d, row in enumerate(rows) for name in row}
    for source, target in edges:
        (x0, y0), (x1, y1) = position[source], position[target]
        start, end = (x0, y0 - size[source][1] / 2), (x1, y1 + size[target][1] / 2)
        if depth[target] - depth[source] > 1:  # around the boxes between, along the right edge
            side = 0.995
            ax.plot(
                [x0, x0, side, side], [start[1], start[1] - 0.12, start[1] - 0.12, y1], color=EDGE, alpha=0.6, lw=0.8
            )
            start, end = (side, y1), (x1 + size[target][0] / 2, y1)
        ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=9, color=EDGE, alpha=0.6, lw=0.8))
    for name, (x, y) in position.items():
        width, height = size[name]
        ax.add_patch(
            FancyBboxPatch(
                (x - width / 2, y - height / 2),
                width,
                height,
                boxstyle="round,pad=0.005",
                facecolor=BOX,
                edgecolor=EDGE,
                linewidth=0.8,
            )
        )
        ax.text(x, y, labels.get(name, name), ha="center", va="center", fontsize=DAG_FONT, linespacing=1.25)
    ax.set_xlim(0, 1)
    ax.set_ylim(tops[-1] - heights[-1] - 0.05, 0.05)
    ax.axis("off")
    ax.set_title(title, fontsize=DAG_FONT + 0.5)
    save(fig, path)


def save(fig, path: Path, bbox: str | None = "tight") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches=bbox)
    plt.close(fig)
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise SystemExit(f"{path}: {size:,} bytes, above the {MAX_BYTES:,} the site allows for a picture")
    print(f"wrote {path.relative_to(ROOT)} ({size:,} bytes)")


# ------------------------------------------------------------------ architecture: the import graph
def contract_layers() -> list[list[str]]:
    """The layers contract of ``pyproject.toml``, each layer's modules without the package prefix."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in config if c["type"] == "layers")
    return [[m.strip().removeprefix(PACKAGE + ".") for m in layer.split(":")] for layer in layers]


def architecture(path: Path) -> None:
    """A matrix of module-to-module imports between the packages, rows importing columns, both in
    layer order: a count right of the diagonal blocks is an import going down, one left of them an
    import going up (an exception the contract would have to name)."""
    import grimp
    import numpy as np

    graph = grimp.build_graph(PACKAGE)
    layers = contract_layers()
    members = [name for layer in layers for name in layer]
    index = {name: i for i, name in enumerate(members)}

    def top(module: str) -> str | None:
        parts = module.split(".")
        return parts[1] if len(parts) > 1 and parts[1] in index else None

    counts = np.zeros((len(members), len(members)), dtype=int)
    for importer in graph.modules:
        for imported in graph.find_modules_directly_imported_by(importer):
            source, target = top(importer), top(imported)
            if source and target and source != target:
                counts[index[source], index[target]] += 1
    fig, ax = plt.subplots(figsize=(7.5, 6.2))
    ax.imshow(np.log1p(counts), cmap="Blues", vmin=0, vmax=np.log1p(counts.max()) * 1.4)
    for (row, column), count in np.ndenumerate(counts):
        if count:
            ax.text(column, row, str(count), ha="center", va="center", fontsize=8)
    edge = -0.5
    for layer in layers:  # the layers' blocks on the diagonal: imports inside a layer are independent packages
        ax.add_patch(plt.Rectangle((edge, edge), len(layer), len(layer), fill=False, edgecolor=EDGE, linewidth=1.2))
        edge += len(layer)
    ax.set_xticks(range(len(members)), members, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(members)), members, fontsize=8)
    ax.set_xlabel("imported package")
    ax.set_ylabel("importing package")
    ax.set_title(
        "bert_kd imports between packages (module-to-module, grimp)\n"
        "in the layers of pyproject.toml's import contract: imports go down, so counts sit right of the layers' diagonal blocks",
        fontsize=9,
    )
    save(fig, path)


# ------------------------------------------------------------------ the DAG of distill_baselines
def pipeline_dag(path: Path, name: str = "distill_baselines") -> None:
    """``name`` as kedro-viz's default view groups it: a box per top-level node and per collapsed group
    (``alp_kd``: its blocks, one per recipe row, named inside; ``compare``), an arrow where a dataset goes from
    one box to another and no longer path already links them."""
    import textwrap

    from kedro.framework.project import pipelines
    from kedro.framework.startup import bootstrap_project

    bootstrap_project(ROOT)
    pipeline = pipelines[name]

    def group(node) -> str:
        return node.namespace.split(".")[0] if node.namespace else node.name

    producer = {output: group(node) for node in pipeline.nodes for output in node.outputs}
    graph = nx.DiGraph()
    for node in pipeline.nodes:
        graph.add_node(group(node))
        for dataset in node.inputs:
            if dataset in producer and producer[dataset] != group(node):
                graph.add_edge(producer[dataset], group(node))
    graph = nx.transitive_reduction(graph)  # an input also reached through another box is not drawn again
    rows = [sorted(generation) for generation in nx.topological_generations(graph)]
    labels = {}
    for name_ in graph.nodes:
        members = [n for n in pipeline.nodes if group(n) == name_ and n.namespace]
        blocks = list(dict.fromkeys(n.namespace.split(".")[1] for n in members if n.namespace.count(".")))
        own = list(
            dict.fromkeys(n.name.rsplit(".", 1)[-1].rstrip("_0123456789") for n in members if "." not in n.namespace)
        )
        lines = [f"{name_} (group)"] if members else [name_]
        lines += textwrap.wrap(f"{len(blocks)} blocks, one per recipe row: " + ", ".join(blocks), 52) if blocks else []
        lines += textwrap.wrap(", ".join(own), 52) if own else []
        labels[name_] = "\n".join(lines)
    draw_rows(rows, graph.edges, labels, path, f"kedro pipeline {name}, grouped as kedro-viz opens it")


# ------------------------------------------------------------------ the comparison plot
def documented_comparison(page: Path = ROOT / "docs" / "compare-on-cpu.md") -> dict[str, float]:
    """row → accuracy from the measured table of ``docs/compare-on-cpu.md`` (``| row | accuracy | …``)."""
    text = page.read_text()
    table = text.split("| row | accuracy |", 1)[1].split("\n\n", 1)[0]
    rows = {}
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and re.fullmatch(r"[0-9.]+", cells[1]):
            rows[cells[0]] = float(cells[1])
    return rows


def comparison(path: Path) -> None:
    from bert_kd.core.reports.plots import comparison_bars, comparison_title
    from bert_kd.core.reports.verdict import noise_tolerance

    rows = documented_comparison()
    teacher, majority = rows.pop("teacher"), rows.pop("majority class")
    figure = comparison_bars(
        list(rows),
        list(rows.values()),
        teacher,
        "accuracy",
        comparison_title("distill_baselines", "sst2", "accuracy"),
        floor=majority,
        noise=noise_tolerance(872),  # the whole SST-2 dev set
    )
    save(figure, path)


def alp_attention(path: Path, glue_dir: Path, n_examples: int = 8) -> None:
    """ALP-KD Figure 3 drawn by the figure node's functions at the start of distillation: the offline
    MiniLM-L6 teacher and a student made of its first layers (``student`` block of
    ``parameters_distill.yml``), on the first SST-2 dev sentences; forward passes only."""
    import csv

    import torch
    import yaml

    from bert_kd.core.distill.alp_figures import alp_attention_figure, alp_attention_per_example
    from bert_kd.core.models import build_student, load_classifier, load_tokenizer

    parameters = yaml.safe_load((ROOT / "conf" / "base" / "parameters_distill.yml").read_text())
    recipe, layers = parameters["distill_methods"]["alp"], parameters["student"]["num_layers"]
    with open(glue_dir / "SST-2" / "dev.tsv", newline="") as rows:
        sentences = [
            row["sentence"]
            for row, _ in zip(csv.DictReader(rows, delimiter="\t", quoting=csv.QUOTE_NONE), range(n_examples))
        ]
    teacher = load_classifier("minilm-l6", num_labels=2)
    student, kept = build_student(teacher, layers, "first")
    batch = dict(load_tokenizer("minilm-l6")(sentences, return_tensors="pt", padding=True))
    with torch.no_grad():
        result = alp_attention_per_example(student, teacher, batch, recipe["mapping"], n_examples=n_examples)
    title = (
        f"ALP-KD Figure 3 before distillation: MiniLM-L6 and a student of its layers {kept} "
        f"(mapping: {recipe['mapping']}), SST-2 dev sentences"
    )
    figure = alp_attention_figure(result, title)
    save(figure, path)


def alp_figure(source: Path, path: Path) -> None:
    """The run's PNG, scaled down (Pillow, matplotlib's image library) until it fits the size limit."""
    from PIL import Image

    image = Image.open(source)
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        image.save(path, optimize=True)
        if path.stat().st_size <= MAX_BYTES:
            break
        image = image.resize((image.width * 4 // 5, image.height * 4 // 5), Image.LANCZOS)
    print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size:,} bytes, {image.width}x{image.height})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alp-figure", type=Path, help="the alp_kd_figure3_alp.png a distill_alp run wrote")
    parser.add_argument("--dag", action="store_true", help="draw only distill_baselines_dag.png")
    parser.add_argument("--glue-dir", type=Path, default=ROOT.parent / "shared" / "glue", help="GLUE's TSV folders")
    args = parser.parse_args()
    if args.dag:
        return pipeline_dag(IMAGES / "distill_baselines_dag.png")
    if args.alp_figure:
        alp_figure(args.alp_figure, IMAGES / "alp_attention.png")
    else:
        alp_attention(IMAGES / "alp_attention.png", args.glue_dir)
    comparison(IMAGES / "distill_baselines.png")
    architecture(IMAGES / "architecture.png")
    pipeline_dag(IMAGES / "distill_baselines_dag.png")


if __name__ == "__main__":
    main()
