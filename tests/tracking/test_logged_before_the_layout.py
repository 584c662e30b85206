"""An MLflow model logged before the package was laid out in folders still loads and predicts.

The fixture was logged on 2026-11-26 by the code of that day: its ``MLmodel`` names the pyfunc loader
``bert_kd.tracking_models``, a module that is now :mod:`bert_kd.tracking.logged_models`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import fresh_interpreter

LOGGED = Path(__file__).parent / "fixtures" / "pyfunc_model_logged_2026-11-26"


def test_the_fixture_records_the_old_loader_module():
    assert "loader_module: bert_kd.tracking_models" in (LOGGED / "MLmodel").read_text()


def test_the_old_module_name_is_the_new_module():
    import bert_kd.tracking.logged_models
    import bert_kd.tracking_models

    assert bert_kd.tracking_models is bert_kd.tracking.logged_models


def test_importing_bert_kd_loads_no_mlflow_for_the_alias():
    code = "import sys, bert_kd; print('mlflow' in sys.modules)"
    assert fresh_interpreter.check_output(code).strip() == "False"


def test_a_model_logged_before_the_layout_loads_and_predicts():
    mlflow = pytest.importorskip("mlflow")
    import pandas as pd

    model = mlflow.pyfunc.load_model(str(LOGGED))
    predictions = model.predict(pd.DataFrame({"sentence1": ["a small test"], "sentence2": ["a test"]}))
    assert list(predictions.columns) == ["label", "score"]
    assert predictions["label"][0] in {"entailment", "not_entailment"} and 0.5 <= predictions["score"][0] <= 1.0
