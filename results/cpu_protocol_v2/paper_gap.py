"""The paper-gap reading of CPU protocol v2 (issue 19), from the trial JSONs of this folder alone.

    PYTHONPATH=src python results/cpu_protocol_v2/paper_gap.py    # writes tables/paper_gap.{md,png} and the README's v2 block

For every row: the paper's number (its regime stated), ours as mean ± 95% CI (t-interval over the
seeds) with n, in dev accuracy ×100 (the metric ALP-KD Table 1 and TED Table 14 report for MRPC and
SST-2). For every ordering claim of the papers (ALP-KD Table 3, TED Table 4, multi-teacher Table 2):
the gain here (seeds pooled, only seeds both rows have), its paired-bootstrap 95% interval and
one-sided p-value (``bert_kd.sweep.significance.paired_bootstrap``, 1,000 resamples of the dev
examples — the test the tables use; reported as ``(k + 1) / (B + 1)``, never 0), its Holm-adjusted
p-value over the tested claims of the same paper (one family per paper: ALP-KD's 16 (claim, task)
pairs, TED's 6, multi-teacher's 1; a claim "holds" when it survives the family-wise 5% level, not when
one test of many crosses 0.05) and the verdict: ``holds`` (Holm p < 0.05), ``same direction; p < 0.05
before correction only``, ``same direction, not significant``, ``no difference``, ``reversed`` (gain < 0;
``reversed, significant`` when the opposite claim survives Holm in the same family), or ``not run yet``;
and where the paper's own gain (its regime) lies against our 95% intervals — the bootstrap's (dev examples) and
a t-interval over the per-seed gains (training seeds): above both, an effect that large is excluded here,
whatever the verdict.
Last, the init ablation (:func:`init_ablation`): does v1's fine-tuned-teacher start shrink the ALP-KD rows'
differences from NKD (spread of the row means, per-example agreement with NKD's students), v1 → v2.
Rerun after new trials land; the table is rewritten whole.
"""

from __future__ import annotations

import collections
import functools
import json
import math
import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np

from bert_kd.sweep.significance import BootstrapResult, holm_adjusted, paired_bootstrap

HERE = Path(__file__).resolve().parent
ROOT, TABLE = HERE.parents[1], HERE.name
TASKS = ("mrpc", "sst2")
LABELS = {"nkd": "NKD", "rkd": "RKD", "pkd": "PKD", "ckd": "CKD", "alp": "ALP", "kd": "KD (TED set-up)",
          "lwd": "LWD", "ted": "TED", "single_teacher": "one teacher", "two_teachers": "two teachers"}
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
#: (claim, better row, worse row, tasks): the papers' ordering claims tested one-sided here.
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
README = ROOT / "README.md"
#: Trials of this table run with other teachers (``fill_other_teacher.sh``): a sensitivity check, never read
#: into the table (:func:`other_teacher_render`).
OTHER_TEACHER = HERE / "other_teacher"
#: Why the table stops short of :func:`table_total` (None while it runs): said in its status lines. Closed in session 15
#: (the v2 README's "Closed at 139").
CLOSED = ("closed: the other {missing} need the teachers its trials were distilled from, which nobody can retrain: "
          "their new classification heads were drawn from an unseeded generator (fixed in session 15) and their store "
          "went with session 13's machine; run with other teachers, they are a sensitivity check: "
          "`results/cpu_protocol_v2/tables/paper_gap_other_teacher.md`")
#: The table rerun whole on the teachers its keys give since session 15's seeding fix (``rerun_seeded.sh``,
#: session 17 on), so that every v2 number can be rerun on any machine; ``other_teacher/``'s 21 are its trials
#: for their keys (copied here). Read by :func:`seeded_render`; once complete it replaces the closed table.
SEEDED = HERE / "seeded"
#: Where ``promote_seeded.sh`` moves the closed table's 139 trials when the complete seeded rerun replaces them; kept
#: so that the seeded reading (the rerun against the closed table) and the other-teacher check can still be rendered.
CLOSED_139 = HERE / "closed_139"
V1 = ROOT / "results" / "cpu_protocol"  # the `init: teacher` ablation
#: the ALP-KD rows compared with NKD in the init ablation: those both tables have (v1's PKD used other maps)
WARM_ROWS = ("rkd", "ckd", "alp")
README_START = "<!-- v2-reading:start (written by results/cpu_protocol_v2/paper_gap.py; do not edit) -->"
README_END = "<!-- v2-reading:end -->"
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228]


def promoted() -> bool:
    """True once the seeded rerun is the table (``promote_seeded.sh`` moved the closed table to :data:`CLOSED_139`)."""
    return CLOSED_139.is_dir()


def closed_table() -> Path:
    """The folder of the closed table's 139 trials: the table folder until the promotion, :data:`CLOSED_139` after."""
    return CLOSED_139 if promoted() else HERE


def seeded_table() -> Path:
    """The folder of the seeded rerun's trials: :data:`SEEDED` until the promotion, the table folder after."""
    return HERE if promoted() else SEEDED


@functools.cache
def table_params() -> dict:
    """The parameters ``cpu_protocol_v2``'s commands run with (conf/base, the table chosen, the GLUE release);
    loaded once per process (``render`` and the README block both read them)."""
    from bert_kd.config_loader import ProjectConfigLoader
    from bert_kd.settings import CONFIG_LOADER_ARGS

    args = {**CONFIG_LOADER_ARGS, "default_run_env": "base"}  # conf/local is a user's, not the protocol's
    runtime = {"reproduce": {"table": TABLE}, "glue_dir": "../shared/glue"}
    return ProjectConfigLoader(str(ROOT / "conf"), runtime_params=runtime, **args)["parameters"]


@functools.cache
def table_spec():
    """The ``cpu_protocol_v2`` sweep as ``conf/base`` defines it (``bert_kd.sweep.spec.build_sweep``), so that
    the count of trials follows the table (its ``extra_seeds`` included) instead of being written here."""
    from bert_kd.sweep.spec import RECIPE_NAMESPACES, build_sweep

    params = table_params()
    return build_sweep(params["reproduce"], {ns: params.get(ns) or {} for ns in RECIPE_NAMESPACES})


@functools.cache
def table_keys() -> frozenset[str]:
    """The content keys of the table's trials (``TrialRunner.content_key``): the only JSON names this
    folder may hold."""
    from bert_kd.sweep.trial import TrialRunner

    runner = TrialRunner(table_params(), commit="paper_gap")
    return frozenset(runner.content_key(trial) for trial in table_spec().trials())


def table_total() -> int:
    """Trials the table asks for: every row × its tasks × the task's seeds (one grid point each in v2)."""
    return len(table_spec().trials())


def trial_files(directory: Path) -> list[Path]:
    """The trial JSONs of ``directory``; in this folder, refused by name unless every one is a trial of the
    table (:func:`table_keys`): another experiment's file would silently replace a seed's result."""
    paths = sorted(directory.glob("*.json"))
    foreign = [path.name for path in paths if directory.resolve() == HERE and path.stem not in table_keys()]
    if foreign:
        raise ValueError(f"{directory}: {len(foreign)} JSON(s) are not trials of {TABLE} as conf/base defines it "
                         f"(e.g. {foreign[0]}): a variant's or another table's results; move them out before reading")
    return paths


def load_runs(directory: Path = HERE) -> tuple[dict, dict]:
    """(row, task) → seed → result, and task → teacher dev accuracy (from any trial of the task)."""
    runs: dict[tuple[str, str], dict[int, dict]] = collections.defaultdict(dict)
    teacher: dict[str, float] = {}
    for path in trial_files(directory):
        record = json.loads(path.read_text(encoding="utf-8"))
        trial, result = record["spec"]["trial"], record["result"]
        runs[(trial["method"], trial["task"])][int(trial["seed"])] = result
        accuracy = (result.get("teacher_dev_metrics") or {}).get("accuracy")
        if accuracy is not None:
            teacher[trial["task"]] = float(accuracy)
    return dict(runs), teacher


def accuracy(result: dict) -> float:
    return float(np.mean(np.asarray(result["dev_predictions"]) == np.asarray(result["dev_labels"])))


def mean_ci(values: list[float]) -> str:
    """``mean ± half-width (n)`` in points; the t-interval needs n ≥ 2."""
    if not values:
        return "–"
    mean = 100 * float(np.mean(values))
    if len(values) < 2:
        return f"{mean:.2f} (1)"
    half = T975[len(values) - 2] * 100 * float(np.std(values, ddof=1)) / math.sqrt(len(values))
    return f"{mean:.2f} ± {half:.2f} ({len(values)})"


class ClaimTest(NamedTuple):
    """One ordering claim on one task: the one-sided test ``better > worse`` over the seeds both rows have,
    its Holm-adjusted p-value over every claim tested, and the verdict."""

    claim: str
    task: str
    test: BootstrapResult | None
    seeds: int
    p: float | None  # one-sided, (k + 1) / (B + 1): never 0 from B resamples
    holm_p: float | None
    verdict: str
    by_seed: tuple[float, float] | None = None  # :func:`seed_interval`, points
    paper_gain: float | None = None  # :func:`paper_gain`, points
    placement: str = ""  # :func:`placement`: where ``paper_gain`` lies against our intervals

    @property
    def paper(self) -> str:
        return f"paper {self.paper_gain:+.2f}: {self.placement} our CI" if self.placement else ""

    def gain_cell(self) -> str:
        if self.test is None:
            return "–"
        t = self.test
        return (f"{100 * t.gain:+.2f} [{100 * t.low:+.2f}, {100 * t.high:+.2f}] p={self.p:.3f}, "
                f"Holm p={self.holm_p:.3f} (n={self.seeds})")

    def readme_cell(self) -> str:
        if self.test is None:
            return self.verdict
        return (f"{100 * self.test.gain:+.2f}, p = {self.p:.3f}, Holm p = {self.holm_p:.3f} "
                f"(n = {self.seeds}): {self.verdict}" + (f"; {self.paper}" if self.paper else ""))


def monte_carlo_p(test: BootstrapResult) -> float:
    """The bootstrap p-value as ``(k + 1) / (B + 1)`` (k of B resampled gains ≤ 0; the usual Monte Carlo
    p-value, North, Curtis & Sham 2002): a p of 0 from 1,000 resamples only says p < ~0.003, which Holm's ×16
    must not turn into 0."""
    return (round(test.p_value * test.resamples) + 1) / (test.resamples + 1)


def paper_of(claim: str) -> str:
    """The paper a claim comes from (the words before "Table" in its parentheses): one Holm family each."""
    return claim.split("(", 1)[1].split(" Table", 1)[0]


def paper_gain(better: str, worse: str, task: str) -> float | None:
    """The paper's own gain of ``better`` over ``worse`` on ``task`` in points (:data:`PAPER`, its regime), or
    None where the paper has no number for both rows."""
    index = TASKS.index(task)
    a, b = PAPER[better][0][index], PAPER[worse][0][index]
    return None if a is None or b is None else round(a - b, 2)


def seed_interval(gains: list[float]) -> tuple[float, float] | None:
    """95% t-interval, in points, of the mean per-seed gain (``gains`` in accuracy, one per shared seed): the
    spread of training seeds, which the bootstrap over dev examples does not resample; None below 2 seeds."""
    if len(gains) < 2:
        return None
    mean, half = float(np.mean(gains)), T975[len(gains) - 2] * float(np.std(gains, ddof=1)) / math.sqrt(len(gains))
    return 100 * (mean - half), 100 * (mean + half)


def placement(gain: float | None, test: BootstrapResult | None, seeds: tuple[float, float] | None) -> str:
    """Where the paper's gain lies against both our 95% intervals of the same gain — the paired bootstrap over
    dev examples (``test``) and the t-interval over training seeds (``seeds``): ``above`` both (this regime
    excludes an effect that large), ``below`` both, or ``within``; ``""`` without a paper number, a test or
    2 seeds."""
    if gain is None or test is None or seeds is None:
        return ""
    low, high = min(100 * test.low, seeds[0]), max(100 * test.high, seeds[1])
    return "above" if gain > high else "below" if gain < low else "within"


def claim_tests(runs: dict) -> list[ClaimTest]:
    """Every (claim, task) of :data:`CLAIMS` in order, tested on the seeds both rows share; the tested
    claims of one paper are one family for Holm's correction (their reversals another, for "reversed,
    significant")."""
    pending: list[tuple[ClaimTest, float]] = []  # (the test before Holm and the verdict, p of the reverse claim)
    for claim, better, worse, tasks in CLAIMS:
        for task in tasks:
            a, b = runs.get((better, task), {}), runs.get((worse, task), {})
            seeds = sorted(set(a) & set(b))
            if not seeds:
                pending.append((ClaimTest(claim, task, None, 0, None, None, "not run yet"), 1.0))
                continue
            pairs = lambda rows: [(rows[s]["dev_predictions"], rows[s]["dev_labels"]) for s in seeds]  # noqa: E731
            test = paired_bootstrap(task, pairs(a), pairs(b), metric="accuracy")
            reverse = monte_carlo_p(paired_bootstrap(task, pairs(b), pairs(a), metric="accuracy")) if test.gain < 0 else 1.0
            by_seed = seed_interval([accuracy(a[s]) - accuracy(b[s]) for s in seeds])
            gain = paper_gain(better, worse, task)
            entry = ClaimTest(claim, task, test, len(seeds), monte_carlo_p(test), None, "", by_seed, gain,
                              placement(gain, test, by_seed))
            pending.append((entry, reverse))
    forward, backward = {}, {}
    for paper in dict.fromkeys(paper_of(claim) for claim, *_ in CLAIMS):
        family = [i for i, (entry, _) in enumerate(pending) if entry.test is not None and paper_of(entry.claim) == paper]
        forward.update(zip(family, holm_adjusted([pending[i][0].p for i in family])))
        backward.update(zip(family, holm_adjusted([pending[i][1] for i in family])))
    out = []
    for i, (entry, _) in enumerate(pending):
        if entry.test is None:
            out.append(entry)
            continue
        if entry.test.gain == 0:
            said = "no difference"
        elif entry.test.gain > 0:
            said = ("holds" if forward[i] < 0.05 else "same direction; p < 0.05 before correction only"
                    if entry.p < 0.05 else "same direction, not significant")
        else:
            said = "reversed, significant" if backward[i] < 0.05 else "reversed, not significant"
        out.append(entry._replace(holm_p=forward[i], verdict=said))
    return out


class Reading(NamedTuple):
    """What the full reading and the README block are written from."""

    runs: dict
    teacher: dict
    tests: list[ClaimTest]
    ablation: dict


def reading(directory: Path = HERE) -> Reading:
    """The folder's runs, claim tests and init ablation, computed once per state of its JSON files (name,
    size, modification time), so ``main`` writes the full reading and the README block from one set of tests."""
    return _reading(directory.resolve(), folder_state(directory))


def folder_state(folder: Path) -> tuple:
    """The state of a folder's trial JSONs (name, size, modification time): what a cached reading is keyed on."""
    return tuple((path.name, path.stat().st_size, path.stat().st_mtime_ns) for path in sorted(folder.glob("*.json")))


@functools.cache
def _reading(directory: Path, state: tuple) -> Reading:
    runs, teacher = load_runs(directory)
    return Reading(runs, teacher, claim_tests(runs), init_ablation(runs))


def task_label(task: str) -> str:
    return task.upper().replace("SST2", "SST-2")


def render(directory: Path = HERE) -> str:
    runs, teacher, tests, ablation = reading(directory)
    lines = ["| row | paper MRPC / SST-2 (regime) | ours MRPC | ours SST-2 |", "|---|---|---|---|"]
    (paper_mrpc, paper_sst2), regime = PAPER["teacher"]
    ours = [f"{100 * teacher[t]:.2f} (seed 42)" if t in teacher else "–" for t in TASKS]
    lines.append(f"| teacher | {paper_mrpc} / {paper_sst2} ({regime}) | {ours[0]} | {ours[1]} |")
    for row, label in LABELS.items():
        (paper_mrpc, paper_sst2), regime = PAPER[row]
        cells = [mean_ci([accuracy(r) for r in runs.get((row, t), {}).values()]) for t in TASKS]
        if row.endswith("teacher") or row.endswith("teachers"):
            cells[1] = "· (MRPC only here)"
        lines.append(f"| {label} | {paper_mrpc or '–'} / {paper_sst2} ({regime}) | {cells[0]} | {cells[1]} |")
    lines += ["", "| claim | task | gain here, points [95% bootstrap CI] p, Holm p (seeds) | verdict | the paper's gain (its "
              "regime) against our CI |", "|---|---|---|---|---|"]
    for entry in tests:
        seeds = "" if entry.by_seed is None else " (seed t-interval [{:+.2f}, {:+.2f}])".format(*entry.by_seed)
        lines.append(f"| {entry.claim} | {task_label(entry.task)} | {entry.gain_cell()} | {entry.verdict} | "
                     f"{(entry.paper + seeds) if entry.paper else '–'} |")
    lines += ["", "The warm start (issue 19): RKD, CKD and ALP against NKD, v1 (`init: teacher`) → v2 (`init: pretrained`, "
              "and v2's other fidelity fixes), both on seeds 1–3; agreement = dev examples on which the row's "
              "student predicts what the same seed's NKD student predicts.", "",
              "| task | NKD accuracy v1 → v2 | mean \\|row − NKD\\|, points | agreement with NKD, % |", "|---|---|---|---|"]
    for task, figures in ablation.items():
        cells = ["–" if figures[name] is None else f"{figures[name][0]:.2f} → {figures[name][1]:.2f}"
                 for name in ("nkd", "spread")]
        cells.append("–" if figures["agreement"] is None else
                     f"{figures['agreement'][0]:.1f} → {figures['agreement'][1]:.1f}")
        lines.append(f"| {task_label(task)} | {' | '.join(cells)} |")
    reason = closed_reason(runs)
    lines += ["", f"{finished(runs)} of {table_total()} trials finished{'; ' + reason if reason else ''}. "
              "Made by: `PYTHONPATH=src python results/cpu_protocol_v2/paper_gap.py`."]
    return "\n".join(lines) + "\n"


def closed_reason(runs: dict) -> str | None:
    """``"closed: …"`` when the table was closed short of its total (:data:`CLOSED`), else None."""
    missing = table_total() - finished(runs)
    return CLOSED.format(missing=missing) if CLOSED and missing > 0 else None


def other_teacher_files(directory: Path | None = None, other: Path = OTHER_TEACHER) -> list[Path]:
    """``other``'s trial JSONs: trials of the table that ``directory`` lacks, run with other teachers.
    Refused by name: a file that is no trial of the table, one whose trial the table already has (it would
    replace a like-for-like seed), or a set distilled from more than one teacher on a task (one other teacher per
    task, so the check reads as "the table's teacher against that one")."""
    directory = closed_table() if directory is None else directory  # the closed table's 139
    keys, have = table_keys(), {path.stem for path in trial_files(directory)}
    paths = sorted(other.glob("*.json"))
    foreign = [path.name for path in paths if path.stem not in keys]
    doubled = [path.name for path in paths if path.stem in have]
    refuse(other, [(foreign, f"are not trials of {TABLE}"), (doubled, "are trials the table already has")],
           [path for path in paths if path.stem in keys])
    return paths


def refuse(folder: Path, named: list[tuple[list[str], str]], teacher_paths: list[Path], whose: str = "") -> None:
    """Raise one ValueError naming every problem of ``folder``'s trial JSONs: each non-empty ``(names, what)`` of
    ``named`` ("N JSON(s) <what> (e.g. <first>)") and each task whose ``teacher_paths`` were distilled from more than
    one teacher (the scores and their trials)."""
    several = {task: found for task, found in teachers_of(teacher_paths).items() if len({score for score, _ in found}) > 1}
    problems = [f"{len(names)} JSON(s) {what} (e.g. {names[0]})" for names, what in named if names] + \
        [f"{task_label(task)} trials{whose} come from {len({score for score, _ in found})} teachers ("
         + ", ".join(f"{score:.2f}: {count}" for (score, _), count in sorted(found.items())) + ")"
         for task, found in sorted(several.items())]
    if problems:
        raise ValueError(f"{folder}: " + "; ".join(problems))


def teachers_of(paths: list[Path]) -> dict[str, dict[tuple[float, str], int]]:
    """task → (teacher dev accuracy, kernels) → trials: the table's teacher each of a set of trial JSONs was distilled
    from (:func:`table_teacher_score`); ``numerics`` (the kernels) is "not recorded" in JSONs written before session 14."""
    out: dict[str, dict[tuple[float, str], int]] = collections.defaultdict(collections.Counter)
    for path in paths:
        record = json.loads(path.read_text(encoding="utf-8"))
        score = table_teacher_score(record)
        if score is not None:
            out[record["spec"]["trial"]["task"]][(round(100 * float(score), 2), record.get("numerics") or "not recorded")] += 1
    return out


def table_teacher_score(record: dict) -> float | None:
    """The dev accuracy a trial JSON records for the table's teacher (``spec.teacher``). A multi-teacher trial that
    records each teacher (``teachers_dev_metrics``, since session 16) gives the slot with the table teacher's settings
    (name and seed aside; their ``teacher_dev_metric`` is the best slot's, which may be another teacher), or None
    when no slot has them; older multi-teacher trials recorded the best slot only, and that is what is read."""
    result, spec = record["result"], record["spec"]
    slots = result.get("teachers_dev_metrics")
    if slots and spec.get("teachers"):
        same = [metrics for teacher, metrics in zip(spec["teachers"], slots)
                if {k: v for k, v in teacher.items() if k not in ("name", "seed")} == spec.get("teacher")]
        return same[0].get("accuracy") if same else None
    return (result.get("teacher_dev_metrics") or {}).get("accuracy")


def filled_reading(directory: Path | None = None, other: Path = OTHER_TEACHER) -> tuple[dict, dict, list[ClaimTest], list[ClaimTest]]:
    """(the table's runs, the same with ``other``'s trials added, the table's claim tests, the filled ones),
    computed once per state of both folders (the render and the picture of ``--other-teacher`` share them)."""
    directory = closed_table() if directory is None else directory  # the closed table's 139
    other_teacher_files(directory, other)  # refuses a file that is no trial, a doubled seed, two teachers
    table = reading(directory)
    filled, after = _filled_tests(directory.resolve(), other.resolve(), folder_state(directory), folder_state(other))
    return table.runs, filled, table.tests, after


@functools.cache
def _filled_tests(directory: Path, other: Path, *states: tuple) -> tuple[dict, list[ClaimTest]]:
    """(the filled runs, their claim tests) for one state of both folders."""
    runs = reading(directory).runs
    added = load_runs(other)[0]  # other_teacher_files checked that none of these seeds is one the table has
    filled = {key: {**runs.get(key, {}), **added.get(key, {})} for key in {*runs, *added}}
    return filled, claim_tests(filled)


def other_teacher_render(directory: Path | None = None, other: Path = OTHER_TEACHER) -> str:
    """The table's reading against the same reading with ``other``'s trials added (:func:`other_teacher_files`):
    the teachers, every claim's gain, Holm p and verdict both ways, and the row means. A sensitivity check — would
    the missing trials, run with other teachers, change what the table says? — never the table."""
    directory = closed_table() if directory is None else directory  # the closed table's 139
    from types import SimpleNamespace

    from bert_kd.sweep.report import teacher_mismatches

    table_paths, extra = trial_files(directory), other_teacher_files(directory, other)
    runs, filled, before, after = filled_reading(directory, other)
    lines = [f"# CPU protocol v2 with {len(extra)} of its missing trials run with other teachers", "",
             "A sensitivity check, not the table: the table's trials (left) against the same reading with the trials of "
             f"`other_teacher/` added (right), which were distilled from the teachers the same teacher keys give since "
             "session 15's seeding fix (each head drawn from its key's seed, so any machine retrains them; the table's "
             "teachers drew theirs unseeded: the v2 README's \"Same key, other teacher\"). Session 14's and 15's fill "
             "trials, distilled from unseeded teachers, are kept in `other_teacher/session14/` and `session15/` and "
             "not read here. Accuracy ×100; the tests are `paper_gap.py`'s (paired bootstrap over dev examples, seeds "
             "both rows have, Holm within each paper).", ""]
    lines += teacher_lines(table_paths, extra)
    grouped = {(row, task): {seed: SimpleNamespace(result=result) for seed, result in seeds.items()}
               for (row, task), seeds in filled.items()}
    mixed = teacher_mismatches(grouped)
    if mixed:
        lines += ["", "**Mixed teachers** in the right-hand reading (teacher dev score of the task's primary metric): "
                  + "; ".join(mixed) + "."]
    changed, compared = verdict_lines(before, after, f"with `other_teacher/` ({finished(filled)} trials)", finished(runs))
    lines += ["", *compared, "", "| row | task | table: mean ± 95% CI (n) | with `other_teacher/` |", "|---|---|---|---|",
              *row_lines(runs, filled, only_moved=True)]
    missing = table_total() - finished(filled)
    lines += ["", f"{changed} of {len(before)} verdicts change. {finished(filled) - finished(runs)} trials added"
              + (f"; {missing} of the table's trials are in neither folder" if missing else "; with them every trial of the "
                 "table has a result") + ". Made by: `PYTHONPATH=src python results/cpu_protocol_v2/paper_gap.py --other-teacher`."]
    return "\n".join(lines) + "\n"


def teacher_lines(table_paths: list[Path], other_paths: list[Path], other_name: str = "`other_teacher/`") -> list[str]:
    """The teachers both sets of trials were distilled from, per task: score (kernels, trials)."""
    mine, theirs = teachers_of(table_paths), teachers_of(other_paths)
    cell = lambda found: "; ".join(f"{score:.2f} ({kernels}, {count})" for (score, kernels), count in sorted(found.items())) or "–"  # noqa: E731
    return [f"| task | teacher of the table's trials (kernels, trials) | teacher of {other_name} (kernels, trials) |",
            "|---|---|---|", *(f"| {task_label(task)} | {cell(mine.get(task, {}))} | {cell(theirs.get(task, {}))} |" for task in TASKS)]


def verdict_lines(before: list[ClaimTest], after: list[ClaimTest], other_header: str, table_trials: int) -> tuple[int, list[str]]:
    """(how many verdicts differ, one table line per claim: gain, Holm p (n) and verdict in both readings); a claim
    the right-hand reading has not tested yet is not counted ("–")."""
    short = lambda entry: "–" if entry.test is None else (  # noqa: E731
        f"{100 * entry.test.gain:+.2f}, Holm p={entry.holm_p:.3f} (n={entry.seeds}): {entry.verdict}")
    lines = [f"| claim | task | table ({table_trials} trials): gain, Holm p (n): verdict | {other_header} | verdict changed |",
             "|---|---|---|---|---|"]
    changed = 0
    for left, right in zip(before, after):
        moved = left.verdict != right.verdict and right.test is not None
        changed += moved
        said = "–" if right.test is None else "**yes**" if moved else "no"
        lines.append(f"| {left.claim} | {task_label(left.task)} | {short(left)} | {short(right)} | {said} |")
    return changed, lines


def row_lines(runs: dict, other: dict, only_moved: bool = False) -> list[str]:
    """``| row | task | the table's mean ± CI (n) | the other reading's |`` for every row of ``other`` (``only_moved``:
    those whose seed count differs)."""
    lines = []
    for (row, task), seeds in sorted(other.items(), key=lambda item: (TASKS.index(item[0][1]), list(LABELS).index(item[0][0]))):
        if not only_moved or len(seeds) != len(runs.get((row, task), {})):
            lines.append(f"| {LABELS[row]} | {task_label(task)} | {mean_ci([accuracy(r) for r in runs.get((row, task), {}).values()])} "
                         f"| {mean_ci([accuracy(r) for r in seeds.values()])} |")
    return lines


#: the rows whose students never read the teacher: their seeded trials must give the table's predictions
TEACHER_FREE = ("nkd",)


def seeded_files(seeded: Path | None = None, other: Path = OTHER_TEACHER) -> list[Path]:
    """``seeded``'s trial JSONs (the table rerun on seeded teachers). Refused by name: a file that is no trial of the
    table, a set distilled from more than one teacher on a task, or one whose teacher is not ``other``'s (the fill ran
    on the same seeded teachers), or a trial of ``other`` whose copy here differs from it."""
    seeded = seeded_table() if seeded is None else seeded
    keys, paths = table_keys(), sorted(seeded.glob("*.json"))
    foreign = [path.name for path in paths if path.stem not in keys]
    differ = [path.name for path in paths if (other / path.name).is_file()
              and (other / path.name).read_bytes() != path.read_bytes()]
    refuse(seeded, [(foreign, f"are not trials of {TABLE}"), (differ, f"differ from their copy in {other.name}/")],
           [path for path in paths if path.stem in keys] + sorted(other.glob("*.json")), f" (with {other.name}/'s)")
    return paths


def teacher_free_reruns(table_runs: dict, seeded_runs: dict) -> list[tuple[str, str, int, bool]]:
    """(row, task, seed, same dev predictions) for every trial of a :data:`TEACHER_FREE` row both readings have: a
    student that never reads the teacher must come out the same whatever teacher the trial's folder was run with."""
    return [(row, task, seed, result["dev_predictions"] == table_runs[(row, task)][seed]["dev_predictions"])
            for (row, task), seeds in sorted(seeded_runs.items()) if row in TEACHER_FREE
            for seed, result in sorted(seeds.items()) if seed in table_runs.get((row, task), {})]


def seeded_render(directory: Path | None = None, seeded: Path | None = None) -> str:
    """The seeded rerun's reading against the closed table's (by default :func:`seeded_table` against
    :func:`closed_table`): its teachers, the teacher-free rows rerun exactly, every claim's gain, Holm p and verdict
    both ways, and every row's mean; interim until all trials have run."""
    directory = closed_table() if directory is None else directory
    seeded = seeded_table() if seeded is None else seeded
    paths = seeded_files(seeded)
    table, mine = reading(directory), reading(seeded)
    done, total = finished(mine.runs), table_total()
    lines = [f"# CPU protocol v2 rerun on seeded teachers: {done} of {total} trials", "",
             "The table again, every trial, distilled from the teachers its keys give since session 15's seeding fix: each "
             "head is drawn from its key's seed, so any machine retrains them (and `TeacherMismatch` refuses any other), "
             "and every number here can be rerun. The closed table's teachers cannot be (their heads were drawn "
             "unseeded). `other_teacher/`'s 21 trials are this rerun's for their keys (copied here). Made by "
             "`rerun_seeded.sh` in a linked worktree, committed piecewise by `commit_trials.sh --seeded`. "
             + ("Complete: it replaces the closed table" + (" (whose trials are kept in `closed_139/`)." if promoted() else
                                                            ".") if done >= total else
                "Interim: a claim is tested on the seeds both of its rows have so far (`run.sh`'s order: seeds 1–5 of "
                "every row first)."), "", *teacher_lines(trial_files(directory), paths, "the seeded rerun")]
    reruns = teacher_free_reruns(table.runs, mine.runs)
    same = [entry for entry in reruns if entry[3]]
    if reruns:
        lines += ["", f"**Teacher-free rows rerun exactly:** {len(same)} of {len(reruns)} {'/'.join(LABELS[r] for r in TEACHER_FREE)} "
                  "trials here give the closed table's dev prediction on every example (their students never read the "
                  "teacher)" + ("." if len(same) == len(reruns) else "; not: " + ", ".join(
                      f"{LABELS[row]} {task_label(task)} seed {seed}" for row, task, seed, ok in reruns if not ok) + ".")]
    changed, compared = verdict_lines(table.tests, mine.tests, f"seeded rerun ({done} trials)", finished(table.runs))
    lines += ["", *compared, "", "| row | task | table: mean ± 95% CI (n) | seeded rerun |", "|---|---|---|---|",
              *row_lines(table.runs, mine.runs)]
    tested = sum(entry.test is not None for entry in mine.tests)
    lines += ["", f"{changed} of {tested} verdicts tested so far differ from the closed table's ({len(table.tests)} claims in all). "
              f"{done} of {total} trials. Made by: "
              "`PYTHONPATH=src python results/cpu_protocol_v2/paper_gap.py --seeded`."]
    return "\n".join(lines) + "\n"


def init_ablation(runs: dict, v1_dir: Path = V1) -> dict[str, dict[str, tuple[float, float] | None]]:
    """Issue 19's question — does the fine-tuned-teacher start shrink the differences between methods? — for
    the ALP-KD rows both tables have (:data:`WARM_ROWS`) against NKD, per task, as (v1, v2), on the seeds v1
    has (1–3; so that the count of seeds does not change how far means scatter): ``nkd`` NKD's mean accuracy;
    ``spread`` the mean over rows of |row mean − NKD mean|; ``agreement`` the share of dev examples on which a
    row's student predicts what the NKD student of the same seed predicts (mean over rows and seeds). v1 =
    ``results/cpu_protocol`` (``init: teacher``), v2 = this table (``init: pretrained``); None: no data yet."""
    tables = {"v1": load_runs(v1_dir)[0] if v1_dir.is_dir() else {}, "v2": runs}
    v1_seeds = {seed for seeds in tables["v1"].values() for seed in seeds}
    out: dict[str, dict[str, tuple[float, float] | None]] = {}
    for task in TASKS:
        figures = {"nkd": [], "spread": [], "agreement": []}
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
            figures["spread"].append(100 * float(np.mean(
                [abs(float(np.mean([accuracy(r) for r in seeds.values()])) - nkd_mean) for seeds in rows])))
            agree = [np.mean(np.asarray(seeds[s]["dev_predictions"]) == np.asarray(nkd[s]["dev_predictions"]))
                     for seeds in rows for s in seeds if s in nkd]
            figures["agreement"].append(100 * float(np.mean(agree)) if agree else None)
        out[task] = {name: None if None in values else tuple(values) for name, values in figures.items()}
    return out


def ablation_cell(figures: dict[str, tuple[float, float] | None]) -> str:
    if figures["spread"] is None:
        return "–"
    (s1, s2), (a1, a2) = figures["spread"], figures["agreement"]
    if s2 > s1 and a2 < a1:
        said = "seen: v2's rows differ more"
    elif s2 <= s1 and a2 >= a1:
        said = "not seen: v2's rows are as alike or more"
    else:
        said = "mixed"
    return f"mean \\|row − NKD\\| {s1:.2f} → {s2:.2f} points; same prediction as NKD {a1:.1f}% → {a2:.1f}%: {said}"


def finished(runs: dict) -> int:
    return sum(len(seeds) for seeds in runs.values())


def named(entries: list[ClaimTest]) -> str:
    """``"TED > KD on MRPC and SST-2; LWD > KD on SST-2"``: the claims of ``entries`` with their tasks, in order."""
    tasks: dict[str, list[str]] = collections.defaultdict(list)
    for entry in entries:
        tasks[entry.claim.split(" (", 1)[0]].append(task_label(entry.task))
    return "; ".join(f"{claim} on {' and '.join(labels)}" for claim, labels in tasks.items())


def verb(entries: list, plural: str) -> str:
    """``plural`` as its subject's count needs it: "1 points", "2 point"."""
    return plural + "s" if len(entries) == 1 else plural


def tally(tests: list[ClaimTest]) -> list[str]:
    """One line per paper: how many of its tested (claim, task) pairs hold, point the paper's way without
    holding, or point the other way — naming those that hold, those significant before correction only and
    those reversed."""
    lines = []
    for paper in dict.fromkeys(paper_of(entry.claim) for entry in tests):
        tested = [entry for entry in tests if paper_of(entry.claim) == paper and entry.test is not None]
        if not tested:
            continue
        kind = lambda *verdicts: [entry for entry in tested if entry.verdict in verdicts]  # noqa: E731
        holds, nominal = kind("holds"), kind("same direction; p < 0.05 before correction only")
        same = kind("same direction, not significant") + nominal
        significant, insignificant = kind("reversed, significant"), kind("reversed, not significant")
        reversed_, no_difference = significant + insignificant, kind("no difference")
        with_paper = [entry for entry in tested if entry.paper]
        excluded = [entry for entry in with_paper if entry.placement == "above"]
        lines.append(f"- {paper}: **{len(holds)} of {len(tested)}** (claim, task) pairs hold"
                     + (f" ({named(holds)})" if holds else "")
                     + f"; {len(same)} {verb(same, 'point')} the paper's way without holding ({len(nominal)} of them at p < 0.05 "
                     f"before correction{': ' + named(nominal) if nominal else ''}); {len(reversed_)} {verb(reversed_, 'point')} the other way "
                     + (f"({len(significant)} significantly: {named(significant)}"
                        + (f"; not significantly: {named(insignificant)}" if insignificant else "") + ")"
                        if significant else "(0 significantly)" + (f": {named(insignificant)}" if insignificant else ""))
                     + (f"; {len(no_difference)} {verb(no_difference, 'show')} no difference" if no_difference else "")
                     + (f"; the paper's own gain lies above our 95% CI in {len(excluded)} of the {len(with_paper)} pairs "
                        "it has numbers for" + (f" ({named(excluded)})" if excluded else "") if with_paper else "") + ".")
    return lines


def readme_block(directory: Path = HERE) -> str:
    """The README's v2 column, claim by claim (between the README's v2-reading markers): the gain,
    one-sided p and seeds per task, and the verdict — the same tests as ``render``."""
    runs, teacher, tests, ablation = reading(directory)
    done, total = finished(runs), table_total()
    counts = collections.Counter(paper_of(entry.claim) for entry in tests if entry.test is not None)
    families = ", ".join(f"{paper} {count}" for paper, count in counts.items())
    status = (f"**v2 complete: all {total} trials**" if done >= total else
              f"**v2 final: {done} of {total} trials** ({closed_reason(runs)})" if CLOSED else
              f"**v2 so far: {done} of {total} trials** (interim until all seeds have run; still running)")
    lines = [README_START, "",
             f"{status}; regenerated with the committed trials by `paper_gap.py`, full reading in "
             "`results/cpu_protocol_v2/tables/paper_gap.md`. Gains in accuracy points, seeds pooled; p: one-sided "
             f"paired bootstrap; a claim holds when its Holm-adjusted p over its paper's claims (here {families}) "
             "is < 0.05; \"paper +x: above our CI\": the paper's own gain (its regime) lies above our 95% intervals "
             "(bootstrap over dev examples, and t over the per-seed gains), so an effect that large is excluded here.",
             "", "| paper's claim | v2 MRPC | v2 SST-2 |", "|---|---|---|"]
    by_claim = collections.defaultdict(dict)
    for entry in tests:
        by_claim[entry.claim][entry.task] = entry.readme_cell()
    for claim, cells in by_claim.items():
        lines.append(f"| {claim} | {cells.get('mrpc', '–')} | {cells.get('sst2', '– (MRPC only)')} |")
    kept = []
    for task in TASKS:
        means = [np.mean([accuracy(r) for r in runs[(row, task)].values()]) for row in LABELS if runs.get((row, task))]
        if not means or task not in teacher:
            kept.append("–")
            continue
        low, high = (f"{100 * value / teacher[task]:.1f}" for value in (min(means), max(means)))
        kept.append(f"{low}% of the teacher" if low == high else f"{low}–{high}% of the teacher")
    lines.append(f"| the students keep most of the teacher (row means / teacher) | {kept[0]} | {kept[1]} |")
    lines += [f"| issue 19: the fine-tuned-teacher start (v1) shrinks method differences; RKD/CKD/ALP vs NKD, seeds 1–3, v1 → v2 | "
              f"{ablation_cell(ablation['mrpc'])} | {ablation_cell(ablation['sst2'])} |", "", *tally(tests), "", README_END]
    return "\n".join(lines) + "\n"


def write_readme_block(readme: Path = README, directory: Path = HERE) -> None:
    """Replace the block between the markers in ``readme`` (whole file written atomically)."""
    text = readme.read_text(encoding="utf-8")
    start, end = text.find(README_START), text.find(README_END)
    if start < 0 or end < start:
        raise ValueError(f"{readme}: no '{README_START}' … '{README_END}' block to write the v2 reading into")
    from bert_kd.jobs import write_file_atomically

    block = text[:start] + readme_block(directory) + text[end + len(README_END) + 1:]
    write_file_atomically(readme, lambda tmp: tmp.write_text(block, encoding="utf-8"))


def forest_figure(tests: list[ClaimTest], title: str = "", compare: list[ClaimTest] | None = None,
                  compare_label: str = ""):
    """One line per tested (claim, task): our gain with its 95% bootstrap interval (thick; filled when the claim
    holds after Holm) and the t-interval over per-seed gains (thin), the paper's own gain (×) where it has one,
    0 dashed. Read it as: × right of both bars = the paper's effect is excluded here. ``compare``: the same claims
    in another reading (e.g. with other teachers' trials added), drawn in grey just above each line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    tested = [entry for entry in tests if entry.test is not None]
    height = 1.2 + 0.32 * max(len(tested), 1)
    fig, ax = plt.subplots(figsize=(8.0, height))
    for y, entry in enumerate(reversed(tested)):
        t = entry.test
        colour = "tab:green" if entry.verdict == "holds" else "tab:red" if t.gain < 0 else "tab:blue"
        if entry.by_seed is not None:
            ax.plot(entry.by_seed, [y - 0.18] * 2, color=colour, linewidth=1, alpha=0.7)
        ax.plot([100 * t.low, 100 * t.high], [y, y], color=colour, linewidth=3, solid_capstyle="butt")
        ax.plot(100 * t.gain, y, "o", color=colour, markerfacecolor=colour if entry.verdict == "holds" else "white")
        if entry.paper_gain is not None:
            ax.plot(entry.paper_gain, y, "x", color="black", markersize=7)
        other = next((c for c in compare or [] if (c.claim, c.task) == (entry.claim, entry.task) and c.test), None)
        if other is not None:
            ax.plot([100 * other.test.low, 100 * other.test.high], [y + 0.28] * 2, color="grey", linewidth=2,
                    solid_capstyle="butt")
            ax.plot(100 * other.test.gain, y + 0.28, "o", color="grey",
                    markerfacecolor="grey" if other.verdict == "holds" else "white", markersize=4)
    ax.set_yticks(range(len(tested)), [f"{entry.claim.split(' (', 1)[0]} · {task_label(entry.task)}"
                                       for entry in reversed(tested)], fontsize=7)
    ax.axvline(0, color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel("gain, accuracy points (better row − worse row)")
    ax.grid(axis="x", alpha=0.3)
    handles = [Line2D([], [], color="tab:blue", linewidth=3, label="our gain, 95% bootstrap CI (dev examples)"),
               Line2D([], [], color="tab:blue", linewidth=1, label="95% t-interval over per-seed gains"),
               Line2D([], [], color="tab:green", marker="o", linewidth=3, label="holds after Holm"),
               Line2D([], [], color="tab:red", linewidth=3, label="reversed"),
               Line2D([], [], color="black", marker="x", linestyle="", label="the paper's gain (its regime)")]
    if compare:
        handles.append(Line2D([], [], color="grey", marker="o", linewidth=2, label=compare_label))
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=7, frameon=False)
    if title:
        ax.set_title(title, fontsize=9)
    fig.tight_layout(rect=(0, 0.5 / height, 1, 1))  # half an inch for the legend
    return fig


def write_forest(directory: Path = HERE, target: Path | None = None, other: Path | None = None,
                 seeded: Path | None = None) -> Path:
    """``tables/paper_gap.png``: :func:`forest_figure` of the folder's reading, written atomically; with ``other``
    (``--other-teacher``: ``tables/paper_gap_other_teacher.png``) the reading with ``other``'s trials added in grey;
    with ``seeded`` (``--seeded``: ``tables/paper_gap_seeded.png``) that folder's own reading in grey."""
    from bert_kd.jobs import write_file_atomically

    if seeded is not None:
        table, mine = reading(directory), reading(seeded)
        fig = forest_figure(table.tests, f"CPU protocol v2: the closed table ({finished(table.runs)} trials, colour) and the "
                            f"seeded rerun ({finished(mine.runs)} of {table_total()}, grey)", mine.tests,
                            "seeded rerun (reproducible teachers): gain, bootstrap CI")
        target = target or HERE / "tables" / "paper_gap_seeded.png"
    elif other is None:
        runs, _, tests, _ = reading(directory)
        fig = forest_figure(tests, f"CPU protocol v2: the papers' ordering claims, {finished(runs)} of {table_total()} trials")
        target = target or HERE / "tables" / "paper_gap.png"
    else:
        runs, filled, tests, after = filled_reading(directory, other)
        fig = forest_figure(tests, f"CPU protocol v2: the table ({finished(runs)} trials, colour) and with other_teacher/ "
                            f"({finished(filled)} of {table_total()}, grey)", after,
                            f"with other_teacher/ (+{finished(filled) - finished(runs)}, another teacher): gain, bootstrap CI")
        target = target or HERE / "tables" / "paper_gap_other_teacher.png"
    write_file_atomically(target, lambda tmp: fig.savefig(str(tmp), dpi=120, format="png", metadata={"Software": None}))
    import matplotlib.pyplot as plt

    plt.close(fig)
    return target


def main(argv: list[str] | None = None) -> None:
    """``paper_gap.py``: the table's reading (``tables/paper_gap.{md,png}``, the README block); ``--other-teacher``:
    only ``tables/paper_gap_other_teacher.{md,png}`` (:func:`other_teacher_render`, :func:`write_forest`); ``--seeded``:
    only ``tables/paper_gap_seeded.{md,png}`` (:func:`seeded_render`)."""
    from bert_kd.jobs import write_file_atomically

    if argv and argv not in (["--other-teacher"], ["--seeded"]):
        raise SystemExit(f"paper_gap.py: unknown arguments {argv}; the options are --other-teacher or --seeded")
    if argv:
        seeded = argv == ["--seeded"]
        text = seeded_render() if seeded else other_teacher_render()
        name = "paper_gap_seeded.md" if seeded else "paper_gap_other_teacher.md"
        write_file_atomically(HERE / "tables" / name, lambda tmp: tmp.write_text(text, encoding="utf-8"))
        write_forest(closed_table(), **({"seeded": seeded_table()} if seeded else {"other": OTHER_TEACHER}))
        sys.stdout.write(text)
        return
    text = render()
    write_file_atomically(HERE / "tables" / "paper_gap.md", lambda tmp: tmp.write_text(text, encoding="utf-8"))
    write_readme_block()
    write_forest()
    sys.stdout.write(text)


if __name__ == "__main__":
    main(sys.argv[1:])
