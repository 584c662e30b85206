"""End to end: multi-teacher distillation and its baselines with two tiny teachers."""

from __future__ import annotations

import mlflow
import pandas as pd
import pytest

from bert_kd.experiment.run_setup import teacher_seed, training_config
from tests.pipelines.conftest import TINY_TRAINING, mlflow_runs


def _teachers(model_dir):
    return [
        {"name": "a", "model": str(model_dir), "seed": 1, "max_seq_length": 32, "training": TINY_TRAINING},
        {
            "name": "b",
            "model": str(model_dir),
            "seed": 2,
            "max_seq_length": 32,
            "training": {**TINY_TRAINING, "learning_rate": 1e-4},
        },
    ]


def test_distill_multi_teacher_and_baselines(run_pipeline, tiny_teacher_dir):
    student = {"num_layers": 2, "init_from_teacher": 0, "training": {**TINY_TRAINING, "aux_learning_rate": 1e-3}}
    _, root, uri = run_pipeline(
        "distill_multi_teacher_baselines", multi_teachers=_teachers(tiny_teacher_dir), multi_student=student
    )
    table = pd.read_csv(root / "data/08_reporting/distill_multi_teacher_baselines.csv")
    assert set(table["method"]) == {"teacher", "majority class", "multi_teacher", "okd", "multi_pkd", "rse_kd", "rl_kd"}
    # RL-KD's row says how often its agents chose each teacher; the other rows choose no teachers per example
    shares = table.loc[table["method"] == "rl_kd", "teachers chosen (share of examples)"].iloc[0]
    assert shares.startswith("a ") and ", b " in shares
    by_epoch = table.loc[table["method"] == "rl_kd", "teachers chosen by epoch"].iloc[0]
    assert by_epoch.startswith("a ") and ", b " in by_epoch
    assert table.loc[table["method"] == "okd", "teachers chosen (share of examples)"].isna().all()
    assert set(table.loc[table["method"] == "multi_teacher", "teachers"]) == {"a+b", "a", "b"}
    markdown = (root / "data/08_reporting/distill_multi_teacher_baselines.md").read_text()
    assert "Table 2" in markdown and "Table 3" in markdown
    runs = mlflow_runs(uri)
    names = set(runs["tags.mlflow.runName"])
    assert "distill_multi_teacher:multi_teacher[a,b]:rte" in names
    assert "distill_multi_teacher:rse_kd[a,b]:rte" in names
    assert "distill_multi_teacher:rl_kd[a,b]:rte" in names
    # RL-KD's run logs each epoch's selection shares and draws them
    rl_kd = runs[runs["tags.mlflow.runName"] == "distill_multi_teacher:rl_kd[a,b]:rte"].iloc[0]
    assert 0 <= rl_kd["metrics.train/selection_share/a"] <= 1 and 0 <= rl_kd["metrics.train/selection_share/b"] <= 1
    artifacts = {a.path for a in mlflow.MlflowClient(uri).list_artifacts(rl_kd["run_id"])}
    assert "observed_by_epoch.png" in artifacts
    parent = runs[runs["tags.mlflow.runName"] == "distill_multi_teacher_baselines:rte [kedro run]"].iloc[0]
    assert parent["metrics.teacher/a/accuracy"] == pytest.approx(
        table.loc[table["configuration"] == "teacher a", "accuracy"].iloc[0]
    )
    assert 0 <= parent["metrics.compare/multi_teacher_a_b/accuracy"] <= 1
    assert "Table 2" in parent["tags.mlflow.note.content"]
    # per-teacher / per-group loss shares of the MT student on dev (one configuration: multi_teacher)
    shares = pd.read_csv(root / "data/08_reporting/multi_teacher_contributions.csv")
    assert shares["share_%"].sum() == pytest.approx(100.0, abs=0.1)
    assert set(shares["teacher"].dropna()) == {"a", "b"} and set(shares["term"]) == {
        "ce",
        "pred",
        "hidden",
        "attn",
        "emb",
    }
    groups = shares[shares["term"] == "hidden"]
    assert list(zip(groups["teacher"], groups["student_layer"], groups["teacher_layers"])) == [
        ("a", 1, "1-2"),
        ("a", 2, "3-4"),
        ("b", 1, "1-2"),
        ("b", 2, "3-4"),
    ]
    assert (root / "data/08_reporting/multi_teacher_contributions.png").stat().st_size > 1000


def test_teacher_blocks_run_in_a_sequential_runner(tmp_path, monkeypatch, tiny_teacher_dir, tiny_glue_dir):
    """Starter-style: the namespaced teacher blocks over an in-memory DataCatalog."""
    from kedro.io import DataCatalog, MemoryDataset
    from kedro.pipeline import Pipeline, node
    from kedro.runner import SequentialRunner

    from bert_kd.core.data.glue import load_glue_task
    from bert_kd.pipelines.common import build_run_settings
    from bert_kd.pipelines.multi_teacher.nodes import gather_teachers
    from bert_kd.pipelines.multi_teacher.pipeline import teacher_block

    monkeypatch.chdir(tmp_path)
    splits = load_glue_task("rte", tiny_glue_dir, allow_download=False)
    teachers = _teachers(tiny_teacher_dir)
    blocks = (
        teacher_block(0)
        + teacher_block(1)
        + Pipeline(
            [
                node(
                    gather_teachers,
                    [
                        "params:multi_teachers",
                        "multi_teacher.teacher_0.teacher_model",
                        "multi_teacher.teacher_1.teacher_model",
                    ],
                    "multi_teacher_models",
                    name="gather",
                )
            ]
        )
    )
    assert {n.name for n in blocks.nodes} >= {
        "multi_teacher.teacher_0.train_teacher",
        "multi_teacher.teacher_1.train_teacher",
    }
    values = {
        "glue_train": splits["train"],
        "glue_validation": splits["validation"].assign(split="validation"),
        "params:multi_teachers": teachers,
        "run_settings": build_run_settings(
            "rte",
            0,
            {"enabled": False},
            {"progress_bar": False, "checkpoint_every_steps": 0},
            {"glue_dir": str(tiny_glue_dir)},
        ),
    }
    catalog = DataCatalog({name: MemoryDataset(value, copy_mode="assign") for name, value in values.items()})
    catalog["multi_teacher_models"] = MemoryDataset(copy_mode="assign")
    SequentialRunner().run(blocks, catalog)
    models = catalog.load("multi_teacher_models")
    assert [m.info["name"] for m in models] == ["a", "b"]
    assert [m.info["seed"] for m in models] == [1, 2]
    assert models[0].info["key"] != models[1].info["key"]
    assert sorted(p.name for p in (tmp_path / "data/06_models/store/teacher").iterdir()) == sorted(
        m.info["key"] for m in models
    )


def test_an_entry_without_max_seq_length_reads_the_schema_default(tiny_teacher_dir):
    """A ``multi_teachers`` entry without ``max_seq_length`` passes validation (default 128): each
    node reads that typed value instead of failing on the missing key."""
    from bert_kd.core.models import ModelBundle, load_tokenizer
    from bert_kd.experiment.parameters import validate_parameters
    from bert_kd.pipelines.multi_teacher.nodes import prepare_multi_teacher_data, select_teacher

    entries = [
        {"name": "a", "model": str(tiny_teacher_dir)},
        {"name": "b", "model": str(tiny_teacher_dir), "max_seq_length": 16},
    ]
    assert validate_parameters({"task": "rte", "multi_teachers": entries}).multi_teachers[0].max_seq_length == 128
    assert select_teacher(entries, 0) == {"model": str(tiny_teacher_dir), "max_seq_length": 128}
    assert select_teacher(entries, 1)["max_seq_length"] == 16
    words = " ".join(["word"] * 300)
    train = pd.DataFrame({"idx": [0, 1], "sentence1": [words, "a"], "sentence2": ["b", "c"], "label": [0, 1]})
    validation = train.assign(split="validation")
    tokenizer = load_tokenizer(str(tiny_teacher_dir))
    bundles = [ModelBundle(None, tokenizer, {}), ModelBundle(None, tokenizer, {})]
    data = prepare_multi_teacher_data(bundles, train, validation, entries, {"num_layers": 2})
    assert len(data["train"][0]["t0_input_ids"]) == 128 and len(data["train"][0]["t1_input_ids"]) == 16
    assert len(data["train"][0]["input_ids"]) == 128  # the student reads teacher 0's tokenization


def test_the_student_is_keyed_on_the_recipe_as_written_and_the_method_reads_explicit_weights():
    """Key material: the recipe as written (no ``teachers``, no weights added: the committed trials'
    students); the method: the same recipe with its weights written out (Shi & Guo Eq. 12–13)."""
    from bert_kd.pipelines.multi_teacher.nodes import student_recipe

    recipe = {"method": "multi_teacher", "alpha": 0.2, "beta": 0.5, "temperature": 5.0, "teachers": [0]}
    written, method_recipe = student_recipe(recipe)
    assert written == {"method": "multi_teacher", "alpha": 0.2, "beta": 0.5, "temperature": 5.0}
    assert method_recipe == {**written, "weights": {"ce": 0.5, "pred": 0.4, "hidden": 0.1, "attn": 0.5, "emb": 0.5}}
    assert recipe["teachers"] == [0]  # the parameter block is not changed
    override, _ = student_recipe({"method": "okd", "beta": 0.5, "weights": {"ce": 2.0}})
    assert override["weights"] == {"ce": 2.0}  # a partial override stays as the user wrote it


def test_the_first_conf_teacher_is_the_main_jobs_teacher():
    """conf/base: `multi_teachers[0]` trains with the settings of `teacher` at the run's seed, so its store key
    is the main job's teacher's and `distill_multi_teacher` after `distill_alp` reuses it."""
    from bert_kd.config.schema import Runtime
    from bert_kd.experiment.parameters import validate_parameters
    from tests.config.test_schema import load_parameters

    params = validate_parameters(load_parameters("local"))
    main, first = params.teacher, params.multi_teachers[0]
    runtime = Runtime.model_validate(params.runtime.model_dump())

    def settings(block, seed):
        config = training_config(block.training, runtime, seed, params.task, None)
        return block.model, block.max_seq_length, vars(config)

    assert teacher_seed(first, params.seed) == teacher_seed(main, params.seed) == params.seed
    assert settings(first, params.seed) == settings(main, params.seed)
    assert settings(params.multi_teachers[1], 7) != settings(main, 7)  # the second differs by more than its seed


def test_the_selection_columns_say_the_run_share_and_each_epoch_share():
    from bert_kd.pipelines.multi_teacher.nodes import selection_shares

    info = {
        "alignment": {"a": {"selection_share": 0.5}, "b": {"selection_share": 0.25}, "c": {"level": "prediction"}},
        "history": [
            {"epoch": 1, "observed": {"selection_share/a": 0.6, "selection_share/b": 0.4}},
            {"epoch": 2, "observed": {"selection_share/a": 0.4, "selection_share/b": 0.1}},
        ],
    }
    assert selection_shares(info) == {
        "teachers chosen (share of examples)": "a 0.50, b 0.25",
        "teachers chosen by epoch": "a 0.60→0.40, b 0.40→0.10",
    }
    assert selection_shares({"alignment": {"a": {"level": "prediction"}}}) == {}
