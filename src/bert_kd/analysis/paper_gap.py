"""The paper-gap reading of a CPU protocol table: the papers' numbers beside ours, and every ordering claim
of the papers tested on the table's trial JSONs.

For every row: the paper's number (its regime stated) and ours as mean ± 95% t-interval over the seeds, in dev
accuracy ×100 (the metric ALP-KD Table 1 and TED Table 14 report for MRPC and SST-2). For every ordering
claim (ALP-KD Table 3, TED Table 4, multi-teacher Table 2), on the seeds both rows have:

- what the row tests: the paper's claim on a task the paper reports, an extrapolation to a task it does not,
  or a stand-in where our rows are not the paper's ([`tests_what`][]);
- the gain, its 95% interval and one-sided p from the paired bootstrap over dev examples (seeds pooled,
  [`RESAMPLES`][statistics.RESAMPLES] resamples), each p with its Monte Carlo error;
- Holm's adjusted p over every tested claim of the table (one family: the headline), with its error, and over
  the tested claims of the same paper (one family per paper) as a second view;
- the verdict on the table's family — ``holds`` (Holm p < 0.05), ``borderline`` (the Monte Carlo interval of the deciding p
  straddles 0.05), ``same direction; p < 0.05 before correction only``, ``same direction, not significant``,
  ``no difference``, ``reversed`` (``significant`` when the reverse claim survives Holm);
- the crossed seed × example variance components of the gain and the verdict of the test that carries both
  sources ([`analytic_p`][statistics.analytic_p] on the model's variance, Holm as above);
- where the paper's own gain lies against ours under both noises combined: z = (paper's gain − our gain) /
  √(our bootstrap SE² + the paper's noise²), the paper's noise its stated SD where it gives one, else an
  assumption named in the table's config (``reproduce.paper_noise``: ``ours``, our own single-run noise on this
  dev set ([`single_run_noise`][statistics.single_run_noise]), or a number of points), with the
  excluded count at 1×, 1.25×, 1.5× and 2× that noise beside it (the sensitivity line);
  ``excluded`` at |z| ≥ [`EXCLUDED_Z`][], ``borderline`` at
  [`BORDERLINE_Z`][] ≤ |z| < `EXCLUDED_Z`, else ``consistent``
  ([`ClaimTest.placement`][]);
- the same with the paper's gain adjusted for best-of-grid selection: a paper row that is the best of k settings
  on dev lies, for independent settings, E[max of k] single-run SDs above one run of it
  ([`expected_max`][]), so its gain over a row chosen from fewer settings
  is lowered by the difference ([`ClaimTest.grid_bias`][]; the
  settings per row are stated in the table's config, ``paper_settings``, cited from each paper).

Last, the init ablation ([`init_ablation`][]): how far the ALP-KD rows lie
from NKD in v1 and in v2, on means and per seed.
"""

from __future__ import annotations

import collections
import functools
import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy import integrate
from scipy.stats import norm

from bert_kd.analysis import statistics as st
from bert_kd.analysis.table import accuracy, correct, load_runs, table_total, task_label

TASKS = ("mrpc", "sst2")
ALPHA = 0.05
LABELS = {
    "nkd": "NKD",
    "rkd": "RKD",
    "pkd": "PKD",
    "ckd": "CKD",
    "alp": "ALP",
    "kd": "KD (TED set-up)",
    "lwd": "LWD",
    "ted": "TED",
    "single_teacher": "one teacher",
    "two_teachers": "two teachers",
}
#: (MRPC, SST-2) dev accuracy ×100 reported by the papers, and the regime.
PAPER = {
    "teacher": ((86.76, 92.67), "ALP-KD T_BERT, 12 layers"),
    "nkd": ((72.06, 85.89), "ALP-KD Table 3: BERT-12 → 2 layers, full data, grid"),
    "rkd": ((73.53, 87.39), "ALP-KD Table 3"),
    "pkd": ((72.55, 88.76), "ALP-KD Table 3, PKD with v2's map"),
    "ckd": ((73.04, 88.65), "ALP-KD Table 3"),
    "alp": ((73.53, 88.88), "ALP-KD Table 3"),
    "kd": ((None, 90.8), "TED Table 4: BERT-12 → BERT-6 from layers M(k)"),
    "lwd": ((None, 90.9), "TED Table 4"),
    "ted": ((None, 91.7), "TED Table 4"),
    "single_teacher": ((None, 86.3), "multi-teacher Table 2: BERT-3 student, best single teacher; no MRPC"),
    "two_teachers": ((None, 89.2), "multi-teacher Table 2: BERT + RoBERTa teachers"),
}
#: (claim, better row, worse row, tasks): the papers' ordering claims, tested one-sided.
CLAIMS = [
    *[(f"{LABELS[row]} > NKD (ALP-KD Table 3)", row, "nkd", TASKS) for row in ("rkd", "pkd", "ckd", "alp")],
    ("ALP > CKD (ALP-KD Table 3)", "alp", "ckd", TASKS),
    ("CKD > PKD (ALP-KD Table 3, SST-2 reversed there: 88.65 < 88.76)", "ckd", "pkd", TASKS),
    ("ALP > PKD (ALP-KD Table 3)", "alp", "pkd", TASKS),
    ("ALP > RKD (ALP-KD Table 3)", "alp", "rkd", TASKS),
    ("TED > LWD (TED Table 4)", "ted", "lwd", TASKS),
    ("LWD > KD (TED Table 4)", "lwd", "kd", TASKS),
    ("TED > KD (TED Table 4)", "ted", "kd", TASKS),
    ("two teachers > one (multi-teacher Table 2)", "two_teachers", "single_teacher", ("mrpc",)),
]
#: the ALP-KD rows compared with NKD in the init ablation: those both tables have (v1's PKD used other maps)
WARM_ROWS = ("rkd", "ckd", "alp")
HOLDS, BORDERLINE = "holds", "borderline"
#: |z| of a paper's gain against ours from which it is excluded: two-sided 5% (per cell, not corrected over cells),
#: the level every interval of the reading uses.
EXCLUDED_Z = 1.96
#: |z| from which (below [`EXCLUDED_Z`][]) it is borderline: more than one combined SD from ours, so neither
#: "consistent" nor, at 5%, "excluded" says it.
BORDERLINE_Z = 1.0
#: The SD a paper states for its gain of ``better`` over ``worse`` on a task, points, keyed (better, worse, task).
#: ALP-KD Table 3, TED Table 4 and multi-teacher Table 2 report single runs without one, so none is stated here
#: and the paper's noise is an assumption ([`NoiseAssumption`][]).
PAPER_SD: dict[tuple[str, str, str], float] = {}
#: The multiples of the assumed noise the sensitivity line counts exclusions at.
SENSITIVITY = (1.0, 1.25, 1.5, 2.0)
OURS = "ours"


@dataclass(frozen=True)
class NoiseAssumption:
    """The paper's single-run noise where it states none: ``ours`` (its SD equals our single-run noise on this
    dev set, per claim) or a fixed number of points; ``scale`` multiplies either (the sensitivity line)."""

    points: float | None = None  # None: ours
    scale: float = 1.0

    @classmethod
    def parse(cls, value, where: str = "reproduce.paper_noise") -> NoiseAssumption:
        """``ours`` or a positive number of points; anything else is a user error naming ``where``."""
        from bert_kd.config.errors import UserError

        if value is None or str(value).strip().lower() == OURS:
            return cls()
        try:
            points = float(value)
        except (TypeError, ValueError):
            points = float("nan")
        if not math.isfinite(points) or points <= 0:
            raise UserError(
                f"{where} must be 'ours' or a positive number of accuracy points, got {value!r}",
                where,
                f"set {where}=ours (the paper's noise assumed equal to our single-run noise) or e.g. {where}=0.8",
            )
        return cls(points)

    def scaled(self, scale: float) -> NoiseAssumption:
        return replace(self, scale=scale)

    def describe(self) -> str:
        base = "assumed equal to our single-run noise" if self.points is None else f"assumed {self.points:g} points"
        return base if self.scale == 1.0 else f"{self.scale:g}× the noise {base}"


@functools.cache
def expected_max(k: int) -> float:
    """E[max of k independent standard normals] (Blom-free, by quadrature): 0 for k = 1, 0.85 for 3, 2.16 for 39 —
    how far, in single-run SDs, the best of k equally good settings lies above one run of them."""
    if k < 1:
        raise ValueError(f"a row is chosen from at least one setting, got {k}")
    if k == 1:
        return 0.0
    value, _ = integrate.quad(lambda x: x * k * norm.pdf(x) * norm.cdf(x) ** (k - 1), -12, 12, limit=200)
    return float(value)


NOMINAL = "same direction; p < 0.05 before correction only"


def paper_of(claim: str) -> str:
    """The paper a claim comes from (the words before "Table" in its parentheses): one Holm family each."""
    return claim.split("(", 1)[1].split(" Table", 1)[0]


def tests_what(claim: str, task: str) -> str:
    """What a (claim, task) row tests: the paper's own claim, an extrapolation to a task the paper did not
    report, or a stand-in where our rows differ from the paper's in kind."""
    paper = paper_of(claim)
    if paper == "multi-teacher":
        return (
            "stand-in: two MiniLM-L6 teachers (seeds 42, 43) vs one; the paper: heterogeneous teachers "
            "(BERT + RoBERTa) vs the best single teacher, on QNLI, SST-2, MNLI (no MRPC)"
        )
    if paper == "TED" and task != "sst2":
        return "extrapolation: TED Table 4 has MNLI, SST-2 and RTE, not MRPC"
    return f"paper claim ({paper} reports {task_label(task)})"


def paper_gain(better: str, worse: str, task: str) -> float | None:
    """The paper's own gain of ``better`` over ``worse`` on ``task`` in points, or None without both numbers."""
    index = TASKS.index(task)
    a, b = PAPER[better][0][index], PAPER[worse][0][index]
    return None if a is None or b is None else round(a - b, 2)


@dataclass(frozen=True)
class ClaimTest:
    """One ordering claim on one task, tested on the seeds both rows have."""

    claim: str
    task: str
    seeds: int
    test: st.TestResult | None = None
    components: st.VarianceComponents | None = None
    by_seed: tuple[float, float] | None = None  # t-interval of the per-seed gains, points
    holm_p: float | None = None
    holm_error: float | None = None
    reverse_holm: tuple[float, float] | None = None  # the reverse claim's Holm p and its error
    model_p: float | None = None  # analytic, on the seed × example model's variance
    model_holm_p: float | None = None
    verdict: str = "not run yet"
    model_verdict: str = ""
    paper_gain: float | None = None
    paper_sd: float | None = None  # the paper's stated SD of its gain, points (`PAPER_SD`)
    assumed: NoiseAssumption = NoiseAssumption()  # the paper's noise where it states none
    settings: tuple[int, int] | None = None  # settings the paper chose its better and worse rows from
    paper_holm_p: float | None = None  # Holm within the claim's paper (the second view)
    paper_holm_error: float | None = None
    paper_verdict: str = ""

    @property
    def name(self) -> str:
        return self.claim.split(" (", 1)[0]

    @property
    def model_sd(self) -> float:
        return float(np.sqrt(self.components.gain_variance())) if self.components else float("nan")

    @property
    def noise(self) -> float | None:
        """The paper's single-run noise on this dev set, accuracy ([`single_run_noise`][statistics.single_run_noise])."""
        return st.single_run_noise(self.components) if self.components else None

    @property
    def paper_noise(self) -> float | None:
        """The paper's noise on its gain, points: its stated SD, else the assumed one (``assumed``: our
        single-run noise on this dev set, or a stated number of points, times its scale)."""
        if self.paper_sd is not None:
            return self.paper_sd
        if self.assumed.points is not None:
            return self.assumed.scale * self.assumed.points
        return self.assumed.scale * 100 * self.noise if self.components else None

    @property
    def grid_bias(self) -> float | None:
        """Points by which best-of-grid selection lifts the paper's gain, for independent settings: one row's
        single-run SD (the gain's noise / √2) × (E[max of k_better] − E[max of k_worse]); None without the
        settings or a noise."""
        if self.settings is None or self.paper_noise is None:
            return None
        better, worse = self.settings
        return self.paper_noise / math.sqrt(2) * (expected_max(better) - expected_max(worse))

    @property
    def adjusted_gain(self) -> float | None:
        """The paper's gain less its best-of-grid lift ([`grid_bias`][])."""
        if self.paper_gain is None or self.grid_bias is None:
            return None
        return self.paper_gain - self.grid_bias

    def _z(self, gain: float | None) -> float | None:
        if gain is None or self.test is None or self.paper_noise is None:
            return None
        return (gain - 100 * self.test.gain) / float(np.hypot(100 * self.test.se, self.paper_noise))

    @property
    def z(self) -> float | None:
        """(paper's gain − our gain) / √(our bootstrap SE² + the paper's noise²), both noises in points; None
        without a paper number, a test or 2 seeds."""
        return self._z(self.paper_gain)

    @property
    def adjusted_z(self) -> float | None:
        """[`z`][] of the best-of-grid-adjusted paper gain."""
        return self._z(self.adjusted_gain)

    @property
    def placement(self) -> str:
        """Where the paper's gain lies against ours under both noises: ``excluded`` (|z| ≥ [`EXCLUDED_Z`][]),
        ``borderline`` (|z| ≥ [`BORDERLINE_Z`][]), ``consistent``; ``""`` without a z."""
        return place(self.z)

    @property
    def adjusted_placement(self) -> str:
        """[`placement`][] of the best-of-grid-adjusted paper gain."""
        return place(self.adjusted_z)

    def paper_cell(self) -> str:
        if not self.placement:
            return "–"
        side = "above" if self.z > 0 else "below"
        said = {
            "excluded": f"**excluded**, {side} ours",
            BORDERLINE: f"borderline, {side} ours",
            "consistent": "consistent with ours",
        }[self.placement]
        return f"{self.paper_gain:+.2f} (its noise ±{self.paper_noise:.2f}), z {self.z:+.2f}: {said}"


def place(z: float | None) -> str:
    """``excluded``, ``borderline`` or ``consistent`` for a z; ``""`` for None."""
    if z is None:
        return ""
    size = abs(z)
    return "excluded" if size >= EXCLUDED_Z else BORDERLINE if size >= BORDERLINE_Z else "consistent"


def verdict(
    gain: float,
    p: float,
    error: float,
    holm_p: float,
    holm_error: float,
    reverse: tuple[float, float] | None,
    alpha: float = ALPHA,
) -> str:
    """The verdict of a tested claim from its p and Holm p (each ± its Monte Carlo error; 0 for an exact p): a
    threshold inside the 95% Monte Carlo interval (± 1.96 errors) of the p that decides makes it ``borderline``."""

    def straddles(value: float, err: float) -> bool:
        return value - 1.96 * err < alpha <= value + 1.96 * err

    if gain == 0:
        return "no difference"
    if gain > 0:
        if straddles(holm_p, holm_error):
            return f"{BORDERLINE}: holds or not within Monte Carlo error"
        if holm_p < alpha:
            return HOLDS
        if straddles(p, error):
            return "same direction; borderline p ≈ 0.05 before correction"
        return NOMINAL if p < alpha else "same direction, not significant"
    reverse_p, reverse_error = reverse
    if straddles(reverse_p, reverse_error):
        return f"reversed, {BORDERLINE}"
    return "reversed, significant" if reverse_p < alpha else "reversed, not significant"


#: Resamples a claim is retested with when its verdict is borderline at the first count.
RETEST_RESAMPLES = 1_000_000


def claim_tests(
    runs: dict,
    resamples: int = st.RESAMPLES,
    seed: int = 0,
    assumed: NoiseAssumption = NoiseAssumption(),
    settings: dict[str, int] | None = None,
) -> list[ClaimTest]:
    """Every (claim, task) of [`CLAIMS`][] in order. Every tested claim of the
    table is one Holm family (their reversals another): the verdict; each paper's claims are a family of their own
    as a second view (``paper_holm_p``, ``paper_verdict``); the same for the analytic p on the variance model. A
    claim whose verdict is borderline (its Monte Carlo interval straddles 0.05) in either view is retested with
    [`RETEST_RESAMPLES`][] resamples, and the families adjusted again;
    what stays borderline is said so. ``assumed``: the papers' noise where they state none; ``settings``: the
    settings each paper row was chosen from (row → k)."""
    tests = _claim_tests(runs, resamples, seed, assumed, settings or {})
    retest = {(e.claim, e.task) for e in tests if BORDERLINE in e.verdict or BORDERLINE in e.paper_verdict}
    if retest and resamples < RETEST_RESAMPLES:
        more = {key: RETEST_RESAMPLES for key in retest}
        tests = _claim_tests(runs, resamples, seed, assumed, settings or {}, more)
    return tests


def _claim_tests(
    runs: dict, resamples: int, seed: int, assumed: NoiseAssumption, settings: dict, more: dict | None = None
) -> list[ClaimTest]:
    pending: list[ClaimTest] = []
    for claim, better, worse, tasks in CLAIMS:
        for task in tasks:
            a, b = runs.get((better, task), {}), runs.get((worse, task), {})
            seeds = sorted(set(a) & set(b))
            if not seeds:
                pending.append(ClaimTest(claim, task, 0))
                continue
            A = np.stack([correct(a[s]) for s in seeds])
            B = np.stack([correct(b[s]) for s in seeds])
            test = _bootstrap(A, B, (more or {}).get((claim, task), resamples), seed)
            components = st.variance_components(A, B) if len(seeds) > 1 else None
            interval = st.t_interval([100 * (accuracy(a[s]) - accuracy(b[s])) for s in seeds])
            model_p = st.analytic_p(test.gain, float(np.sqrt(components.gain_variance()))) if components else None
            pending.append(
                ClaimTest(
                    claim,
                    task,
                    len(seeds),
                    test,
                    components,
                    interval,
                    model_p=model_p,
                    paper_gain=paper_gain(better, worse, task),
                    paper_sd=PAPER_SD.get((better, worse, task)),
                    assumed=assumed,
                    settings=(settings[better], settings[worse]) if better in settings and worse in settings else None,
                )
            )
    tested = [i for i, entry in enumerate(pending) if entry.test is not None]
    table = _family(pending, tested)
    out = list(pending)
    for paper in dict.fromkeys(paper_of(claim) for claim, *_ in CLAIMS):
        by_paper = _family(pending, [i for i in tested if paper_of(pending[i].claim) == paper])
        for i, (holm_p, holm_error, said, *_) in by_paper.items():
            (table_p, table_error, table_said, reverse, model_holm_p, model_said) = table[i]
            out[i] = replace(
                pending[i],
                holm_p=table_p,
                holm_error=table_error,
                reverse_holm=reverse,
                verdict=table_said,
                model_holm_p=model_holm_p,
                model_verdict=model_said,
                paper_holm_p=holm_p,
                paper_holm_error=holm_error,
                paper_verdict=said,
            )
    return out


def _family(pending: list[ClaimTest], family: list[int]) -> dict[int, tuple]:
    """Holm over the claims ``family`` (indices into ``pending``), forward and reversed, for the bootstrap's p and
    the variance model's: index → (Holm p, its error, verdict, reverse (p, error), model Holm p, model verdict)."""
    tests = [pending[i].test for i in family]
    forward = st.holm([t.p for t in tests], [t.mc_error for t in tests])
    backward = st.holm([t.reverse_p for t in tests], [t.reverse_mc_error for t in tests])
    with_model = [i for i in family if pending[i].model_p is not None]
    model = dict(zip(with_model, st.holm([pending[i].model_p for i in with_model])))
    model_reverse = dict(zip(with_model, st.holm([1 - pending[i].model_p for i in with_model])))
    out = {}
    for i, (holm_p, holm_error), reverse in zip(family, forward, backward):
        entry, t = pending[i], pending[i].test
        said = verdict(t.gain, t.p, t.mc_error, holm_p, holm_error, reverse)
        model_said = ""
        if i in model:
            model_said = verdict(t.gain, entry.model_p, 0.0, model[i][0], 0.0, model_reverse[i])
        out[i] = (holm_p, holm_error, said, reverse, model[i][0] if i in model else None, model_said)
    return out


@functools.lru_cache(maxsize=64)
def _bootstrap_cached(a: bytes, b: bytes, shape: tuple, resamples: int, seed: int) -> st.TestResult:
    A = np.frombuffer(a, dtype=np.int8).reshape(shape)
    B = np.frombuffer(b, dtype=np.int8).reshape(shape)
    return st.bootstrap_test(A, B, resamples=resamples, seed=seed)


def _bootstrap(A: np.ndarray, B: np.ndarray, resamples: int, seed: int) -> st.TestResult:
    """[`bootstrap_test`][statistics.bootstrap_test], computed once per process for the same arrays."""
    A, B = A.astype(np.int8), B.astype(np.int8)
    return _bootstrap_cached(A.tobytes(), B.tobytes(), A.shape, resamples, seed)


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
