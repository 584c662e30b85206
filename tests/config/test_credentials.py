"""Passwords in database URLs: masked where written, moved out of the parameters into PGPASSWORD."""

from __future__ import annotations

import pytest

from bert_kd.config import credentials
from bert_kd.config.errors import UserError


@pytest.mark.parametrize(
    "text, masked",
    [
        ("postgresql+psycopg://bert_kd:s3cret@db:5433/x", "postgresql+psycopg://bert_kd:***@db:5433/x"),
        (
            "kedro run --params reproduce.storage=postgresql://u:p%40ss@h/db,x=1",
            "kedro run --params reproduce.storage=postgresql://u:***@h/db,x=1",
        ),
        (
            "http://alice:t0ken@mlflow:5000 and mysql://root:pw@h/d",
            "http://alice:***@mlflow:5000 and mysql://root:***@h/d",
        ),
        ("postgresql+psycopg://bert_kd@127.0.0.1:5433/x", "postgresql+psycopg://bert_kd@127.0.0.1:5433/x"),
        ("sqlite:///data/09_sweeps/optuna.db", "sqlite:///data/09_sweeps/optuna.db"),
    ],
)
def test_mask_hides_every_password_and_keeps_the_rest(text, masked):
    assert credentials.mask(text) == masked


def test_the_password_leaves_the_parameters_for_pgpassword(monkeypatch):
    monkeypatch.delenv("PGPASSWORD", raising=False)
    params = {"reproduce": {"storage": "postgresql+psycopg://bert_kd:s3cret@db:5433/bert_kd_optuna"}}
    credentials.move_password_to_environment(params)
    assert params["reproduce"]["storage"] == "postgresql+psycopg://bert_kd@db:5433/bert_kd_optuna"
    import os

    assert os.environ["PGPASSWORD"] == "s3cret"
    credentials.move_password_to_environment(params)  # a second load finds nothing to move
    assert os.environ["PGPASSWORD"] == "s3cret"


def test_two_different_passwords_are_refused_naming_the_key(monkeypatch):
    monkeypatch.setenv("PGPASSWORD", "other")
    params = {"reproduce": {"storage": "postgresql://u:s3cret@db/x"}}
    with pytest.raises(UserError) as caught:
        credentials.move_password_to_environment(params)
    assert caught.value.where == "reproduce.storage" and "s3cret" not in caught.value.block()


def test_a_url_without_password_or_of_another_scheme_is_left_alone(monkeypatch):
    monkeypatch.delenv("PGPASSWORD", raising=False)
    for url in ("postgresql://u@db/x", "sqlite:///x.db", "mysql://u:pw@h/d"):
        params = {"reproduce": {"storage": url}}
        credentials.move_password_to_environment(params)
        assert params["reproduce"]["storage"] == url
    credentials.move_password_to_environment({})  # no reproduce block at all
    import os

    assert "PGPASSWORD" not in os.environ


def test_scrub_masks_every_string_of_a_nested_value_and_keeps_its_shape():
    value = {
        "runtime_params": {"reproduce": {"storage": "postgresql://u:s3cret@db/x"}, "seed": 3},
        "argv": ["--params", "reproduce.storage=mysql://root:pw@h/d"],
        "pair": ("http://alice:t0ken@mlflow:5000", 1.5),
        "postgresql://k:keypw@h/d": None,
    }
    scrubbed = credentials.scrub(value)
    assert scrubbed == {
        "runtime_params": {"reproduce": {"storage": "postgresql://u:***@db/x"}, "seed": 3},
        "argv": ["--params", "reproduce.storage=mysql://root:***@h/d"],
        "pair": ("http://alice:***@mlflow:5000", 1.5),
        "postgresql://k:***@h/d": None,
    }
    assert value["runtime_params"]["reproduce"]["storage"] == "postgresql://u:s3cret@db/x"  # a copy: not in place
