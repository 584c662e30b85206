"""bert_kd.experiment.floor: a score against its task's majority class, and the rows cut at the max length."""

from __future__ import annotations

from bert_kd.experiment.floor import Floor, card_floor, floor_of


def _evaluation(score: float, majority: float | None = 0.5271) -> dict:
    return {
        "primary_metric": "accuracy",
        "score": score,
        "metrics": {"validation": {"accuracy": score}},
        "majority_class": {"validation": {"accuracy": majority} if majority is not None else None},
        "input_cut": {"validation": {"max_length": 64, "rows": 277, "cut": 97}},
    }


def test_a_score_at_or_below_the_majority_class_is_a_warning_and_above_it_a_margin():
    assert floor_of(_evaluation(0.5235)).at_or_below and floor_of(_evaluation(0.5271)).at_or_below
    assert floor_of(_evaluation(0.5235)).standing().startswith("WARNING: accuracy 0.5235 is at or below")
    above = floor_of(_evaluation(0.6))
    assert not above.at_or_below and above.standing() == "+0.0729 over the majority class (0.5271)"
    assert above.lines()[-1] == "input cut at 64 tokens: 97 of 277 dev rows"


def test_no_floor_for_regression_and_no_cut_line_where_nothing_was_cut():
    regression = floor_of(_evaluation(0.8, majority=None))
    assert regression.standing() is None and not regression.at_or_below
    assert Floor("accuracy", 0.9, 0.5, {"validation": {"max_length": 128, "rows": 10, "cut": 0}}).lines() == [
        "+0.4000 over the majority class (0.5000)"
    ]
    assert floor_of({"primary_metric": "accuracy"}) is None


def test_mnli_reads_its_matched_split():
    evaluation = {
        "primary_metric": "accuracy",
        "score": 0.3,
        "metrics": {"validation_mismatched": {"accuracy": 0.9}, "validation_matched": {"accuracy": 0.3}},
        "majority_class": {"validation_mismatched": {"accuracy": 0.1}, "validation_matched": {"accuracy": 0.35}},
    }
    assert floor_of(evaluation).majority == 0.35 and floor_of(evaluation).at_or_below


def test_a_card_reads_the_floor_its_entry_recorded_and_none_from_an_older_entry():
    info = {"majority_class": {"accuracy": 0.5271}, "input_cut": {}, "dev_split": "validation"}
    assert card_floor(info, {"accuracy": 0.5}, "accuracy").at_or_below
    assert card_floor({}, {"accuracy": 0.5}, "accuracy") is None
