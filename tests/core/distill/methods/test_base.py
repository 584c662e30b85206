"""The Method base class: no-op hooks every caller may use without probing (methods.base)."""

from __future__ import annotations

import pytest
import torch

from bert_kd.core.distill.methods import build_method
from bert_kd.core.distill.objective import DistillationObjective, Teacher, collect_diagnostics
from tests.core.distill.ted_filters.helpers import tiny_bert


def test_hooks_default_to_no_ops():
    teacher, student = tiny_bert(layers=4), tiny_bert(layers=2, seed=1)
    method = build_method({"method": "pkd"}, student, [teacher])
    assert method.bind_teachers([Teacher(teacher)]) is method
    assert method.observe(None, {}, {}) is None
    assert method.alignment_report() == {} and method.alignment_metrics() == {}
    assert not method.observes and not method.reads_teacher_prefixes


def test_only_observing_methods_run_a_diagnostics_pass():
    teacher, student = tiny_bert(layers=4), tiny_bert(layers=2, seed=1)
    batch = {
        "input_ids": torch.randint(0, 30, (2, 5)),
        "attention_mask": torch.ones(2, 5, dtype=torch.long),
        "labels": torch.tensor([0, 1]),
    }
    for name, expect_alpha in (("pkd", False), ("alp", True)):
        method = build_method({"method": name}, student, [teacher])
        objective = DistillationObjective(student, [Teacher(teacher)], method, method.weights)
        diagnostics = collect_diagnostics(objective, [batch])
        assert ("alp_attention" in diagnostics) == expect_alpha
    assert build_method({"method": "okd"}, student, [teacher]).reads_teacher_prefixes


# --------------------------------------------------------------------------- the registry


def test_every_module_of_the_package_is_discovered():
    import pkgutil

    from bert_kd.core.distill import methods

    modules = {m.name for m in pkgutil.walk_packages(methods.__path__, prefix=f"{methods.__name__}.")}
    defined_in = {cls.__module__ for cls in methods.METHODS.values()}
    assert defined_in <= modules and "bert_kd.core.distill.methods.tinybert" in defined_in
    before = dict(methods.METHODS)
    assert methods.discover_methods() == before  # discovering again registers nothing twice


def test_a_methods_options_are_declared_once_for_the_schema_and_the_method():
    """The schema's valid keys for a recipe are the method's ``Options``; a key outside them is
    refused by both (TED's schema once lacked ``teacher_filters``/``task`` that the method read)."""
    from bert_kd.core.distill.methods import METHODS
    from bert_kd.experiment.parameters import method_names, valid_keys

    assert set(method_names()) == set(METHODS)
    for name, cls in METHODS.items():
        assert set(valid_keys(("distill_methods", "row", name))) == set(cls.Options.model_fields), name
        with pytest.raises(ValueError, match=rf"unknown option\(s\) \['not_an_option'\] for method '{name}'"):
            cls.check_config({"method": name, "not_an_option": 1})
    assert {"teacher_filters", "student_filters", "task", "allow_filter_mismatch"} <= METHODS["ted"].option_names()


def test_a_name_is_registered_once():
    from bert_kd.core.distill.methods import Method, register_method

    with pytest.raises(ValueError, match="method 'alp' is registered twice"):
        register_method("alp")(type("AnotherALP", (Method,), {}))


def test_a_recipe_without_a_temperature_is_checked_and_trained_at_its_methods_one_default():
    """Each method's default temperature lives in one place, its class's ``default_temperature``: TED's
    family T = 2 (TED Sec. 4.3), every other method T = 1; the recipe's own value wins."""
    from bert_kd.core.distill.methods import METHODS
    from bert_kd.core.distill.methods.ted import DEFAULT_TEMPERATURE, _TEDFamily

    teacher, student = tiny_bert(layers=4), tiny_bert(layers=2, seed=1)
    defaults = {name: cls.default_temperature for name, cls in METHODS.items()}
    assert {name for name, t in defaults.items() if t != 1.0} == {
        name for name, cls in METHODS.items() if issubclass(cls, _TEDFamily)
    }
    assert {defaults[name] for name in ("ted", "lwd", "kd")} == {DEFAULT_TEMPERATURE} == {2.0}
    for name in ("pkd", "kd", "tinybert"):
        assert build_method({"method": name}, student, [teacher]).temperature == defaults[name]
        assert build_method({"method": name, "temperature": 3.0}, student, [teacher]).temperature == 3.0
