"""benchmarks/gpu/reproduce_gpu.{sh,py}: the slice record, Table 1's end-to-end estimate, the dry run
(benchmarks/step_rates.py's tests: tests/benchmarks/test_step_rates.py)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import REPO_ROOT


def _module(name: str):
    sys.path.insert(0, str(REPO_ROOT / "benchmarks" / "gpu"))
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "benchmarks" / "gpu" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def trial(task: str, seconds: float, train: float, compile_s: float = 0.0, recompiles: int = 0, method: str = "alp"):
    return {
        "spec": {
            "trial": {"task": task, "method": method},
            "student": {"training": {"epochs": 4}},
            "teacher": {"training": {"epochs": 3}},
        },
        "result": {"dev_metric": 0.5},
        "seconds": seconds,
        "compile": {"graphs": 2 if compile_s else 0, "recompiles": recompiles, "seconds": compile_s},
        "phases": {"train_s": train, "data_s": 1.0, "eval_s": 2.0, "checkpoint_s": 0.5},
    }


SIZES = {"rte": 2000, "mrpc": 4000}
DEV = {"rte": 200, "mrpc": 400}


def test_per_trial_costs_take_compilation_out_and_the_teacher_from_the_slowest_trial():
    helper = _module("reproduce_gpu")
    trials = [trial("rte", 20, 15), trial("rte", 20, 15), trial("rte", 80, 75, compile_s=0)]  # the 3rd trained it
    trials += [trial("mrpc", 40, 35 + 30, compile_s=30), trial("mrpc", 40, 35), trial("mrpc", 40, 35)]
    costs = helper.per_trial_costs(trials, SIZES, DEV)
    # (train + data − compile) / examples: rte 16 / 8000 twice (and its teacher's trial), mrpc 36 / 16000 three times
    assert costs["train_s_per_example"] == pytest.approx(36 / 16000)
    assert costs["eval_s_per_example"] == pytest.approx((2 / 800 + 2 / 1600) / 2)
    assert costs["checkpoint_s"] == 0.5
    assert costs["other_s"] == pytest.approx(20 - 18.5)  # the median of seconds − the phases
    # rte: (76 − 16) s over 2000 × 3 teacher examples; mrpc: 0 (compilation taken out) → median of the two
    assert costs["teacher_s_per_example"] == pytest.approx(((76 - 16) / 6000 + 0) / 2)


def test_table1_estimate_shares_the_gpu_among_workers_and_adds_teachers_and_compilation():
    helper = _module("reproduce_gpu")
    costs = {
        "train_s_per_example": 0.001,
        "eval_s_per_example": 0.002,
        "checkpoint_s": 1.0,
        "other_s": 9.0,
        "teacher_s_per_example": 0.0005,
    }
    table = [SimpleNamespace(task="rte", training={"epochs": 4})] * 10 + [SimpleNamespace(task="mrpc", training={})]
    estimate = helper.table1_estimate(
        costs, table, workers=4, compile_s_per_worker=36.0, train_sizes=SIZES, dev_sizes=DEV
    )
    rte = 10 + 0.001 * 2000 * 4 + 0.002 * 200 * 4
    mrpc = 10 + 0.001 * 4000 * 3 + 0.002 * 400 * 3
    assert estimate["student_gpu_hours"] == pytest.approx((10 * rte + mrpc) / 4 / 3600)
    assert estimate["teacher_gpu_hours"] == pytest.approx(0.0005 * 3 * (2000 + 4000) / 3600)
    assert estimate["compile_gpu_hours"] == pytest.approx(0.01)
    total = estimate["student_gpu_hours"] + estimate["teacher_gpu_hours"] + 0.01
    assert estimate["gpu_hours"] == pytest.approx(total) and estimate["trials"] == 11
    no_teacher = helper.table1_estimate({**costs, "teacher_s_per_example": None}, table, 4, 0.0, SIZES, DEV)
    assert no_teacher["teacher_gpu_hours"] == 0 and not no_teacher["teacher_hours_measured"]


def test_the_record_holds_the_fields_the_goal_names_and_a_note_beside_it(tmp_path):
    helper = _module("reproduce_gpu")
    trials = [trial("rte", 20, 15, compile_s=5, recompiles=1), trial("rte", 20, 15), trial("mrpc", 30, 25)]
    table = [SimpleNamespace(task="rte", training={"epochs": 4})] * 3
    summary = helper.summarize(trials, workers=2, wall_s=61.0, device="NVIDIA H100 80GB HBM3", table_trials=table)
    helper.write_record(
        summary, tmp_path / "r.json", tmp_path / "r.md", "bash benchmarks/gpu/reproduce_gpu.sh OUT", "abc1234"
    )
    record = json.loads((tmp_path / "r.json").read_text())
    for field in ("device", "trials", "workers", "wall_s", "compile_s", "train_s", "eval_s", "recompiles"):
        assert field in record, field
    assert record["trials"] == 3 and record["workers"] == 2 and record["recompiles"] == 1
    assert record["compile_s"] == 5 and record["train_s"] == 15 + 15 + 25 - 5 and record["eval_s"] == 6
    assert record["table1_gpu_hours_end_to_end"] == round(record["table1"]["gpu_hours"], 1)
    assert record["commit"] == "abc1234" and "compilation" in record["includes"]
    note = (tmp_path / "r.md").read_text()
    assert "bash benchmarks/gpu/reproduce_gpu.sh OUT" in note and "abc1234" in note and "GPU-hours" in note
    with pytest.raises(ValueError, match="no finished trial"):
        helper.summarize([], 2, 1.0, "cpu", table)


@pytest.mark.gpu_prep
def test_the_dry_run_writes_the_record_from_real_reproduce_trials(tmp_path):
    """Two workers, two tiny trials (NKD and ALP on tiny RTE), the record beside them."""
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHON": sys.executable,
    }
    result = subprocess.run(
        ["bash", str(REPO_ROOT / "benchmarks" / "gpu" / "reproduce_gpu.sh"), "--dry-run", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    record = json.loads((tmp_path / "out" / "reproduce_gpu_cpu.json").read_text())
    assert record["device"] == "cpu" and record["workers"] == 2 and record["trials"] == 2
    assert record["methods"] == ["alp", "nkd"] and record["recompiles"] == 0
    assert record["table1_gpu_hours_end_to_end"] > 0
    assert (tmp_path / "out" / "reproduce_gpu_cpu.md").exists()
