"""bert_kd.tracking.format: values as the MLflow UI shows them."""

from types import SimpleNamespace

import pytest

from bert_kd.tracking.format import (
    format_param,
    layer_map_string,
    metric_key,
    recipe_string,
    weight_params,
)


def test_layer_map_string_compresses_ranges_and_names_unconnected_layers():
    assert layer_map_string([[1, 2, 3, 4, 5, 6], []]) == "1-6→1; none→2"
    assert layer_map_string([[1, 2, 3, 4], [4, 5, 6]]) == "1-4→1; 4-6→2"
    assert layer_map_string([[3], [1, 2, 5]]) == "3→1; 1-2+5→2"
    with pytest.raises(ValueError, match="mapping"):
        layer_map_string("pkd_skip")


def test_recipe_string_rounds_weights_and_shows_temperature_only_with_a_teacher_term():
    method = SimpleNamespace(weights={"ce": 1 - 0.5 - 0.2, "kd": 0.5, "layer": 0.2}, temperature=5.0)
    assert recipe_string(method) == "ce 0.3 + kd 0.5 + layer 0.2, T=5"
    assert recipe_string({"ce": 1.0, "kd": 0.0}, temperature=5.0) == "ce 1"
    with pytest.raises(ValueError, match="all zero"):
        recipe_string({"ce": 0.0})


def test_a_staged_recipe_is_logged_by_its_stages_not_its_default_weights():
    from bert_kd.core.distill.objective import WeightSchedule

    terms = ("ce", "pred", "emb", "hidden", "attn")
    schedule = WeightSchedule.parse(
        [{"fraction": 0.6, "weights": {"emb": 1, "hidden": 1, "attn": 1}}, {"weights": {"pred": 1}}], terms
    )
    method = SimpleNamespace(weights={"ce": 1.0}, temperature=1.0, schedule=schedule)
    assert recipe_string(method) == "emb 1 + hidden 1 + attn 1 (60% of epochs) → pred 1, T=1"
    assert weight_params(method) == {
        "stages.0.emb": 1.0,
        "stages.0.hidden": 1.0,
        "stages.0.attn": 1.0,
        "stages.1.pred": 1.0,
    }
    two_epochs = WeightSchedule.parse([{"epochs": 2, "weights": {"ce": 1}}, {"weights": {"ce": 1}}], terms)
    assert recipe_string(SimpleNamespace(weights={}, temperature=2.0, schedule=two_epochs)) == "ce 1 (2 epochs) → ce 1"
    assert weight_params(SimpleNamespace(weights={"ce": 0.5}, schedule=None)) == {"weights.ce": 0.5}


def test_format_param():
    assert format_param(0.1 + 0.2) == "0.3"
    assert format_param(2e-5) == "2e-05"
    assert format_param([[1, 2], []]) == "1-2→1; none→2"
    assert format_param([True, False]) == "[true, false]"


def test_metric_keys_are_valid_mlflow_names():
    assert metric_key("% of teacher") == "pct_of_teacher"
    assert metric_key("throughput (ex/s)") == "throughput_ex_s"
    assert metric_key("okd[a+b]") == "okd_a_b"


def test_scores_are_recorded_to_four_significant_digits_and_counts_exactly():
    from bert_kd.tracking.format import metric_value

    assert [metric_value(v) for v in (0.780963, 0.0421349, 96.4285, 15_617_282, 0.99996)] == [
        0.781,
        0.04213,
        96.43,
        15_617_282,
        1.0,
    ]
