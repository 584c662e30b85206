"""benchmarks/transfer_ablation.py and general_ablation.py read through benchmarks/paired_trials.py: fabricated
trials give the gain, its interval, Holm's p and the sentences; the committed general-ablation files are unchanged."""

from __future__ import annotations

import json
import sys
import zlib

import numpy as np
import pytest

from tests.conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))

import general_ablation as general  # noqa: E402
import paired_trials  # noqa: E402
import transfer_ablation as transfer  # noqa: E402


@pytest.fixture(autouse=True)
def fewer_resamples(monkeypatch):
    """5,000 bootstrap resamples instead of 100,000: the same reading, a twentieth of the time."""
    monkeypatch.setattr(paired_trials, "RESAMPLES", 5_000)


def _trial(task, row, arm, seed, share, examples=200):
    rng = np.random.default_rng(zlib.crc32(f"{task}-{row}-{arm}-{seed}".encode()))  # the same draws in every process
    correct = "".join("1" if x else "0" for x in rng.random(examples) < share)
    return {"task": task, "row": row, "arm": arm, "seed": seed, "evaluation": {"correct": {"validation": correct}}}


def test_an_empty_table_lists_every_cell_as_not_run_yet():
    text = transfer.table([])
    assert text.count("not run yet | not run yet") == 9
    assert "No trial pair has finished yet" in text


def test_the_reading_gives_gain_interval_holm_and_sentences():
    trials = [_trial("rte", "bilstm", "plain", s, 0.5) for s in range(3)]
    trials += [_trial("rte", "bilstm", "transfer", s, 0.8) for s in range(3)]
    trials += [_trial("mrpc", "bert2", arm, s, 0.6) for arm in ("plain", "transfer") for s in range(3)]
    cells = transfer.readings(trials)
    gain, null = cells[("rte", "bilstm")], cells[("mrpc", "bert2")]
    assert gain.seeds == 3 and 25 < 100 * gain.test.gain < 35 and gain.test.low > 0
    adjusted = transfer.holm_by_cell(cells)
    assert set(adjusted) == {("rte", "bilstm"), ("mrpc", "bert2")}
    assert adjusted[("mrpc", "bert2")][0] == pytest.approx(null.test.p)  # the larger p: times 1, above the smaller
    assert adjusted[("rte", "bilstm")][0] == pytest.approx(2 * gain.test.p)  # the smallest of 2 p-values, times 2
    text = transfer.table(trials)
    assert text.count("not run yet | not run yet") == 7
    line = next(x for x in text.splitlines() if x.startswith("| RTE | BiLSTM"))
    assert f"{100 * gain.test.gain:+.2f}" in line and f"[{100 * gain.test.low:+.2f}, " in line
    assert "BiLSTM, logits-MSE, RTE: the transfer set raises dev accuracy" in text
    assert "a gain that holds after Holm's correction over the 2 cells read" in text
    assert "2-layer BERT, logits-MSE, MRPC" in text and "no effect resolved" in text
    assert "1 of the 2 cells read show a gain" in text and "7 of 9 cells are not run yet" in text


def _at_majority(trial, share):
    trial["evaluation"]["majority_class"] = {"validation": {"accuracy": share}}
    return trial


def _one_class(task, row, arm, seed, share, examples=200):
    """A student that answers the majority class always: correct on exactly that class's share of dev."""
    trial = _trial(task, row, arm, seed, share, examples)
    right = round(share * examples)
    trial["evaluation"]["correct"]["validation"] = "1" * right + "0" * (examples - right)
    return _at_majority(trial, share)


def test_arms_at_the_majority_class_floor_are_named_and_not_read_as_a_method_effect():
    majority = 0.68
    floor = [_one_class("mrpc", "bert2", arm, s, majority) for arm in ("plain", "transfer") for s in range(3)]
    above = [_at_majority(_trial("rte", "bert2", "plain", s, 0.55), 0.53) for s in range(3)]
    above += [_at_majority(_trial("rte", "bert2", "transfer", s, 0.75), 0.53) for s in range(3)]
    cells = transfer.readings(floor + above)
    assert cells[("mrpc", "bert2")].at_floor and not cells[("rte", "bert2")].at_floor
    assert cells[("mrpc", "bert2")].majority == pytest.approx(majority)
    text = transfer.table(floor + above)
    assert "MRPC: the transfer set" in text and "a floor, not a reading of the transfer set" in text
    assert (
        "1 of the 2 cells read show a gain" in text
        and "; 1 of the 2 sit at the majority-class floor, where no gain is read;" in text
    )
    general_trials = [_one_class("mrpc", None, arm, s, majority) for arm in ("general", "truncated") for s in range(3)]
    general_text = general.table(general_trials)
    assert "| mrpc | 3 |" in general_text and "| 68.00 |" in general_text
    assert "mrpc: general student" in general_text and "says nothing about general distillation" in general_text


def test_a_trial_without_a_majority_share_is_never_at_the_floor():
    trials = [_trial("sst2", "tinybert", arm, 0, 0.7) for arm in ("plain", "transfer")]
    reading = transfer.readings(trials)[("sst2", "tinybert")]
    assert np.isnan(reading.majority) and not reading.at_floor


def test_a_lone_seed_has_no_seed_example_p():
    trials = [_trial("sst2", "tinybert", arm, 0, 0.7) for arm in ("plain", "transfer")]
    assert np.isnan(transfer.readings(trials)[("sst2", "tinybert")].seed_example_p)


def test_the_general_ablation_files_are_unchanged_by_the_shared_module(tmp_path, monkeypatch):
    monkeypatch.setattr(paired_trials, "RESAMPLES", None)  # the committed table's resamples (the statistics' own)
    results = general.RESULTS
    assert general.table(paired_trials.load_trials(results)) == (results / "table.md").read_text()
    for path in sorted((results / "trials").glob("*.json")):
        copy = tmp_path / path.name
        paired_trials.write_trial(copy, json.loads(path.read_text()))
        assert copy.read_bytes() == path.read_bytes()
    assert paired_trials.trial_path(results, "rte", "general", 0) == results / "trials" / "rte-general-0.json"


@pytest.mark.parametrize(
    "results, table",
    [
        (transfer.RESULTS, transfer.table),
        (transfer.RESULTS.parent / "transfer_ablation_steps", transfer.table),
        (general.RESULTS.parent / "general_ablation_6000", general.table),
    ],
    ids=["transfer_ablation", "transfer_ablation_steps", "general_ablation_6000"],
)
def test_each_committed_table_is_the_one_its_committed_trials_give(monkeypatch, results, table):
    """A trial committed without rebuilding its table (or a table edited by hand) fails here."""
    monkeypatch.setattr(paired_trials, "RESAMPLES", None)  # the committed tables' resamples (the statistics' own)
    assert table(paired_trials.load_trials(results)) == (results / "table.md").read_text()


def test_dotted_parameters_nest():
    assert paired_trials.nest({"a.b": 1, "a.c": 2, "d": 3}) == {"a": {"b": 1, "c": 2}, "d": 3}


def test_a_present_trial_is_skipped_and_a_new_one_written_whole(tmp_path):
    paired_trials.write_trial(paired_trials.trial_path(tmp_path, "rte", "bilstm", "plain", 0), {"kept": True})
    ran = []

    def run(*key):
        ran.append(key)
        return {"evaluation": {"metrics": {}}, "key": list(key)}

    keys = [("rte", "bilstm", arm, 0) for arm in transfer.ARMS]
    paired_trials.run_missing(tmp_path, keys, run)
    assert ran == [("rte", "bilstm", "transfer", 0)]
    assert sorted(p.name for p in (tmp_path / "trials").iterdir()) == [
        "rte-bilstm-plain-0.json",
        "rte-bilstm-transfer-0.json",
    ]
    assert json.loads((tmp_path / "trials" / "rte-bilstm-plain-0.json").read_text()) == {"kept": True}


def test_the_teacher_of_a_student_is_found_by_its_key_among_versioned_records(tmp_path):
    for stamp, key, accuracy in (("2026-01-01T00.00.00.000Z", "a", 0.7), ("2026-01-02T00.00.00.000Z", "b", 0.8)):
        version = tmp_path / paired_trials.TEACHER_METRICS / stamp
        version.mkdir(parents=True)
        record = {"info": {"key": key}, "metrics": {"validation": {"accuracy": accuracy}}}
        (version / paired_trials.TEACHER_METRICS.name).write_text(json.dumps(record))
    teacher = paired_trials.teacher_of({"info": {"teacher_key": "a"}}, tmp_path)
    assert teacher["key"] == "a" and paired_trials.teacher_accuracy({"teacher": teacher}) == 0.7
    assert paired_trials.teacher_of({"info": {"teacher_key": "c"}}, tmp_path) is None
    assert np.isnan(paired_trials.teacher_accuracy({}))


def test_trials_of_other_rows_or_settings_in_the_folder_stop_the_run_with_the_fix(tmp_path, capsys):
    general_student = tmp_path / "general"
    general_student.mkdir()
    (general_student / "config.json").write_text("{}")
    trial = {"task": "rte", "arm": "general", "seed": 0, "evaluation": {"info": {"train_examples": 500}}}
    paired_trials.write_trial(paired_trials.trial_path(tmp_path / "t", "rte", "general", 0), trial)
    args = ["--general", str(general_student), "--results", str(tmp_path / "t"), "--tasks", "rte"]
    assert general.main([*args, "--train-rows", "2000"]) == 2
    err = capsys.readouterr().err
    assert "rte-general-0.json was run with 500 training rows" in err and "--results results/<name>" in err
    assert general.main([*args, "--train-rows", "500", "--set", "training.epochs"]) == 2
    assert "'training.epochs': not KEY=VALUE" in capsys.readouterr().err
    assert general.settings(["training.epochs=5", "x.y=a"]) == {"training.epochs": 5, "x.y": "a"}


def test_training_rows_are_given_per_task_with_all_for_the_whole_split(tmp_path, capsys):
    assert general.train_rows(["2000", "mrpc=all", "rte=all"]) == {"sst2": 2000, "mrpc": None, "rte": None}
    assert general.train_rows(["rte=700", "all"]) == dict.fromkeys(general.TASKS)  # later items win
    for bad, said in (("qqp=all", "'qqp' is not one of"), ("mrpc=-3", "a positive number of rows or 'all'")):
        with pytest.raises(ValueError, match=said):
            general.train_rows([bad])
    general_student = tmp_path / "general"
    general_student.mkdir()
    (general_student / "config.json").write_text("{}")
    args = ["--general", str(general_student), "--results", str(tmp_path / "t"), "--tasks", "rte"]
    assert general.main([*args, "--train-rows", "rte=0"]) == 2
    assert "--train-rows 'rte=0'" in capsys.readouterr().err
    unrecorded = {"task": "rte", "arm": "general", "seed": 0, "evaluation": {"info": {}}}  # says no rows: never reused
    paired_trials.write_trial(paired_trials.trial_path(tmp_path / "t", "rte", "general", 0), unrecorded)
    assert general.main([*args, "--train-rows", "all"]) == 2
    assert "was run with unrecorded training rows" in capsys.readouterr().err


def test_a_cells_teachers_are_listed_and_a_teacher_at_the_floor_is_named():
    trials = [_trial("rte", "bert2", arm, s, 0.6 if arm == "plain" else 0.7) for arm in transfer.ARMS for s in range(2)]
    for trial in trials:
        trial["evaluation"]["majority_class"] = {"validation": {"accuracy": 0.5}}
        trial["teacher"] = {"metrics": {"validation": {"accuracy": 0.8 if trial["seed"] == 0 else 0.505}}}
    teacher = transfer.cell_teachers(trials, "rte", "bert2")
    assert teacher.at_floor == (1,) and teacher.cell == "65.25"
    text = transfer.table(trials)
    assert "| RTE | 2-layer BERT, logits-MSE | 2 | 65.25 |" in text
    assert "The teacher of seed 1 is within 1 point of the majority class's share" in text
    assert transfer.cell_teachers([], "rte", "bert2").cell == "–"


def test_the_step_matched_control_sets_the_plain_arms_epochs_only():
    settings = {"glue_dir": "g", "train_rows": 1000, "copies": 4, "plain_epochs": 15}
    plain = transfer.trial_params("sst2", "bilstm", "plain", 0, settings)
    assert plain["student.training.epochs"] == plain["tang_student.training.epochs"] == 15
    assert "student.training.epochs" not in transfer.trial_params("sst2", "bilstm", "transfer", 0, settings)
    assert "student.training.epochs" not in transfer.trial_params(
        "sst2", "bert2", "plain", 0, {**settings, "plain_epochs": None}
    )
    trials = [
        {**_trial("sst2", "bert2", "plain", 0, 0.6), "plain_epochs": 15},
        _trial("sst2", "bert2", "transfer", 0, 0.7),
    ]
    assert "| no transfer set, 15 epochs | transfer set |" in transfer.table(trials)
    assert "| no transfer set | transfer set |" in transfer.table([_trial("sst2", "bert2", "plain", 0, 0.6)])
    with pytest.raises(ValueError, match="several epochs"):
        transfer.plain_epochs_of([*trials, _trial("mrpc", "bert2", "plain", 0, 0.6)])


def test_a_trial_of_other_settings_in_the_folder_stops_the_run_with_the_fix(tmp_path, capsys):
    plain = {**_trial("rte", "bert2", "plain", 0, 0.6), "train_rows": 1000, "copies": 0}
    paired_trials.write_trial(paired_trials.trial_path(tmp_path, "rte", "bert2", "plain", 0), plain)
    args = ["--glue-dir", str(tmp_path), "--results", str(tmp_path), "--tasks", "rte"]
    assert transfer.main([*args, "--plain-epochs", "15"]) == 2
    err = capsys.readouterr().err
    assert "rte-bert2-plain-0.json was run with --train-rows 1000, --copies 0 and --plain-epochs None" in err
    assert "--results results/<name>" in err
    assert transfer.main([*args, "--train-rows", "500"]) == 2
    assert "not 500, 0 and None" in capsys.readouterr().err
    assert transfer.main([*args, "--plain-epochs", "0"]) == 2
    assert "--plain-epochs 0: a positive number of epochs" in capsys.readouterr().err
    assert not (tmp_path / "table.md").exists()  # refused before anything ran or was written
