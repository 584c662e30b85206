"""The papers' numbers and ordering claims, and each claim tested on a table's runs (no file read or written here:
[`paper_gap`][bert_kd.analysis.paper_gap] reads a table's folder into these tests, and
[`paper_gap_report`][bert_kd.analysis.paper_gap_report] writes them).

For every row: the paper's number (its regime stated) in dev accuracy ×100 (the metric ALP-KD Table 1 and TED
Table 14 report for MRPC and SST-2). For every ordering claim (ALP-KD Table 3, TED Table 4, multi-teacher
Table 2), on the seeds both rows have:

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
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import numpy as np
from scipy import integrate
from scipy.stats import norm

from bert_kd.analysis import statistics as st
from bert_kd.analysis.table import accuracy, correct, task_label

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
