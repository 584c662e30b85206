"""Each loss term's share of the student's gradient in a table's trials, from the trial JSONs.

Every training run measures, on its first ``runtime.gradient_share_batches`` training batches before the
first step, each weighted term's gradient w.r.t. the student's parameters, g_name = w_name · ∂term/∂θ, and
records its share ‖g_name‖ / Σ‖g‖ (``bert_kd.core.distill.gradient_share``; the trial JSON's
``result.gradient_shares``). [`render`][] gives, per row and task, every term's weight and its share (mean over
the trials, min–max); [`shares_figure`][] the mean shares as stacked bars. A term with a few percent barely
moves the student, whatever its weight says.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping
from pathlib import Path

from bert_kd.analysis.table import read_trial, task_label, trial_files


def committed_trials(folder: Path) -> tuple[dict[str, dict], dict[str, dict[str, float]]]:
    """(content key → the trial's spec, content key → term → share) for every trial JSON of ``folder`` (shares only
    for the trials that carry them)."""
    trials, shares = {}, {}
    for path in trial_files(folder):
        record = read_trial(path)
        trials[record["key"]] = record["spec"]["trial"]
        if record["result"].get("gradient_shares"):
            shares[record["key"]] = record["result"]["gradient_shares"]
    return trials, shares


def share_table(trials: Mapping[str, dict], shares: Mapping[str, Mapping[str, float]]) -> list[str]:
    """Markdown rows: task, row, trials measured / committed, and per term ``name (w): mean% (min–max)``, the terms
    in the recipe's order, its weights with the shorthands expanded (β = 1 − η − λ; α/β)."""
    from bert_kd.experiment.parameters import explicit_weights

    groups: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
    for key, trial in trials.items():
        groups[(trial["task"], trial["method"])].append(key)
    lines = [
        "| task | row | trials measured | term (weight): share of the student's gradient, mean (min–max) |",
        "|---|---|---|---|",
    ]
    for (task, row), keys in sorted(groups.items()):
        weights = explicit_weights(trials[keys[0]]["recipe"])
        found = [shares[key] for key in keys if key in shares]
        cells = []
        for term in [*weights, *sorted({name for measured in found for name in measured} - set(weights))]:
            values = [100 * measured[term] for measured in found if term in measured]
            if values:
                cells.append(
                    f"{term} ({weights.get(term, '–')}): {sum(values) / len(values):.1f}% "
                    f"({min(values):.1f}–{max(values):.1f})"
                )
        lines.append(f"| {task} | {row} | {len(found)} of {len(keys)} | {'; '.join(cells) or 'not measured'} |")
    return lines


def mean_shares(
    trials: Mapping[str, dict], shares: Mapping[str, Mapping[str, float]]
) -> dict[tuple[str, str], dict[str, float]]:
    """(task, row) → term → mean share over the row's measured trials (rows with none left out)."""
    found: dict[tuple[str, str], list[Mapping[str, float]]] = collections.defaultdict(list)
    for key, trial in trials.items():
        if key in shares:
            found[(trial["task"], trial["method"])].append(shares[key])
    return {
        group: {
            term: sum(m.get(term, 0.0) for m in measured) / len(measured)
            for term in dict.fromkeys(t for m in measured for t in m)
        }
        for group, measured in sorted(found.items())
    }


def shares_figure(means: Mapping[tuple[str, str], Mapping[str, float]], title: str = ""):
    """One stacked bar per (task, row): each term's mean share of the student's gradient, a colour per term."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = list(means)
    terms = list(dict.fromkeys(term for group in groups for term in means[group]))
    colours = dict(zip(terms, plt.get_cmap("tab10").colors))
    height = 1.2 + 0.3 * max(len(groups), 1)
    fig, ax = plt.subplots(figsize=(8.0, height))
    for y, group in enumerate(reversed(groups)):
        left = 0.0
        for term in terms:
            width = 100 * means[group].get(term, 0.0)
            ax.barh(y, width, left=left, color=colours[term])
            left += width
    ax.set_yticks(range(len(groups)), [f"{row} · {task_label(task)}" for task, row in reversed(groups)], fontsize=7)
    ax.set_xlim(0, 100)
    ax.set_xlabel("share of the student's gradient at the start of training, % (mean over trials)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[term]) for term in terms]
    ax.legend(
        handles,
        terms,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.5 / height - 0.06),
        ncol=max(len(terms), 1),
        fontsize=7,
        frameon=False,
    )
    if title:
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig


def render(folder: Path, command: str) -> tuple[str, object]:
    """(``tables/gradient_shares.md``, its figure) for the trials of ``folder``."""
    trials, shares = committed_trials(folder)
    about = (
        f"{len(shares)} of the {len(trials)} committed trials measured, each on its first 2 training batches "
        "before the first step (‖w·∂term/∂θ‖ / Σ‖·‖ over the student's own parameters; "
        "`bert_kd.core.distill.gradient_share`; the trial JSON's `result.gradient_shares`). The weights are the "
        f"table's; a term's share is what it does to the student. Made by: `{command}`."
    )
    text = "\n".join(
        [
            f"# Each term's share of the student's gradient, {folder.name}",
            "",
            about,
            "",
            *share_table(trials, shares),
            "",
        ]
    )
    return text, shares_figure(mean_shares(trials, shares), f"{folder.name}: what trains the student")
