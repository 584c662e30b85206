"""The suite's workers (pytest-xdist, `-n auto`): each runs torch on its share of the cores, and so do the
processes its tests start, so that two workers on two cores do not run four threads."""

from __future__ import annotations

import os

import pytest
import torch

from tests import conftest


def test_a_worker_runs_torch_on_its_share_of_the_cores():
    if conftest.WORKER_THREADS is None:
        pytest.skip("not an xdist worker (-n0), or OMP_NUM_THREADS set by the caller: torch keeps that setting")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    share = max(1, cores // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    assert share == conftest.WORKER_THREADS
    assert torch.get_num_threads() == share  # set before torch was imported
    assert os.environ["OMP_NUM_THREADS"] == str(share)  # inherited by the processes a test starts
