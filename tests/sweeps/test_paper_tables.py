from __future__ import annotations

import re

import pytest

from bert_kd.sweeps.paper_tables import build_report, markdown, write_report
from bert_kd.sweeps.spec import build_sweep
from tests.sweeps.conftest import RECIPES, dev_labels, fake_run_trial, tiny_reproduce

CELL = re.compile(r"^\d+\.\d\d ± \d+\.\d\d \(\d\)\*?$")


def test_table_has_mean_std_n_teacher_average_and_marks_the_better_method(tmp_path):
    sweep = build_sweep(tiny_reproduce(), RECIPES)
    results = {t.key: fake_run_trial(t) for t in sweep.trials()}
    report = build_report(sweep, results, resamples=200)
    assert list(report.wide.columns) == ["RTE", "SST-2", "Average", "% of teacher"]
    assert list(report.wide.index) == ["Teacher", "Majority class", "NKD", "ALP"]
    assert report.wide.loc["Teacher", "RTE"] == "95.00"
    labels = dev_labels()  # the fake trials' dev labels: the floor is the most frequent label's share
    assert report.wide.loc["Majority class", "RTE"] == f"{100 * max(labels.mean(), 1 - labels.mean()):.2f}"
    for label in ("NKD", "ALP"):
        for column in ("RTE", "SST-2", "Average"):
            assert CELL.match(report.wide.loc[label, column]), report.wide.loc[label, column]
            assert "(2)" in report.wide.loc[label, column]
    assert report.wide.loc["ALP", "RTE"].endswith("*") and not report.wide.loc["NKD", "RTE"].endswith("*")
    alp_rte = report.long[(report.long.method == "alp") & (report.long.task == "rte")].iloc[0]
    assert alp_rte["n"] == 2 and alp_rte["p_value"] < 0.05 and "learning_rate=5e-05" in alp_rte["chosen"]
    assert (
        "best epoch on the dev set itself" in report.caption
        and "the best of up to 2 grid points per (method, task, seed)" in report.caption
        and "gain over NKD" in report.caption
    )

    paths = write_report(report, tmp_path, "tiny")
    assert paths["png"].stat().st_size > 1000 and paths["png"].read_bytes()[:4] == b"\x89PNG"
    assert "| Model | RTE | SST-2 | Average | % of teacher |" in paths["md"].read_text()
    assert paths["csv"].read_text().startswith("method,label,task,mean,std,n")
    assert markdown(report).count("\n| ") == 4


def test_missing_seed_shows_in_n():
    sweep = build_sweep(tiny_reproduce(), RECIPES)
    results = {t.key: fake_run_trial(t) for t in sweep.trials() if not (t.method == "alp" and t.seed == 2)}
    report = build_report(sweep, results, resamples=50)
    assert "(1)" in report.wide.loc["ALP", "RTE"] and "(2)" in report.wide.loc["NKD", "RTE"]


def test_caption_says_there_was_no_selection_when_one_grid_point_finished():
    sweep = build_sweep(tiny_reproduce(), RECIPES)
    one_point = {}
    for t in sweep.trials():
        one_point.setdefault(t.group, t)  # the first grid point of every (method, task, seed)
    report = build_report(sweep, {t.key: fake_run_trial(t) for t in one_point.values()}, resamples=50)
    assert "Grid selection: none" in report.caption and "best epoch on the dev set itself" in report.caption
    full = build_report(sweep, {t.key: fake_run_trial(t) for t in sweep.trials()}, resamples=50)
    assert "the best of up to 2 grid points" in full.caption


def test_a_sweep_where_every_method_predicts_the_majority_class_says_so():
    import numpy as np

    from bert_kd.sweeps.paper_tables import build_report
    from bert_kd.sweeps.spec import build_sweep
    from tests.sweeps.conftest import RECIPES, dev_labels, fake_run_trial, tiny_reproduce

    sweep = build_sweep(tiny_reproduce(), RECIPES)
    labels = dev_labels()
    majority = int(np.bincount(labels).argmax())

    def majority_only(spec):
        return {
            **fake_run_trial(spec),
            "dev_metric": float(np.mean(labels == majority)),
            "dev_predictions": [majority] * len(labels),
        }

    tied = build_report(sweep, {s.key: majority_only(s) for s in sweep.trials()}, resamples=20)
    assert len(tied.warnings) == 2 and all("ties with the majority class" in w for w in tied.warnings)
    assert tied.warnings[0].startswith("RTE: ")
    clear = build_report(sweep, {s.key: fake_run_trial(s) for s in sweep.trials()}, resamples=20)
    assert clear.warnings == ()  # ALP is 20 points above NKD here


def test_seeds_of_one_row_from_different_teachers_are_named_under_the_table():
    """A row whose seeds report two teacher dev scores (the same teacher settings retrained into other
    weights, e.g. on a CPU with other fp32 kernels) is named with its seeds under the table."""
    table = tiny_reproduce()
    table["tables"]["tiny"]["seeds"] = [1, 2, 3, 4]
    sweep = build_sweep(table, RECIPES)
    results = {t.key: fake_run_trial(t) for t in sweep.trials()}
    assert build_report(sweep, results, resamples=20).mixed_teachers == ()
    assert "Mixed teachers" not in markdown(build_report(sweep, results, resamples=20))
    for trial in sweep.trials():
        if trial.method == "alp" and trial.task == "rte" and trial.seed in (2, 4):
            results[trial.key]["teacher_dev_metric"] = 0.9681
    report = build_report(sweep, results, resamples=20)
    assert report.mixed_teachers == ("RTE, alp: teacher 95.00 (seeds 1, 3), 96.81 (seeds 2, 4)",)
    assert "**Mixed teachers**" in markdown(report) and "RTE, alp: teacher 95.00 (seeds 1, 3)" in markdown(report)


def test_a_multi_teacher_row_is_compared_teacher_by_teacher_when_every_seed_recorded_each():
    """Two seeds whose best teacher scores the same but whose second teacher differs are mixed teachers; a row where
    one seed lacks the per-teacher record falls back to the best teacher (no false alarm on old trials)."""
    from types import SimpleNamespace

    from bert_kd.sweeps.paper_tables import teacher_mismatches

    def seed(*accuracies, per_slot=True):
        result = {"teacher_dev_metric": max(accuracies), "teacher_dev_metrics": {"accuracy": max(accuracies)}}
        if per_slot:
            result["teachers_dev_metrics"] = [{"accuracy": a} for a in accuracies]
        return SimpleNamespace(result=result)

    row = {1: seed(0.80, 0.75), 2: seed(0.80, 0.75), 3: seed(0.80, 0.76)}
    assert teacher_mismatches({("two", "mrpc"): row}) == (
        "MRPC, two: teachers 80.00 / 75.00 (seeds 1, 2), 80.00 / 76.00 (seed 3)",
    )
    row[1] = seed(0.80, 0.75, per_slot=False)  # written before 2026-11-25: the best teacher only
    assert teacher_mismatches({("two", "mrpc"): row}) == ()
    assert teacher_mismatches({("two", "mrpc"): {1: seed(0.80, 0.75), 2: seed(0.80, 0.75)}}) == ()


def test_seed_lists_collapse_runs_of_three():
    from bert_kd.sweeps.paper_tables import _seed_list

    assert _seed_list([8, 1, 2, 3, 4, 5, 7]) == "1–5, 7, 8"
    assert _seed_list([9, 10]) == "9, 10" and _seed_list([6]) == "6"


def test_report_states_the_metric_and_keeps_the_combined_score():
    """Cells in the paper's metric (MRPC: accuracy), caption says so, CSV keeps (acc + F1)/2."""
    table = tiny_reproduce(seeds="1")
    table["tables"]["tiny"]["tasks"] = ["mrpc"]
    sweep = build_sweep(table, RECIPES)
    results = {}
    for trial in sweep.trials():
        result = fake_run_trial(trial)
        accuracy = result["dev_metric"]
        result["dev_metrics"] = {"accuracy": accuracy, "f1": 0.9, "combined": (accuracy + 0.9) / 2}
        result["dev_metric"] = result["dev_metrics"]["combined"]
        result["teacher_dev_metrics"] = {"accuracy": 0.8, "f1": 0.9, "combined": 0.85}
        results[trial.key] = result
    report = build_report(sweep, results, resamples=50)
    assert "MRPC: accuracy" in report.caption
    assert report.wide.loc["Teacher", "MRPC"] == "80.00"
    row = report.long[(report.long.method == "alp") & (report.long.task == "mrpc")].iloc[0]
    assert row["metric"] == "accuracy" and row["combined_metric"] == "combined"
    assert row["combined_mean"] == pytest.approx((row["mean"] + 0.9) / 2)


def test_a_table_without_trials_shows_no_share_for_a_missing_teacher():
    """An empty results folder (``results_only``): no trial recorded the teacher, so its row keeps nothing, not 100%."""
    sweep = build_sweep(tiny_reproduce(), RECIPES)
    empty = build_report(sweep, {}, resamples=20)
    assert list(empty.wide.loc["Teacher"]) == ["–", "–", "–", "–"]
    full = build_report(sweep, {t.key: fake_run_trial(t) for t in sweep.trials()}, resamples=20)
    assert full.wide.loc["Teacher", "% of teacher"] == "100"
