"""The per-batch token alignment rule (multi_teacher.alignment)."""

from __future__ import annotations

import pytest
import torch

from bert_kd.core.distill.methods.multi_teacher.alignment import tokens_aligned


def batch(t_ids, t_mask):
    return {
        "input_ids": torch.tensor([[2, 5, 6, 3], [2, 7, 3, 0]]),
        "attention_mask": torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]]),
        "t_input_ids": torch.tensor(t_ids),
        "t_attention_mask": torch.tensor(t_mask),
    }


def test_same_ids_on_valid_positions_align_even_if_padding_differs():
    assert tokens_aligned(batch([[2, 5, 6, 3], [2, 7, 3, 99]], [[1, 1, 1, 1], [1, 1, 1, 0]]), "t_")


@pytest.mark.parametrize(
    "t_ids, t_mask",
    [
        ([[2, 5, 6, 3], [2, 8, 3, 0]], [[1, 1, 1, 1], [1, 1, 1, 0]]),  # one valid id differs
        ([[2, 5, 6, 3], [2, 7, 3, 0]], [[1, 1, 1, 1], [1, 1, 1, 1]]),  # masks differ
        ([[2, 5, 6], [2, 7, 3]], [[1, 1, 1], [1, 1, 1]]),  # shapes differ
    ],
)
def test_misaligned_batches(t_ids, t_mask):
    assert not tokens_aligned(batch(t_ids, t_mask), "t_")


def test_student_columns_align_by_definition_and_missing_columns_are_named():
    assert tokens_aligned({"input_ids": torch.zeros(1, 2)}, "")
    with pytest.raises(KeyError, match="u_input_ids"):
        tokens_aligned(batch([[2]], [[1]]), "u_")


def test_the_alignment_option_is_checked_by_the_parameter_schema():
    import copy

    from kedro.config import OmegaConfigLoader

    from bert_kd import settings
    from bert_kd.config.errors import ParameterError
    from bert_kd.experiment.parameters import validate_parameters
    from tests.conftest import REPO_ROOT

    params = OmegaConfigLoader(str(REPO_ROOT / "conf"), env="local", **settings.CONFIG_LOADER_ARGS)["parameters"]
    for value in ("token", "sentence"):
        ok = copy.deepcopy(params)
        ok["multi_teacher_configs"]["multi_teacher"]["alignment"] = value
        validate_parameters(ok)
    bad = copy.deepcopy(params)
    bad["multi_teacher_configs"]["multi_teacher"]["alignment"] = "auto"  # the pre-issue-19 name
    with pytest.raises(ParameterError) as err:
        validate_parameters(bad)
    ((key, message),) = dict(err.value.problems).items()
    assert key == "multi_teacher_configs.multi_teacher.alignment" and "'token'" in message and "'sentence'" in message
