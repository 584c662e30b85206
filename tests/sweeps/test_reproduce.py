from __future__ import annotations

import pytest

from bert_kd.sweeps.reproduce import reproduce, table_name
from bert_kd.sweeps.scheduler import SweepTrialsFailedError
from bert_kd.sweeps.spec import build_sweep
from tests.sweeps.conftest import RECIPES, fake_run_trial, tiny_reproduce


def test_reproduce_writes_the_table_files(tmp_path):
    params = {
        **tiny_reproduce(),
        "storage": f"sqlite:///{tmp_path}/optuna.db",
        "bootstrap": {"resamples": 50, "seed": 0},
    }
    report, paths = reproduce(params, RECIPES, fake_run_trial, tmp_path / "out")
    # the table has a learning-rate grid: the expected-best-score-vs-trials curve is written beside it
    assert sorted(p.name for p in paths.values()) == [
        "tiny.csv",
        "tiny.md",
        "tiny.png",
        "tiny_budget.csv",
        "tiny_budget.png",
    ]
    assert "(2)" in report.wide.loc["ALP", "RTE"]


def test_a_restricted_run_writes_its_own_table_never_the_committed_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    committed = tmp_path / "results/tiny/tables"
    committed.mkdir(parents=True)
    (committed / "tiny.md").write_text("the committed table\n")
    params = {
        **tiny_reproduce(seeds="1", methods="nkd"),
        "storage": f"sqlite:///{tmp_path}/optuna.db",
        "bootstrap": {"resamples": 50, "seed": 0},
    }
    for output_dir in (None, committed):  # not even when told to write there
        _, paths = reproduce(params, RECIPES, fake_run_trial, output_dir, committed_dir=committed)
        assert paths["md"].resolve() == tmp_path / "data/08_reporting/reproduce/tiny__methods-nkd__seeds-1.md"
    assert (committed / "tiny.md").read_text() == "the committed table\n"
    assert sorted(p.name for p in committed.iterdir()) == ["tiny.md"]
    _, paths = reproduce({**params, "seeds": None, "methods": None}, RECIPES, fake_run_trial, committed_dir=committed)
    assert paths["md"] == committed / "tiny.md" and "the committed table" not in paths["md"].read_text()


def test_table_name_says_the_restriction_and_the_data_changes():
    full = build_sweep(tiny_reproduce(), RECIPES)
    assert table_name(full, tiny_reproduce()) == "tiny"
    assert (
        table_name(build_sweep(tiny_reproduce(tasks="rte sst2"), RECIPES), tiny_reproduce(tasks="rte sst2")) == "tiny"
    )
    assert table_name(full, tiny_reproduce(), {"max_train_samples": 64}) == "tiny__max_train_samples-64"
    restricted = tiny_reproduce(tasks="rte", grid="training.learning_rate=1e-5|5e-5", methods=["alp"])
    assert table_name(build_sweep(restricted, RECIPES), restricted, {"glue": "0a1b2c3d"}) == (
        "tiny__tasks-rte__methods-alp__glue-0a1b2c3d"
    )  # the grid names every value: not a restriction, not named
    one_lr = tiny_reproduce(grid="training.learning_rate=1e-5")
    assert table_name(build_sweep(one_lr, RECIPES), one_lr) == "tiny__grid-training.learning_rate=1e-5"


def test_unwired_runner_says_what_to_pass(tmp_path):
    params = {**tiny_reproduce(seeds="1", methods="nkd", tasks="rte"), "storage": f"sqlite:///{tmp_path}/o.db"}
    with pytest.raises(SweepTrialsFailedError) as failed:  # the partial table is written, then the run fails
        reproduce(params, RECIPES, output_dir=tmp_path)
    assert failed.value.report.wide.loc["NKD", "RTE"] == "–"
    assert "pass run_trial=" in failed.value.what and failed.value.paths["md"].exists()


def test_trials_that_fail_end_the_run_with_an_error_after_a_partial_table_never_the_committed_one(
    tmp_path, monkeypatch
):
    """A whole-table run in which some trials raise: the finished ones are in a partial table outside the
    committed folder, and the run ends with one error naming how many failed, the first one and the fix."""
    monkeypatch.chdir(tmp_path)
    committed = tmp_path / "results/tiny/tables"
    committed.mkdir(parents=True)
    (committed / "tiny.md").write_text("the committed table\n")
    trials = build_sweep(tiny_reproduce(), RECIPES).trials()
    broken = {t.key for t in trials if t.recipe.get("method") == "nkd"}

    def run_trial(spec):
        if spec.key in broken:
            raise RuntimeError("CUDA out of memory\nsecond line")
        return fake_run_trial(spec)

    params = {**tiny_reproduce(), "storage": f"sqlite:///{tmp_path}/o.db", "bootstrap": {"resamples": 50, "seed": 0}}
    with pytest.raises(SweepTrialsFailedError) as failed:
        reproduce(params, RECIPES, run_trial, committed_dir=committed)
    error = failed.value
    assert set(error.failures) == broken and all(
        m == "RuntimeError: CUDA out of memory" for m in error.failures.values()
    )
    assert error.what.startswith(f"{len(broken)} of {len(trials)} trials failed in this worker: ")
    assert "run the same command again" in error.fix and str(error.paths["md"]) in error.where
    assert error.paths["md"].resolve().parent == tmp_path / "data/08_reporting/reproduce"
    assert (committed / "tiny.md").read_text() == "the committed table\n"
    assert error.report.wide.loc["NKD", "RTE"] == "–" and error.report.wide.loc["ALP", "RTE"] != "–"
    _, paths = reproduce(params, RECIPES, fake_run_trial, committed_dir=committed)  # fixed: retried, the table whole
    assert paths["md"] == committed / "tiny.md" and "the committed table" not in paths["md"].read_text()


def test_a_run_whose_params_change_trials_is_never_the_committed_table(tmp_path, monkeypatch):
    """A whole-table run whose ``run_trial`` reports ``setting_changes`` (--params that change trial keys)."""
    monkeypatch.chdir(tmp_path)
    committed = tmp_path / "results/tiny/tables"
    committed.mkdir(parents=True)

    class Variant:
        def __call__(self, spec):
            return fake_run_trial(spec)

        def setting_changes(self, trials):
            return {"params": "0a1b2c3d"}

    params = {
        **tiny_reproduce(),
        "storage": f"sqlite:///{tmp_path}/optuna.db",
        "bootstrap": {"resamples": 50, "seed": 0},
    }
    _, paths = reproduce(params, RECIPES, Variant(), committed_dir=committed)
    assert paths["md"].resolve() == tmp_path / "data/08_reporting/reproduce/tiny__params-0a1b2c3d.md"
    assert not list(committed.iterdir())


def test_results_only_with_missing_trials_never_writes_over_the_committed_table(tmp_path, monkeypatch, caplog):
    """A results folder with the tables but not (all) the trial JSONs (a wrong path, a git clean):
    the partial table goes to data/08_reporting/reproduce/, the committed one stays, the log says how many
    trials are missing."""
    monkeypatch.chdir(tmp_path)
    committed = tmp_path / "results/tiny/tables"
    committed.mkdir(parents=True)
    (committed / "tiny.md").write_text("the committed table\n")
    full = build_sweep(tiny_reproduce(), RECIPES)
    kept = {t.key for t in full.trials()[:1]}

    class StoredHalf:
        results_dir = tmp_path / "results/tiny"

        def __call__(self, spec):
            raise AssertionError("results_only trains nothing")

        def stored_result(self, spec):
            return fake_run_trial(spec) if spec.key in kept else None

    params = {**tiny_reproduce(), "bootstrap": {"resamples": 50, "seed": 0}}
    for output_dir in (None, committed):  # not even when told to write there
        with caplog.at_level("WARNING"):
            _, paths = reproduce(params, RECIPES, StoredHalf(), output_dir, committed_dir=committed, results_only=True)
        assert paths["md"].resolve().parent == tmp_path / "data/08_reporting/reproduce"
    assert (committed / "tiny.md").read_text() == "the committed table\n"
    assert sorted(p.name for p in committed.iterdir()) == ["tiny.md"]
    missing = len(full.trials()) - 1
    assert any(
        f"{missing} of {len(full.trials())} trials" in r.getMessage()
        and "data/08_reporting/reproduce" in r.getMessage()
        for r in caplog.records
    )
