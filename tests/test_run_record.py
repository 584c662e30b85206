"""scripts/run_record.py: a main-job log and two pytest logs become whole JSON records."""

from __future__ import annotations

import importlib.util
import json
from datetime import datetime

from tests.benchmarks.test_stage_times import log_lines
from tests.conftest import REPO_ROOT

spec = importlib.util.spec_from_file_location("run_record", REPO_ROOT / "scripts" / "run_record.py")
run_record = importlib.util.module_from_spec(spec)
spec.loader.exec_module(run_record)

TIME_V = """\tUser time (seconds): 50.25
\tSystem time (seconds): 2.75
\tElapsed (wall clock) time (h:mm:ss or m:ss): 1:02.50
\tMaximum resident set size (kbytes): 2097152"""


def test_a_main_job_log_gives_accuracies_stages_time_and_load(tmp_path):
    start = datetime(2026, 11, 27, 23, 59, 40).timestamp()
    end = datetime(2026, 11, 28, 0, 0, 42).timestamp()
    lines = log_lines(start, end)
    lines.insert(7, "00:00:38.000 bert_kd.core.training.loop INFO alp student sst2 epoch 1: {'accuracy': 0.80851}")
    head = [
        "candidate: x",
        "threads: 2",
        "params: glue_dir=../shared/glue",
        "nice: 10",
        "load before: up 1 min,  load average: 6.72, 6.7, 5.5",
    ]
    log = tmp_path / "x.log"
    log.write_text("\n".join([*head, *lines, TIME_V, "load after: load average: 7.10, 7.0, 6.0"]) + "\n")
    out = tmp_path / "record.json"
    assert run_record.main(["main-job", str(log), str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["teacher_dev_accuracy_each_epoch"] == [80.0, 85.0] and record["teacher_dev_accuracy"] == 85.0
    assert record["student_dev_accuracy"] == 80.85
    assert (record["wall_s"], record["cpu_s"], record["peak_rss_gb"]) == (62.5, 53.0, 2.0)
    assert (record["threads"], record["niceness"], record["load_before"], record["load_after"]) == (2, 10, 6.72, 7.1)
    assert record["stage_seconds"]["wall"] == 62.0 and {"machine", "commit", "clean"} <= set(record)


def test_suite_logs_give_each_tiers_wall_and_counts_and_a_tier_not_run_is_null(tmp_path):
    readme = tmp_path / "readme.log"
    readme.write_text(
        "command: python -m pytest -q\nload before: load average: 0.10\n....\n"
        "============================= slowest 25 durations =============================\n"
        "335.90s call     tests/benchmarks/test_gpu_run.py::test_dry_run\n"
        "49.39s setup    tests/pipelines/test_multiprocess.py::test_two\n"
        "2 failed, 1341 passed, 3 skipped, 9 warnings in 270.12s (0:04:30)\nload after: load average: 1.9\n"
    )
    out = tmp_path / "suite.json"
    assert run_record.main(["suite", str(readme), str(tmp_path / "slow.log"), str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["readme_command"]["wall_s"] == 270.1 and record["slow_tier"] is None
    assert record["readme_command"]["counts"] == {"failed": 2, "passed": 1341, "skipped": 3, "warnings": 9}
    assert (record["readme_command"]["load_before"], record["readme_command"]["load_after"]) == (0.1, 1.9)
    assert record["readme_command"]["slowest"] == [
        {"s": 335.9, "phase": "call", "test": "tests/benchmarks/test_gpu_run.py::test_dry_run"},
        {"s": 49.39, "phase": "setup", "test": "tests/pipelines/test_multiprocess.py::test_two"},
    ]


def test_a_log_without_its_measurements_writes_no_record(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("candidate: x\n")
    assert run_record.main(["main-job", str(log), str(tmp_path / "r.json")]) == 2
    assert not list(tmp_path.glob("r.json*"))


def test_a_reference_row_is_carried_by_column_with_its_source(tmp_path):
    table = tmp_path / "t.md"
    table.write_text("| run | wall s | CPU s |\n|---|---|---|\n| idle | **164** | 292 |\n| busy | 900 | 1,000 |\n")
    row = run_record.reference_row("idle", table)
    assert row == {"source": f"{table} (idle)", "wall s": "164", "CPU s": "292"}
