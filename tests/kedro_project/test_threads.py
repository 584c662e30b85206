"""bert_kd.kedro_project.threads: a ``kedro run`` sets torch's threads at start and says so in one line."""

import logging

import torch
from kedro.io import DataCatalog, MemoryDataset

from bert_kd.kedro_project import threads as threads_hook


def test_the_hook_sets_the_chosen_threads_and_logs_one_line(caplog, monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(threads_hook, "machine_load", lambda: (3.0, 4))
    catalog = DataCatalog({"parameters": MemoryDataset({"runtime": {"threads": None}})})
    try:
        with caplog.at_level(logging.INFO, logger=threads_hook.__name__):
            threads_hook.ThreadsHook().before_pipeline_run({}, None, catalog)
        assert torch.get_num_threads() == 1  # 4 cores at load 3: one free
        lines = [r.getMessage() for r in caplog.records if r.name == threads_hook.__name__]
        assert lines == [
            "threads: 1 torch thread for the cores free at start (load 3.0 on 4 cores; runtime.threads sets it)"
        ]
        catalog = DataCatalog({"parameters": MemoryDataset({"runtime": {"threads": 2}})})
        threads_hook.ThreadsHook().before_pipeline_run({}, None, catalog)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
