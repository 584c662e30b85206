"""Adding a method = one module under ``bert_kd.core.distill.methods`` + one recipe row in YAML.

A toy method is written to a temporary folder that is added to the methods package's path (as if
the file sat in ``src/bert_kd/core/distill/methods/``) and discovered like every other method; one
``distill_methods`` row in a scratch copy of ``conf/base`` names it. Nothing else is edited, and
the schema, the ``distill_<row>`` pipeline and the sweep tables all know it.
"""

from __future__ import annotations

import json
import sys

import pytest
import yaml

from tests.pipelines.conftest import latest_version

TOY_MODULE = '''"""Toy method: Hinton KD whose soft term is multiplied by ``scale``."""

from bert_kd.core.distill.methods.base import Method, register_method
from bert_kd.config.schema import PositiveFloat, Recipe


class ToyOptions(Recipe):
    scale: PositiveFloat | None = None


@register_method("toy_kd")
class ToyKD(Method):
    term_names = ("ce", "kd")
    default_weights = {"ce": 0.5, "kd": 0.5}
    Options = ToyOptions

    def terms(self, student, teachers, batch):
        result = super().terms(student, teachers, batch)
        result["kd"] = float(self.config.get("scale", 1.0)) * self.prediction_loss(student, teachers)
        return result
'''
TOY_ROW = {"method": "toy_kd", "temperature": 2.0, "scale": 3.0, "weights": {"kd": 0.6}}


@pytest.fixture
def toy_method(tmp_path_factory, monkeypatch):
    """``toy_kd`` registered from a temporary module of the methods package; unregistered after."""
    from bert_kd.core.distill import methods
    from bert_kd.core.distill.methods import METHODS, discover_methods
    from bert_kd.experiment.parameters import parameters_model

    parameters_model()  # the schema was built before the module arrived (as in a long-lived process)
    folder = tmp_path_factory.mktemp("methods_plugin")
    (folder / "toy.py").write_text(TOY_MODULE)
    monkeypatch.setattr(methods, "__path__", [*methods.__path__, str(folder)])
    discover_methods()
    yield METHODS["toy_kd"]
    METHODS.pop("toy_kd", None)
    sys.modules.pop("bert_kd.core.distill.methods.toy", None)


def add_recipe_row(root, row: str, recipe: dict) -> None:
    """One more ``distill_methods`` row in the scratch project's ``parameters_distill.yml``."""
    path = root / "conf" / "base" / "parameters_distill.yml"
    parameters = yaml.safe_load(path.read_text())
    parameters["distill_methods"][row] = recipe
    path.write_text(yaml.safe_dump(parameters, sort_keys=False))


def test_a_new_module_is_discovered_and_its_options_are_the_schema(toy_method):
    from bert_kd.config.errors import ParameterError
    from bert_kd.experiment.parameters import method_names, validate_parameters

    assert toy_method.__module__ == "bert_kd.core.distill.methods.toy" and "toy_kd" in method_names()
    params = {"task": "rte", "distill_methods": {"toy": TOY_ROW}}
    assert validate_parameters(params).distill_methods["toy"].scale == 3.0
    with pytest.raises(ParameterError) as err:
        validate_parameters(
            {"task": "rte", "distill_methods": {"toy": {**TOY_ROW, "scael": 2.0, "weights": {"kd": -1}}}}
        )
    problems = dict(err.value.problems)
    assert problems["distill_methods.toy.scael"] == "unknown key; did you mean 'distill_methods.toy.scale'?"
    assert "greater than or equal to 0" in problems["distill_methods.toy.weights.kd"]


def test_a_sweep_table_accepts_the_new_method(toy_method):
    from bert_kd.sweeps.spec import build_sweep

    table = {
        "tasks": ["rte"],
        "seeds": [1],
        "grid": {"method.scale": [1.0, 2.0]},
        "methods": {"toy": {"recipe": "distill_methods.toy", "label": "Toy", "set": {"temperature": 4.0}}},
    }
    recipes = {"distill_methods": {"toy": TOY_ROW}}
    sweep = build_sweep({"table": "t", "tables": {"t": table}}, recipes)
    assert sorted(t.recipe["scale"] for t in sweep.trials()) == [1.0, 2.0]
    assert {t.recipe["temperature"] for t in sweep.trials()} == {4.0}
    table["methods"]["toy"]["set"] = {"scael": 4.0}
    with pytest.raises(
        ValueError,
        match=r"reproduce.tables.t.methods.toy.set.scael: unknown key; did you mean "
        r"'reproduce.tables.t.methods.toy.set.scale'",
    ):
        build_sweep({"table": "t", "tables": {"t": table}}, recipes)


def test_the_new_rows_pipeline_runs_and_refuses_a_bad_option(toy_method, run_pipeline, tmp_path):
    add_recipe_row(tmp_path, "toy", TOY_ROW)
    _, root, _ = run_pipeline("distill_toy")
    metrics = json.loads(latest_version(root / "data/08_reporting/students/toy_metrics.json").read_text())
    assert metrics["info"]["method"] == "toy" and metrics["info"]["algorithm"] == "toy_kd"
    assert (root / metrics["info"]["store_path"] / "config.json").exists()
    with pytest.raises(Exception, match=r"distill_methods.toy.scale: Input should be greater than 0"):
        run_pipeline("distill_toy", distill_methods={"toy": {**TOY_ROW, "scale": -1.0}})
