"""What the paired ablation benchmarks share (``general_ablation.py``, ``transfer_ablation.py``): a trial is one
``kedro run`` of a pipeline with dotted parameters, kept as one JSON file (a finished trial is skipped on resume),
and a claim "arm A beats arm B on a task" is read from the trials' per-example dev correctness with the project's
statistics (``bert_kd.analysis.statistics``: the paired bootstrap over dev examples with the seeds pooled, and the
seed × example variance model where there are ≥ 2 seeds)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
#: Where the students' versioned metrics land (the catalog's ``{paper}.{method}.student_metrics``).
STUDENT_METRICS = Path("data/08_reporting/students")
#: Where the teachers' versioned dev metrics land (the catalog's ``teacher_metrics``).
TEACHER_METRICS = Path("data/08_reporting/teacher_metrics.json")
#: Bootstrap resamples of a reading: the statistics module's (a Monte Carlo error ≈ 2·10⁻⁴ at p ≈ 0.005).
RESAMPLES: int | None = None


def nest(dotted: dict) -> dict:
    """``{"student.init": x}`` → ``{"student": {"init": x}}``: Kedro's runtime parameters as a tree."""
    tree: dict = {}
    for key, value in dotted.items():
        node = tree
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree


def _versions(path: Path) -> set[Path]:
    return set(path.iterdir()) if path.is_dir() else set()


def run_pipeline(pipeline: str, params: dict, metrics: str, root: Path = ROOT) -> dict:
    """One ``kedro run --pipelines=<pipeline>`` in a session on ``root`` with the dotted ``params``; the student
    evaluation this run wrote (``<metrics>_metrics.json``: dev metrics and per-example correctness)."""
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    bootstrap_project(root)
    store = root / STUDENT_METRICS / f"{metrics}_metrics.json"
    before = _versions(store)
    with KedroSession.create(project_path=root, runtime_params=nest(params)) as session:
        session.run(pipeline_names=[pipeline])
    written = sorted(_versions(store) - before) or sorted(_versions(store))
    return json.loads((written[-1] / store.name).read_text())


def teacher_of(evaluation: dict, root: Path = ROOT) -> dict | None:
    """The dev metrics of the teacher a student was distilled from (its store key matched against the versioned
    ``teacher_metrics`` records under ``root``, newest first); None where no record has that key."""
    key = evaluation.get("info", {}).get("teacher_key")
    for version in sorted(_versions(root / TEACHER_METRICS), reverse=True):
        record = json.loads((version / TEACHER_METRICS.name).read_text())
        if key and record.get("info", {}).get("key") == key:
            return {"key": key, "metrics": record["metrics"], "majority_class": record.get("majority_class", {})}
    return None


def teacher_accuracy(trial: dict) -> float:
    """The recorded dev accuracy of the trial's teacher (nan where the trial has none)."""
    return split_accuracy((trial.get("teacher") or {}).get("metrics", {}))


def trial_path(results: Path, *parts) -> Path:
    """``<results>/trials/<part>-<part>-….json``."""
    return results / "trials" / ("-".join(str(part) for part in parts) + ".json")


def write_trial(path: Path, trial: dict) -> None:
    """The trial as indented JSON, written whole (a temporary file renamed) or not at all."""
    from bert_kd.core.files import write_file_atomically

    write_file_atomically(path, lambda tmp: tmp.write_text(json.dumps(trial, indent=1)))


def run_missing(results: Path, keys, run) -> None:
    """``run(*key)`` for every key (a trial file's name parts) whose trial is missing; each written as it ends."""
    for key in keys:
        path = trial_path(results, *key)
        if path.exists():
            continue
        trial = run(*key)
        write_trial(path, trial)
        print(f"{path.name}: {trial['evaluation']['metrics']}", flush=True)


def rebuild_table(results: Path, table) -> int:
    """``<results>/table.md`` = ``table(trials)`` of every trial there, printed too."""
    from bert_kd.core.files import write_file_atomically

    text = table(load_trials(results))
    write_file_atomically(results / "table.md", lambda tmp: tmp.write_text(text))
    print(text)
    return 0


def load_trials(results: Path) -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted((results / "trials").glob("*.json"))]


def correctness(trial: dict) -> np.ndarray:
    """The 0/1 dev correctness of a trial's student (the validation split, else the first split)."""
    correct = trial["evaluation"]["correct"]
    split = "validation" if "validation" in correct else sorted(correct)[0]
    return np.array([c == "1" for c in correct[split]], dtype=np.int8)


def select(trials: list[dict], **match) -> dict[int, dict]:
    """The trials whose fields equal ``match``, by seed."""
    return {t["seed"]: t for t in trials if all(t.get(key) == value for key, value in match.items())}


#: An arm whose mean dev accuracy is within this of the majority class's share (accuracy, not points) sits at the
#: floor: its student (or the teacher it learned from) predicts about one class, and a gain between two such arms
#: says nothing about the method.
FLOOR = 0.01


def split_accuracy(by_split: dict) -> float:
    """The accuracy of ``{split: {"accuracy": …}}`` on the validation split, else the first split (nan if none)."""
    return float(by_split.get("validation", next(iter(by_split.values()), {})).get("accuracy", math.nan))


def majority_share(trial: dict) -> float:
    """The dev accuracy of always answering the majority class, as the trial's evaluation recorded it (nan if not)."""
    return split_accuracy(trial["evaluation"].get("majority_class", {}))


@dataclass(frozen=True)
class Teachers:
    """The teachers of the seeds both arms have: their mean dev accuracy and the seeds whose teacher is at the floor."""

    accuracy: float
    at_floor: tuple[int, ...]

    @property
    def cell(self) -> str:
        return "–" if math.isnan(self.accuracy) else f"{100 * self.accuracy:.2f}"


def teachers(one: dict[int, dict], other: dict[int, dict]) -> Teachers:
    """The teachers of two arms' shared seeds (a seed's arms share one teacher), from ``one``'s ``teacher`` records."""
    seeds = sorted(set(one) & set(other))
    accuracies = [teacher_accuracy(one[s]) for s in seeds]
    floor = tuple(s for s, a in zip(seeds, accuracies) if abs(a - majority_share(one[s])) < FLOOR)
    return Teachers(float(np.mean(accuracies)) if seeds else math.nan, floor)


@dataclass(frozen=True)
class Paired:
    """The paired reading of ``better`` against ``worse`` on the seeds both have (accuracies, not points)."""

    seeds: int
    better: float  # mean dev accuracy
    worse: float
    test: object  # statistics.TestResult: gain, interval, bootstrap p and its Monte Carlo error
    seed_example_p: float  # the analytic p under the seed × example model (nan with one seed)
    majority: float = math.nan  # the majority class's share of dev (the accuracy of answering it always)

    @property
    def seeds_text(self) -> str:
        return f"{self.seeds} seed{'s' if self.seeds != 1 else ''}"

    @property
    def seed_example_cell(self) -> str:
        """The seed × example model's p for a table cell: "–" with one seed (it needs two)."""
        return "–" if math.isnan(self.seed_example_p) else f"{self.seed_example_p:.3f}"

    @property
    def at_floor(self) -> bool:
        """Both arms within :data:`FLOOR` of the majority class's share: no reading of the method."""
        return all(abs(arm - self.majority) < FLOOR for arm in (self.better, self.worse))


def paired(better: dict[int, dict], worse: dict[int, dict]) -> Paired | None:
    """The paired bootstrap and the seed × example model of two arms' trials (by seed); None without a shared seed."""
    from bert_kd.analysis.statistics import RESAMPLES as DEFAULT
    from bert_kd.analysis.statistics import analytic_p, bootstrap_test, variance_components

    seeds = sorted(set(better) & set(worse))
    if not seeds:
        return None
    a = np.stack([correctness(better[s]) for s in seeds])
    b = np.stack([correctness(worse[s]) for s in seeds])
    test = bootstrap_test(a, b, resamples=RESAMPLES or DEFAULT)
    components = variance_components(a, b) if len(seeds) > 1 else None
    p2 = analytic_p(test.gain, components.gain_variance() ** 0.5) if components else math.nan
    majority = float(np.mean([majority_share(better[s]) for s in seeds]))
    return Paired(len(seeds), float(a.mean()), float(b.mean()), test, p2, majority)
