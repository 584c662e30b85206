"""bert_kd.core.machine: torch threads chosen from other processes' CPU use now, unless the user chose."""

import pytest

from bert_kd.core.machine import (
    CpuSample,
    CpuUse,
    cpu_use_now,
    free_cores,
    parse_proc_stat,
    parse_self_stat,
    read_proc,
    thread_choice,
)

PROC_STAT = """cpu  11526 411 4209 58697 546 0 85 6 0 0
cpu0 1260 24 1120 35185 96 0 6 2 0 0
cpu1 10266 387 3089 23511 449 0 78 4 0 0
intr 1 2 3
ctxt 42
"""
SELF_STAT = "8941 (a (b) c) R 8878 8878 4781 0 -1 4194304 97 0 0 0 150 25 7 3 20 0 1 0 37930 3133440 382"


def _sample(values):
    busy, total, own = values
    return CpuSample(busy=busy, total=total, online=2, own=own)


def use_of(first, second, window_s=0.3):
    """Other processes' cores from two (busy, total, own) readings ``window_s`` apart."""
    readings = iter([first, second])
    slept = []
    use = cpu_use_now(lambda: _sample(next(readings)), slept.append, window_s)
    assert slept == [window_s]
    return use


def test_proc_files_are_parsed_into_busy_total_and_own_ticks():
    busy, total, online = parse_proc_stat(PROC_STAT)
    assert (busy, total, online) == (11526 + 411 + 4209 + 0 + 85 + 6, 11526 + 411 + 4209 + 58697 + 546 + 85 + 6, 2)
    assert parse_self_stat(SELF_STAT) == 175  # utime 150 + stime 25; a name with spaces and brackets
    sample = read_proc()  # this machine's own /proc (Linux)
    assert sample.total >= sample.busy >= 0 and sample.online >= 1 and sample.own >= 0


def test_other_processes_use_is_the_machines_busy_time_less_this_processs_own():
    # 2 cores, 0.3 s of 100 ticks/s: 60 ticks in all
    # idle right after a burst: the load average lags a minute, this reading does not
    assert use_of((0, 0, 0), (0, 60, 0)).other_cores == 0.0
    assert use_of((0, 0, 0), (60, 60, 0)).other_cores == pytest.approx(2.0)  # two spinning threads elsewhere
    assert use_of((0, 0, 0), (30, 60, 0)).other_cores == pytest.approx(1.0)  # one
    assert use_of((0, 0, 0), (30, 60, 30)).other_cores == pytest.approx(0.0)  # this process's own work is not others'
    assert use_of((5, 10, 3), (5, 10, 3)).other_cores is None  # no ticks passed: unknown


def test_an_unreadable_proc_is_unknown_and_takes_every_core(tmp_path):
    def missing():
        return read_proc(tmp_path)

    use = cpu_use_now(missing, lambda s: None)
    assert use.other_cores is None
    threads, line, warning = thread_choice(None, {}, use, 2)
    assert threads == 2 and warning is None
    assert "other processes' CPU use unreadable here" in line


def test_a_core_counts_as_taken_when_another_process_holds_half_of_it():
    assert [free_cores(other, 2) for other in (0.0, 0.3, 0.49, 0.5, 1.0, 1.6, 2.0, 6.0)] == [2, 2, 2, 1, 1, 1, 1, 1]
    assert free_cores(None, 8) == 8
    assert free_cores(2.2, 8) == 6


def test_runtime_threads_wins_capped_at_the_cores_then_omp_num_threads_then_the_free_cores():
    busy = CpuUse(2.0, 0.3)
    assert thread_choice(2, {"OMP_NUM_THREADS": "1"}, busy, 2) == (
        2,
        "threads: 2 torch threads (runtime.threads)",
        None,
    )
    threads, line, warning = thread_choice(999, {}, busy, 2)
    assert (threads, line) == (2, "threads: 2 torch threads (runtime.threads=999, capped at the 2 cores)")
    assert "runtime.threads=999 is more than this machine's 2 cores" in warning
    # a torchrun share of 2 cores: the cap is the machine's 8
    assert thread_choice(4, {}, busy, 2, machine_cores=8)[0] == 4
    assert thread_choice(None, {"OMP_NUM_THREADS": "1"}, busy, 2) == (
        None,
        "threads: 1 torch threads (OMP_NUM_THREADS)",
        None,
    )
    assert thread_choice(None, {}, CpuUse(1.3, 0.3), 2) == (
        1,
        "threads: 1 torch thread (1 of 2 cores free: other processes used 1.3 cores over 0.3 s at start; "
        "runtime.threads sets it)",
        None,
    )
    assert thread_choice(None, {}, CpuUse(0.1, 0.3), 2) == (
        2,
        "threads: 2 torch threads (all 2 cores free: other processes used 0.1 cores over 0.3 s at start; "
        "runtime.threads sets it)",
        None,
    )
