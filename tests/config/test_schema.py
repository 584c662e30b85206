"""The typed parameter schema: every environment validates, errors name dotted keys, weights expand."""

from __future__ import annotations

import copy
import json
from typing import Annotated, Any, Literal, Union

import pytest

from bert_kd.config.errors import ModelNotFoundError, ParameterError
from bert_kd.config.schema import RECIPE_BLOCKS, reads_bool_as_number
from bert_kd.experiment.parameters import cross_check, explicit_weights, model_config, valid_keys, validate_parameters
from tests.conftest import REPO_ROOT


def load_parameters(env: str) -> dict:
    from kedro.config import OmegaConfigLoader

    from bert_kd import settings

    loader = OmegaConfigLoader(str(REPO_ROOT / "conf"), env=env, **settings.CONFIG_LOADER_ARGS)
    return loader["parameters"]


@pytest.fixture(scope="module")
def base() -> dict:
    return load_parameters("local")


def problems_of(params: dict) -> dict[str, str]:
    with pytest.raises(ParameterError) as err:
        validate_parameters(params)
    return dict(err.value.problems)


@pytest.mark.parametrize("env", ["local", "paper"])
def test_every_environment_and_recipe_validates(env):
    params = load_parameters(env)
    typed = validate_parameters(params)
    recipes = [(block, name) for block in RECIPE_BLOCKS for name in params[block]]
    assert len(recipes) >= 17  # every method of conf/base has a recipe
    for block, name in recipes:
        weights = explicit_weights(params[block][name])
        assert weights and all(w == round(w, 10) for w in weights.values()), (block, name, weights)
    assert typed.training is not None


def test_one_training_block_is_shared_through_interpolation(base):
    shared = base["training"]
    # the main job's teacher and student (README, benchmarks/results/main_job.md)
    assert base["teacher"]["training"] == {**shared, "learning_rate": 1e-4, "epochs": 2, "warmup_ratio": 0.0}
    assert base["student"]["training"] == {**shared, "learning_rate": 1e-4, "epochs": 3, "aux_learning_rate": 1e-3}
    assert base["multi_student"]["training"]["learning_rate"] == 2e-4
    assert base["ted"]["filters"]["training"]["epochs"] == 1
    # written once, in the shared block; the sweep tables state their teachers in full on purpose (their
    # trials must not follow the main job's teacher), so parameters_reproduce.yml is not counted
    text = "".join(
        p.read_text()
        for p in (REPO_ROOT / "conf" / "base").glob("parameters*.yml")
        if p.name != "parameters_reproduce.yml"
    )
    assert text.count("max_grad_norm") == 1


def test_paper_states_only_differences_and_the_papers_set_ups():
    paper = load_parameters("paper")
    assert paper["teacher"]["training"]["weight_decay"] == 0.01  # merged from conf/base
    assert paper["student"]["training"]["learning_rate"] == 5e-5  # not conf/base's CPU-protocol 1e-4
    assert paper["ted_student"]["num_layers"] == 6 and paper["ted_student"]["layer_selection"] == "distilbert"
    stage_one = paper["ted"]["filters"]["training"]
    assert (stage_one["epochs"], stage_one["learning_rate"], stage_one["batch_size"], stage_one["weight_decay"]) == (
        3,
        3e-5,
        32,
        0.0,
    )
    assert [t["model"] for t in paper["multi_teachers"]] == ["bert-base-uncased", "roberta-base", "xlnet-base-cased"]
    assert paper["multi_student"]["num_layers"] == 3
    import yaml

    stated = yaml.safe_load((REPO_ROOT / "conf" / "paper" / "parameters.yml").read_text())
    # recipes come from conf/base; only TinyBERT's stage lengths (the paper's 20 : 3 epochs) differ
    assert {name: set(recipe) for name, recipe in stated["distill_methods"].items()} == {"tinybert": {"stages"}}
    assert paper["distill_methods"]["tinybert"]["mapping"] == "uniform"  # merged from conf/base


def test_alp_shorthand_expands_to_rounded_explicit_weights():
    assert explicit_weights({"method": "alp", "weights": {"kd": 0.5, "layer": 0.2}}) == {
        "ce": 0.3,
        "kd": 0.5,
        "layer": 0.2,
    }
    assert explicit_weights({"method": "rkd", "weights": {"kd": 0.7}})["ce"] == 0.3  # not 0.30000000000000004


def test_multi_teacher_alpha_beta_expand_to_eq_12_13():
    weights = explicit_weights({"method": "multi_teacher", "alpha": 0.2, "beta": 0.7, "teachers": [0]})
    assert weights == {"ce": 0.3, "pred": 0.56, "hidden": 0.14, "attn": 0.7, "emb": 0.7}
    assert explicit_weights({"method": "multi_pkd", "alpha": 0.1, "beta": 0.2}) == {
        "ce": 0.8,
        "pred": 0.18,
        "layer": 0.02,
    }
    override = explicit_weights({"method": "okd", "beta": 0.5, "weights": {"ce": 2.0}})
    assert override == {"ce": 2.0, "pred": 0.5}


def test_explicit_weights_reproduce_the_recipe_exactly(base):
    """Writing the expanded weights back gives the same weights (the hook does this)."""
    for block in RECIPE_BLOCKS:
        for recipe in base[block].values():
            expanded = explicit_weights(recipe)
            assert explicit_weights({**recipe, "weights": expanded}) == expanded


@pytest.mark.parametrize(
    "override, key, words",
    [
        ({"max_train_samples": "abc"}, "max_train_samples", "valid integer"),
        ({"seed": 1.5}, "seed", "fractional"),
        ({"max_train_samples": -5}, "max_train_samples", "greater than or equal to 1"),
        ({"max_train_sample": 10}, "max_train_sample", "did you mean 'max_train_samples'"),
        ({"foo": {"bar": 1}}, "foo", "unknown key"),
        ({"task": "sst3"}, "task", "valid names"),
        ({"seed": 99999999999999999999999}, "seed", "outside 0 … 4294967295"),
        ({"seed": 2**32}, "seed", "(2**32 - 1)"),
    ],
)
def test_top_level_errors_name_the_key(base, override, key, words):
    problems = problems_of({**base, **override})
    assert key in problems and words in problems[key], problems


def test_nested_errors_name_the_dotted_key(base):
    params = copy.deepcopy(base)
    params["runtime"]["checkpoint_every_steps"] = -1
    params["student"]["training"]["epochz"] = 3
    params["multi_teachers"][1]["sed"] = 1
    params["distill_methods"]["alp"]["mapin"] = "all"
    params["ted_methods"]["ted"]["weights"]["ted"] = -1.0
    params["ted"]["filters"]["arch"] = "conv"
    problems = problems_of(params)
    assert "-1" in problems["runtime.checkpoint_every_steps"]
    assert "student.training.epochs" in problems["student.training.epochz"]
    assert "multi_teachers[1].seed" in problems["multi_teachers[1].sed"]
    assert "distill_methods.alp.mapping" in problems["distill_methods.alp.mapin"]
    assert "greater than or equal to 0" in problems["ted_methods.ted.weights.ted"]
    assert "'linear', 'mlp' or 'subsequent_layer'" in problems["ted.filters.arch"]
    assert len(problems) == 6  # every problem at once


def test_method_level_checks_surface_at_the_recipe(base):
    params = copy.deepcopy(base)
    params["distill_methods"]["alp"]["weights"] = {"kd": 0.9, "layer": 0.5}
    params["distill_methods"]["pkd"]["method"] = "pkdd"
    params["multi_teacher_configs"]["okd"]["beta"] = 1.5
    problems = problems_of(params)
    assert "β = 1 − η − λ" in problems["distill_methods.alp.weights"]
    assert "'pkd'" in problems["distill_methods.pkd"]
    assert "less than or equal to 1" in problems["multi_teacher_configs.okd.beta"]
    params = copy.deepcopy(base)
    params["multi_teacher_configs"]["single_teacher"]["teachers"] = [7]
    params["multi_student"]["init_from_teacher"] = 2
    (message,) = problems_of(params).values()
    assert "multi_teacher_configs.single_teacher.teachers: index 7" in message
    assert "multi_student.init_from_teacher=2" in message


def test_newer_keys_are_accepted(base):
    params = copy.deepcopy(base)
    params["runtime"].update(mixed_precision="auto", group_by_length=True)
    params["multi_teacher_configs"]["okd"]["scale_by_t2"] = True
    params["reproduce"] = {
        "table": "cpu_protocol",
        "tasks": "mrpc sst2",
        "methods": ["nkd", "alp"],
        "seeds": "1 2",
        "grids": {"alp": {"eta": [0, 0.2]}},
    }
    params["distill_methods"]["pkd"]["mapping"] = [[1], [3]]
    typed = validate_parameters(params)
    assert typed.multi_teacher_configs["okd"].scale_by_t2 is True
    assert typed.runtime.mixed_precision == "auto" and typed.reproduce.seeds == "1 2"
    assert problems_of({**params, "reproduce": {"tabel": "x"}}) == {
        "reproduce.tabel": "unknown key; did you mean 'reproduce.table'?"
    }


def test_recipe_options_are_the_methods_own(base):
    """One declaration per option: what the method reads is what the schema accepts, with its values."""
    params = copy.deepcopy(base)
    params["ted_methods"]["ted"].update(task="rte", allow_filter_mismatch=True)  # read by TED, once refused here
    validate_parameters(params)
    params["multi_teacher_configs"]["multi_pkd"].update(
        projection=True, mapping="all"
    )  # once passed, then failed to build
    params["multi_teacher_configs"]["multi_teacher"]["projection"] = False
    problems = problems_of(params)
    assert problems["multi_teacher_configs.multi_pkd.projection"].startswith("Input should be 'always' or 'auto'")
    assert problems["multi_teacher_configs.multi_pkd.mapping"].startswith("Input should be 'pkd_skip' or 'pkd_last'")
    assert "'always' or 'auto'" in problems["multi_teacher_configs.multi_teacher.projection"]


def test_unquoted_yaml_no_means_no_mixed_precision(base):
    assert validate_parameters({**base, "runtime": {"mixed_precision": False}}).runtime.mixed_precision == "no"


def test_valid_keys_walks_lists_dicts_and_method_unions():
    assert "seed" in valid_keys(("multi_teachers", 0))
    assert "alpha" in valid_keys(("multi_teacher_configs", "x", "multi_teacher"))
    assert "epochs" in valid_keys(("student", "training"))


def test_glue_dir_that_is_a_file_says_so(base, tmp_path):
    afile = tmp_path / "glue.tsv"
    afile.write_text("x")
    assert "is a file" in problems_of({**base, "glue_dir": str(afile)})["glue_dir"]


# --------------------------------------------------------------------------- cross-checks


def test_model_config_reads_local_dirs_without_weights(tiny_teacher_dir):
    assert model_config(str(tiny_teacher_dir), "teacher.model")["num_hidden_layers"] == 4


def test_model_config_offline_hub_id_is_one_line(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotFoundError) as err:
        model_config("nosuch-org/nosuch-model-xyz", "teacher.model")
    assert err.value.where == "teacher.model" and "offline" in err.value.what
    assert "\n" not in str(err.value)


def test_model_config_missing_dir_and_file(tmp_path):
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        model_config(str(tmp_path / "nope"), "student.model")
    (tmp_path / "model.bin").write_bytes(b"x")
    with pytest.raises(ModelNotFoundError, match="is a file"):
        model_config(str(tmp_path / "model.bin"), "student.model")
    with pytest.raises(ModelNotFoundError, match="no config.json"):
        model_config(str(tmp_path), "student.model")


def test_cross_check_student_depth_and_mapping(base, tiny_teacher_dir):
    params = copy.deepcopy(base)
    params["teacher"]["model"] = str(tiny_teacher_dir)
    used = {"teacher", "student", "distill_methods", "distill_methods.pkd"}
    cross_check(validate_parameters(params), used)  # 2 of 4 layers: fine
    params["student"]["num_layers"] = 99
    with pytest.raises(ParameterError) as err:
        cross_check(validate_parameters(params), used)
    assert "exceeds the teacher's 4 layers" in dict(err.value.problems)["student.num_layers"]
    params["student"]["num_layers"] = 2
    params["distill_methods"]["pkd"]["mapping"] = [[1], [9]]
    with pytest.raises(ParameterError) as err:
        cross_check(validate_parameters(params), used)
    assert "distill_methods.pkd.mapping" in dict(err.value.problems)


def test_cross_check_skips_blocks_the_pipeline_does_not_read(base, tiny_teacher_dir):
    params = copy.deepcopy(base)
    params["teacher"]["model"] = str(tiny_teacher_dir)
    params["ted_student"]["num_layers"] = 99
    cross_check(validate_parameters(params), {"teacher", "student"})
    with pytest.raises(ParameterError, match="ted_student.num_layers"):
        cross_check(validate_parameters(params), {"teacher", "ted", "ted_student"})


def test_schema_module_is_kedro_free():
    from tests import fresh_interpreter

    code = (
        "import sys, bert_kd.config.schema; print(json.dumps(sorted(m for m in sys.modules if m.startswith('kedro'))))"
    )
    out = fresh_interpreter.check_output("import json;" + code)
    assert json.loads(out) == []


# --------------------------------------------------------------------------- staged recipes


def test_stage_errors_name_the_recipe_stage_key(base):
    params = copy.deepcopy(base)
    params["distill_methods"]["tinybert"]["stages"] = [{"epochs": 0, "weights": {"attn": 1}}, {"weights": {"pred": 1}}]
    params["distill_methods"]["pkd"]["stages"] = [
        {"epochs": 1, "weights": {"layer": 1}},
        {"weights": {"kd": 1, "attn": 1}},
    ]
    params["distill_methods"]["alp"]["stages"] = [{"epoch": 1, "weights": {"layer": 1}}, {"weights": {"kd": 1}}]
    problems = problems_of(params)
    assert "greater than or equal to 1" in problems["distill_methods.tinybert.stages[0].epochs"]
    assert "stages[1].weights: unknown loss term(s) ['attn']" in problems["distill_methods.pkd.stages"]
    assert "did you mean 'distill_methods.alp.stages[0].epochs'" in problems["distill_methods.alp.stages[0].epoch"]


def test_conf_tinybert_is_two_stage_and_the_one_stage_row_stays(base):
    from bert_kd.core.distill.methods.tinybert import TinyBERT
    from bert_kd.core.distill.objective import WeightSchedule

    typed = validate_parameters(base).distill_methods
    schedule = WeightSchedule.parse(typed["tinybert"].method_config()["stages"], TinyBERT.term_names)
    assert schedule.stage_lengths(5) == [3, 2] and schedule.stage_lengths(3) == [2, 1]  # CPU protocol; conf/base
    first, second = (stage.weights for stage in schedule.stages)
    assert {k for k, v in first.items() if v} == {"emb", "hidden", "attn"} and {k for k, v in second.items() if v} == {
        "pred"
    }
    assert typed["tinybert_one_stage"].stages is None
    assert explicit_weights(base["distill_methods"]["tinybert_one_stage"])["attn"] == 1.0


def test_cross_check_stages_must_fit_the_students_epochs(base):
    params = copy.deepcopy(base)
    params["student"]["training"]["epochs"] = 1
    typed = validate_parameters(params)  # the recipe alone is fine
    cross_check(typed, {"student", "distill_methods", "distill_methods.nkd"})  # tinybert is not run
    with pytest.raises(ParameterError) as err:
        cross_check(typed, {"student", "distill_methods", "distill_methods.tinybert"})
    message = dict(err.value.problems)["distill_methods.tinybert.stages"]
    assert "stages[1] would never run" in message and "student.training.epochs=1" in message
    params["student"]["training"]["epochs"] = 2
    cross_check(validate_parameters(params), {"student", "distill_methods", "distill_methods.tinybert"})


def test_every_seed_key_is_checked_against_2_to_the_32(base):
    params = copy.deepcopy(base)
    params["seed"] = 2**32 - 1  # the largest allowed
    params["multi_teachers"][0]["seed"] = 2**40
    params["figures"]["seed"] = 2**33
    problems = problems_of(params)
    assert set(problems) == {"multi_teachers[0].seed", "figures.seed"}, problems


def test_a_boolean_where_a_number_goes_is_an_error_not_one(base):
    params = copy.deepcopy(base)
    params["training"]["epochs"] = True  # pydantic's lax mode would read 1
    params["student"]["training"] = {**params["student"].get("training", {}), "batch_size": False}
    params["runtime"]["group_by_length"] = False  # a boolean key: fine
    problems = problems_of(params)
    assert set(problems) == {"training", "student.training"}, problems
    assert "epochs: True — a boolean where this key takes a number" in problems["training"]
    assert "batch_size: False" in problems["student.training"]
    assert reads_bool_as_number(Annotated[int, "positive"]) and reads_bool_as_number(Union[float, str, None])
    assert not reads_bool_as_number(Union[bool, int]) and not reads_bool_as_number(Literal["auto", True, 1])
    assert not reads_bool_as_number(Any) and not reads_bool_as_number(Literal["always", "auto"])


def test_max_seq_length_above_the_models_positions_fails_before_any_node(base, tiny_teacher_dir, tmp_path):
    from tests.conftest import make_tiny_bert

    params = copy.deepcopy(base)
    params["teacher"]["model"] = str(tiny_teacher_dir)  # 128 positions
    params["teacher"]["max_seq_length"] = 128
    cross_check(validate_parameters(params), {"teacher", "student"})  # exactly the positions: fine
    params["teacher"]["max_seq_length"] = 1024
    with pytest.raises(ParameterError) as err:
        cross_check(validate_parameters(params), {"teacher", "student"})
    assert "1024 exceeds the 128 positions" in dict(err.value.problems)["teacher.max_seq_length"]
    assert "use at most 128" in err.value.block()

    short = make_tiny_bert(tmp_path / "short", num_layers=2)
    config = json.loads((short / "config.json").read_text())
    (short / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 64}))
    params["teacher"]["max_seq_length"] = 100
    params["student"] = {**params["student"], "model": str(short)}
    with pytest.raises(ParameterError) as err:
        cross_check(validate_parameters(params), {"teacher", "student"})
    assert "100 exceeds the 64 positions of student.model" in dict(err.value.problems)["teacher.max_seq_length"]

    params["teacher"]["max_seq_length"] = 32
    params["student"].pop("model")
    params["multi_teachers"] = [{**params["multi_teachers"][0], "model": str(tiny_teacher_dir), "max_seq_length": 512}]
    params["multi_teacher_configs"] = {}
    params["multi_student"]["init_from_teacher"] = 0
    with pytest.raises(ParameterError) as err:
        cross_check(validate_parameters(params), {"teacher", "multi_teachers"})
    assert "512 exceeds the 128 positions" in dict(err.value.problems)["multi_teachers[0].max_seq_length"]

    params["multi_teachers"][0]["max_seq_length"] = 100
    params["multi_student"] = {**params["multi_student"], "model": str(short)}  # 64 positions
    with pytest.raises(ParameterError) as err:
        cross_check(validate_parameters(params), {"teacher", "multi_teachers", "multi_student"})
    assert (
        "100 exceeds the 64 positions of multi_student.model"
        in dict(err.value.problems)["multi_teachers[0].max_seq_length"]
    )


def test_max_positions_knows_robertas_padding_offset():
    from bert_kd.experiment.parameters import max_positions

    assert max_positions({"model_type": "bert", "max_position_embeddings": 512}) == 512
    assert max_positions({"model_type": "roberta", "max_position_embeddings": 514, "pad_token_id": 1}) == 512
    assert max_positions({"model_type": "gpt2", "n_positions": 1024}) == 1024
    assert max_positions({"model_type": "custom"}) is None


def test_length_grouped_batches_are_the_default(base):
    """On by default since the paired check (benchmarks/results/grouping_check.md)."""
    assert base["runtime"]["group_by_length"] is True
    assert validate_parameters({**base, "runtime": {}}).runtime.group_by_length is True


def test_layer_selection_takes_the_space_separated_form_of_the_command_line():
    """``--params`` splits on commas, so ``student.layer_selection=1 9`` is how a list reaches it."""
    params = validate_parameters({"task": "rte", "student": {"num_layers": 2, "layer_selection": "1 3"}})
    assert params.student.layer_selection == [1, 3]
    assert validate_parameters({"task": "rte", "student": {"num_layers": 2}}).student.layer_selection == "first"


def test_a_training_key_error_states_the_precedence_rule():
    with pytest.raises(ParameterError) as caught:
        validate_parameters({"task": "rte", "student": {"num_layers": 2, "training": {"epochs": -1}}})
    assert "the command line wins over conf" in caught.value.fix and "training.epochs=1" in caught.value.fix
    with pytest.raises(ParameterError) as caught:
        validate_parameters({"task": "rte", "seed": -1})
    assert "command line wins" not in caught.value.fix


def _strict_blocks():
    from bert_kd.config import schema

    todo, seen = [schema.Strict], []
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in seen:
                seen.append(sub)
                todo.append(sub)
    return seen


def test_every_list_key_takes_the_space_separated_form_its_printed_fix_gives():
    """The block for a list cut by --params' comma split prints `--params 'key=a b'`: every key that takes a list
    (and no string) reads that as the list ("Input should be a valid list" for augment.rules before)."""
    import pydantic

    from bert_kd.config.schema import Augment, takes_list_not_str

    checked = []
    for block in _strict_blocks():
        for name, field in block.model_fields.items():
            if not takes_list_not_str(field.annotation):
                continue
            try:
                block.model_validate({name: "1 2"})
            except pydantic.ValidationError as error:
                assert not [e for e in error.errors() if e["type"] == "list_type" and e["loc"][:1] == (name,)], (
                    block.__name__,
                    name,
                )
            checked.append(f"{block.__name__}.{name}")
    assert {"Augment.rules", "Student.layer_selection", "GeneralCorpus.files"} <= set(checked)
    assert Augment.model_validate({"rules": "mask pos"}).rules == ["mask", "pos"]
    with pytest.raises(pydantic.ValidationError) as error:
        Augment.model_validate({"rules": "mask bogus"})
    assert "bogus" in str(error.value) and "valid list" not in str(error.value)
