"""bert_kd.core.machine: torch threads chosen from the cores free at start, unless the user chose."""

from bert_kd.core.machine import free_cores, thread_choice


def test_the_free_cores_are_the_cores_less_the_load_and_at_least_one():
    assert [free_cores(load, 2) for load in (0.0, 0.4, 0.6, 1.0, 2.0, 6.0)] == [2, 2, 1, 1, 1, 1]
    assert free_cores(None, 8) == 8
    assert free_cores(2.2, 8) == 6


def test_runtime_threads_wins_then_omp_num_threads_then_the_free_cores():
    assert thread_choice(3, {"OMP_NUM_THREADS": "1"}, 5.0, 2) == (3, "threads: 3 torch threads (runtime.threads)")
    assert thread_choice(None, {"OMP_NUM_THREADS": "1"}, 5.0, 2) == (None, "threads: 1 torch threads (OMP_NUM_THREADS)")
    threads, line = thread_choice(None, {}, 1.3, 2)
    assert threads == 1
    assert line == "threads: 1 torch thread for the cores free at start (load 1.3 on 2 cores; runtime.threads sets it)"
    assert thread_choice(None, {}, 0.1, 2)[0] == 2
