"""A training run's set-up from parameter blocks: adaptive loss-logging interval, dicts and models alike."""

from __future__ import annotations

import pytest

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
    config = runs.training_config(section, None, 0, "rte", None, n_train=rows)
    assert config.log_every_steps == expected


def test_training_config_is_the_same_for_parameter_dicts_and_their_validated_models():
    """Nodes get dicts (notebooks, tests, sweep trials) or the hook's validated models: same config, same job key."""
    from bert_kd.config.schema import Runtime, Training
    from bert_kd.experiment.jobs import training_spec

    section = {"epochs": 1, "batch_size": 8, "learning_rate": "1e-4"}
    runtime = {"group_by_length": True, "eval_batch_size": 16, "recompute": True}
    as_dicts = runs.training_config(section, runtime, 5, "rte", "ckpt", n_train=48)
    as_models = runs.training_config(
        Training.model_validate(section), Runtime.model_validate(runtime), 5, "rte", "ckpt", n_train=48
    )
    assert as_dicts == as_models and training_spec(vars(as_dicts)) == training_spec(vars(as_models))
    assert (as_models.seed, as_models.select_metric, as_models.checkpoint_dir, as_models.keep_checkpoint) == (
        5,
        "accuracy",
        "ckpt",
        True,
    )
    assert (as_models.group_by_length, as_models.eval_batch_size, as_models.log_every_steps) == (True, 16, 1)
    assert Runtime().group_by_length and not runs.training_config(section, Runtime(), 5, "rte", None).group_by_length
    assert runs.training_config(section, {"log_every_steps": 4}, 5, "rte", None, n_train=48).log_every_steps == 4


def test_losses_are_logged_often_enough_to_draw_a_curve_and_no_more():
    from bert_kd.experiment.run_setup import adaptive_log_every

    assert adaptive_log_every(60) == 1
    assert adaptive_log_every(300) == 6
    assert adaptive_log_every(30000) == 10


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
