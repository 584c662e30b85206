"""The committed result tables (``results/<table>/tables/<table>.md``) are what the committed
trial JSONs give with today's code and configuration — so a fresh checkout rebuilds them, and a
change that silently alters trial content keys (the JSONs would no longer be found) fails here."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import click
import pytest
from kedro.framework.cli.utils import _split_params

from bert_kd.config_loader import ProjectConfigLoader
from bert_kd.pipelines.reproduce.nodes import DATA_KEYS
from bert_kd.settings import CONFIG_LOADER_ARGS
from bert_kd.sweep.report import build_report, markdown
from bert_kd.sweep.spec import RECIPE_NAMESPACES, build_sweep
from bert_kd.sweep.trial import TrialRunner

ROOT = Path(__file__).resolve().parents[2]
MADE_BY = re.compile(r"^Made by: `(?P<command>kedro [^`]+)`", re.MULTILINE)
COMMITTED = sorted(p for p in ROOT.glob("results/*/tables/*.md") if MADE_BY.search(p.read_text(encoding="utf-8")))


def v2_script(name: str):
    """``results/cpu_protocol_v2/<name>.py`` imported as a module (the results folder is no package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "results" / "cpu_protocol_v2" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cli_params(command: str) -> dict:
    """The ``--params`` of a recorded ``kedro run`` command, parsed as Kedro parses them."""
    words = shlex.split(command)
    for i, word in enumerate(words):
        if word == "--params":
            value = words[i + 1]
            break
        if word.startswith("--params="):
            value = word.split("=", 1)[1]
            break
    else:
        return {}
    return _split_params(click.Context(click.Command("run")), click.Option(["--params"]), value)


def project_params(runtime: dict) -> dict:
    args = {**CONFIG_LOADER_ARGS, "default_run_env": "base"}  # conf/local is a user's, not the record's
    return ProjectConfigLoader(str(ROOT / "conf"), runtime_params=runtime, **args)["parameters"]  # as `kedro run`


def table_lines(text: str) -> list[str]:
    """The Markdown table and its caption, without the provenance line."""
    return [line for line in text.splitlines() if line and not line.startswith("Made by:")]


def test_there_is_a_committed_table():
    assert COMMITTED, "results/*/tables/*.md with a 'Made by:' line"


@pytest.mark.parametrize("table_md", COMMITTED, ids=lambda p: p.stem)
def test_committed_table_is_rebuilt_from_the_committed_trial_results(table_md):
    committed = table_md.read_text(encoding="utf-8")
    runtime = cli_params(MADE_BY.search(committed)["command"])
    params = project_params(runtime)
    reproduce = params["reproduce"]
    sweep = build_sweep(reproduce, {ns: params.get(ns) or {} for ns in RECIPE_NAMESPACES})
    assert sweep.table == table_md.stem
    runner = TrialRunner(params, data_overrides={k: runtime[k] for k in DATA_KEYS if k in runtime},
                         results_dir=table_md.parents[1], commit="test", results_only=True)
    results = {t.key: r for t in sweep.trials() if (r := runner.stored_result(t)) is not None}
    stored = sorted(p.stem for p in table_md.parents[1].glob("*.json"))
    assert len(results) == len(stored), (
        f"{len(stored)} trial files in {table_md.parents[1]} but only {len(results)} match a trial of the recorded "
        "command: a change altered the trials' content keys (TrialRunner.key_material) or the table")
    bootstrap = dict(reproduce.get("bootstrap") or {})
    report = build_report(sweep, results, resamples=int(bootstrap.get("resamples", 1000)),
                          seed=int(bootstrap.get("seed", 0)), alpha=float(bootstrap.get("alpha", 0.05)))
    assert table_lines(markdown(report)) == table_lines(committed)
    assert report.mixed_teachers == (), f"{table_md}: a row's seeds were distilled from different teachers"


def test_v2_paper_gap_reading_matches_the_committed_trials():
    """results/cpu_protocol_v2/tables/paper_gap.md is what paper_gap.py renders from the committed JSONs
    (commit new trials, the table and this reading together)."""
    module = v2_script("paper_gap")
    committed = (module.HERE / "tables" / "paper_gap.md").read_text(encoding="utf-8")
    assert module.render() == committed, "rerun: PYTHONPATH=src python results/cpu_protocol_v2/paper_gap.py"


#: The main job's settings a session may tune (README "Measured"): none of them may reach a committed trial.
MAIN_JOB_CHANGES = {"teacher": {"max_seq_length": 48, "training": {"epochs": 2, "learning_rate": 1.0e-4, "batch_size": 16,
                                                                     "warmup_ratio": 0.0, "weight_decay": 0.0,
                                                                     "max_grad_norm": 5.0}},
                    "student": {"training": {"epochs": 2, "learning_rate": 3.0e-4}},
                    # `multi_teachers` (the multi-teacher pipeline's; its first entry follows the main teacher)
                    "multi_teachers": [{"name": "other", "model": "minilm-l6", "seed": 3, "max_seq_length": 48,
                                        "training": {"epochs": 1, "learning_rate": 1.0e-4}}],
                    "max_train_samples": 8000}


@pytest.mark.parametrize("table_md", COMMITTED, ids=lambda p: p.stem)
def test_changing_the_main_jobs_teacher_changes_no_committed_trial_key(table_md):
    """Each table states its own teacher: the global ``teacher`` block (the main job's) is not inherited."""
    runtime = cli_params(MADE_BY.search(table_md.read_text(encoding="utf-8"))["command"])
    keys = {}
    for name, extra in (("recorded", {}), ("main job changed", MAIN_JOB_CHANGES)):
        params = project_params({**runtime, **extra})
        sweep = build_sweep(params["reproduce"], {ns: params.get(ns) or {} for ns in RECIPE_NAMESPACES})
        runner = TrialRunner(params, data_overrides={k: runtime[k] for k in DATA_KEYS if k in runtime},
                             results_dir=table_md.parents[1], commit="test", results_only=True)
        keys[name] = {t.key: runner.content_key(t) for t in sweep.trials()}
    assert keys["main job changed"] == keys["recorded"]


def test_power_calculation_reproduces_the_v1_decision_and_reads_v2_folders():
    """power.py on the v1 trials gives the 8 SST-2 seeds the v2 README decided on; on the v2 folder it
    only uses rows with at least 2 seeds shared with their baseline."""
    import io

    module = v2_script("power")
    folder = ROOT / "results" / "cpu_protocol_v2"
    out = io.StringIO()
    assert module.main(out=out)["sst2"] == 8
    assert "| sst2 | 10 |" in out.getvalue()
    v2 = module.load_correctness(folder)
    verdict = module.main(out=io.StringIO(), directory=folder)
    baseline = lambda row: module.BASELINE.get(row, "nkd")  # noqa: E731
    with_pairs = {task for (task, row), seeds in v2.items()
                  if row != baseline(row) and len(set(seeds) & set(v2.get((task, baseline(row)), {}))) >= 2}
    assert set(verdict) == with_pairs


def test_v2_readme_block_replaces_only_its_markers(tmp_path):
    module = v2_script("paper_gap")
    readme = tmp_path / "README.md"
    readme.write_text("# title\n", encoding="utf-8")
    with pytest.raises(ValueError, match="README.md: no"):
        module.write_readme_block(readme)
    readme.write_text(f"before\n{module.README_START}\nstale\n{module.README_END}\nafter\n", encoding="utf-8")
    module.write_readme_block(readme)
    text = readme.read_text(encoding="utf-8")
    assert text.startswith("before\n") and text.endswith("\nafter\n") and "stale" not in text
    assert module.readme_block() in text and not list(tmp_path.glob("*.partial"))


def test_v2_total_follows_the_table_and_every_trial_is_committed():
    """paper_gap.py counts the trials the table asks for (rows × tasks × seeds, extra seeds included), the folder
    holds a JSON for each of them, and the reading's summary line says the table is complete."""
    module = v2_script("paper_gap")
    sweep = module.table_spec()
    expected = sum(len(sweep.seeds_of(task)) for m in sweep.methods for task in sweep.tasks_of(m))
    assert module.table_total() == expected == 160  # 8 rows × 2 tasks + 2 MRPC rows, 8 seeds (+ 2 extra on SST-2)
    assert len(list(module.HERE.glob("*.json"))) == expected
    assert "v2 complete" in module.readme_block()


def test_v2_seed_rule_reads_the_power_calculation_only_and_waits_for_round_one():
    module = v2_script("power")
    assert module.extra_seeds(8) == [] and module.extra_seeds(5) == []
    assert module.extra_seeds(10) == [9, 10]
    assert module.extra_seeds(35) == module.extra_seeds(None) == [9, 10, 11, 12]  # capped at 12
    folder = ROOT / "results" / "cpu_protocol_v2"
    missing = module.round_one_missing(folder)
    finished_round_one = sum(1 for seeds in module.load_correctness(folder).values() for s in seeds if s in module.ROUND_ONE)
    sweep = v2_script("paper_gap").table_spec()
    assert len(missing) + finished_round_one == len(module.ROUND_ONE) * sum(len(sweep.tasks_of(m)) for m in sweep.methods)
    if missing:
        with pytest.raises(SystemExit, match="round 1 is not complete"):
            module.apply_rule(folder)


def test_v2_claims_hold_only_after_holm_within_their_paper(monkeypatch):
    """A claim "holds" when its Holm-adjusted p (over the tested claims of its paper) is < 0.05; a p < 0.05
    that does not survive is said to be "before correction only"; p is (k + 1) / (B + 1), never 0."""
    from bert_kd.sweep.significance import BootstrapResult

    module = v2_script("paper_gap")
    chosen = {("ted", "kd", "sst2"): 0.0, ("ted", "kd", "mrpc"): 0.02, ("two_teachers", "single_teacher", "mrpc"): 0.03}

    def fake_bootstrap(task, better, worse, metric):  # the rows' names ride on the predictions
        key = (better[0][0], worse[0][0], task)
        return BootstrapResult(0.01, chosen.get(key, 0.5), 1000, -0.01, 0.03)

    monkeypatch.setattr(module, "paired_bootstrap", fake_bootstrap)
    rows = {row for _, better, worse, _ in module.CLAIMS for row in (better, worse)}
    runs = {(row, task): {1: {"dev_predictions": row, "dev_labels": []}} for row in rows for task in module.TASKS}
    tests = {(t.claim.split(" (")[0], t.task): t for t in module.claim_tests(runs)}
    strong = tests[("TED > KD", "sst2")]  # k = 0 of 1000: p = 1/1001, ×6 TED claims
    assert strong.p == pytest.approx(1 / 1001) and strong.holm_p == pytest.approx(6 / 1001) and strong.verdict == "holds"
    nominal = tests[("TED > KD", "mrpc")]  # 21/1001 × 5 > 0.05
    assert nominal.holm_p == pytest.approx(5 * 21 / 1001) and nominal.verdict.endswith("before correction only")
    alone = tests[("two teachers > one", "mrpc")]  # a family of one: no correction
    assert alone.holm_p == pytest.approx(31 / 1001) and alone.verdict == "holds"
    assert tests[("ALP > NKD", "sst2")].verdict == "same direction, not significant"
    assert sum(t.claim.startswith("ALP") or "NKD" in t.claim or "PKD" in t.claim for t in tests.values()) == 16


def test_v2_reading_refuses_a_json_that_is_not_a_trial_of_the_table(tmp_path, monkeypatch):
    """A variant's trial (or any other file) in results/cpu_protocol_v2 would replace a seed's result in the
    reading and the seed rule: both refuse it by name instead."""
    import shutil

    module = v2_script("paper_gap")
    folder = tmp_path / "cpu_protocol_v2"
    folder.mkdir()
    first = sorted(module.HERE.glob("*.json"))[0]
    shutil.copy(first, folder / first.name)
    shutil.copy(first, folder / ("0" * 64 + ".json"))  # the same trial under a key the table does not have
    monkeypatch.setattr(module, "HERE", folder)  # the check applies to the table's own folder
    with pytest.raises(ValueError, match=r"1 JSON\(s\) are not trials of cpu_protocol_v2.*0000"):
        module.load_runs(folder)
    (folder / ("0" * 64 + ".json")).unlink()
    assert sum(len(seeds) for seeds in module.load_runs(folder)[0].values()) == 1


def test_v2_init_ablation_compares_the_alp_kd_rows_spread_and_agreement_with_nkd(tmp_path):
    """v1 (init: teacher) vs v2 (init: pretrained), on v1's seeds: NKD's accuracy, the mean |row − NKD| over the
    ALP-KD rows both tables have, and how often a row's student predicts what the same seed's NKD student
    predicts; a task without data gives None."""
    import json

    module = v2_script("paper_gap")
    labels = [1, 1, 0, 0]

    def result(predictions):
        return {"dev_predictions": predictions, "dev_labels": labels}

    v1 = tmp_path / "cpu_protocol"
    v1.mkdir()
    for name, (method, predictions) in enumerate([("nkd", [1, 1, 0, 0]), ("alp", [1, 0, 0, 0]), ("pkd_3", [0, 0, 1, 1])]):
        record = {"spec": {"trial": {"method": method, "task": "mrpc", "seed": 1}}, "result": result(predictions)}
        (v1 / f"{name}.json").write_text(json.dumps(record), encoding="utf-8")
    v2 = {("nkd", "mrpc"): {1: result([1, 1, 0, 1]), 4: result([0, 0, 0, 0])},  # seed 4: not v1's, left out
          ("alp", "mrpc"): {1: result([1, 1, 1, 1]), 4: result([1, 1, 0, 0])},
          ("ckd", "mrpc"): {1: result([1, 1, 0, 1])}}
    figures = module.init_ablation(v2, v1_dir=v1)
    mrpc = figures["mrpc"]
    assert mrpc["nkd"] == pytest.approx((100.0, 75.0))
    assert mrpc["spread"] == pytest.approx((25.0, 12.5))  # v1: ALP only (PKD-3 used another map); v2: ALP 25, CKD 0
    assert mrpc["agreement"] == pytest.approx((75.0, 87.5))  # v2: ALP 3 of 4, CKD 4 of 4
    assert figures["sst2"] == {"nkd": None, "spread": None, "agreement": None}
    assert module.ablation_cell(mrpc) == ("mean \\|row − NKD\\| 25.00 → 12.50 points; same prediction as NKD 75.0% → 87.5%: "
                                          "not seen: v2's rows are as alike or more")
    more_apart = {"spread": (0.2, 0.9), "agreement": (95.0, 90.0)}
    assert module.ablation_cell(more_apart).endswith(": seen: v2's rows differ more")
    assert module.ablation_cell({"spread": (0.2, 0.9), "agreement": (90.0, 95.0)}).endswith(": mixed")


def test_v2_tally_counts_each_papers_verdicts():
    module = v2_script("paper_gap")
    entry = lambda claim, verdict, tested=True: module.ClaimTest(claim, "mrpc", object() if tested else None, 5,  # noqa: E731
                                                                 0.5, 0.5, verdict)
    tests = [entry("A > B (TED Table 4)", "holds"), entry("B > C (TED Table 4)", "same direction; p < 0.05 before correction only"),
             entry("C > D (TED Table 4)", "reversed, significant"), entry("D > E (TED Table 4)", "not run yet", tested=False),
             entry("X > Y (ALP-KD Table 3)", "same direction, not significant"),
             entry("Y > X (ALP-KD Table 3)", "reversed, not significant")._replace(task="sst2")]
    assert module.tally(tests) == [
        "- TED: **1 of 3** (claim, task) pairs hold (A > B on MRPC); 1 points the paper's way without holding (1 of them "
        "at p < 0.05 before correction: B > C on MRPC); 1 points the other way (1 significantly: C > D on MRPC).",
        "- ALP-KD: **0 of 2** (claim, task) pairs hold; 1 points the paper's way without holding (0 of them at p < 0.05 "
        "before correction); 1 points the other way (0 significantly): Y > X on SST-2."]
    mixed = [entry("P > Q (TED Table 4)", "reversed, significant"), entry("Q > R (TED Table 4)", "reversed, not significant")]
    assert module.tally(mixed)[0].endswith(
        "2 point the other way (1 significantly: P > Q on MRPC; not significantly: Q > R on MRPC).")


def test_v2_gradient_shares_read_each_students_run_through_its_trials_key(tmp_path):
    from mlflow import MlflowClient

    shares = v2_script("gradient_shares")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("v2")
    started = iter(range(1_000, 2_000))  # start times in ms, strictly increasing

    def trial_with_student(key: str, metrics: dict, status: str = "FINISHED") -> None:
        trial = client.create_run(experiment, tags={"role": "trial", "content_key": key})
        student = client.create_run(experiment, start_time=next(started),
                                    tags={"role": "student", "mlflow.parentRunId": trial.info.run_id})
        teacher = client.create_run(experiment, tags={"role": "teacher", "mlflow.parentRunId": trial.info.run_id})
        for name, value in metrics.items():
            client.log_metric(student.info.run_id, f"grad_share/{name}", value)
        client.log_metric(teacher.info.run_id, "grad_share/ce", 1.0)  # the teacher's own run is not the student's
        for run in (student, teacher, trial):
            client.set_terminated(run.info.run_id, status)

    trial_with_student("a", {"ce": 0.5, "kd": 0.5})
    trial_with_student("a", {"ce": 0.25, "kd": 0.75})  # a rerun of the same trial: the latest counts
    trial_with_student("b", {"ce": 0.9}, status="KILLED")  # an interrupted try measures nothing
    trial_with_student("c", {"ce": 0.1})  # not a committed trial of the table
    measured = shares.measured_shares(uri, ["a", "b"])
    assert measured == {"a": {"ce": 0.25, "kd": 0.75}}

    rkd = {"method": "rkd", "temperature": 1.0, "weights": {"kd": 0.2}}
    trials = {key: {"task": "mrpc", "method": "rkd", "recipe": rkd} for key in ("a", "b")}
    table = shares.share_table(trials, measured)
    assert table[-1] == "| mrpc | rkd | 1 of 2 | ce (0.8): 25.0% (25.0–25.0); kd (0.2): 75.0% (75.0–75.0) |"
    assert shares.share_table(trials, {})[-1] == "| mrpc | rkd | 0 of 2 | not measured |"
    means = shares.mean_shares({**trials, "n": {"task": "sst2", "method": "nkd", "recipe": {"method": "nkd"}}},
                               {**measured, "b": {"ce": 0.75, "kd": 0.25}, "n": {"ce": 1.0}})
    assert means == {("mrpc", "rkd"): {"ce": 0.5, "kd": 0.5}, ("sst2", "nkd"): {"ce": 1.0}}
    ax = shares.shares_figure(means).axes[0]
    assert [label.get_text() for label in ax.get_yticklabels()] == ["nkd · SST-2", "rkd · MRPC"]
    assert len(ax.patches) == 2 * 2  # a bar segment per (row, term)


def test_v2_gradient_shares_add_a_fresh_stores_trials_to_the_committed_ones(tmp_path, monkeypatch):
    """A worker on a fresh machine has a new MLflow store: its trials' shares are added to those recorded in
    gradient_shares.json; a render that would measure fewer trials than the committed table writes nothing."""
    from mlflow import MlflowClient

    shares = v2_script("gradient_shares")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    trial = client.create_run(client.create_experiment("v2"), tags={"role": "trial", "content_key": "b"})
    student = client.create_run(trial.info.experiment_id, tags={"role": "student", "mlflow.parentRunId": trial.info.run_id})
    client.log_metric(student.info.run_id, "grad_share/ce", 1.0)
    for run in (student, trial):
        client.set_terminated(run.info.run_id, "FINISHED")
    rkd = {"method": "rkd", "temperature": 1.0, "weights": {"kd": 0.2}}
    trials = {key: {"task": "mrpc", "method": "rkd", "recipe": rkd} for key in ("a", "b", "c")}
    monkeypatch.setattr(shares, "committed_trials", lambda directory=None: trials)
    out, record = tmp_path / "gradient_shares.md", tmp_path / "gradient_shares.json"
    record.write_text(json.dumps({"a": {"ce": 0.25, "kd": 0.75}, "gone": {"ce": 1.0}}), encoding="utf-8")
    assert shares.known_shares(uri, trials, record) == {"a": {"ce": 0.25, "kd": 0.75}, "b": {"ce": 1.0}}
    carrying = tmp_path / "carrying"  # a trial JSON that carries its shares (trials run since session 14)
    carrying.mkdir()
    (carrying / "c.json").write_text(json.dumps({"key": "c", "result": {"gradient_shares": {"ce": 0.5, "kd": 0.5}}}))
    assert shares.known_shares(uri, trials, record, carrying)["c"] == {"ce": 0.5, "kd": 0.5}
    empty = tmp_path / "trials"  # the table's folder for main(): no trial JSON of its own
    empty.mkdir()

    out.write_text("…; 3 of the 3 committed trials measured …", encoding="utf-8")
    with pytest.raises(SystemExit, match="would measure 2 trials, fewer than the 3"):
        shares.main(["--tracking-uri", uri, "--out", str(out), "--directory", str(empty)])
    assert "3 of the 3" in out.read_text(encoding="utf-8") and "b" not in json.loads(record.read_text(encoding="utf-8"))

    out.write_text("…; 1 of the 3 committed trials measured …", encoding="utf-8")
    shares.main(["--tracking-uri", uri, "--out", str(out), "--directory", str(empty)])
    assert "2 of the 3 committed trials measured" in out.read_text(encoding="utf-8")
    assert json.loads(record.read_text(encoding="utf-8")) == {"a": {"ce": 0.25, "kd": 0.75}, "b": {"ce": 1.0}}
    assert "| mrpc | rkd | 2 of 3 |" in out.read_text(encoding="utf-8") and out.with_suffix(".png").exists()


def test_v2_reading_places_the_papers_own_gain_against_our_interval():
    from bert_kd.sweep.significance import BootstrapResult

    module = v2_script("paper_gap")
    assert module.paper_gain("alp", "nkd", "sst2") == 2.99  # ALP-KD Table 3: 88.88 − 85.89
    assert module.paper_gain("ted", "kd", "mrpc") is None  # TED Table 4 has no MRPC
    interval = BootstrapResult(gain=0.002, p_value=0.4, resamples=1000, low=-0.008, high=0.012)
    seeds = module.seed_interval([0.01, 0.0, -0.01])  # mean 0, sd 1 point, n = 3: ± 4.303 / √3 points
    assert seeds == pytest.approx((-2.484, 2.484), abs=1e-3)
    assert module.seed_interval([0.01]) is None
    narrow = (-0.5, 0.5)
    assert module.placement(2.99, interval, narrow) == "above"
    assert module.placement(2.99, interval, seeds) == "above"
    assert module.placement(2.0, interval, seeds) == "within"  # above the bootstrap's interval only
    assert module.placement(0.49, interval, narrow) == "within"
    assert module.placement(-0.9, interval, narrow) == "below"
    assert module.placement(None, interval, narrow) == module.placement(1.0, None, narrow) == ""
    assert module.placement(1.0, interval, None) == ""  # one seed: no seed interval, no placement
    entry = module.ClaimTest("ALP > NKD (ALP-KD Table 3)", "sst2", interval, 5, 0.4, 1.0, "same direction, not significant",
                             narrow, 2.99, module.placement(2.99, interval, narrow))
    assert entry.paper == "paper +2.99: above our CI"
    assert entry._replace(placement="").paper == ""
    line = module.tally([entry])[0]
    assert line.endswith("the paper's own gain lies above our 95% CI in 1 of the 1 pairs it has numbers for "
                         "(ALP > NKD on SST-2).")
    assert entry.readme_cell().endswith("same direction, not significant; paper +2.99: above our CI")


def test_v2_forest_plot_draws_every_tested_claim_and_the_papers_gains():
    module = v2_script("paper_gap")
    tests = module.reading().tests
    fig = module.forest_figure(tests)
    ax = fig.axes[0]
    tested = [entry for entry in tests if entry.test is not None]
    labels = [label.get_text() for label in ax.get_yticklabels()]
    assert len(labels) == len(tested) and labels[-1] == "RKD > NKD · MRPC"  # first claim on top
    crosses = [line for line in ax.get_lines() if line.get_marker() == "x"]
    assert len(crosses) == sum(entry.paper_gain is not None for entry in tested) > 0
    assert (module.HERE / "tables" / "paper_gap.png").stat().st_size > 0  # committed with the reading


def test_v2_forest_plot_draws_a_second_reading_in_grey_beside_each_claim():
    """``--other-teacher``'s picture: every tested claim of the table with the filled reading's gain and interval
    in grey above it (here the table against itself: the grey points sit on the coloured ones)."""
    module = v2_script("paper_gap")
    tests = module.reading().tests
    tested = [entry for entry in tests if entry.test is not None]
    ax = module.forest_figure(tests, compare=tests, compare_label="again").axes[0]
    grey = [line for line in ax.get_lines() if line.get_color() == "grey" and line.get_marker() == "o"]
    assert len(grey) == len(tested)
    assert sorted(line.get_xdata()[0] for line in grey) == pytest.approx(sorted(100 * e.test.gain for e in tested))
    assert (module.HERE / "tables" / "paper_gap_other_teacher.png").stat().st_size > 0  # committed with its reading


def test_v2_rechecked_trials_gave_the_committed_predictions():
    """rechecks/ holds table trials rerun later from their keys on another machine (the v2 README's "Same key, same
    number"); each must be a trial of the table with the committed dev predictions, metrics and best epoch. NKD is the
    row whose student never reads the teacher, so its keys can be rerun although the table's teachers cannot."""
    module = v2_script("paper_gap")
    rechecks = sorted((module.HERE / "rechecks").glob("*.json"))
    assert len(rechecks) >= 2
    for path in rechecks:  # the closed table's trials (closed_139/ once the seeded rerun replaced them)
        rerun, committed = (json.loads(p.read_text(encoding="utf-8")) for p in (path, module.closed_table() / path.name))
        assert rerun["key"] == committed["key"] == path.stem and rerun["trial"] == committed["trial"]
        assert rerun["spec"] == committed["spec"] and rerun["spec"]["trial"]["method"] == "nkd"
        assert rerun["numerics"] != committed.get("numerics")  # another machine's kernels (the table's recorded none)
        for field in ("dev_predictions", "dev_metrics", "best_epoch"):
            assert rerun["result"][field] == committed["result"][field], f"{path.name}: {field} differs"


def test_v2_other_teacher_reading_matches_the_committed_trials():
    """tables/paper_gap_other_teacher.md (the missing trials run with other teachers, a sensitivity
    check) is what ``paper_gap.py --other-teacher`` renders from the committed JSONs, and it names the mixed teachers."""
    module = v2_script("paper_gap")
    committed = (module.HERE / "tables" / "paper_gap_other_teacher.md").read_text(encoding="utf-8")
    assert module.other_teacher_render() == committed, \
        "rerun: PYTHONPATH=src python results/cpu_protocol_v2/paper_gap.py --other-teacher"
    assert ("**Mixed teachers**" in committed) == bool(module.other_teacher_files())  # named whenever there are any


def test_v2_other_teacher_folder_refuses_a_trial_the_table_has_or_does_not_ask_for(tmp_path):
    """other_teacher/ holds only trials the table lacks: a copy of one of the table's trials would be read as a second
    result for its seed, and a file that is no trial of the table as another experiment's."""
    import shutil

    module = v2_script("paper_gap")
    closed = module.closed_table()  # the table the fill completes: the closed one (closed_139/ after the promotion)
    other = tmp_path / "other_teacher"
    other.mkdir()
    first = sorted(closed.glob("*.json"))[0]
    shutil.copy(first, other / first.name)
    with pytest.raises(ValueError, match=r"1 JSON\(s\) are trials the table already has"):
        module.other_teacher_files(closed, other)
    (other / first.name).rename(other / ("0" * 64 + ".json"))
    with pytest.raises(ValueError, match=r"1 JSON\(s\) are not trials of cpu_protocol_v2"):
        module.other_teacher_files(closed, other)
    (other / ("0" * 64 + ".json")).unlink()
    assert module.other_teacher_files(closed, other) == []
    # two trials the table lacks, distilled from two different teachers (session 15's fill, one score edited)
    sst2 = [path for path in sorted((module.OTHER_TEACHER / "session15").glob("*.json"))
            if json.loads(path.read_text())["spec"]["trial"]["task"] == "sst2"][:2]
    for path in sst2:
        shutil.copy(path, other / path.name)
    assert len(module.other_teacher_files(closed, other)) == 2  # one teacher: accepted
    record = json.loads((other / sst2[1].name).read_text())
    record["result"]["teacher_dev_metrics"]["accuracy"] += 0.01
    (other / sst2[1].name).write_text(json.dumps(record))
    with pytest.raises(ValueError, match=r"SST-2 trials come from 2 teachers \(86\.93: 1, 87\.93: 1\)"):
        module.other_teacher_files(closed, other)


@pytest.mark.parametrize("script", ["fill_other_teacher.sh", "rerun_seeded.sh"])
def test_v2_worktree_scripts_refuse_the_main_checkout(tmp_path, script):
    """fill_other_teacher.sh and rerun_seeded.sh delete the table's JSONs of the checkout they run in: in a main
    checkout they stop first, naming themselves."""
    import shutil
    import subprocess

    folder = tmp_path / "results" / "cpu_protocol_v2"
    folder.mkdir(parents=True)
    for name in (script, "worktree.sh"):
        shutil.copy(ROOT / "results" / "cpu_protocol_v2" / name, folder)
    (folder / "trial.json").write_text("{}", encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    done = subprocess.run(["bash", str(folder / script)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 1 and "linked worktree" in done.stderr and done.stderr.startswith(script)
    assert (folder / "trial.json").exists()


def test_v2_promotion_refuses_a_second_promotion_and_uncommitted_results(tmp_path):
    """promote_seeded.sh moves every trial JSON of the table: it stops, naming itself and moving nothing, when the
    table was promoted already or the results folder has changes not committed (its completeness check is
    ``seeded_files()`` counted against ``table_total()``)."""
    import shutil
    import subprocess

    folder = tmp_path / "results" / "cpu_protocol_v2"
    folder.mkdir(parents=True)
    shutil.copy(ROOT / "results" / "cpu_protocol_v2" / "promote_seeded.sh", folder)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "t"], cwd=tmp_path, check=True)
    (folder / "closed_139").mkdir()
    done = subprocess.run(["bash", str(folder / "promote_seeded.sh")], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 1 and done.stderr.startswith("promote_seeded.sh: already promoted")
    (folder / "closed_139").rmdir()
    (folder / "trial.json").write_text("{}", encoding="utf-8")
    done = subprocess.run(["bash", str(folder / "promote_seeded.sh")], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 1 and done.stderr.startswith("promote_seeded.sh: uncommitted changes")
    assert sorted(path.name for path in folder.iterdir()) == ["promote_seeded.sh", "trial.json"]


def test_v2_seeded_reading_matches_the_committed_trials():
    """tables/paper_gap_seeded.md (the table rerun on reproducible teachers, committed piecewise) is what
    ``paper_gap.py --seeded`` renders from seeded/, and every teacher-free trial there gave the closed table's
    predictions: NKD's students never read the teacher, so the rerun must reproduce them exactly."""
    module = v2_script("paper_gap")
    seeded = module.seeded_table()  # seeded/, or the table folder once the rerun replaced the closed table
    if not any(seeded.glob("*.json")):
        pytest.skip("no seeded trial committed yet")
    committed = (module.HERE / "tables" / "paper_gap_seeded.md").read_text(encoding="utf-8")
    assert module.seeded_render() == committed, "rerun: PYTHONPATH=src python results/cpu_protocol_v2/paper_gap.py --seeded"
    assert (module.HERE / "tables" / "paper_gap_seeded.png").stat().st_size > 0
    reruns = module.teacher_free_reruns(module.reading(module.closed_table()).runs, module.reading(seeded).runs)
    assert reruns and [entry for entry in reruns if not entry[3]] == []
    for path in module.OTHER_TEACHER.glob("*.json"):  # the fill's trials are the rerun's for their keys
        if (seeded / path.name).exists():
            assert (seeded / path.name).read_bytes() == path.read_bytes()


def test_v2_seeded_folder_refuses_a_foreign_file_a_changed_copy_or_a_second_teacher(tmp_path):
    """seeded/ holds the table's trials on one seeded teacher per task, the fill's (other_teacher/) included byte for
    byte: anything else is refused by name before it is read."""
    import shutil

    module = v2_script("paper_gap")
    seeded, other = tmp_path / "seeded", tmp_path / "other_teacher"
    seeded.mkdir()
    other.mkdir()
    fill = sorted(module.OTHER_TEACHER.glob("*.json"))[:2]
    for path in fill:
        shutil.copy(path, other / path.name)
        shutil.copy(path, seeded / path.name)
    assert module.seeded_files(seeded, other) == sorted(seeded.glob("*.json"))
    shutil.copy(fill[0], seeded / ("0" * 64 + ".json"))
    with pytest.raises(ValueError, match=r"1 JSON\(s\) are not trials of cpu_protocol_v2"):
        module.seeded_files(seeded, other)
    (seeded / ("0" * 64 + ".json")).unlink()
    record = json.loads((seeded / fill[0].name).read_text())
    record["result"]["teacher_dev_metrics"]["accuracy"] += 0.01  # also a second teacher on its task
    (seeded / fill[0].name).write_text(json.dumps(record))
    with pytest.raises(ValueError, match=r"1 JSON\(s\) differ from their copy in other_teacher/.*come from 2 teachers"):
        module.seeded_files(seeded, other)


def test_v2_a_multi_teacher_trial_is_read_by_its_table_teacher_slot_not_its_best_teacher():
    """Two teachers' trials record the best slot as ``teacher_dev_metrics``; the seeded reading's one-teacher check
    reads the slot with the table teacher's settings instead, so a stronger second teacher is not a second table
    teacher (and a trial without per-slot scores falls back to the best one)."""
    module = v2_script("paper_gap")
    record = json.loads(next(path for path in sorted(module.closed_table().glob("*.json"))
                             if json.loads(path.read_text())["trial"].startswith("two_teachers|")).read_text())
    assert module.table_teacher_score(record) == record["result"]["teacher_dev_metrics"]["accuracy"]  # before session 16
    record["result"]["teachers_dev_metrics"] = [{"accuracy": 0.80}, {"accuracy": 0.83}]
    record["result"]["teacher_dev_metrics"] = {"accuracy": 0.83}
    assert module.table_teacher_score(record) == 0.80
    record["spec"]["teachers"][0]["training"]["learning_rate"] = 1.0
    assert module.table_teacher_score(record) is None


def test_v2_teacher_free_reruns_compare_only_the_teacher_free_rows_seed_by_seed():
    module = v2_script("paper_gap")
    result = lambda *predictions: {"dev_predictions": list(predictions)}  # noqa: E731
    table = {("nkd", "mrpc"): {1: result(0, 1), 2: result(1, 1)}, ("alp", "mrpc"): {1: result(0, 0)}}
    seeded = {("nkd", "mrpc"): {1: result(0, 1), 2: result(1, 0), 3: result(0, 0)}, ("alp", "mrpc"): {1: result(1, 1)}}
    assert module.teacher_free_reruns(table, seeded) == [("nkd", "mrpc", 1, True), ("nkd", "mrpc", 2, False)]
