"""bert_kd.core.distill.gradient_share: each weighted term's share of the student's gradient."""

from __future__ import annotations

import logging
import math

import pytest
import torch

from bert_kd.core.distill.gradient_share import (
    first_batches,
    inert_warnings,
    log_gradient_shares,
    measure_recipe_shares,
    shares_for,
)
from bert_kd.core.distill.methods import build_method
from bert_kd.core.distill.objective import DistillationObjective, Teacher
from bert_kd.core.models import build_student
from bert_kd.tracking import RunLogger


def objective_for(rte, weights, stages=None):
    teacher, datasets, collator = rte
    torch.manual_seed(0)
    student = build_student(teacher, 2)[0]
    recipe = {"method": "pkd", "mapping": [[3], []], "temperature": 5.0, "weights": weights}
    if stages:
        recipe = {**recipe, "stages": stages}
        recipe.pop("weights")
    method = build_method(recipe, student, [teacher])
    return DistillationObjective(student, [Teacher(teacher)], method, method.weights), datasets["train"], collator


def by_term(rows):
    return {r.term: r for r in rows}


def test_shares_for_is_the_weighted_norm_over_their_sum():
    rows = by_term(shares_for({"ce": 2.0, "kd": 1.0, "layer": 10.0}, {"ce": 0.5, "kd": 1.0, "layer": 0.01}))
    # weighted norms 1.0, 1.0, 0.1 → shares 1/2.1, 1/2.1, 0.1/2.1
    assert math.isclose(rows["ce"].share, 1 / 2.1) and math.isclose(rows["layer"].share, 0.1 / 2.1)
    assert rows["layer"].inert and not rows["kd"].inert
    assert not by_term(shares_for({"layer": 0.0}, {"layer": 0.0}))["layer"].inert  # weight 0: not warned about


def test_measured_shares_sum_to_one_and_follow_the_weight(rte):
    objective, train, collator = objective_for(rte, {"ce": 0.3, "kd": 0.5, "layer": 0.2})
    batches = first_batches(train, 8, collator, 2)
    small = by_term(measure_recipe_shares(objective, batches)[0][1])
    objective.method.weights = objective.weights = {"ce": 0.3, "kd": 0.5, "layer": 2.0}
    large = by_term(measure_recipe_shares(objective, batches)[0][1])
    assert math.isclose(sum(r.share for r in small.values()), 1.0, rel_tol=1e-9)
    assert 0 < small["layer"].share < large["layer"].share
    assert math.isclose(large["layer"].norm, 10 * small["layer"].norm, rel_tol=1e-5)  # same batches and masks


def test_measuring_leaves_rng_gradients_and_mode_untouched(rte):
    objective, train, collator = objective_for(rte, {"ce": 0.3, "kd": 0.5, "layer": 0.2})
    objective.eval()
    torch.manual_seed(123)
    measure_recipe_shares(objective, first_batches(train, 8, collator, 1))
    after = torch.rand(1)
    torch.manual_seed(123)
    assert torch.equal(after, torch.rand(1))
    assert all(p.grad is None for p in objective.model.parameters())
    assert not objective.training and objective.method.weights == {"ce": 0.3, "kd": 0.5, "layer": 0.2}


def test_a_staged_recipe_gets_shares_per_stage(rte):
    stages = [{"epochs": 1, "weights": {"layer": 1.0}}, {"weights": {"kd": 1.0, "ce": 0.001}}]
    objective, train, collator = objective_for(rte, None, stages)
    measured = dict(measure_recipe_shares(objective, first_batches(train, 8, collator, 1)))
    assert set(measured) == {"stage1", "stage2"}
    assert by_term(measured["stage1"])["layer"].share == 1.0
    assert set(by_term(measured["stage2"])) == {"kd", "ce"}


class Recorder(RunLogger):
    def __init__(self):
        super().__init__(False)
        self.params, self.metrics, self.tags = {}, {}, {}

    def log_params(self, params):
        self.params.update(params)

    def log_metrics(self, metrics, step=None):
        self.metrics.update(metrics)

    def set_tags(self, tags):
        self.tags.update(tags)


def test_an_inert_term_is_logged_and_warned_about(rte, caplog):
    objective, train, collator = objective_for(rte, {"ce": 0.3, "kd": 0.5, "layer": 1e-6})
    run = Recorder()
    with caplog.at_level(logging.WARNING, logger="bert_kd.core.distill.gradient_share"):
        measured = log_gradient_shares(run, objective, train, collator, batch_size=8, batches=2, name="distill_pkd")
    assert set(run.metrics) == {"grad_share/ce", "grad_share/kd", "grad_share/layer"}
    assert run.params["grad_share.batches"] == 2
    assert "'layer'" in run.tags["grad_share.warning"] and "distill_pkd" in caplog.text
    warned = inert_warnings(measured)
    assert any("'layer'" in line for line in warned) and not any("'ce'" in line for line in warned)


def test_zero_batches_measures_nothing(rte):
    objective, train, collator = objective_for(rte, {"ce": 0.3, "kd": 0.5, "layer": 0.2})
    run = Recorder()
    assert log_gradient_shares(run, objective, train, collator, batch_size=8, batches=0) == []
    assert run.metrics == {}


def test_the_measurement_runs_the_whole_objective_on_the_students_device(rte, monkeypatch):
    """CKD's combiners are the method's own modules: on a GPU the student was there before ``fit`` moved the
    rest, and the measurement failed on a CPU combiner. The meta device stands in for the GPU here."""
    teacher, datasets, collator = rte
    student = build_student(teacher, 2)[0]
    method = build_method(
        {"method": "ckd", "mapping": "buckets_no", "weights": {"kd": 0.5, "layer": 0.2}}, student, [teacher]
    )
    objective = DistillationObjective(student, [Teacher(teacher)], method, method.weights)
    seen = {}
    monkeypatch.setattr(
        "bert_kd.core.distill.gradient_share.module_device", lambda module: torch.device("meta")
    )  # the student's device
    monkeypatch.setattr(
        "bert_kd.core.distill.gradient_share.measure_recipe_shares",
        lambda objective, batches, seed=0: (
            seen.update(
                devices={p.device.type for p in objective.parameters()},
                batches={v.device.type for b in batches for v in b.values() if torch.is_tensor(v)},
            )
            or []
        ),
    )
    log_gradient_shares(Recorder(), objective, datasets["train"], collator, batch_size=8, batches=1)
    assert list(method.combiners.parameters())  # CKD has modules of its own
    assert seen == {"devices": {"meta"}, "batches": {"meta"}}


@pytest.fixture()
def rte(tiny_teacher_dir, tiny_glue_dir):
    from bert_kd.core.data.glue import load_glue_task
    from bert_kd.core.data.tokenize import tokenize_splits
    from bert_kd.core.models import load_classifier, load_tokenizer
    from bert_kd.core.training import Collator

    tokenizer = load_tokenizer(str(tiny_teacher_dir))
    datasets = tokenize_splits(load_glue_task("rte", tiny_glue_dir, allow_download=False), tokenizer, 32)
    torch.manual_seed(0)
    teacher = load_classifier(str(tiny_teacher_dir), 2)
    return teacher, datasets, Collator({"": tokenizer.pad_token_id})
