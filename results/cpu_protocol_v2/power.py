"""How many seeds CPU protocol v2 needs: a power calculation from the 81 v1 trials (issue 19).

    PYTHONPATH=src python results/cpu_protocol_v2/power.py            # Markdown to stdout
    PYTHONPATH=src python results/cpu_protocol_v2/power.py results/cpu_protocol_v2   # v2's own variance so far
    PYTHONPATH=src python results/cpu_protocol_v2/power.py results/cpu_protocol_v2 --rule   # and the README's seed rule

For every v1 row and its baseline (NKD; KD for LWD/TED; one teacher for two teachers) the v1
JSONs' per-example dev predictions give, in accuracy (v2's metric on MRPC and SST-2, ALP-KD
Table 1):
  * the row's standard deviation across its seeds (``seed sd``; 3 in v1);
  * the paired-bootstrap standard error of the pooled gain with 1 seed per row (averaged over the
    seed pairs) and with all seeds both rows have pooled — the test ``bert_kd.sweep.significance.paired_bootstrap``
    runs (1,000 resamples of the dev examples);
and :class:`bert_kd.sweep.significance.PowerModel` fits SE(n)² = floor² + per-seed²/n, takes the
observed gain's seed scatter as sd·√(2/n), and asks for the fewest seeds n ≥ 5 at which a true
1-point gain is significant (one-sided p < 0.05) with 80% power.

Given a folder (e.g. ``results/cpu_protocol_v2``) it reads that table's trial JSONs instead: the same
calculation on the variance v2 itself shows (rows with fewer than 2 shared seeds are left out).
``--rule`` then applies the rule the v2 README fixed before round 1 ended (:func:`extra_seeds`): it refuses
while a trial of round 1 (seeds 1–5 of every row and task of the table) is missing, and it reads the pooled
SST-2 "seeds for 1 pt" only — a variance, never a gain or a p-value.
"""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path

import numpy as np

from bert_kd.sweep.significance import PowerModel, pooled_bootstrap_se

V1 = Path(__file__).resolve().parents[1] / "cpu_protocol"
BASELINE = {"lwd": "kd", "ted": "kd", "two_teachers": "single_teacher"}  # others: nkd (as the v1 table)
EFFECT, ALPHA, POWER, AT_LEAST = 0.01, 0.05, 0.8, 5
ROUND_ONE, PLANNED, CAP = (1, 2, 3, 4, 5), 8, 12  # the v2 README's rule: seeds 1–5 first, 8 planned, at most 12


def paper_gap():
    """``paper_gap.py`` of this folder (the table as conf/base defines it, and its trial files)."""
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    import paper_gap as module

    return module


def load_correctness(directory: Path = V1) -> dict[tuple[str, str], dict[int, np.ndarray]]:
    """(task, row) → seed → 0/1 correctness of every dev example."""
    runs: dict[tuple[str, str], dict[int, np.ndarray]] = collections.defaultdict(dict)
    for path in paper_gap().trial_files(directory):  # v2's folder: only the table's own trials
        record = json.loads(path.read_text(encoding="utf-8"))
        spec, result = record["spec"]["trial"], record["result"]
        correct = np.asarray(result["dev_predictions"]) == np.asarray(result["dev_labels"])
        runs[(spec["task"], spec["method"])][int(spec["seed"])] = correct.astype(float)
    return dict(runs)


def row_model(method: dict[int, np.ndarray], baseline: dict[int, np.ndarray]) -> tuple[PowerModel, dict]:
    seeds = sorted(set(method) & set(baseline))
    if len(seeds) < 2:
        raise ValueError(f"power needs at least 2 seeds both rows have; got {seeds}")
    se_one = float(np.sqrt(np.mean([pooled_bootstrap_se(method[a], baseline[b]) ** 2 for a in seeds for b in seeds])))
    se_all = pooled_bootstrap_se(np.stack([method[s] for s in seeds]), np.stack([baseline[s] for s in seeds]))
    sd = float(np.sqrt((np.var([method[s].mean() for s in seeds], ddof=1)
                        + np.var([baseline[s].mean() for s in seeds], ddof=1)) / 2))
    return PowerModel.from_se(se_one, se_all, len(seeds), sd), {"seeds": len(seeds), "se_one": se_one, "se_all": se_all}


def main(out=sys.stdout, directory: Path = V1) -> dict[str, int | None]:
    runs = load_correctness(directory)
    lines = ["| task | row (vs baseline) | seeds | seed sd | SE 1 seed | SE all seeds | SE floor | SE per seed | "
             "seeds for 1 pt | detectable at 5 / 10 seeds |", "|" + "---|" * 10]
    pooled: dict[str, list] = collections.defaultdict(list)
    for (task, row) in sorted(runs):
        base = BASELINE.get(row, "nkd")
        if row == base or (task, base) not in runs or len(set(runs[(task, row)]) & set(runs[(task, base)])) < 2:
            continue
        model, info = row_model(runs[(task, row)], runs[(task, base)])
        pooled[task].append((model, info))
        needed = model.seeds_needed(EFFECT, ALPHA, POWER, AT_LEAST)
        lines.append(f"| {task} | {row} ({base}) | {info['seeds']} | {100 * model.seed_sd:.2f} | {100 * info['se_one']:.2f} | "
                     f"{100 * info['se_all']:.2f} | {100 * model.se_floor:.2f} | {100 * model.se_seed:.2f} | "
                     f"{needed if needed else 'unreachable'} | {100 * model.detectable_effect(5):.2f} / "
                     f"{100 * model.detectable_effect(10):.2f} |")
    lines += ["", "Per task (rows pooled: mean of the squared SEs and variances):", "",
              "| task | rows | seed sd | SE floor | SE per seed | seeds for 1 pt | power at 1 pt with 5 / 8 / 10 seeds | detectable at 5 / 8 / 10 seeds |",
              "|" + "---|" * 8]
    verdict: dict[str, int | None] = {}
    for task, models in pooled.items():
        rms = lambda values: float(np.sqrt(np.mean(np.square(values))))  # noqa: E731
        model = PowerModel(rms([m.se_floor for m, _ in models]), rms([m.se_seed for m, _ in models]),
                           rms([m.seed_sd for m, _ in models]))
        verdict[task] = needed = model.seeds_needed(EFFECT, ALPHA, POWER, AT_LEAST)
        lines.append(f"| {task} | {len(models)} | {100 * model.seed_sd:.2f} | {100 * model.se_floor:.2f} | {100 * model.se_seed:.2f} | "
                     f"{needed if needed else 'unreachable'} | "
                     + " / ".join(f"{model.power(EFFECT, n, ALPHA):.2f}" for n in (5, 8, 10)) + " | "
                     + " / ".join(f"{100 * model.detectable_effect(n):.2f}" for n in (5, 8, 10)) + " |")
    lines += ["", "All figures in accuracy points (×100). Effect 1 point, one-sided α = 0.05, power 0.8, at least 5 seeds."]
    out.write("\n".join(lines) + "\n")
    return verdict


def extra_seeds(needed: int | None, planned: int = PLANNED, cap: int = CAP) -> list[int]:
    """The seeds beyond ``planned`` that a task gets when the pooled power calculation asks for ``needed``
    seeds (``None``: a 1-point gain is out of reach at any n): ``planned + 1`` … ``min(needed, cap)``."""
    if needed is not None and needed <= planned:
        return []
    return list(range(planned + 1, min(cap if needed is None else needed, cap) + 1))


def round_one_missing(directory: Path) -> list[str]:
    """``method/task/seed`` of every round-1 trial of the table that has no JSON in ``directory`` yet."""
    runs = load_correctness(directory)
    return [f"{t.method}/{t.task}/{t.seed}" for t in paper_gap().table_spec().trials()  # as conf/base defines it
            if t.seed in ROUND_ONE and t.seed not in runs.get((t.task, t.method), {})]


def apply_rule(directory: Path, out=sys.stdout) -> list[int]:
    """The v2 README's rule: after round 1, SST-2 gets :func:`extra_seeds` of the pooled calculation."""
    missing = round_one_missing(directory)
    if missing:
        raise SystemExit(f"{directory}: round 1 is not complete ({len(missing)} trials missing, e.g. "
                         f"{', '.join(missing[:3])}); the rule applies after it")
    needed = main(out=out, directory=directory).get("sst2")
    more = extra_seeds(needed)
    out.write(f"\nRule: pooled SST-2 seeds for 1 pt = {needed or 'unreachable'} → "
              + (f"extra_seeds: {{sst2: {more}}} in the table (seeds {more[0]}–{more[-1]} after 6–8)\n" if more
                 else f"no extra seeds (≤ {PLANNED})\n"))
    return more


if __name__ == "__main__":
    arguments = [a for a in sys.argv[1:] if a != "--rule"]
    folder = Path(arguments[0]) if arguments else V1
    apply_rule(folder) if "--rule" in sys.argv[1:] else main(directory=folder)
