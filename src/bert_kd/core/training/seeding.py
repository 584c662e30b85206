"""Seeding the process's global random number generators (Kedro-free, no other bert_kd import: the job path
and the training loop both use it)."""

from __future__ import annotations

import random

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's global random number generators."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
