"""conf/paper carries the papers' settings (checked against the cited tables)."""

from __future__ import annotations

import yaml

from tests.conftest import REPO_ROOT


def test_ted_stage1_uses_the_bert_on_glue_settings_of_table_12():
    """TED App. A.2.4, Table 12 (BERT-base on GLUE); not the GPT-2 settings of Sec. 4.3 / Table 10."""
    paper = yaml.safe_load((REPO_ROOT / "conf" / "paper" / "parameters.yml").read_text())
    training = paper["ted"]["filters"]["training"]
    assert (training["epochs"], training["batch_size"], training["learning_rate"], training["weight_decay"]) == (
        3,
        32,
        3.0e-5,
        0.0,
    )
    assert paper["ted"]["mapping"] == "distilbert"


def test_tinybert_runs_the_papers_two_task_specific_stages():
    """TinyBERT Sec. 3.2: intermediate-layer, then prediction-layer distillation (20 + 3 epochs)."""
    from bert_kd.core.distill.methods.tinybert import TinyBERT
    from bert_kd.core.distill.objective import WeightSchedule

    paper = yaml.safe_load((REPO_ROOT / "conf" / "paper" / "parameters.yml").read_text())
    schedule = WeightSchedule.parse(paper["distill_methods"]["tinybert"]["stages"], TinyBERT.term_names)
    assert schedule.stage_lengths(23) == [20, 3]
    assert schedule.stage_lengths(paper["student"]["training"]["epochs"]) == [3, 1]
    assert schedule.stages[1].weights["pred"] == 1.0 and schedule.stages[0].weights["pred"] == 0.0
