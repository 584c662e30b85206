"""A table of ALP variants read beside v2: ALP-KD's claims retested with another score of α (Eq. 5).

A variant table (``results/cpu_protocol_v2_alpha``) reruns v2's ALP cells with ``similarity`` other than the raw
dot product; each of its rows ``alp_<name>`` stands for v2's ``alp``. The reading puts the variant's trials in
place of v2's ALP trials and tests every ALP-KD claim as v2's reading does
([`claim_tests`][paper_claims.claim_tests]: paired bootstrap over dev examples, seeds pooled, Holm
over every tested claim of the table, the paper's gain against ours under both noises), NKD, RKD, PKD and CKD being
v2's own trials. Beside it, v2's committed reading; what changes is said in generated sentences.

    bert-kd results alp-variants results/cpu_protocol_v2_alpha        # tables/reading.md (v2: its sibling folder)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bert_kd.analysis import paper_claims, paper_gap_report
from bert_kd.analysis.table import load_runs, read_trial, task_label, trial_files

BASE_ROW = "alp"


def variant_rows(runs: dict) -> list[str]:
    """The variant folder's rows that stand for ALP (``alp_<name>``), in name order."""
    return sorted({row for row, _ in runs if row.startswith(BASE_ROW + "_")})


def substituted(base: dict, variant: dict, row: str) -> dict:
    """``base``'s runs with its ALP cells replaced by ``variant``'s row ``row`` (every task of ``base``)."""
    out = {key: seeds for key, seeds in base.items() if key[0] != BASE_ROW}
    for (name, task), seeds in variant.items():
        if name == row:
            out[(BASE_ROW, task)] = seeds
    return out


def alpha_entropy(folder: Path, row: str) -> dict[str, tuple[float, int]]:
    """Task → (mean α entropy of the student's first layer in nats over the row's trials, trials) from the
    trials' ``alp_alpha_entropy`` (ALP's diagnostics on dev)."""
    values: dict[str, list[float]] = {}
    for path in trial_files(folder):
        record = read_trial(path)
        trial, entropy = record["spec"]["trial"], record["result"].get("alp_alpha_entropy")
        if trial["method"] == row and entropy and entropy[0] is not None:
            values.setdefault(trial["task"], []).append(float(entropy[0]))
    return {task: (float(np.mean(v)), len(v)) for task, v in values.items()}


def alp_claims(tests: list[paper_claims.ClaimTest]) -> list[paper_claims.ClaimTest]:
    return [e for e in tests if paper_claims.paper_of(e.claim) == "ALP-KD" and e.name.startswith("ALP >")]


def cell(entry: paper_claims.ClaimTest) -> str:
    if entry.test is None:
        return "not run yet | | | "
    holm = f"{entry.holm_p:.3f}"
    z = f"{entry.z:+.2f} {entry.placement}" if entry.placement else "–"
    return f"{entry.seeds} | {100 * entry.test.gain:+.2f} | {holm} | {entry.verdict} | {z}"


def changes(before: list[paper_claims.ClaimTest], after: list[paper_claims.ClaimTest]) -> list[str]:
    """One sentence per ALP claim whose verdict or placement differs between v2 and the variant."""
    lines = []
    for old, new in zip(alp_claims(before), alp_claims(after)):
        if new.test is None:
            continue
        said = []
        if old.verdict != new.verdict:
            said.append(f"verdict {old.verdict!r} → {new.verdict!r}")
        if old.placement != new.placement:
            said.append(f"the paper's gain {old.placement or '–'} → {new.placement or '–'}")
        if said:
            lines.append(f"- {new.name} on {task_label(new.task)}: " + "; ".join(said) + ".")
    return lines


def render(variant_dir: Path, base_dir: Path, resamples: int, command: str) -> str:
    """The variant reading (Markdown): per variant row, the ALP claims beside v2's, α's entropy, the tallies and
    the sentences saying what changes."""
    base_runs, _ = load_runs(base_dir)
    variant_runs, _ = load_runs(variant_dir)
    before = paper_claims.claim_tests(base_runs, resamples)
    lines = [
        f"# ALP with another score of α, read beside {base_dir.name}",
        "",
        f"Each row of `{variant_dir.name}` stands in for {base_dir.name}'s ALP; NKD, RKD, PKD and CKD are "
        f"{base_dir.name}'s own trials. Tests as {base_dir.name}'s reading: paired bootstrap over dev examples on "
        f"the seeds both rows have (seeds pooled, {resamples:,} resamples), Holm over every tested claim of the "
        f"table ({sum(e.test is not None for e in before)} claims of the three papers, the family of "
        f"{base_dir.name}'s reading; not ALP-KD's claims alone), the paper's gain set against ours under both noises "
        "(z; excluded at |z| ≥ 1.96).",
        "",
    ]
    for row in variant_rows(variant_runs):
        after = paper_claims.claim_tests(substituted(base_runs, variant_runs, row), resamples)
        entropy = alpha_entropy(variant_dir, row)
        trials = sum(len(seeds) for (name, _), seeds in variant_runs.items() if name == row)
        lines += [f"## {row} ({trials} trials)", ""]
        lines += [
            f"- α's mean entropy, student layer 1, on dev: {task_label(task)} {h:.2f} nats over {n} trials "
            f"(log 6 = {np.log(6):.2f}: equal weights)"
            for task, (h, n) in sorted(entropy.items())
        ]
        lines += [
            "",
            f"| claim | task | {base_dir.name}: seeds | gain | Holm p | verdict | paper's z | {row}: seeds | gain "
            "| Holm p | verdict | paper's z |",
            "|---|---|---:|---:|---:|---|---|---:|---:|---:|---|---|",
        ]
        for old, new in zip(alp_claims(before), alp_claims(after)):
            lines.append(f"| {new.name} | {task_label(new.task)} | {cell(old)} | {cell(new)} |")
        lines += ["", f"ALP-KD's claims with {base_dir.name}'s ALP:", *paper_gap_report.tally(before), ""]
        lines += [f"With {row} as ALP:", *paper_gap_report.tally(after), ""]
        changed = changes(before, after)
        untested = [e for e in alp_claims(after) if e.test is None]
        lines += (
            ["What changes for the ALP claims:", *changed]
            if changed
            else ["No ALP claim changes verdict or placement on the cells run."]
        )
        if untested:
            lines.append(
                f"Not run yet: {paper_gap_report.named(untested)} (Holm's family holds the tested claims only)."
            )
        lines.append("")
    lines.append(f"Made by: `{command}`")
    return "\n".join(lines) + "\n"


def default_base(variant_dir: Path) -> Path:
    """v2's folder beside the variant folder (``cpu_protocol_v2_alpha`` → ``cpu_protocol_v2``)."""
    return variant_dir.resolve().parent / variant_dir.resolve().name.rsplit("_", 1)[0]
