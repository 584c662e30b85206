"""The job-path ``run_trial``: a tiny 2 × 2 × 2 sweep through real teachers and students."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest

from bert_kd.sweeps.reproduce import reproduce
from bert_kd.sweeps.spec import build_sweep
from bert_kd.sweeps.trial import TrialRunner, cut_heldout
from bert_kd.sweeps.trial_results import ResultsFolder, TeacherMismatch
from tests.conftest import SHARED_GLUE

TINY = {"epochs": 1, "batch_size": 8, "eval_batch_size": 16}
RECIPES = {
    "distill_methods": {
        "nkd": {"method": "nkd"},
        "alp": {"method": "alp", "mapping": "all", "temperature": 5.0, "weights": {"kd": 0.5, "layer": 0.2}},
    },
    "ted_methods": {"ted": {"method": "ted", "temperature": 2.0, "weights": {"ce": 1.0, "pred": 1.0, "ted": 100.0}}},
    "multi_teacher_configs": {"two": {"method": "multi_teacher", "alpha": 0.2, "beta": 0.5, "temperature": 5.0}},
}


def project_params(teacher_dir, glue_dir) -> dict:
    return {
        "glue_dir": str(glue_dir),
        "seed": 42,
        "teacher": {"model": str(teacher_dir), "max_seq_length": 32, "training": TINY},
        "student": {"num_layers": 2, "layer_selection": "first", "training": {**TINY, "aux_learning_rate": 1e-3}},
        "ted": {"mapping": "distilbert", "filters": {"arch": "linear", "student_filters": "copy", "training": TINY}},
        "ted_student": {
            "num_layers": 2,
            "layer_selection": "distilbert",
            "training": {**TINY, "aux_learning_rate": 1e-3},
        },
        "multi_teachers": [
            {"name": "a", "model": str(teacher_dir), "seed": 42, "max_seq_length": 32, "training": TINY},
            {"name": "b", "model": str(teacher_dir), "seed": 7, "max_seq_length": 32, "training": TINY},
        ],
        "multi_student": {
            "num_layers": 2,
            "layer_selection": "first",
            "init_from_teacher": 0,
            "training": {**TINY, "aux_learning_rate": 1e-3},
        },
        "teacher_cache": {"enabled": True, "batch_size": 16, "directory": "data/07_model_output/teacher_cache"},
        "runtime": {"progress_bar": False, "checkpoint_every_steps": 0},
        "tracking": {"enabled": False},
    }


def tiny_table(methods=None, selection="dev", **extra) -> dict:
    return {
        "table": "tiny",
        "storage": "sqlite:///optuna.db",
        **extra,
        "tables": {
            "tiny": {
                "tasks": ["rte", "sst2"],
                "seeds": [1, 2],
                "baseline": "nkd",
                "selection": selection,
                "student": {"num_layers": 2},
                "data": {"rte": {"max_train_samples": 40}},
                "grid": {"training.learning_rate": [1.0e-4]},
                "methods": methods
                or {"nkd": {"recipe": "distill_methods.nkd"}, "alp": {"recipe": "distill_methods.alp"}},
            }
        },
    }


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the job store (data/06_models/store) is relative to the project root
    return tmp_path


def test_sweep_runs_on_the_job_path_and_reruns_reuse_everything(workdir, tiny_teacher_dir, tiny_glue_dir, monkeypatch):
    train_and_evaluate = TrialRunner.train_and_evaluate
    runner = TrialRunner(
        project_params(tiny_teacher_dir, tiny_glue_dir), ResultsFolder(path=workdir / "results", commit="abc")
    )
    report, paths = reproduce(tiny_table(), RECIPES, runner, output_dir=workdir / "tables")
    # the fixture's GLUE files are not the release: a variant, whose trials are kept apart from the table's
    assert not list((workdir / "results").glob("*.json"))
    files = sorted((workdir / "results").glob("variants/tiny__glue-*/*.json"))
    assert len(files) == 8
    record = json.loads(files[0].read_text())
    assert (
        record["commit"] == "abc"
        and record["numerics"].startswith(("cpu ", "cuda "))
        and len(record["result"]["dev_predictions"]) == len(record["result"]["dev_labels"]) == 24
    )
    assert record["spec"]["data"]["max_train_samples"] in (40, None)
    shares = {
        json.loads(f.read_text())["spec"]["trial"]["method"]: json.loads(f.read_text())["result"]["gradient_shares"]
        for f in files
    }  # each term's share of the student's gradient, kept with the trial
    assert shares["nkd"] == {"ce": pytest.approx(1.0)} and set(shares["alp"]) == {"ce", "kd", "layer"}
    assert sum(shares["alp"].values()) == pytest.approx(1.0)
    teachers = list((workdir / "data/06_models/store/teacher").iterdir())
    assert len(teachers) == 2  # one per task: the teacher seed is not the trial seed
    rows = report.long[report.long.task != "Average"]
    assert set(rows.n) == {2} and rows["std"].notna().all()
    assert "±" in paths["md"].read_text() and "(2)" in paths["md"].read_text()

    # A rerun on the same study trains nothing; a fresh study (other machine, no db) reads the results folder.
    monkeypatch.setattr(TrialRunner, "train_and_evaluate", lambda self, spec: pytest.fail(f"retrained {spec.key}"))
    reproduce(tiny_table(), RECIPES, runner, output_dir=workdir / "tables")
    (workdir / "optuna.db").unlink()
    again, _ = reproduce(tiny_table(), RECIPES, runner, output_dir=workdir / "tables2")
    assert list(again.long["mean"]) == pytest.approx(list(report.long["mean"]), nan_ok=True)

    # A teacher that scores otherwise than the one the folder's trials recorded (the same settings retrained on
    # another CPU's kernels) is refused before its student trains.
    monkeypatch.setattr(TrialRunner, "train_and_evaluate", train_and_evaluate)
    first = next(t for t in build_sweep(tiny_table(), RECIPES).trials() if t.task == "rte" and t.method == "nkd")
    for other in files:
        record = json.loads(other.read_text())
        if record["spec"]["trial"]["task"] == "rte":
            record["result"]["teacher_dev_metrics"]["accuracy"] += 0.01
            other.write_text(json.dumps(record))
    runner.results.result_path(first).unlink()
    with pytest.raises(TeacherMismatch, match=r"same settings scoring \d+\.\d\d \(3 trials\)"):
        runner(first)


def test_cli_sizes_replace_the_tables_and_change_the_key(tiny_teacher_dir, tiny_glue_dir):
    spec = next(t for t in build_sweep(tiny_table(), RECIPES).trials() if t.task == "rte")
    params = project_params(tiny_teacher_dir, tiny_glue_dir)
    table_sized, cli_sized = (
        TrialRunner(params, ResultsFolder(commit="")),
        TrialRunner(params, ResultsFolder(commit=""), data_overrides={"max_train_samples": 16}),
    )
    assert table_sized.identity.data_sizes(spec)["max_train_samples"] == 40
    assert cli_sized.identity.data_sizes(spec)["max_train_samples"] == 16
    assert table_sized.content_key(spec) != cli_sized.content_key(spec)
    assert table_sized.identity.teacher_seed(spec) == 42 and spec.seed != 42
    import dataclasses

    relabelled = dataclasses.replace(spec, label="another label")
    retrain = TrialRunner(
        {**params, "teacher": {**params["teacher"], "retrain": True}, "runtime": {"progress_bar": True}},
        ResultsFolder(commit=""),
    )
    assert retrain.content_key(relabelled) == table_sized.content_key(spec)  # neither changes the result
    more_epochs = TrialRunner(
        {**params, "student": {**params["student"], "training": {**params["student"]["training"], "epochs": 3}}},
        ResultsFolder(commit=""),
    )
    assert more_epochs.content_key(spec) != table_sized.content_key(spec)


def test_heldout_slice_leaves_train_and_is_listed_first():
    import pandas as pd

    train = pd.DataFrame({"idx": range(20), "label": [0, 1] * 10})
    validation = pd.DataFrame({"idx": range(5), "label": [0] * 5, "split": "validation"})
    rest, with_heldout = cut_heldout(train, validation, {"fraction": 0.25}, seed=0)
    held = with_heldout[with_heldout.split == "heldout"]
    assert len(held) == 5 and len(rest) == 15 and with_heldout.split.iloc[0] == "heldout"
    assert set(held.idx).isdisjoint(rest.idx)
    with pytest.raises(ValueError, match="heldout.fraction"):
        cut_heldout(train, validation, {"fraction": 1.5}, seed=0)


def test_ted_and_multi_teacher_trials_and_heldout_selection(workdir, tiny_teacher_dir, tiny_glue_dir):
    methods = {
        "nkd": {"recipe": "distill_methods.nkd"},
        "ted": {"recipe": "ted_methods.ted", "baseline": "nkd"},
        "two": {"recipe": "multi_teacher_configs.two", "tasks": ["rte"]},
    }
    table = tiny_table(methods, selection="heldout", tasks="rte", seeds="1")
    runner = TrialRunner(project_params(tiny_teacher_dir, tiny_glue_dir), ResultsFolder(commit=""))
    results = {}
    for spec in build_sweep(table, RECIPES).trials():
        results[spec.method] = runner(spec)
    assert set(results) == {"nkd", "ted", "two"}
    for result in results.values():
        assert 0.0 <= result["heldout_metric"] <= 1.0 and len(result["dev_predictions"]) == 24
    assert (workdir / "data/06_models/store/ted_filters").is_dir()


def test_a_multi_teacher_trial_records_every_teacher_and_refuses_one_that_scores_otherwise(
    workdir, tiny_teacher_dir, tiny_glue_dir, monkeypatch
):
    """Each slot's dev metrics are kept (``teachers_dev_metrics``; ``teacher_dev_metric`` stays the best), and a later
    trial whose teacher ``b`` scores otherwise than the folder's trials recorded for ``b``'s settings is refused
    before its student trains."""
    table = tiny_table({"two": {"recipe": "multi_teacher_configs.two"}}, tasks="rte", seeds="1 2")
    table["tables"]["tiny"]["baseline"] = "two"
    first, second = build_sweep(table, RECIPES).trials()
    runner = TrialRunner(
        project_params(tiny_teacher_dir, tiny_glue_dir), ResultsFolder(path=workdir / "results", commit="")
    )
    result = runner(first)
    slots = result["teachers_dev_metrics"]
    assert len(slots) == 2 and result["teacher_dev_metric"] == max(slot["accuracy"] for slot in slots)
    path = runner.results.result_path(first)
    record = json.loads(path.read_text())
    assert record["result"]["teachers_dev_metrics"] == slots and [t["name"] for t in record["spec"]["teachers"]] == [
        "a",
        "b",
    ]
    record["result"]["teachers_dev_metrics"][1]["accuracy"] += (
        0.01  # as if teacher b had been retrained into other weights
    )
    path.write_text(json.dumps(record))
    from bert_kd.sweeps import trial as trial_module

    run_nodes = trial_module.run_nodes

    def teacher_side_only(pipeline, *args):
        assert not any(n.name.endswith(".distill") for n in pipeline.nodes), "the student trained"
        return run_nodes(pipeline, *args)

    monkeypatch.setattr(trial_module, "run_nodes", teacher_side_only)
    with pytest.raises(
        TeacherMismatch, match=r"the teacher 'b' scores \d+\.\d\d .* same settings scoring \d+\.\d\d \(1 trials\)"
    ):
        runner(second)
    monkeypatch.setattr(trial_module, "run_nodes", run_nodes)
    record["result"]["teachers_dev_metrics"][1]["accuracy"] -= 0.01
    path.write_text(json.dumps(record))
    assert runner(second)["teachers_dev_metrics"] == slots  # the same teachers, read from the store: accepted


def test_results_only_trains_nothing(workdir, tiny_teacher_dir, tiny_glue_dir):
    spec = build_sweep(tiny_table(), RECIPES).trials()[0]
    runner = TrialRunner(
        project_params(tiny_teacher_dir, tiny_glue_dir),
        ResultsFolder(path=workdir / "results", commit="", results_only=True),
    )
    with pytest.raises(LookupError, match="results_only"):
        runner(spec)
    assert not (workdir / "data").exists()


# ---------------------------------------------------------------- identity of stored results
needs_real_glue = pytest.mark.skipif(not (SHARED_GLUE / "RTE" / "dev.tsv").is_file(), reason="needs ../shared/glue")


def real_rte_table(seeds=(1, 2), **extra) -> dict:
    """nkd on real RTE rows at the table's own sizes (40 train, 32 dev examples), one trial per seed."""
    return {
        "table": "real",
        "storage": "sqlite:///optuna.db",
        "bootstrap": {"resamples": 20},
        **extra,
        "tables": {
            "real": {
                "tasks": ["rte"],
                "seeds": list(seeds),
                "baseline": "nkd",
                "selection": "dev",
                "student": {"num_layers": 2},
                "data": {"rte": {"max_train_samples": 40, "max_eval_samples": 32}},
                "grid": {"training.learning_rate": [1.0e-4]},
                "methods": {"nkd": {"recipe": "distill_methods.nkd"}},
            }
        },
    }


@pytest.fixture
def quick_training(monkeypatch):
    """``train_and_evaluate`` without training: reads the trial's real dev rows and predicts class
    ``seed % 2`` for each (a result per trial, quickly); the keys it ran, in order."""
    calls = []

    def train_and_evaluate(self, spec):
        from bert_kd.pipelines.data_processing.nodes import ingest_glue

        sizes = self.identity.data_sizes(spec)
        _, dev, _ = ingest_glue(
            spec.task, self.params["glue_dir"], sizes["max_train_samples"], sizes["max_eval_samples"], 42
        )
        calls.append(spec.key)
        labels = [int(v) for v in dev["label"]]
        predictions = [spec.seed % 2] * len(labels)
        return {
            "dev_metric": sum(p == y for p, y in zip(predictions, labels)) / len(labels),
            "dev_predictions": predictions,
            "dev_labels": labels,
            "teacher_dev_metric": 0.9,
        }

    monkeypatch.setattr(TrialRunner, "train_and_evaluate", train_and_evaluate)
    return calls


def _two_trials(workdir, teacher_dir):
    runner = TrialRunner(project_params(teacher_dir, SHARED_GLUE), ResultsFolder(path=workdir / "results", commit=""))
    reproduce(real_rte_table(), RECIPES, runner, output_dir=workdir / "tables")
    first, second = build_sweep(real_rte_table(), RECIPES).trials()
    return runner, first, second


@needs_real_glue
def test_a_resized_sweep_trains_again_and_only_the_full_run_writes_the_table(workdir, tiny_teacher_dir, monkeypatch):
    """Finding 1: the trials of a run at max_train_samples=16 are not the table's (40 examples)."""
    params = project_params(tiny_teacher_dir, SHARED_GLUE)
    committed = workdir / "results/tables"
    trained = []
    original = TrialRunner.train_and_evaluate
    monkeypatch.setattr(
        TrialRunner, "train_and_evaluate", lambda self, spec: trained.append(spec.key) or original(self, spec)
    )
    resized = TrialRunner(
        params, ResultsFolder(path=workdir / "results", commit=""), data_overrides={"max_train_samples": 16}
    )
    _, small_paths = reproduce(real_rte_table(seeds=[1]), RECIPES, resized, committed_dir=committed)
    assert small_paths["md"].name == "real__max_train_samples-16.md" and not committed.exists()
    full = TrialRunner(params, ResultsFolder(path=workdir / "results", commit=""))
    report, paths = reproduce(real_rte_table(seeds=[1]), RECIPES, full, committed_dir=committed)
    assert trained == ["nkd|rte|seed=1|training.learning_rate=0.0001"] * 2  # trained at each size
    assert paths["md"] == committed / "real.md"

    def sizes(folder):
        return [json.loads(p.read_text())["spec"]["data"]["max_train_samples"] for p in folder.glob("*.json")]

    assert sizes(workdir / "results") == [40]  # the table's own trial; the resized one is a variant's
    assert sizes(workdir / "results/variants/real__max_train_samples-16") == [16]


@needs_real_glue
def test_a_results_file_under_another_trials_name_is_not_reused(workdir, tiny_teacher_dir, quick_training, caplog):
    """Finding 3: a JSON copied over another trial's name is refused (one warning line) and recomputed."""
    runner, first, second = _two_trials(workdir, tiny_teacher_dir)
    shutil.copy(runner.results.result_path(first), runner.results.result_path(second))
    looker = TrialRunner(runner.params, ResultsFolder(path=workdir / "results", commit="", results_only=True))
    with caplog.at_level("WARNING"):
        assert looker.stored_result(second) is None and looker.stored_result(first) is not None
        report, _ = reproduce(real_rte_table(), RECIPES, looker, output_dir=workdir / "tables", results_only=True)
    assert report.long.set_index("task").loc["rte", "n"] == 1  # the refused file's trial is missing
    refused = [r.message for r in caplog.records if str(runner.results.result_path(second)) in r.message]
    assert len(refused) == 1 and "not trial" in refused[0] and "\n" not in refused[0]
    quick_training.clear()
    reproduce(
        real_rte_table(),
        RECIPES,
        TrialRunner(runner.params, ResultsFolder(path=workdir / "results", commit="")),
        output_dir=workdir / "tables",
    )
    assert quick_training == [second.key]
    assert json.loads(runner.results.result_path(second).read_text())["trial"] == second.key


@needs_real_glue
def test_a_corrupt_results_file_is_named_once_and_recomputed(workdir, tiny_teacher_dir, quick_training, caplog):
    runner, first, second = _two_trials(workdir, tiny_teacher_dir)
    runner.results.result_path(second).write_text('{"key": "truncated', encoding="utf-8")
    looker = TrialRunner(runner.params, ResultsFolder(path=workdir / "results", commit="", results_only=True))
    with caplog.at_level("WARNING"):
        report, _ = reproduce(real_rte_table(), RECIPES, looker, output_dir=workdir / "tables", results_only=True)
        quick_training.clear()
        reproduce(
            real_rte_table(),
            RECIPES,
            TrialRunner(runner.params, ResultsFolder(path=workdir / "results", commit="")),
            output_dir=workdir / "tables",
        )
    named = [r for r in caplog.records if str(runner.results.result_path(second)) in r.message]
    assert [r.message.split(";")[-1].strip() for r in named] == [
        "shown as missing (results_only)",
        "not reused: the trial is recomputed and the file replaced",
    ]
    assert "not valid JSON" in named[0].message and not any(r.exc_info for r in caplog.records)
    assert (
        quick_training == [second.key]
        and json.loads(runner.results.result_path(second).read_text())["trial"] == second.key
    )


@needs_real_glue
def test_deleting_a_results_file_recomputes_its_trial(workdir, tiny_teacher_dir, quick_training):
    """Finding 2: the Optuna study still holds the trial; the deleted file decides."""
    runner, first, second = _two_trials(workdir, tiny_teacher_dir)
    runner.results.result_path(second).unlink()
    quick_training.clear()
    reproduce(
        real_rte_table(),
        RECIPES,
        TrialRunner(runner.params, ResultsFolder(path=workdir / "results", commit="")),
        output_dir=workdir / "tables",
    )
    assert quick_training == [second.key] and runner.results.result_path(second).is_file()


def test_other_glue_files_get_their_own_key_the_release_keeps_the_old_one(tmp_path, tiny_teacher_dir, tiny_glue_dir):
    spec = next(t for t in build_sweep(tiny_table(), RECIPES).trials() if t.task == "rte")
    on_tiny = TrialRunner(project_params(tiny_teacher_dir, tiny_glue_dir), ResultsFolder(commit=""))
    assert "RTE/train.tsv" in on_tiny.identity.key_material(spec)["source"]
    if (SHARED_GLUE / "RTE" / "dev.tsv").is_file():
        on_release = TrialRunner(project_params(tiny_teacher_dir, SHARED_GLUE), ResultsFolder(commit=""))
        assert "source" not in on_release.identity.key_material(spec)
        copy = tmp_path / "glue"
        shutil.copytree(SHARED_GLUE / "RTE", copy / "RTE")
        assert TrialRunner(project_params(tiny_teacher_dir, copy), ResultsFolder(commit="")).content_key(
            spec
        ) == on_release.content_key(spec)
        with (copy / "RTE" / "dev.tsv").open("a") as handle:
            handle.write("9999\tedited\trow\tentailment\n")
        assert TrialRunner(project_params(tiny_teacher_dir, copy), ResultsFolder(commit="")).content_key(
            spec
        ) != on_release.content_key(spec)
    assert on_tiny.data_changes([spec]).keys() == {"glue"}


def test_student_init_teacher_keeps_the_key_it_had_before_the_option(tiny_teacher_dir, tiny_glue_dir):
    """student.init: ``teacher`` (= the behaviour before the option) in the table or the
    project's student block leaves the trial key unchanged; ``pretrained`` changes it."""
    params = project_params(tiny_teacher_dir, tiny_glue_dir)
    runner = TrialRunner(params, ResultsFolder(commit=""))
    before = next(t for t in build_sweep(tiny_table(), RECIPES).trials() if t.task == "rte")

    def table_with(init):
        table = tiny_table()
        table["tables"]["tiny"]["student"]["init"] = init
        return next(t for t in build_sweep(table, RECIPES).trials() if t.task == "rte")

    base_pretrained = TrialRunner(
        {**params, "student": {**params["student"], "init": "pretrained"}}, ResultsFolder(commit="")
    )
    assert runner.content_key(table_with("teacher")) == runner.content_key(before)
    assert base_pretrained.content_key(table_with("teacher")) == runner.content_key(before)
    assert runner.content_key(table_with("pretrained")) != runner.content_key(before)


def test_a_tables_batching_is_its_own_not_the_runtime_default(tiny_teacher_dir, tiny_glue_dir):
    """Batches are part of a table's protocol: ``group_by_length`` in the table (default false, the
    setting every committed trial ran with, kept out of keys) decides the training batches and the
    key; ``runtime.group_by_length`` (the project default, now true) changes neither."""
    params = project_params(tiny_teacher_dir, tiny_glue_dir)
    spec = next(t for t in build_sweep(tiny_table(), RECIPES).trials() if t.task == "rte")
    before = TrialRunner(params, ResultsFolder(commit="")).content_key(spec)
    on = {**params, "runtime": {**(params.get("runtime") or {}), "group_by_length": True}}
    runner = TrialRunner(on, ResultsFolder(commit=""))
    assert runner.content_key(spec) == before and runner._runtime(spec)["group_by_length"] is False
    grouped_table = tiny_table()
    grouped_table["tables"]["tiny"]["group_by_length"] = True
    grouped = next(t for t in build_sweep(grouped_table, RECIPES).trials() if t.task == "rte")
    assert runner.content_key(grouped) != before and runner._runtime(grouped)["group_by_length"] is True
    seeded_globally = dataclasses.replace(
        grouped, settings={k: v for k, v in grouped.settings.items() if k != "grouped_sampler"}
    )
    assert runner.content_key(grouped) != runner.content_key(seeded_globally)  # its key before grouped_sampler: 2
    grouped_table["tables"]["tiny"]["group_by_length"] = "yes"
    with pytest.raises(ValueError, match="group_by_length must be true or false"):
        build_sweep(grouped_table, RECIPES)


# ---------------------------------------------------------------- a trial is the pipeline
from tests.pipelines.conftest import TINY_TRAINING, run_pipeline_training_the_teacher  # noqa: E402,F401  (fixture)


def store_entries(root) -> set[str]:
    """``<kind>/<key>`` of every stored job: the model store and the teacher caches."""
    stores = [root / "data/06_models/store", root / "data/07_model_output/teacher_cache"]
    return {
        f"{kind.name}/{entry.name}"
        for store in stores
        for kind in store.iterdir()
        if kind.name not in ("locks", "checkpoints")
        for entry in kind.iterdir()
        if entry.is_dir()
    }


#: (pipeline, recipe of the trial): every job the pipeline trains, students included, the trial finds
#: stored. A multi-teacher trial hands the recipe as the table gives it (its committed students'
#: keys); the pipeline's student is keyed on the same recipe as written.
SAME_JOBS = [
    ("distill_alp", "distill_methods.alp"),
    ("distill_ted", "ted_methods.ted"),
    ("distill_multi_teacher", "multi_teacher_configs.multi_teacher"),
]


@pytest.mark.parametrize(("pipeline", "recipe"), SAME_JOBS, ids=[p for p, _ in SAME_JOBS])
def test_a_trial_and_its_pipeline_train_the_same_jobs(
    run_pipeline_training_the_teacher,  # noqa: F811
    tiny_teacher_dir,
    tiny_glue_dir,
    pipeline,
    recipe,
):
    """``kedro run --pipelines=distill_<row>`` and a sweep trial of that row with the same parameters
    build the same teacher(s), teacher caches, (TED filters) and student jobs: the trial trains
    nothing new. The ``multi_teachers`` entries set no ``training``: each slot is its own entry in
    both (before trials ran the pipelines' nodes, a trial filled it in from the main ``teacher`` block)."""
    from kedro.framework.session import KedroSession

    from bert_kd.sweeps.spec import RECIPE_NAMESPACES

    runtime = {
        "task": "rte",
        "seed": 42,
        "glue_dir": str(tiny_glue_dir),
        "max_train_samples": None,
        "teacher": {"model": str(tiny_teacher_dir), "max_seq_length": 32, "training": TINY_TRAINING},
        "student": {"num_layers": 2, "training": {**TINY_TRAINING, "aux_learning_rate": 1e-3}},
        "multi_teachers": [
            {"name": "a", "model": str(tiny_teacher_dir), "seed": 1, "max_seq_length": 32},
            {"name": "b", "model": str(tiny_teacher_dir), "seed": 2, "max_seq_length": 32},
        ],
        "multi_student": {"num_layers": 2, "training": {**TINY_TRAINING, "aux_learning_rate": 1e-3}},
        "runtime": {"progress_bar": False, "checkpoint_every_steps": 0, "group_by_length": False},
        "tracking": {"enabled": False},
    }
    _, root, _ = run_pipeline_training_the_teacher(pipeline, **runtime)  # every entry of the store its own
    trained_by_pipeline = store_entries(root)
    with KedroSession.create(project_path=root, runtime_params=runtime) as session:
        params = session.load_context().params  # what the pipeline read (conf + --params)
    table = {
        "table": "same",
        "tables": {
            "same": {
                "tasks": ["rte"],
                "seeds": [42],
                "baseline": "row",
                "selection": "dev",
                "methods": {"row": {"recipe": recipe}},
            }
        },
    }
    spec = build_sweep(table, {ns: params.get(ns) or {} for ns in RECIPE_NAMESPACES}).trials()[0]
    result = TrialRunner(params, ResultsFolder(commit="")).train_and_evaluate(spec)
    assert store_entries(root) - trained_by_pipeline == set()
    student_kind = "multi_teacher_student" if pipeline == "distill_multi_teacher" else "student"
    assert f"{student_kind}/{result['model_key']}" in trained_by_pipeline
    assert {e.split("/")[0] for e in trained_by_pipeline} >= {"teacher", "teacher_cache"}


def test_a_multi_teacher_trial_reads_each_entrys_own_max_seq_length(tiny_teacher_dir, tiny_glue_dir, monkeypatch):
    """A ``multi_teachers`` entry without ``max_seq_length`` is tokenized at the schema's 128 in a
    trial as in the pipeline, not at the main teacher's length."""
    from bert_kd.pipelines.data_processing import nodes as data_nodes
    from bert_kd.pipelines.multi_teacher import pipeline as mt_pipeline

    params = project_params(tiny_teacher_dir, tiny_glue_dir)
    params["multi_teachers"] = [{"name": "a", "model": str(tiny_teacher_dir), "seed": 42, "training": TINY}]
    blocks = []

    class Stop(Exception):
        pass

    def tokenize_for_model(train, validation, block):
        blocks.append(block)
        raise Stop

    for module in (
        data_nodes,
        mt_pipeline,
    ):  # where a trial's teacher slots are tokenized, in the data nodes and the multi-teacher pipeline
        monkeypatch.setattr(module, "tokenize_for_model", tokenize_for_model)
    methods = {"nkd": {"recipe": "distill_methods.nkd"}, "two": {"recipe": "multi_teacher_configs.two"}}
    spec = next(
        t for t in build_sweep(tiny_table(methods, tasks="rte", seeds="1"), RECIPES).trials() if t.method == "two"
    )
    with pytest.raises(Stop):
        TrialRunner(params, ResultsFolder(commit="")).train_and_evaluate(spec)
    assert blocks[0]["max_seq_length"] == 128 and params["teacher"]["max_seq_length"] == 32


def test_params_that_change_a_trial_make_the_run_a_variant(tiny_teacher_dir, tiny_glue_dir, caplog):
    """``setting_changes``: a --params key the table does not state (here the student's warm-up) changes the
    distill trials' keys, so the run is named as a variant; keys the table states, and unknown conf, do not."""
    trials = build_sweep(tiny_table(), RECIPES).trials()
    conf = project_params(tiny_teacher_dir, tiny_glue_dir)
    assert (
        TrialRunner(conf, ResultsFolder(commit="")).setting_changes(trials) == {}
    )  # conf_params unknown: nothing to compare
    assert TrialRunner(conf, ResultsFolder(commit=""), conf_params=conf).setting_changes(trials) == {}
    restated = {**conf, "student": {**conf["student"], "num_layers": 3}}  # the table says num_layers: 2
    assert TrialRunner(restated, ResultsFolder(commit=""), conf_params=conf).setting_changes(trials) == {}
    warmup = {**conf, "student": {**conf["student"], "training": {**conf["student"]["training"], "warmup_ratio": 0.3}}}
    changes = TrialRunner(warmup, ResultsFolder(commit=""), conf_params=conf).setting_changes(trials)
    assert set(changes) == {"params"} and len(changes["params"]) == 8
    assert "key material student differs" in caplog.text
    other = {**conf, "student": {**conf["student"], "training": {**conf["student"]["training"], "warmup_ratio": 0.2}}}
    assert (
        TrialRunner(other, ResultsFolder(commit=""), conf_params=conf).setting_changes(trials) != changes
    )  # each variant its name


def test_a_tables_epoch_metric_reaches_the_training_config(tiny_teacher_dir, tiny_glue_dir):
    """The table's ``select_metric`` (its paper's metric where it is not the primary one) is what every
    training job of the trial keeps its best epoch by; without one, the task's primary metric."""
    from bert_kd.config.schema import Runtime, Training
    from bert_kd.experiment.run_setup import training_config

    params = project_params(tiny_teacher_dir, tiny_glue_dir)
    table = tiny_table()
    table["tables"]["tiny"]["tasks"] = ["mrpc"]
    spec = build_sweep(table, RECIPES).trials()[0]
    runtime = TrialRunner(params, ResultsFolder(commit=""))._runtime(spec)
    assert runtime["select_metric"] == "accuracy"
    assert training_config(Training(), Runtime.model_validate(runtime), 1, "mrpc", None).select_metric == "accuracy"
    assert training_config(Training(), Runtime(), 1, "mrpc", None).select_metric == "combined"
    from bert_kd.config.errors import ParameterError

    with pytest.raises(ParameterError, match="'pearson' is not a dev metric of mrpc .accuracy, combined, f1."):
        training_config(Training(), Runtime(select_metric="pearson"), 1, "mrpc", None)
