"""The paired reading (bert_kd.analysis.paired): the floor read per student on known cases, and the committed
ablation tables rendered from their trial files give the numbers their scripts' tables gave before the trials
moved into the sweep layout (the scripts' ``table.md``, pinned here cell by cell)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bert_kd.analysis import paired
from tests.conftest import REPO_ROOT

#: The scripts' tables (results/<table>/table.md before the conversion): task, student, seeds, teacher, reference
#: arm, compared arm, gain, 95% interval, bootstrap p, Holm p (transfer tables only), p (seed + example).
PINNED = {
    "transfer_ablation": [
        (
            "sst2",
            "BiLSTM, logits-MSE",
            3,
            "78.71",
            "72.67",
            "72.59",
            "-0.08",
            "[-1.64, +1.49]",
            "0.549",
            "1.000",
            "0.522",
        ),
        (
            "sst2",
            "2-layer BERT, logits-MSE",
            3,
            "78.71",
            "52.87",
            "76.57",
            "+23.70",
            "[+19.69, +27.75]",
            "0.000",
            "0.000",
            "0.000",
        ),
        (
            "sst2",
            "TinyBERT task stage",
            3,
            "78.71",
            "50.92",
            "75.76",
            "+24.85",
            "[+20.49, +29.24]",
            "0.000",
            "0.000",
            "0.000",
        ),
        (
            "mrpc",
            "BiLSTM, logits-MSE",
            3,
            "70.51",
            "70.42",
            "70.59",
            "+0.16",
            "[-0.57, +0.90]",
            "0.371",
            "1.000",
            "0.353",
        ),
        (
            "mrpc",
            "2-layer BERT, logits-MSE",
            3,
            "70.51",
            "68.95",
            "70.67",
            "+1.72",
            "[-0.65, +4.08]",
            "0.085",
            "0.507",
            "0.080",
        ),
        (
            "mrpc",
            "TinyBERT task stage",
            3,
            "70.51",
            "68.38",
            "70.51",
            "+2.12",
            "[-0.08, +4.41]",
            "0.030",
            "0.212",
            "0.031",
        ),
        (
            "rte",
            "BiLSTM, logits-MSE",
            3,
            "52.47",
            "52.59",
            "52.11",
            "-0.48",
            "[-3.97, +3.01]",
            "0.619",
            "1.000",
            "0.591",
        ),
        (
            "rte",
            "2-layer BERT, logits-MSE",
            3,
            "52.47",
            "52.59",
            "53.31",
            "+0.72",
            "[-2.65, +4.09]",
            "0.347",
            "1.000",
            "0.379",
        ),
        (
            "rte",
            "TinyBERT task stage",
            3,
            "52.47",
            "50.90",
            "51.99",
            "+1.08",
            "[-2.89, +5.05]",
            "0.302",
            "1.000",
            "0.295",
        ),
    ],
    "transfer_ablation_steps": [
        (
            "sst2",
            "BiLSTM, logits-MSE",
            3,
            "78.71",
            "72.40",
            "72.59",
            "+0.19",
            "[-1.38, +1.76]",
            "0.412",
            "1.000",
            "0.405",
        ),
        (
            "sst2",
            "2-layer BERT, logits-MSE",
            3,
            "78.71",
            "76.76",
            "76.57",
            "-0.19",
            "[-1.15, +0.76]",
            "0.670",
            "1.000",
            "0.655",
        ),
        (
            "sst2",
            "TinyBERT task stage",
            3,
            "78.71",
            "76.61",
            "75.76",
            "-0.84",
            "[-1.83, +0.15]",
            "0.957",
            "1.000",
            "0.952",
        ),
        (
            "mrpc",
            "BiLSTM, logits-MSE",
            3,
            "70.51",
            "70.92",
            "70.59",
            "-0.33",
            "[-1.14, +0.49]",
            "0.812",
            "1.000",
            "0.771",
        ),
        (
            "mrpc",
            "2-layer BERT, logits-MSE",
            3,
            "70.51",
            "71.49",
            "70.67",
            "-0.82",
            "[-2.12, +0.49]",
            "0.900",
            "1.000",
            "0.888",
        ),
        (
            "mrpc",
            "TinyBERT task stage",
            3,
            "70.51",
            "70.51",
            "70.51",
            "+0.00",
            "[-0.74, +0.74]",
            "0.544",
            "1.000",
            "0.500",
        ),
        ("rte", "BiLSTM, logits-MSE", 0, "", "not run yet", "not run yet", "", "", "", "", ""),
        ("rte", "2-layer BERT, logits-MSE", 0, "", "not run yet", "not run yet", "", "", "", "", ""),
        ("rte", "TinyBERT task stage", 0, "", "not run yet", "not run yet", "", "", "", "", ""),
    ],
    "general_ablation": [
        (
            "sst2",
            "TinyBERT task stage",
            3,
            "69.69",
            "50.92",
            "50.92",
            "+0.00",
            "[+0.00, +0.00]",
            "1.000",
            None,
            "1.000",
        ),
        (
            "mrpc",
            "TinyBERT task stage",
            3,
            "68.55",
            "68.38",
            "68.38",
            "+0.00",
            "[+0.00, +0.00]",
            "1.000",
            None,
            "1.000",
        ),
        ("rte", "TinyBERT task stage", 3, "52.35", "52.95", "52.71", "-0.24", "[-1.32, +0.84]", "0.712", None, "0.672"),
    ],
    "general_ablation_6000": [
        (
            "sst2",
            "TinyBERT task stage",
            3,
            "86.28",
            "78.21",
            "78.17",
            "-0.04",
            "[-0.61, +0.50]",
            "0.572",
            None,
            "0.553",
        ),
        (
            "mrpc",
            "TinyBERT task stage",
            3,
            "78.19",
            "69.93",
            "70.18",
            "+0.25",
            "[-0.25, +0.82]",
            "0.226",
            None,
            "0.193",
        ),
        ("rte", "TinyBERT task stage", 3, "55.23", "52.59", "52.47", "-0.12", "[-1.56, +1.32]", "0.594", None, "0.563"),
    ],
}


def record(method, task, seed, predictions, labels, teacher=None):
    result = {"dev_predictions": list(predictions), "dev_labels": list(labels)}
    if teacher is not None:
        result["teacher_dev_metrics"] = {"accuracy": teacher}
    return {"spec": {"trial": {"method": method, "task": task, "seed": seed}}, "result": result}


ROWS = [
    {"name": "a", "arm": "plain", "cell": "s", "label": "S, plain"},
    {"name": "b", "arm": "set", "cell": "s", "label": "S, set"},
]


def test_the_floor_is_read_per_student_and_per_teacher():
    labels = [0] * 60 + [1] * 40  # majority share 0.60
    rng = np.random.default_rng(0)
    mixed = [int(v) for v in rng.integers(0, 2, 100)]
    records = [
        record("a", "rte", 1, [1] * 100, labels, teacher=0.70),  # the minority class always: one-class too
        record("b", "rte", 1, mixed, labels, teacher=0.70),
        record("a", "rte", 2, [0] * 96 + [1] * 4, labels, teacher=0.59),  # 96% one class; teacher below majority
        record("b", "rte", 2, mixed, labels, teacher=0.59),
    ]
    (cell,) = paired.cells_of(records, ROWS, ("plain", "set"), ("rte",), 2_000)
    assert cell.one_class == (2, 0) and cell.majority == pytest.approx(0.60)
    assert cell.teachers_at_majority == (2,) and cell.unreadable  # a mean teacher of 64.5 would have hidden seed 2
    text = paired.reading([cell], ("plain", "set"))
    assert "cannot be read" in text and "2 of 2 plain, 0 of 2 set" in text and "seed 2 is at or below" in text
    fine = [dict(r, result={**r["result"], "teacher_dev_metrics": {"accuracy": 0.9}}) for r in records]
    (good,) = paired.cells_of(fine, ROWS, ("plain", "set"), ("rte",), 2_000)
    assert not good.unreadable and good.teachers_at_majority == ()
    margin = [dict(r, result={**r["result"], "teacher_dev_metrics": {"accuracy": 0.615}}) for r in records]
    assert paired.cells_of(margin, ROWS, ("plain", "set"), ("rte",), 2_000)[0].unreadable  # within 2 points


def test_a_cell_without_a_shared_seed_is_not_run_yet():
    records = [record("a", "rte", 1, [0, 1], [0, 1], teacher=0.9)]
    (cell,) = paired.cells_of(records, ROWS, ("plain", "set"), ("rte",), 2_000)
    assert not cell.read and "not run yet" in paired.reading([cell], ("plain", "set"))


@pytest.mark.slow  # 100,000 resamples per cell, as the committed readings: about 10 s a table
@pytest.mark.parametrize("table", sorted(PINNED))
def test_the_committed_paired_tables_give_the_scripts_numbers(table):
    cells, _ = paired.folder_cells(REPO_ROOT / "results" / table)
    got = {(c.task, c.label): c for c in cells}
    for task, label, seeds, teacher, reference, compared, gain, interval, p, holm, p2 in PINNED[table]:
        if seeds == 0:  # a cell the script's table listed as not run yet (RTE of the step-matched control)
            assert (task, label) not in got
            continue
        c = got[(task, label)]
        t = c.test
        assert (len(c.seeds), paired.pct(c.teacher_mean), paired.pct(c.reference), paired.pct(c.compared)) == (
            seeds,
            teacher,
            reference,
            compared,
        )
        assert f"{100 * t.gain:+.2f}" == gain and f"[{100 * t.low:+.2f}, {100 * t.high:+.2f}]" == interval
        assert f"{t.p:.3f}" == p and f"{c.seed_example_p:.3f}" == p2
        assert holm is None or f"{c.holm_p:.3f}" == holm
        assert not math.isnan(c.majority)


@pytest.mark.parametrize("table", sorted(PINNED))
def test_every_committed_trial_of_a_paired_table_is_a_trial_of_its_table_as_conf_defines_it(table):
    """A change of what a trial's key holds (a new option of a block its pipeline reads) must leave the committed
    trials' keys as they are where it changes nothing they computed, or the folder no longer renders."""
    from bert_kd.analysis.table import table_keys, trial_files

    folder = REPO_ROOT / "results" / table
    files = trial_files(folder)  # refuses a folder holding a JSON that is not a trial of the table
    assert files and {path.stem for path in files} <= table_keys(folder.resolve())
