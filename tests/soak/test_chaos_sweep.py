"""tests/soak/chaos_sweep.py: its fault schedule is the seed's, the same every time (a soak is replayed by its seed)."""

from __future__ import annotations

import importlib.util
import sys

from tests.conftest import REPO_ROOT

spec = importlib.util.spec_from_file_location("chaos_sweep", REPO_ROOT / "tests" / "soak" / "chaos_sweep.py")
chaos_sweep = importlib.util.module_from_spec(spec)
sys.modules["chaos_sweep"] = chaos_sweep  # dataclasses look their module up by name
spec.loader.exec_module(chaos_sweep)


def test_a_seed_gives_the_same_schedule_and_another_seed_another():
    schedule = chaos_sweep.fault_schedule(7)
    assert schedule == chaos_sweep.fault_schedule(7)
    assert schedule != chaos_sweep.fault_schedule(8)


def test_the_schedule_signals_workers_every_20_to_60_s_and_restarts_each_service_once():
    for seed in range(20):
        schedule = chaos_sweep.fault_schedule(seed, span=420.0)
        assert [f.at for f in schedule] == sorted(f.at for f in schedule)
        signals = [f for f in schedule if f.kind in ("sigkill", "sigterm")]
        gaps = [b.at - a.at for a, b in zip(signals, signals[1:])]
        assert 20 <= signals[0].at <= 60 and all(19.9 <= gap <= 60.1 for gap in gaps)
        assert all(0 <= f.worker < chaos_sweep.WORKERS for f in signals) and signals[-1].at < 420
        once = sorted(f.kind for f in schedule if f not in signals)
        assert once == ["fill_disk", "restart_mlflow", "restart_postgres"]


def test_the_soak_trains_its_students_the_epochs_it_says_and_its_teacher_one():
    from pathlib import Path

    from tests.sweeps.test_many_machines import tiny_conf

    text = chaos_sweep.student_epochs(tiny_conf(Path("/glue"), Path("/teacher"), "sqlite://"), 30)
    teacher, student = text.split("student:")
    assert "epochs: 1," in teacher and "epochs: 30," in student and "epochs: 1," not in student
