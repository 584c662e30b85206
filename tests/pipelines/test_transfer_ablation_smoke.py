"""End to end: one pair of benchmarks/transfer_ablation.py's trials (the BiLSTM without and with the transfer set)
through real Kedro sessions on the tiny teacher and tiny RTE, then its table row."""

from __future__ import annotations

import sys

import pytest

from tests.conftest import REPO_ROOT
from tests.pipelines.conftest import TINY_TRAINING

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))

import paired_trials  # noqa: E402
import transfer_ablation  # noqa: E402


@pytest.mark.slow
def test_one_trial_pair_runs_and_reads(run_pipeline, tiny_teacher_dir, tiny_glue_dir, tmp_path, monkeypatch):
    root = tmp_path  # run_pipeline's scratch project, its store holding the tiny teacher
    settings = {
        "glue_dir": str(tiny_glue_dir),
        "train_rows": None,
        "copies": 2,
        "extra": {
            "teacher.model": str(tiny_teacher_dir),
            "teacher.max_seq_length": 32,
            "teacher.training": TINY_TRAINING,
            "tang_student.bilstm": {"hidden_size": 8, "classifier_size": 8},
            "tang_student.training": {**TINY_TRAINING, "learning_rate": 1e-3},
            "augment.max_source_rows": 16,
            "runtime.checkpoint_every_steps": 0,
        },
    }
    trials = [
        transfer_ablation.run_trial("rte", "bilstm", arm, 0, settings, root=root) for arm in ("plain", "transfer")
    ]
    assert [t["pipeline"] for t in trials] == ["distill_bilstm", "distill_bilstm_transfer"]
    assert all(len(t["evaluation"]["correct"]["validation"]) == 24 for t in trials)  # tiny RTE's dev rows
    for trial in trials:
        paired_trials.write_trial(paired_trials.trial_path(root / "results", "rte", "bilstm", trial["arm"], 0), trial)
    monkeypatch.setattr(paired_trials, "RESAMPLES", 2_000)
    text = transfer_ablation.table(paired_trials.load_trials(root / "results"))
    line = next(x for x in text.splitlines() if x.startswith("| RTE | BiLSTM"))
    assert "| 1 |" in line and "not run yet" not in line and "BiLSTM, logits-MSE, RTE: the transfer set" in text
