"""A tiny sweep table and a fake ``run_trial`` whose quality is known in advance."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

RECIPES = {
    "distill_methods": {
        "nkd": {"method": "nkd"},
        "alp": {"method": "alp", "mapping": "all", "temperature": 5.0, "weights": {"kd": 0.5, "layer": 0.2}},
        "pkd": {"method": "pkd", "mapping": "pkd_skip", "temperature": 5.0, "weights": {"kd": 0.5, "layer": 0.2}},
    },
    "ted_methods": {"kd": {"method": "kd", "temperature": 2.0, "weights": {"ce": 1.0, "pred": 1.0}}},
}

#: Probability that the fake student gets a dev example right, per method; lr 5e-5 adds 0.1.
QUALITY = {"nkd": 0.6, "alp": 0.8, "pkd": 0.6}
N_DEV = 300


def tiny_reproduce(**restrict) -> dict:
    """2 methods × 2 tasks × 2 seeds × 2 learning rates = 16 trials."""
    return {
        "table": "tiny",
        **restrict,
        "tables": {
            "tiny": {
                "paper": "a tiny test table",
                "tasks": ["rte", "sst2"],
                "seeds": [1, 2],
                "baseline": "nkd",
                "selection": "dev",
                "grid": {"training.learning_rate": [1.0e-5, 5.0e-5]},
                "methods": {
                    "nkd": {"recipe": "distill_methods.nkd", "label": "NKD"},
                    "alp": {"recipe": "distill_methods.alp", "label": "ALP"},
                },
            }
        },
    }


def dev_labels() -> np.ndarray:
    return np.random.default_rng(0).integers(0, 2, size=N_DEV)


def fake_run_trial(spec) -> dict:
    """Deterministic per trial: correct on an example with probability QUALITY[method] (+0.1 at
    lr 5e-5); the held-out metric prefers lr 1e-5 (so dev and held-out selection disagree)."""
    labels = dev_labels()
    lr = spec.params.get("training.learning_rate", 1e-5)
    quality = QUALITY.get(spec.method, 0.6) + (0.1 if lr == 5.0e-5 else 0.0)
    rng = np.random.default_rng(zlib.crc32(spec.key.encode()))
    correct = rng.random(N_DEV) < quality
    predictions = np.where(correct, labels, 1 - labels)
    return {
        "dev_metric": float(np.mean(correct)),
        "heldout_metric": 0.9 if lr == 1.0e-5 else 0.5,
        "dev_predictions": predictions.tolist(),
        "dev_labels": labels.tolist(),
        "teacher_dev_metric": 0.95,
        "run_id": spec.key,
    }


@pytest.fixture
def recipes():
    return RECIPES


def hanging_worker(storage: str, started: str) -> None:
    """A sweep worker process that takes one trial, writes its key to ``started`` and hangs in it (the test
    kills it with SIGKILL mid-trial)."""
    import time
    from pathlib import Path

    import optuna

    from bert_kd.sweeps.scheduler import SweepOptions, run_sweep
    from bert_kd.sweeps.spec import build_sweep

    optuna.logging.set_verbosity(optuna.logging.WARNING)

    def run_trial(spec):
        Path(started).write_text(spec.key)
        time.sleep(3600)

    sweep = build_sweep(tiny_reproduce(methods="alp", tasks="rte", seeds="1"), RECIPES)
    run_sweep(sweep, run_trial, storage, SweepOptions(heartbeat_interval=1, grace_period=2))
