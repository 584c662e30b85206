"""What a table can resolve: power and the smallest resolvable gain of every tested claim, from one variance
model — the crossed seed × example components of the claim's own gain
([`VarianceComponents`][statistics.VarianceComponents]), SE(n)² = σ²_s/n + σ²_e/m + σ²_r/(nm) — at the level
each claim is actually tested: one-sided α = 0.05 alone, and α/K after Holm's correction over its paper's K
tested claims (the level its smallest p must pass; a single true effect among nulls meets exactly that).
"""

from __future__ import annotations

import numpy as np

from bert_kd.analysis import statistics as st
from bert_kd.analysis.paper_claims import ALPHA, paper_of
from bert_kd.analysis.paper_gap import Reading
from bert_kd.analysis.table import table_total, task_label

#: The gain the protocol was sized for (accuracy), and the power asked of it.
EFFECT, TARGET = 0.01, 0.8
#: Seed counts the pooled table projects to.
PROJECTED = (5, 8, 10, 20)


def family_sizes(read: Reading) -> dict[str, int]:
    """paper → number of its tested (claim, task) pairs: Holm's K."""
    sizes: dict[str, int] = {}
    for entry in read.tests:
        if entry.test is not None:
            sizes[paper_of(entry.claim)] = sizes.get(paper_of(entry.claim), 0) + 1
    return sizes


def pooled(read: Reading) -> dict[tuple[str, str], st.VarianceComponents]:
    """(paper, task) → the mean of its claims' variance components (negative estimates as 0), at their seeds."""
    groups: dict[tuple[str, str], list[st.VarianceComponents]] = {}
    for entry in read.tests:
        if entry.components is not None:
            groups.setdefault((paper_of(entry.claim), entry.task), []).append(entry.components)
    return {key: _mean_components(parts) for key, parts in groups.items()}


def _mean_components(parts: list[st.VarianceComponents]) -> st.VarianceComponents:
    def mean(name: str) -> float:
        return float(np.mean([max(getattr(c, name), 0.0) for c in parts]))

    return st.VarianceComponents(
        round(float(np.mean([c.seeds for c in parts]))),
        parts[0].examples,
        mean("seed"),
        mean("example"),
        mean("residual"),
    )


def render(read: Reading, command: str) -> str:
    """``tables/power.md``: per claim, then per (paper, task) pooled and projected to other seed counts."""
    sizes = family_sizes(read)
    lines = [
        (
            f"Power for a true {100 * EFFECT:.0f}-point gain and the gain resolved with {100 * TARGET:.0f}% power, "
            "one-sided, alone (α = 0.05) and after Holm (α/K, K = the paper's tested claims); SE of the gain from its "
            "seed × example variance components; accuracy points."
        ),
        "",
        "| claim | task | n | SE | resolvable: alone / after Holm | power at 1 pt: alone / after Holm |",
        "|---|---|---|---|---|---|",
    ]
    for entry in read.tests:
        if entry.components is None:
            continue
        sd, holm_alpha = entry.model_sd, ALPHA / sizes[paper_of(entry.claim)]
        lines.append(
            f"| {entry.name} | {task_label(entry.task)} | {entry.seeds} | {100 * sd:.2f} | "
            f"{100 * st.resolvable(sd, ALPHA, TARGET):.2f} / {100 * st.resolvable(sd, holm_alpha, TARGET):.2f} | "
            f"{st.power(EFFECT, sd, ALPHA):.2f} / {st.power(EFFECT, sd, holm_alpha):.2f} |"
        )
    lines += [
        "",
        "Per paper and task (variance components averaged over its claims), at the table's seeds and projected:",
        "",
        "| paper | task | K | σ seed / σ example / σ residual | n | SE | resolvable: alone / after Holm | "
        "power at 1 pt: alone / after Holm | resolvable after Holm at " + " / ".join(map(str, PROJECTED)) + " seeds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (paper, task), c in pooled(read).items():
        sd = float(np.sqrt(c.gain_variance()))
        holm_alpha = ALPHA / sizes[paper]
        sds = " / ".join(f"{100 * np.sqrt(v):.2f}" for v in (c.seed, c.example, c.residual))
        projected = " / ".join(
            f"{100 * st.resolvable(float(np.sqrt(c.gain_variance(n))), holm_alpha, TARGET):.2f}" for n in PROJECTED
        )
        lines.append(
            f"| {paper} | {task_label(task)} | {sizes[paper]} | {sds} | {c.seeds} | {100 * sd:.2f} | "
            f"{100 * st.resolvable(sd, ALPHA, TARGET):.2f} / {100 * st.resolvable(sd, holm_alpha, TARGET):.2f} | "
            f"{st.power(EFFECT, sd, ALPHA):.2f} / {st.power(EFFECT, sd, holm_alpha):.2f} | {projected} |"
        )
    trials = sum(len(seeds) for seeds in read.runs.values())
    lines += ["", f"{trials} of {table_total(read.folder)} trials. Made by: `{command}`."]
    return "\n".join(lines) + "\n"
