"""The paper-gap reading of a CPU protocol table: what it reads. The table's trial JSONs (ours beside the papers'
numbers, every ordering claim of the papers tested on them: [`paper_claims`][bert_kd.analysis.paper_claims]),
the assumptions the table's config states about the papers' numbers, and v1's table for the init ablation;
[`paper_gap_report`][bert_kd.analysis.paper_gap_report] writes the reading.

For every row ours is the mean ± 95% t-interval over the seeds, in dev accuracy ×100. Last, the init ablation
([`init_ablation`][]): how far the ALP-KD rows lie from NKD in v1 and in v2, on means and per seed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from bert_kd.analysis import statistics as st
from bert_kd.analysis.paper_claims import OURS, SENSITIVITY, TASKS, WARM_ROWS, ClaimTest, NoiseAssumption, claim_tests
from bert_kd.analysis.table import accuracy, load_runs


@dataclass(frozen=True)
class Reading:
    """What the reading's files are written from."""

    folder: Path
    runs: dict
    teacher: dict
    tests: list[ClaimTest]
    ablation: dict
    assumed: NoiseAssumption = NoiseAssumption()
    settings: dict | None = None  # row → settings the paper chose it from (the table's ``paper_settings``)
    sources: str = ""  # where those counts come from (the table's ``paper_settings_source``)
    resamples: int = st.RESAMPLES

    def excluded_at(self, scale: float) -> int:
        """How many (claim, task) pairs with a paper gain are excluded at ``scale`` × the assumed noise."""
        return sum(
            e.placement == "excluded" for e in (replace(e, assumed=self.assumed.scaled(scale)) for e in self.tests)
        )

    def sensitivity(self) -> str:
        """The sensitivity line: the excluded count at each multiple of the assumed noise
        ([`SENSITIVITY`][])."""
        counts = ", ".join(f"{self.excluded_at(scale)} at {scale:g}×" for scale in SENSITIVITY)
        total = sum(e.placement != "" for e in self.tests)
        return (
            f"The papers' noise, {self.assumed.describe()} (none of the papers states an SD or a run count); pairs "
            f"excluded of the {total} with a paper gain, at multiples of that noise: {counts}."
        )


def table_assumptions(folder: Path, noise=None) -> tuple[NoiseAssumption, dict, str]:
    """The table's stated assumptions about the papers' numbers (``conf/base``): the noise
    (``reproduce.paper_noise``, or ``noise`` when given) and the settings each paper row was chosen from
    (``reproduce.tables.<table>.paper_settings``) with their source."""
    from bert_kd.analysis.table import table_params

    params = table_params(Path(folder).resolve())
    reproduce = params.get("reproduce") or {}
    table = (reproduce.get("tables") or {}).get(Path(folder).name) or {}
    where = "--paper-noise" if noise is not None else "reproduce.paper_noise"
    assumed = NoiseAssumption.parse(noise if noise is not None else reproduce.get("paper_noise", OURS), where)
    settings = {str(row): int(k) for row, k in (table.get("paper_settings") or {}).items()}
    return assumed, settings, str(table.get("paper_settings_source", "")).strip()


@functools.cache
def reading(folder: Path, resamples: int = st.RESAMPLES, noise: str | None = None) -> Reading:
    """The folder's runs, claim tests and init ablation (computed once per process and folder), under the
    table's assumptions ([`table_assumptions`][]; ``noise``
    overrides the assumed paper noise)."""
    folder = Path(folder).resolve()
    runs, teacher = load_runs(folder)
    assumed, settings, sources = table_assumptions(folder, noise)
    v1 = folder.parent / "cpu_protocol"
    tests = claim_tests(runs, resamples, assumed=assumed, settings=settings)
    return Reading(folder, runs, teacher, tests, init_ablation(runs, v1), assumed, settings, sources, resamples)


def finished(runs: dict) -> int:
    return sum(len(seeds) for seeds in runs.values())


def init_ablation(runs: dict, v1_dir: Path) -> dict[str, dict[str, tuple[float, float] | None]]:
    """Does the fine-tuned-teacher start shrink the differences between methods? For [`WARM_ROWS`][] against
    NKD, per task, as (v1, v2), on the seeds v1 has (so the seed count does not change how far means scatter):
    ``nkd`` NKD's mean accuracy; ``spread`` the mean over rows of |row mean − NKD mean|; ``per_seed`` the mean over
    rows and seeds of |row − NKD| on the same seed; ``agreement`` the share
    of dev examples on which a row's student predicts what the same seed's NKD student predicts. None: no data."""
    tables = {"v1": load_runs(v1_dir)[0] if v1_dir.is_dir() else {}, "v2": runs}
    v1_seeds = {seed for seeds in tables["v1"].values() for seed in seeds}
    out: dict[str, dict[str, tuple[float, float] | None]] = {}
    for task in TASKS:
        figures: dict[str, list] = {"nkd": [], "spread": [], "per_seed": [], "agreement": []}
        for version in ("v1", "v2"):
            table = {key: {s: r for s, r in seeds.items() if s in v1_seeds} for key, seeds in tables[version].items()}
            nkd = table.get(("nkd", task), {})
            rows = [seeds for row in WARM_ROWS if (seeds := table.get((row, task)))]
            if not nkd or not rows:
                for values in figures.values():
                    values.append(None)
                continue
            nkd_mean = float(np.mean([accuracy(r) for r in nkd.values()]))
            figures["nkd"].append(100 * nkd_mean)
            figures["spread"].append(
                100
                * float(
                    np.mean([abs(float(np.mean([accuracy(r) for r in seeds.values()])) - nkd_mean) for seeds in rows])
                )
            )
            figures["per_seed"].append(
                100
                * float(
                    np.mean([abs(accuracy(seeds[s]) - accuracy(nkd[s])) for seeds in rows for s in seeds if s in nkd])
                )
            )
            agree = [
                np.mean(np.asarray(seeds[s]["dev_predictions"]) == np.asarray(nkd[s]["dev_predictions"]))
                for seeds in rows
                for s in seeds
                if s in nkd
            ]
            figures["agreement"].append(100 * float(np.mean(agree)) if agree else None)
        out[task] = {name: None if None in values else tuple(values) for name, values in figures.items()}
    return out
