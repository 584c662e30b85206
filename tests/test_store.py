"""The model store's ``runtime.recompute`` (and ``tracking.enabled``) from the hook's models or from dicts."""

from __future__ import annotations

import pytest

from bert_kd.schema import Runtime, Tracking
from bert_kd.store import recompute
from bert_kd.tracking import tracking_enabled


@pytest.mark.parametrize("form", [dict, "model"])
def test_settings_helpers_read_the_hooks_models_and_dicts_alike(form):
    tracking, runtime = {"enabled": False, "log_models": False}, {"recompute": True}
    if form == "model":
        tracking, runtime = Tracking.model_validate(tracking), Runtime.model_validate(runtime)
    assert tracking_enabled(tracking) is False and recompute(runtime) is True
    assert tracking_enabled(None) is True and recompute(None) is False  # the schema's defaults


def test_a_bad_key_in_a_notebooks_dict_names_the_block():
    from bert_kd.errors import ParameterError

    with pytest.raises(ParameterError, match="runtime.recompte"):
        recompute({"recompte": True})
