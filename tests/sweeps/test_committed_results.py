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

from bert_kd.kedro_project.config_loader import ProjectConfigLoader
from bert_kd.settings import CONFIG_LOADER_ARGS
from bert_kd.sweeps.paper_tables import markdown, report_with_bootstrap
from bert_kd.sweeps.reproduce_pipeline.nodes import DATA_KEYS
from bert_kd.sweeps.spec import RECIPE_NAMESPACES, build_sweep
from bert_kd.sweeps.trial import TrialRunner
from bert_kd.sweeps.trial_results import ResultsFolder

ROOT = Path(__file__).resolve().parents[2]
MADE_BY = re.compile(r"^Made by: `(?P<command>kedro [^`]+)`", re.MULTILINE)
COMMITTED = sorted(p for p in ROOT.glob("results/*/tables/*.md") if MADE_BY.search(p.read_text(encoding="utf-8")))


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
    runner = TrialRunner(
        params,
        ResultsFolder(path=table_md.parents[1], commit="test", results_only=True),
        data_overrides={k: runtime[k] for k in DATA_KEYS if k in runtime},
    )
    results = {t.key: r for t in sweep.trials() if (r := runner.stored_result(t)) is not None}
    stored = sorted(p.stem for p in table_md.parents[1].glob("*.json"))
    assert len(results) == len(stored), (
        f"{len(stored)} trial files in {table_md.parents[1]} but only {len(results)} match a trial of the recorded "
        "command: a change altered the trials' content keys (TrialIdentity.key_material) or the table"
    )
    report = report_with_bootstrap(sweep, results, reproduce)
    assert table_lines(markdown(report)) == table_lines(committed)
    assert report.mixed_teachers == (), f"{table_md}: a row's seeds were distilled from different teachers"


#: The main job's settings one may tune: none of them may reach a committed trial.
MAIN_JOB_CHANGES = {
    "teacher": {
        "max_seq_length": 48,
        "training": {
            "epochs": 2,
            "learning_rate": 1.0e-4,
            "batch_size": 16,
            "warmup_ratio": 0.0,
            "weight_decay": 0.0,
            "max_grad_norm": 5.0,
        },
    },
    "student": {"training": {"epochs": 2, "learning_rate": 3.0e-4}},
    # `multi_teachers` (the multi-teacher pipeline's; its first entry follows the main teacher)
    "multi_teachers": [
        {
            "name": "other",
            "model": "minilm-l6",
            "seed": 3,
            "max_seq_length": 48,
            "training": {"epochs": 1, "learning_rate": 1.0e-4},
        }
    ],
    "max_train_samples": 8000,
}


@pytest.mark.parametrize("table_md", COMMITTED, ids=lambda p: p.stem)
def test_changing_the_main_jobs_teacher_changes_no_committed_trial_key(table_md):
    """Each table states its own teacher: the global ``teacher`` block (the main job's) is not inherited."""
    runtime = cli_params(MADE_BY.search(table_md.read_text(encoding="utf-8"))["command"])
    keys = {}
    for name, extra in (("recorded", {}), ("main job changed", MAIN_JOB_CHANGES)):
        params = project_params({**runtime, **extra})
        sweep = build_sweep(params["reproduce"], {ns: params.get(ns) or {} for ns in RECIPE_NAMESPACES})
        runner = TrialRunner(
            params,
            ResultsFolder(path=table_md.parents[1], commit="test", results_only=True),
            data_overrides={k: runtime[k] for k in DATA_KEYS if k in runtime},
        )
        keys[name] = {t.key: runner.content_key(t) for t in sweep.trials()}
    assert keys["main job changed"] == keys["recorded"]


def test_v2_rechecked_trials_gave_the_committed_predictions():
    """archive/rechecks/ holds NKD trials of cpu_protocol_v2 rerun from their keys in a separate checkout and run;
    each must be a trial of the table with the committed dev predictions, metrics and best epoch. NKD's students
    never read the teacher, so their keys rerun anywhere."""
    folder = ROOT / "results" / "cpu_protocol_v2"
    rechecks = sorted((folder / "archive" / "rechecks").glob("*.json"))
    assert len(rechecks) >= 2
    for path in rechecks:
        rerun, committed = (json.loads(p.read_text(encoding="utf-8")) for p in (path, folder / path.name))
        assert rerun["key"] == committed["key"] == path.stem and rerun["trial"] == committed["trial"]
        assert rerun["spec"] == committed["spec"] and rerun["spec"]["trial"]["method"] == "nkd"
        assert rerun["finished"] != committed["finished"]  # another run of the same key
        for field in ("dev_predictions", "dev_metrics", "best_epoch"):
            assert rerun["result"][field] == committed["result"][field], f"{path.name}: {field} differs"


def test_results_hold_data_readmes_and_one_sweep_driver_only():
    """results/ is trial JSONs, their tables and a README per table; the one sweep driver lives in scripts/."""
    tracked = [p for p in (ROOT / "results").rglob("*") if p.is_file()]
    assert not [p for p in tracked if p.suffix in (".sh", ".py")]
    assert (ROOT / "scripts" / "sweep.sh").is_file()
    for table in ("cpu_protocol", "cpu_protocol_v2"):
        assert (ROOT / "results" / table / "README.md").is_file()
