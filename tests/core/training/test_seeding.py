"""bert_kd.core.training.seeding: one call seeds Python's, NumPy's and torch's global generators."""

import random

import numpy as np
import torch

from bert_kd.core.training.seeding import seed_everything


def test_seed_everything_repeats_every_generators_draws():
    def draws():
        return random.random(), float(np.random.rand()), float(torch.rand(1))

    seed_everything(11)
    first = draws()
    seed_everything(11)
    assert draws() == first
    seed_everything(12)
    assert all(a != b for a, b in zip(draws(), first))
