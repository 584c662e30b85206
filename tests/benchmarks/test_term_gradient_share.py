"""benchmarks/term_gradient_share.py on a tiny teacher and GLUE folder."""

from __future__ import annotations

import importlib.util
import math
import sys

import pytest

from tests.conftest import REPO_ROOT, make_tiny_bert, write_tiny_glue

SCRIPT = REPO_ROOT / "benchmarks" / "term_gradient_share.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("term_gradient_share", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


@pytest.fixture(scope="module")
def setup(script, tmp_path_factory):
    from bert_kd.core.models import load_bundle
    from bert_kd.experiment.training_jobs.student import build_student_model

    root = tmp_path_factory.mktemp("share")
    teacher = load_bundle(make_tiny_bert(root / "teacher", num_layers=4))
    glue = write_tiny_glue(root / "glue", "RTE", n_train=24, n_dev=4)
    batches = script.training_batches(teacher, "rte", str(glue), batches=2, batch_size=8, max_seq_length=32, seed=0)
    student = build_student_model(teacher, {"num_layers": 2, "layer_selection": "first"}, "rte").model
    return teacher, student, batches


def by_term(rows):
    return {r.term: r for r in rows}


def test_shares_sum_to_one_and_a_zero_weight_term_has_no_share(script, setup):
    teacher, student, batches = setup
    recipe = {
        "method": "pkd",
        "mapping": [[3], []],
        "temperature": 5.0,
        "weights": {"ce": 0.3, "kd": 0.7, "layer": 0.0},
    }
    rows = by_term(script.term_gradients([student], teacher.model, recipe, batches, seed=0))
    assert len(batches) == 2 and set(rows) == {"ce", "kd", "layer", "total"}
    assert math.isclose(sum(r.share for t, r in rows.items() if t != "total"), 1.0, rel_tol=1e-9)
    assert rows["layer"].weight == 0.0 and rows["layer"].share == 0.0 and rows["layer"].norm == 0.0
    # the unweighted layer gradient still exists, so the weight that would match KD is finite
    assert rows["layer"].unweighted_norm > 0
    assert math.isclose(rows["layer"].parity_weight * rows["layer"].unweighted_norm, rows["kd"].norm, rel_tol=1e-9)
    assert rows["ce"].parity_weight is None and rows["kd"].parity_weight is None
    assert -1.0 <= rows["ce"].cos_with_prediction <= 1.0 and math.isclose(
        rows["kd"].cos_with_prediction, 1.0, rel_tol=1e-5
    )


def test_a_weighted_layer_term_takes_a_share_proportional_to_its_weight(script, setup):
    teacher, student, batches = setup
    recipe = {
        "method": "pkd",
        "mapping": [[3], []],
        "temperature": 5.0,
        "weights": {"ce": 0.3, "kd": 0.5, "layer": 0.2},
    }
    small = by_term(script.term_gradients([student], teacher.model, recipe, batches, seed=0))
    large = by_term(
        script.term_gradients(
            [student], teacher.model, {**recipe, "weights": {"ce": 0.3, "kd": 0.5, "layer": 2.0}}, batches, seed=0
        )
    )
    assert 0 < small["layer"].share < large["layer"].share
    assert math.isclose(
        large["layer"].norm, 10 * small["layer"].norm, rel_tol=1e-6
    )  # same dropout masks, same gradient
    assert math.isclose(sum(r.share for t, r in large.items() if t != "total"), 1.0, rel_tol=1e-9)


def test_protocol_recipes_are_the_cpu_protocol_rows_with_explicit_weights(script):
    recipes = script.protocol_recipes(["pkd_1", "pkd_6", "alp", "tinybert"])
    assert recipes["pkd_1"]["mapping"] == [[1], []] and recipes["pkd_6"]["mapping"] == [[6], []]
    assert recipes["alp"]["mapping"] == "all"
    assert recipes["pkd_1"]["weights"] == {"ce": 0.3, "kd": 0.5, "layer": 0.2}
    assert recipes["tinybert"]["weights"]["pred"] == 1.0
    with pytest.raises(ValueError, match="ted"):
        script.protocol_recipes(["ted"])


def test_share_at_the_recipe_weight_is_the_measured_share(script, setup):
    teacher, student, batches = setup
    recipe = {
        "method": "pkd",
        "mapping": [[3], []],
        "temperature": 5.0,
        "weights": {"ce": 0.3, "kd": 0.5, "layer": 0.2},
    }
    rows = script.term_gradients([student], teacher.model, recipe, batches, seed=0)
    layer = by_term(rows)["layer"]
    assert [r.term for r in script.layer_terms(rows)] == ["layer"]
    assert math.isclose(script.share_at(rows, "layer", 0.2), layer.share, rel_tol=1e-9)
    assert (
        script.share_at(rows, "layer", 0.0)
        == 0.0
        < script.share_at(rows, "layer", 2.0)
        < script.share_at(rows, "layer", 20.0)
        < 1.0
    )
    assert "share at 20" in script.what_if([("pkd", "init", rows)], [0.2, 20.0])
