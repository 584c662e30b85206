"""The local copy of MLflow's rule for registered model names agrees with MLflow's own."""

import pytest
from mlflow.exceptions import MlflowException
from mlflow.utils.validation import _validate_model_name

from bert_kd.config.errors import ParameterError
from bert_kd.config.schema import Tracking, registered_model_name_problem, typed

NAMES = [
    "bert_kd-rte-student",
    "a b",
    "x.y",
    "x/y",
    "a:b",
    "..",
    ".",
    "a/../b",
    "../x",
    "/abs",
    "a//b",
    "./a",
    "  ",
    "é-ü",
]


@pytest.mark.parametrize("name", NAMES)
def test_same_verdict_and_message_as_mlflow(name):
    try:
        _validate_model_name(name)
        expected = None
    except MlflowException as exc:
        expected = exc.message.rstrip(".")
    assert registered_model_name_problem(name) == expected


def test_a_bad_name_is_a_parameter_error_naming_the_rule():
    with pytest.raises(ParameterError, match="cannot contain '/' or ':'"):
        typed(Tracking, {"registered_model": "x/y:1"}, "tracking")
