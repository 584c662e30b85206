"""What the paper-gap reading writes: ``tables/paper_gap.md`` ([`render`][]), ``summary.md`` ([`summary`][]),
``claims.md`` ([`strength`][]), the sentences the README and the docs quote, and the forest figure
(``paper_gap.png``, [`forest_figure`][]), all from one [`Reading`][bert_kd.analysis.paper_gap.Reading]."""

from __future__ import annotations

import collections

import numpy as np
from scipy.stats import norm

from bert_kd.analysis import statistics as st
from bert_kd.analysis.paper_claims import (
    ALPHA,
    BORDERLINE,
    BORDERLINE_Z,
    EXCLUDED_Z,
    HOLDS,
    LABELS,
    NOMINAL,
    PAPER,
    TASKS,
    ClaimTest,
    NoiseAssumption,
    paper_of,
    tests_what,
)
from bert_kd.analysis.paper_gap import Reading, finished
from bert_kd.analysis.table import accuracy, table_total, task_label


def mean_ci(values: list[float]) -> str:
    """``mean ± half-width (n)`` in points; the t-interval needs n ≥ 2."""
    if not values:
        return "–"
    interval = st.t_interval([100 * v for v in values])
    mean = 100 * float(np.mean(values))
    return (
        f"{mean:.2f} (1)" if interval is None else f"{mean:.2f} ± {(interval[1] - interval[0]) / 2:.2f} ({len(values)})"
    )


def p_cell(p: float, error: float) -> str:
    return f"{p:.4f} ± {error:.4f}"


def z_table(tests: list[ClaimTest]) -> list[str]:
    """Every (claim, task) with the paper's own gain: the paper's gain and its noise, ours and its bootstrap SE,
    the combined z and where that places the paper's gain; then the settings the paper chose its two rows from and
    the same for its best-of-grid-adjusted gain (``bert-kd results paper-gap`` prints it)."""
    lines = [
        "| claim | task | paper's gain ± its noise | our gain ± SE | z | the paper's gain | settings (better, worse) "
        "| adjusted gain | z | adjusted |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e in tests:
        if e.z is None:
            continue
        grid = (
            "– | – | – | –"
            if e.adjusted_z is None
            else f"{e.settings[0]}, {e.settings[1]} | {e.adjusted_gain:+.2f} | {e.adjusted_z:+.2f} | {e.adjusted_placement}"
        )
        lines.append(
            f"| {e.name} | {task_label(e.task)} | {e.paper_gain:+.2f} ± {e.paper_noise:.2f} | "
            f"{100 * e.test.gain:+.2f} ± {100 * e.test.se:.2f} | {e.z:+.2f} | {e.placement} | {grid} |"
        )
    return lines


def assumptions(read: Reading) -> list[str]:
    """The lines that name what the reading assumes of the papers' numbers: their noise, its sensitivity line,
    and the best-of-grid adjustment with its source."""
    lines = [read.sensitivity()]
    if read.settings:
        lines += [
            "",
            (
                "Best of a grid: a paper row that is the best on dev of k settings lies, for independent settings of "
                "equal merit, E[max of k standard normals] single-run SDs above one run of it (0.85 for k = 3, 2.16 "
                "for k = 39); the adjusted gain subtracts that lift of the better row less the worse row's, one row's "
                "single-run SD taken as the assumed noise of the gain / √2. Settings correlate, so this is an upper "
                "bound on the lift. Settings per row: "
                + ", ".join(f"{LABELS.get(row, row)} {k}" for row, k in read.settings.items())
                + (f" ({read.sources})" if read.sources else "")
                + "."
            ),
        ]
    return lines


def render(read: Reading, command: str) -> str:
    """``tables/paper_gap.md``: the rows, the claims with their tests, the variance components per claim, the
    init ablation."""
    runs, teacher, tests = read.runs, read.teacher, read.tests
    lines = ["| row | paper MRPC / SST-2 (regime) | ours MRPC | ours SST-2 |", "|---|---|---|---|"]
    (paper_mrpc, paper_sst2), regime = PAPER["teacher"]
    ours = [f"{100 * teacher[t]:.2f} (seed 42)" if t in teacher else "–" for t in TASKS]
    lines.append(f"| teacher | {paper_mrpc} / {paper_sst2} ({regime}) | {ours[0]} | {ours[1]} |")
    for row, label in LABELS.items():
        (paper_mrpc, paper_sst2), regime = PAPER[row]
        cells = [mean_ci([accuracy(r) for r in runs.get((row, t), {}).values()]) for t in TASKS]
        if row in ("single_teacher", "two_teachers"):
            cells[1] = "· (MRPC only here)"
        lines.append(f"| {label} | {paper_mrpc or '–'} / {paper_sst2} ({regime}) | {cells[0]} | {cells[1]} |")
    counts = sorted({e.test.resamples for e in tests if e.test})
    retested = [f"{e.name} on {task_label(e.task)}" for e in tests if e.test and e.test.resamples > counts[0]]
    how = (
        f"Claims: paired bootstrap over dev examples ({counts[0]:,} resamples, seeds pooled"
        + (f"; {counts[-1]:,} for {', '.join(retested)}, borderline at the first count" if retested else "")
        + "), one-sided p ± its Monte Carlo error; Holm over every tested claim of the table (the verdict), and "
        "within each paper as a second view; gains in accuracy points."
    )
    lines += [
        "",
        how,
        "",
        "| claim | task | tests | n | gain [95% CI] | p | Holm p (table) | verdict | within the paper: Holm p, "
        "verdict | the paper's gain, z |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e in tests:
        if e.test is None:
            lines.append(
                f"| {e.claim} | {task_label(e.task)} | {tests_what(e.claim, e.task)} | 0 | – | – | – | {e.verdict} | – "
                "| – |"
            )
            continue
        t = e.test
        lines.append(
            f"| {e.claim} | {task_label(e.task)} | {tests_what(e.claim, e.task)} | {e.seeds} | "
            f"{100 * t.gain:+.2f} [{100 * t.low:+.2f}, {100 * t.high:+.2f}] | {p_cell(t.p, t.mc_error)} | "
            f"{p_cell(e.holm_p, e.holm_error)} | {e.verdict} | {p_cell(e.paper_holm_p, e.paper_holm_error)}, "
            f"{e.paper_verdict} | {e.paper_cell()} |"
        )
    lines += [
        "",
        (
            f"The paper's gain against ours, both noises combined: z = (paper's gain − our gain) / √(our bootstrap "
            f"SE² + the paper's noise²), the paper's noise {read.assumed.describe()} (below) where it states no SD; "
            f"excluded at |z| ≥ {EXCLUDED_Z}, borderline at {BORDERLINE_Z} ≤ |z| < {EXCLUDED_Z}, else consistent "
            "(per cell, not corrected over cells)."
        ),
        "",
        *assumptions(read),
        "",
        *z_table(tests),
        "",
        (
            "Seeds and examples: the crossed model D_ij = μ + s_i + e_j + r_ij of each claim's per-seed, per-example "
            "differences (method of moments; SDs in points, a negative variance estimate shown as 0), the SE of "
            "the gain it gives (both sources) beside the bootstrap's (examples), the analytic test on it and its "
            "verdict; noise: the SD of one run of each row, the paper's single-run noise on this dev set."
        ),
        "",
        (
            "| claim | task | σ seed / σ example / σ residual | SE: bootstrap / model | model p, Holm p | "
            "verdict on the model | single-run noise |"
        ),
        "|---|---|---|---|---|---|---|",
    ]
    for e in tests:
        if e.components is None:
            continue
        c = e.components
        sds = " / ".join(f"{100 * np.sqrt(max(v, 0.0)):.2f}" for v in (c.seed, c.example, c.residual))
        same = "same" if e.model_verdict == e.verdict else f"**{e.model_verdict}**"
        lines.append(
            f"| {e.name} | {task_label(e.task)} | {sds} | {100 * e.test.se:.2f} / {100 * e.model_sd:.2f} | "
            f"{e.model_p:.4f}, {e.model_holm_p:.4f} | {same} | {100 * e.noise:.2f} |"
        )
    lines += [
        "",
        (
            "The warm start: RKD, CKD and ALP against NKD, v1 (`init: teacher`) → v2 (`init: pretrained`, "
            "and v2's other fidelity fixes, changed together), both on seeds 1–3; |row − NKD| of the rows' means and "
            "per seed (the mean over rows and seeds of |row − NKD| on the same seed); agreement = dev examples on "
            "which the row's student predicts what the same seed's NKD student predicts."
        ),
        "",
        "| task | NKD accuracy v1 → v2 | \\|row − NKD\\| of means, points | \\|row − NKD\\| per seed, points "
        "| agreement with NKD, % |",
        "|---|---|---|---|---|",
    ]
    for task, figures in read.ablation.items():
        cells = [
            "–" if figures[name] is None else f"{figures[name][0]:.2f} → {figures[name][1]:.2f}"
            for name in ("nkd", "spread", "per_seed")
        ]
        cells.append(
            "–" if figures["agreement"] is None else f"{figures['agreement'][0]:.1f} → {figures['agreement'][1]:.1f}"
        )
        lines.append(f"| {task_label(task)} | {' | '.join(cells)} |")
    lines += ["", warm_start_sentence(read.ablation)]
    lines += ["", f"{finished(runs)} of {table_total(read.folder)} trials. Made by: `{command}`."]
    return "\n".join(lines) + "\n"


def named(entries: list[ClaimTest]) -> str:
    """``"TED > KD on MRPC and SST-2; LWD > KD on SST-2"``: the claims of ``entries`` with their tasks, in order."""
    tasks: dict[str, list[str]] = collections.defaultdict(list)
    for entry in entries:
        tasks[entry.name].append(task_label(entry.task))
    return "; ".join(f"{claim} on {' and '.join(labels)}" for claim, labels in tasks.items())


def tally(tests: list[ClaimTest]) -> list[str]:
    """One line per paper: how many of its tested (claim, task) pairs hold, are borderline, point the paper's way
    without holding, or point the other way; and against how many of the paper's own gains the table excludes."""
    lines = []
    for paper in dict.fromkeys(paper_of(entry.claim) for entry in tests):
        tested = [e for e in tests if paper_of(e.claim) == paper and e.test is not None]
        if not tested:
            continue
        holds = [e for e in tested if e.verdict == HOLDS]
        borderline = [e for e in tested if e.verdict.startswith(BORDERLINE)]
        nominal = [e for e in tested if e.verdict == NOMINAL]
        same = [e for e in tested if e.verdict.startswith("same direction")]
        significant = [e for e in tested if e.verdict == "reversed, significant"]
        backwards = [e for e in tested if e.verdict.startswith("reversed")]
        with_paper = [e for e in tested if e.placement]
        line = f"- {paper}: **{len(holds)} of {len(tested)}** (claim, task) pairs hold over the table" + (
            f" ({named(holds)})" if holds else ""
        )
        if borderline:
            line += f"; {len(borderline)} borderline ({named(borderline)})"
        line += (
            f"; {len(same)} point the paper's way without holding ({len(nominal)} at p < 0.05 before correction"
            + (f": {named(nominal)}" if nominal else "")
            + f"); {len(backwards)} point the other way "
            f"({len(significant)} significantly)"
        )
        if with_paper:
            line += "; " + placements(with_paper)
        lines.append(line + ".")
    return lines


def placements(with_paper: list[ClaimTest]) -> str:
    """How many of the paper's own gains are excluded, borderline and consistent with ours, naming the first two."""
    excluded = [e for e in with_paper if e.placement == "excluded"]
    borderline = [e for e in with_paper if e.placement == BORDERLINE]
    return (
        f"of the {len(with_paper)} pairs with the paper's own gain, set against ours under both noises: "
        f"{len(excluded)} excluded (|z| ≥ {EXCLUDED_Z}" + (f": {named(excluded)}" if excluded else "") + "), "
        f"{len(borderline)} borderline ({BORDERLINE_Z} ≤ |z| < {EXCLUDED_Z}"
        + (f": {named(borderline)}" if borderline else "")
        + f"), {len(with_paper) - len(excluded) - len(borderline)} consistent"
    )


def excluded_sentence(tests: list[ClaimTest], paper: str = "ALP-KD") -> str:
    """The sentence the README and the docs say of ``paper``'s own gains (they quote it; a test compares)."""
    with_paper = [e for e in tests if paper_of(e.claim) == paper and e.placement]
    excluded = [e for e in with_paper if e.placement == "excluded"]
    borderline = [e for e in with_paper if e.placement == BORDERLINE]
    noise = with_paper[0].assumed.describe() if with_paper else NoiseAssumption().describe()
    return (
        f"Set against our gain with both noises combined (our bootstrap SE and the paper's single-run noise, "
        f"{noise}), {paper}'s own gain is excluded (|z| ≥ {EXCLUDED_Z}) in {len(excluded)} of its {len(with_paper)} pairs"
        + (f" ({named(excluded)})" if excluded else "")
        + f", borderline ({BORDERLINE_Z} ≤ |z| < {EXCLUDED_Z}) in {len(borderline)}"
        + (f" ({named(borderline)})" if borderline else "")
        + f" and consistent with ours in {len(with_paper) - len(excluded) - len(borderline)}."
    )


def adjusted_sentence(tests: list[ClaimTest], paper: str = "ALP-KD") -> str:
    """What the best-of-grid adjustment does to ``paper``'s excluded pairs (the README and the docs quote it)."""
    with_paper = [e for e in tests if paper_of(e.claim) == paper and e.adjusted_placement]
    if not with_paper:
        return f"No settings counts are stated for {paper}'s rows, so its gains are not adjusted for best-of-grid."
    excluded = [e for e in with_paper if e.adjusted_placement == "excluded"]
    borderline = [e for e in with_paper if e.adjusted_placement == BORDERLINE]
    return (
        f"Adjusted for best-of-grid selection (each paper row the best of its stated settings on dev), {paper}'s own "
        f"gain is excluded in {len(excluded)} of its {len(with_paper)} pairs"
        + (f" ({named(excluded)})" if excluded else "")
        + f", borderline in {len(borderline)}"
        + (f" ({named(borderline)})" if borderline else "")
        + f" and consistent with ours in {len(with_paper) - len(excluded) - len(borderline)}."
    )


def headline_sentence(tests: list[ClaimTest]) -> str:
    """What holds with every tested claim of the table one Holm family, and what holds only within its own paper's
    family (the second view); the README's sentence on the table's claims."""
    tested = [e for e in tests if e.test is not None]
    holds = [e for e in tested if e.verdict == HOLDS]
    within = [e for e in tested if e.paper_verdict == HOLDS and e.verdict != HOLDS]
    line = (
        f"With all {len(tested)} tested (claim, task) pairs of the table one Holm family, "
        + (f"{len(holds)} hold{'s' if len(holds) == 1 else ''} ({named(holds)})" if holds else "none holds")
        + "."
    )
    for e in within:
        family = sum(paper_of(o.claim) == paper_of(e.claim) for o in tested)
        line += (
            f" Within {paper_of(e.claim)}'s own {family} pairs only, {e.name} on {task_label(e.task)} holds "
            f"({100 * e.test.gain:+.2f} points, Holm p {e.paper_holm_p:.3f} there, {e.holm_p:.2f} over the table)."
        )
    return line


def warm_start_sentence(ablation: dict) -> str:
    """What the v1 → v2 comparison of the ALP-KD rows' distance from NKD shows, and what it cannot."""
    parts = []
    for task, figures in ablation.items():
        if figures.get("spread") is None or figures.get("per_seed") is None:
            continue
        (m1, m2), (p1, p2) = figures["spread"], figures["per_seed"]
        parts.append(f"{task_label(task)} {m1:.2f} → {m2:.2f} on means, {p1:.2f} → {p2:.2f} per seed")
    if not parts:
        return "The warm start: no v1 table beside this one to compare with."
    return (
        "v1 → v2 changed the students' start together with other settings, on 3 seeds × 3 rows; the ALP-KD rows' "
        f"distance from NKD, v1 → v2: {'; '.join(parts)}. The two statistics need not agree, and the table cannot "
        "say whether the warm start explains v1's null result."
    )


def summary(read: Reading, command: str) -> str:
    """``tables/summary.md``: the claims one line each (gain, p, Holm p, verdict, what it tests) and the tally per
    paper — the short reading a README or a docs page includes."""
    lines = [
        "| claim | task | tests | gain, points | p | Holm p (table) | verdict | within the paper |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for e in read.tests:
        what = tests_what(e.claim, e.task).split(":")[0].split(" (")[0]
        if e.test is None:
            lines.append(f"| {e.name} | {task_label(e.task)} | {what} | – | – | – | {e.verdict} | – |")
            continue
        lines.append(
            f"| {e.name} | {task_label(e.task)} | {what} | {100 * e.test.gain:+.2f} | "
            f"{p_cell(e.test.p, e.test.mc_error)} | {p_cell(e.holm_p, e.holm_error)} | {e.verdict} | "
            f"{e.paper_verdict} |"
        )
    lines += [
        "",
        headline_sentence(read.tests),
        "",
        *tally(read.tests),
        "",
        excluded_sentence(read.tests),
        "",
        read.sensitivity(),
        "",
        adjusted_sentence(read.tests),
        "",
        f"{finished(read.runs)} of {table_total(read.folder)} trials. Made by: `{command}`.",
    ]
    return "\n".join(lines) + "\n"


def holm_level(entry: ClaimTest, tests: list[ClaimTest]) -> tuple[float, int]:
    """The one-sided level ``entry``'s own p must pass after Holm at its rank in the table's family, α/(K − rank),
    and that divisor (the running maximum of earlier ranks aside)."""
    family = sorted((e for e in tests if e.test is not None), key=lambda e: e.test.p)
    divisor = len(family) - family.index(entry)
    return ALPHA / divisor, divisor


def what_would_change(entry: ClaimTest, tests: list[ClaimTest]) -> str:
    """The gain at which the verdict turns at the claim's own bootstrap SE and Holm level (normal approximation),
    and for a holding claim how far its Holm p lies from 0.05 in Monte Carlo errors."""
    level, divisor = holm_level(entry, tests)
    turning = 100 * entry.test.se * float(norm.ppf(1 - level))
    gain = 100 * entry.test.gain
    if entry.verdict == HOLDS or entry.verdict.startswith(BORDERLINE):
        margin = (ALPHA - entry.holm_p) / entry.holm_error if entry.holm_error else float("inf")
        return (
            f"a gain below +{turning:.2f} (at SE {100 * entry.test.se:.2f}, α/{divisor}), {gain - turning:.2f} less; "
            f"Holm p is {margin:.1f} Monte Carlo errors below 0.05"
        )
    return f"a gain of +{turning:.2f} or more at this SE ({100 * entry.test.se:.2f}, α/{divisor}): {turning - gain:.2f} more"


def strength(read: Reading, command: str) -> str:
    """``tables/claims.md``: how strong each claim is — what it tests, p ± Monte Carlo error, Holm p, verdict, the
    paper's gain against ours (z), and the gain that would turn the verdict."""
    lines = [
        (
            "How strong each claim is: one-sided paired bootstrap over dev examples, p ± its Monte Carlo error, Holm "
            "over every tested claim of the table; z of the paper's gain against ours under both noises; the turning gain is the gain at "
            "which the claim's own Holm level would be passed (or missed) at its bootstrap SE, normal approximation; "
            "accuracy points."
        ),
        "",
        "| claim | task | tests | gain | p | Holm p | verdict | paper's gain, z | what would change it |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for e in read.tests:
        if e.test is None:
            continue
        what = tests_what(e.claim, e.task).split(":")[0].split(" (")[0]
        paper = "–" if e.z is None else f"{e.paper_gain:+.2f}, z {e.z:+.2f}: {e.placement}"
        lines.append(
            f"| {e.name} | {task_label(e.task)} | {what} | {100 * e.test.gain:+.2f} | {p_cell(e.test.p, e.test.mc_error)} | "
            f"{p_cell(e.holm_p, e.holm_error)} | {e.verdict} | {paper} | {what_would_change(e, read.tests)} |"
        )
    lines += ["", f"{finished(read.runs)} of {table_total(read.folder)} trials. Made by: `{command}`."]
    return "\n".join(lines) + "\n"


def forest_figure(tests: list[ClaimTest], title: str = ""):
    """One line per tested (claim, task): our gain with its 95% bootstrap interval (thick; filled when the claim
    holds after Holm) and the t-interval over per-seed gains (thin), the paper's own gain (×) where it has one,
    0 dashed; the × red where the paper's gain is excluded under both noises ([`ClaimTest.placement`][]),
    orange where borderline."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    tested = [entry for entry in tests if entry.test is not None]
    height = 1.2 + 0.32 * max(len(tested), 1)
    fig, ax = plt.subplots(figsize=(8.0, height))
    for y, entry in enumerate(reversed(tested)):
        t = entry.test
        colour = (
            "tab:green"
            if entry.verdict == HOLDS
            else "tab:orange"
            if entry.verdict.startswith(BORDERLINE)
            else "tab:red"
            if t.gain < 0
            else "tab:blue"
        )
        if entry.by_seed is not None:
            ax.plot(entry.by_seed, [y - 0.18] * 2, color=colour, linewidth=1, alpha=0.7)
        ax.plot([100 * t.low, 100 * t.high], [y, y], color=colour, linewidth=3, solid_capstyle="butt")
        ax.plot(100 * t.gain, y, "o", color=colour, markerfacecolor=colour if entry.verdict == HOLDS else "white")
        if entry.paper_gain is not None:
            cross = {"excluded": "tab:red", BORDERLINE: "tab:orange"}.get(entry.placement, "black")
            ax.plot(entry.paper_gain, y, "x", color=cross, markersize=7, markeredgewidth=2 if cross != "black" else 1)
    ax.set_yticks(
        range(len(tested)), [f"{entry.name} · {task_label(entry.task)}" for entry in reversed(tested)], fontsize=7
    )
    ax.axvline(0, color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel("gain, accuracy points (better row − worse row)")
    ax.grid(axis="x", alpha=0.3)
    handles = [
        Line2D([], [], color="tab:blue", linewidth=3, label="our gain, 95% bootstrap CI (dev examples)"),
        Line2D([], [], color="tab:blue", linewidth=1, label="95% t-interval over per-seed gains"),
        Line2D([], [], color="tab:green", marker="o", linewidth=3, label="holds after Holm"),
        Line2D([], [], color="tab:orange", linewidth=3, label="borderline"),
        Line2D([], [], color="tab:red", linewidth=3, label="reversed"),
        Line2D([], [], color="black", marker="x", linestyle="", label="the paper's gain (its regime)"),
        Line2D(
            [], [], color="tab:red", marker="x", linestyle="", label=f"the paper's gain, excluded (|z| ≥ {EXCLUDED_Z})"
        ),
    ]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=7, frameon=False)
    if title:
        ax.set_title(title, fontsize=9)
    fig.tight_layout(rect=(0, 0.65 / height, 1, 1))  # three legend lines
    return fig
