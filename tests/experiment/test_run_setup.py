"""A training run's set-up from parameter blocks: adaptive loss-logging interval, dicts and models alike."""

from __future__ import annotations

import pytest

from bert_kd.config.schema import Runtime, Training
from bert_kd.experiment import run_setup as runs


@pytest.mark.parametrize(
    ("section", "rows", "expected"),
    [
        ({"epochs": 1, "batch_size": 8}, 48, 1),  # 6 steps: every step
        ({"epochs": 3, "batch_size": 32}, 3000, 5),  # 282 steps: every 5
        ({"epochs": 3, "batch_size": 32}, 67349, 10),  # capped at 10
        ({"epochs": 1, "batch_size": 8, "log_every_steps": 4}, 48, 4),  # the user's choice wins
    ],
)
def test_loss_logging_interval_adapts_to_the_run_length(section, rows, expected):
    config = runs.training_config(Training.model_validate(section), Runtime(), 0, "rte", None, n_train=rows)
    assert config.log_every_steps == expected


def test_training_config_reads_the_validated_blocks():
    """The training block's and runtime's set keys reach the config; the run's settings beside them."""
    section = Training.model_validate({"epochs": 1, "batch_size": 8, "learning_rate": "1e-4"})
    runtime = Runtime.model_validate({"group_by_length": True, "eval_batch_size": 16, "recompute": True})
    config = runs.training_config(section, runtime, 5, "rte", "ckpt", n_train=48)
    assert (config.seed, config.select_metric, config.checkpoint_dir, config.keep_checkpoint) == (
        5,
        "accuracy",
        "ckpt",
        True,
    )
    assert (config.epochs, config.batch_size, config.learning_rate) == (1.0, 8, 1e-4)
    assert (config.group_by_length, config.eval_batch_size, config.log_every_steps) == (True, 16, 1)
    assert Runtime().group_by_length and not runs.training_config(section, Runtime(), 5, "rte", None).group_by_length
    chosen = Runtime(log_every_steps=4)
    assert runs.training_config(section, chosen, 5, "rte", None, n_train=48).log_every_steps == 4


def test_run_settings_hold_the_validated_tracking_and_runtime_blocks():
    """A dict becomes its schema model once, when the run settings are built: what reads them gets models
    whose set keys are the dict's (the same TrainingConfig and job keys as the dict gave)."""
    from bert_kd.config.errors import ParameterError
    from bert_kd.config.schema import Runtime, Tracking

    settings = runs.RunSettings("rte", 1, {"enabled": False}, {"recompute": True})
    assert settings.tracking == Tracking(enabled=False) and settings.runtime.recompute is True
    assert settings.runtime.model_fields_set == {"recompute"}
    assert runs.RunSettings("rte", 1).runtime == Runtime() and runs.RunSettings("rte", 1).tracking == Tracking()
    with pytest.raises(ParameterError, match=r"runtime\.recompte"):
        runs.RunSettings("rte", 1, runtime={"recompte": True})
