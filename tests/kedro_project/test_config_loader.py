"""``--params`` keys inside an interpolated block (``student.training.epochs`` where ``student.training`` is
``${merge:${training},…}``) no longer freeze the block before the global ``training.*`` overrides arrive."""

from __future__ import annotations

from pathlib import Path

import pytest
from kedro.config import OmegaConfigLoader
from omegaconf import OmegaConf

from bert_kd import settings
from bert_kd.kedro_project.config_loader import ProjectConfigLoader, split_runtime_params
from tests.conftest import migrated_mlflow_db

REPO_ROOT = Path(__file__).resolve().parents[2]
ARGS = {**settings.CONFIG_LOADER_ARGS, "default_run_env": "base"}


def parameters(runtime: dict, loader=ProjectConfigLoader, conf: Path = REPO_ROOT / "conf") -> dict:
    return loader(str(conf), runtime_params=runtime, **ARGS)["parameters"]


def test_the_project_uses_the_loader():
    assert settings.CONFIG_LOADER_CLASS is ProjectConfigLoader


def test_split_puts_keys_inside_interpolated_blocks_last():
    config = OmegaConf.create(
        {"training": {"lr": 5}, "student": {"layers": 2, "training": "${training}"}, "teacher": {"training": {"lr": 1}}}
    )
    runtime = {
        "student": {"layers": 3, "training": {"epochs": 1}},
        "training": {"bs": 16},
        "teacher": {"training": {"lr": 2}},
        "new": {"key": 1},
    }
    plain, through = split_runtime_params(config, runtime)
    assert through == {"student": {"training": {"epochs": 1}}}
    assert plain == {
        "student": {"layers": 3},
        "training": {"bs": 16},
        "teacher": {"training": {"lr": 2}},
        "new": {"key": 1},
    }


@pytest.mark.parametrize("block", ["student", "teacher"])
def test_a_job_block_follows_global_overrides_whatever_the_order(block):
    """The documented ``--params student.training.epochs=1`` beside ``training.batch_size=16`` and a key of
    the same block outside ``training`` (the case Kedro's own loader resolved with batch 32)."""
    other = {"student": {"num_layers": 3}, "teacher": {"max_seq_length": 32}}[block]
    first = {block: {**other, "training": {"epochs": 1}}, "training": {"batch_size": 16, "warmup_ratio": 0.0}}
    second = {"training": first["training"], block: first[block]}
    conf_only = parameters({})[block]["training"]
    for runtime in (first, second):
        got = parameters(runtime)[block]["training"]
        assert got == {**conf_only, "epochs": 1, "batch_size": 16, "warmup_ratio": 0.0}
    assert parameters(first)[block]["training"]["learning_rate"] != parameters(first)["training"]["learning_rate"]
    # Kedro's loader: the same keys in the first order freeze the block before the batch size arrives
    assert parameters(first, loader=OmegaConfigLoader)[block]["training"]["batch_size"] == conf_only["batch_size"] != 16


def test_an_interpolation_of_an_overridden_block_sees_the_override(tmp_path):
    base = tmp_path / "conf" / "base"
    base.mkdir(parents=True)
    (tmp_path / "conf" / "local").mkdir()
    (base / "parameters.yml").write_text(
        "training: {lr: 5, bs: 32}\n"
        "teacher: {msl: 128, training: '${merge:${training},{lr: 1}}'}\n"
        "other_teacher: {training: '${teacher.training}'}\n",
        encoding="utf-8",
    )
    got = parameters({"teacher": {"msl": 32, "training": {"lr": 9}}, "training": {"bs": 4}}, conf=tmp_path / "conf")
    assert got["teacher"] == {"msl": 32, "training": {"lr": 9, "bs": 4}}
    assert got["other_teacher"]["training"] == {"lr": 9, "bs": 4}
    assert got["training"] == {"lr": 5, "bs": 4}


def test_a_session_hands_nodes_the_merged_block(tmp_path, monkeypatch):
    """Through a Kedro session (what ``kedro run --params`` builds), not only the loader."""
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    monkeypatch.setenv(
        "MLFLOW_TRACKING_URI", migrated_mlflow_db(tmp_path / "mlflow.db")
    )  # kedro-mlflow's hook opens it

    bootstrap_project(REPO_ROOT)
    runtime = {"student": {"num_layers": 3, "training": {"epochs": 1}}, "training": {"batch_size": 16}}
    with KedroSession.create(project_path=REPO_ROOT, runtime_params=runtime, env="base") as session:
        student = session.load_context().params["student"]
    assert student["num_layers"] == 3
    assert (student["training"]["epochs"], student["training"]["batch_size"]) == (1, 16)


def test_a_shared_training_key_on_the_command_line_changes_every_job():
    """The one rule: command line over conf, a job's own key over the shared block. ``training.epochs=1``
    reaches the student although its conf block pins ``epochs: 3``; ``student.training.epochs=2`` beside it
    wins for the student only; the reproduce tables, which state their training in full, stay as they are."""
    conf = parameters({})
    assert conf["student"]["training"]["epochs"] == 3 and conf["ted"]["filters"]["training"]["epochs"] == 1
    shared = parameters({"training": {"epochs": 1}})
    for path in (("teacher",), ("student",), ("ted_student",), ("multi_student",), ("ted", "filters")):
        block = shared
        for part in path:
            block = block[part]
        assert block["training"]["epochs"] == 1, path
    assert all(entry["training"]["epochs"] == 1 for entry in shared["multi_teachers"])
    assert shared["reproduce"] == conf["reproduce"]
    assert shared["student"]["training"]["learning_rate"] == conf["student"]["training"]["learning_rate"]
    both = parameters({"training": {"epochs": 1}, "student": {"training": {"epochs": 2}}})
    assert both["student"]["training"]["epochs"] == 2 and both["teacher"]["training"]["epochs"] == 1


def test_the_rule_holds_in_an_environment_that_pins_a_job_key():
    """conf/paper pins ``student.training.epochs: 4``; the command line still wins over it."""
    loader = ProjectConfigLoader(
        str(REPO_ROOT / "conf"),
        env="paper",
        runtime_params={"training": {"epochs": 1}},
        **{**settings.CONFIG_LOADER_ARGS},
    )
    assert loader["parameters"]["student"]["training"]["epochs"] == 1
    paper = ProjectConfigLoader(str(REPO_ROOT / "conf"), env="paper", **settings.CONFIG_LOADER_ARGS)["parameters"]
    assert paper["student"]["training"]["epochs"] == 4


@pytest.mark.parametrize("env, said", [("../../somewhere", "is a path"), ("papr", "did you mean --env paper")])
def test_an_env_outside_conf_or_unknown_is_refused(env, said):
    from bert_kd.config.errors import UserError

    with pytest.raises(UserError) as caught:
        ProjectConfigLoader(str(REPO_ROOT / "conf"), env=env, **settings.CONFIG_LOADER_ARGS)
    block = caught.value.block()
    assert said in block and "base, compare, local, paper" in block


def test_a_missing_interpolation_key_names_its_file_and_line(tmp_path):
    from bert_kd.config.errors import UserError

    base = tmp_path / "conf" / "base"
    base.mkdir(parents=True)
    (tmp_path / "conf" / "local").mkdir()
    (base / "parameters.yml").write_text(
        "training: {lr: 5}\nteacher:\n  training: '${merge:${trainin},{lr: 1}}'\n", encoding="utf-8"
    )
    with pytest.raises(UserError) as caught:
        parameters({}, conf=tmp_path / "conf")
    error = caught.value
    assert error.where == f"{base / 'parameters.yml'}:3" and "trainin" in error.what and "trainin" in error.fix


def test_an_environment_block_marked_replace_replaces_bases_so_an_entry_can_switch_method(tmp_path):
    """Base's keys merge into an environment's block and cannot be removed: switching the multi_teacher entry to
    okd kept base's alpha, which okd refuses. `replace: true` makes the environment's block the whole block."""
    import shutil

    from bert_kd.config.errors import ParameterError
    from bert_kd.experiment.parameters import validate_parameters

    conf = tmp_path / "conf"
    shutil.copytree(REPO_ROOT / "conf" / "base", conf / "base")
    (conf / "switch").mkdir()
    switched = "multi_teacher_configs:\n  multi_teacher: {%smethod: okd, beta: 0.3, temperature: 2.0}\n"
    loaded = {}
    for marker in ("", "replace: true, "):
        (conf / "switch" / "parameters.yml").write_text(switched % marker, encoding="utf-8")
        args = {**settings.CONFIG_LOADER_ARGS, "default_run_env": "switch"}
        loaded[marker] = ProjectConfigLoader(str(conf), env="switch", **args)["parameters"]
    assert loaded[""]["multi_teacher_configs"]["multi_teacher"]["alpha"] == 0.2  # merged in from base
    with pytest.raises(ParameterError, match="alpha"):
        validate_parameters(loaded[""])
    entry = loaded["replace: true, "]["multi_teacher_configs"]["multi_teacher"]
    assert entry == {"method": "okd", "beta": 0.3, "temperature": 2.0}
    assert validate_parameters(loaded["replace: true, "]).multi_teacher_configs["multi_teacher"].method == "okd"
    assert loaded["replace: true, "]["multi_teacher_configs"]["okd"]["beta"] == 0.5  # other entries as in base
