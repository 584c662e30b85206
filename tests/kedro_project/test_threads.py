"""bert_kd.kedro_project.threads: a ``kedro run`` sets torch's threads at start and says so in one line."""

import logging

import torch
from kedro.io import DataCatalog, MemoryDataset

from bert_kd.core.machine import CpuUse
from bert_kd.kedro_project import threads as threads_hook


def run_hook(runtime):
    catalog = DataCatalog({"parameters": MemoryDataset({"runtime": runtime})})
    threads_hook.ThreadsHook().before_pipeline_run({}, None, catalog)


def messages(caplog):
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == threads_hook.__name__]


def test_the_hook_sets_the_chosen_threads_and_logs_one_line(caplog, monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(threads_hook, "usable_cores", lambda: 4)
    monkeypatch.setattr(threads_hook, "cpu_use_now", lambda: CpuUse(3.0, 0.3))
    try:
        with caplog.at_level(logging.INFO, logger=threads_hook.__name__):
            run_hook({"threads": None})
            assert torch.get_num_threads() == 1  # 4 cores, 3 of them busy elsewhere: one free
            assert messages(caplog) == [
                (
                    "INFO",
                    "threads: 1 torch thread (1 of 4 cores free: other processes used 3.0 cores over 0.3 s at "
                    "start; runtime.threads sets it)",
                )
            ]
            caplog.clear()
            monkeypatch.setattr(threads_hook, "cpu_use_now", lambda: CpuUse(0.0, 0.3))
            run_hook({"threads": None})  # right after a burst the load average is still high: not read
            assert torch.get_num_threads() == 4
            run_hook({"threads": 2})
            assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_more_threads_than_cores_are_capped_with_a_warning(caplog, monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.setattr(threads_hook, "usable_cores", lambda: 2)
    monkeypatch.setattr(threads_hook, "cpu_use_now", lambda: (_ for _ in ()).throw(AssertionError("not read")))
    try:
        with caplog.at_level(logging.INFO, logger=threads_hook.__name__):
            run_hook({"threads": 999})
        assert torch.get_num_threads() == 2
        (level, warning), info = messages(caplog)
        assert level == "WARNING" and "runtime.threads=999 is more than this machine's 2 cores" in warning
        assert info == ("INFO", "threads: 2 torch threads (runtime.threads=999, capped at the 2 cores)")
    finally:
        torch.set_num_threads(before)
