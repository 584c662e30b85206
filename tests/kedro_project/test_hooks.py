"""The parameter hook: validate before any node, hand nodes explicit rounded weights."""

from __future__ import annotations

import pytest

from bert_kd.config.errors import ParameterError
from bert_kd.kedro_project.hooks import ValidateParametersHook, used_blocks
from tests.config.test_schema import load_parameters


class FakePipeline:
    def __init__(self, inputs):
        self._inputs = set(inputs)

    def inputs(self):
        return self._inputs


class FakeCatalog:
    """``load``/``save`` of parameter entries as Kedro adds them (``params:a.b``)."""

    def __init__(self, parameters):
        self.data = {"parameters": parameters}

        def add(prefix, value):
            self.data[prefix] = value
            if isinstance(value, dict):
                for key, inner in value.items():
                    add(f"{prefix}.{key}", inner)

        for key, value in parameters.items():
            add(f"params:{key}", value)

    def load(self, name):
        return self.data[name]

    def save(self, name, value):
        if name not in self.data:  # as Kedro's DataCatalog: an entry is registered first
            raise KeyError(name)
        self.data[name] = value

    def __setitem__(self, name, value):
        self.data[name] = value

    def __contains__(self, name):
        return name in self.data


def test_used_blocks_names_blocks_and_recipes():
    used = used_blocks({"params:teacher.max_seq_length", "params:distill_methods.alp", "teacher_model"})
    assert used == {"teacher", "teacher.max_seq_length", "distill_methods", "distill_methods.alp"}
    assert "ted_student" in used_blocks({"params:ted"})


def test_hook_writes_explicit_rounded_weights(tiny_teacher_dir):
    params = load_parameters("local")
    params["teacher"]["model"] = str(tiny_teacher_dir)
    catalog = FakeCatalog(params)
    pipeline = FakePipeline({"params:teacher", "params:student", "params:distill_methods.rkd"})
    ValidateParametersHook().before_pipeline_run({}, pipeline, catalog)
    assert catalog.load("params:distill_methods.rkd")["weights"] == {"ce": 0.3, "kd": 0.7}


def test_hook_hands_multi_teacher_recipes_as_written():
    """The multi-teacher student is keyed on its recipe as written (a sweep trial's key); its node
    writes the weights out for the method (``student_recipe``), not the hook."""
    params = load_parameters("local")
    written = dict(params["multi_teacher_configs"]["multi_teacher"])
    catalog = FakeCatalog(params)
    pipeline = FakePipeline(
        {"params:multi_teachers", "params:multi_student", "params:multi_teacher_configs.multi_teacher"}
    )
    ValidateParametersHook().before_pipeline_run({}, pipeline, catalog)
    assert catalog.load("params:multi_teacher_configs.multi_teacher") == written


class FakeNode:
    def __init__(self, inputs):
        self.inputs = list(inputs)


def test_hook_hands_nodes_the_validated_models_and_keeps_dicts_in_the_catalog(tiny_teacher_dir):
    from bert_kd.config.schema import MultiTeacher, Runtime, Student, Teacher, Tracking, Training

    params = load_parameters("local")
    params["teacher"] = {"model": str(tiny_teacher_dir), "training": {"epochs": 1}}  # no max_seq_length
    catalog = FakeCatalog(params)
    raw_teacher = catalog.load("params:teacher")
    inputs = {
        "params:teacher",
        "params:teacher.training",
        "params:student",
        "params:tracking",
        "params:runtime",
        "params:multi_teachers",
        "params:distill_methods.rkd",
        "params:task",
        "teacher_model",
    }
    hook = ValidateParametersHook()
    hook.before_pipeline_run({}, FakePipeline(inputs), catalog)
    handed = hook.before_node_run(
        FakeNode(sorted(inputs)), {name: catalog.load(name) for name in inputs - {"teacher_model"}}
    )
    assert (
        isinstance(handed["params:teacher"], Teacher) and handed["params:teacher"].max_seq_length == 128
    )  # schema default
    assert isinstance(handed["params:teacher.training"], Training) and handed["params:teacher.training"].epochs == 1
    assert isinstance(handed["params:student"], Student)
    assert isinstance(handed["params:tracking"], Tracking) and isinstance(handed["params:runtime"], Runtime)
    assert all(isinstance(entry, MultiTeacher) for entry in handed["params:multi_teachers"])
    assert set(handed) == {
        "params:teacher",
        "params:teacher.training",
        "params:student",
        "params:tracking",
        "params:runtime",
        "params:multi_teachers",
    }  # recipes, scalars and datasets as loaded
    assert catalog.load("params:distill_methods.rkd")["weights"] == {"ce": 0.3, "kd": 0.7}  # a dict, weights explicit
    assert catalog.load("params:teacher") == raw_teacher  # what kedro-mlflow and the other hooks read
    handed["params:teacher"].max_seq_length = 8  # a node changing its model does not change the next node's
    again = hook.before_node_run(FakeNode(["params:teacher"]), {"params:teacher": raw_teacher})
    assert again["params:teacher"].max_seq_length == 128
    assert hook.before_node_run(FakeNode(["teacher_model"]), {"teacher_model": None}) is None


def test_an_entry_the_configuration_leaves_out_gets_the_schemas_default(tiny_teacher_dir):
    params = load_parameters("local")
    params["teacher"] = {"model": str(tiny_teacher_dir)}
    catalog = FakeCatalog(params)
    inputs = {
        "params:teacher.max_seq_length",
        "params:teacher.retrain",
        "params:teacher.model",
        "params:teacher.training",
    }
    hook = ValidateParametersHook()
    hook.before_pipeline_run({}, FakePipeline(inputs), catalog)
    assert catalog.load("params:teacher.max_seq_length") == 128 and catalog.load("params:teacher.retrain") is False
    assert catalog.load("params:teacher.model") == str(tiny_teacher_dir)
    assert catalog.load("params:teacher.training") == {}  # a dict for kedro-mlflow; the node gets the model
    handed = hook.before_node_run(FakeNode(["params:teacher.training"]), {"params:teacher.training": {}})
    handed_training = handed["params:teacher.training"]
    assert handed_training.epochs == 3.0 and handed_training.model_fields_set == set()  # the default, not set


def test_hook_refuses_before_any_node(tiny_teacher_dir):
    params = load_parameters("local")
    params["teacher"]["model"] = str(tiny_teacher_dir)
    params["student"]["num_layers"] = 99
    with pytest.raises(ParameterError, match="student.num_layers"):
        ValidateParametersHook().before_pipeline_run(
            {}, FakePipeline({"params:teacher", "params:student"}), FakeCatalog(params)
        )


@pytest.mark.parametrize(
    "cli, env, expected",
    [
        ({"glue_dir": "/from/params"}, "/from/env", "/from/params"),  # --params > environment
        ({}, "/from/env", "/from/env"),  # environment > conf
        ({}, "", "/from/conf"),  # conf when nothing else says
    ],
)
def test_glue_dir_precedence_params_then_environment_then_conf(monkeypatch, caplog, cli, env, expected):
    from bert_kd.kedro_project.run_params import apply_glue_dir_precedence

    monkeypatch.setenv("GLUE_DIR", env)
    catalog = FakeCatalog({"task": "rte", "glue_dir": cli.get("glue_dir", "/from/conf")})
    with caplog.at_level("INFO", logger="bert_kd.kedro_project.hooks"):
        assert apply_glue_dir_precedence({"runtime_params": cli}, catalog) == expected
    assert catalog.load("params:glue_dir") == expected and catalog.load("parameters")["glue_dir"] == expected
    lines = [r.getMessage() for r in caplog.records if "glue_dir" in r.getMessage()]
    assert len(lines) == 1 and expected in lines[0]  # logged once, naming the folder in use


def test_kedro_itself_validates_no_node_parameter_and_warns_about_none(caplog):
    """Nodes get their models from ValidateParametersHook alone: Kedro's own validation of node
    annotations (a pydantic model → validated into the catalog; a ``Union`` → a warning each run)
    finds nothing in any registered pipeline, since nodes annotate blocks as ``schema.Block[…]``."""
    from kedro.validation.type_extractor import TypeExtractor

    from bert_kd.pipeline_registry import register_pipelines

    with caplog.at_level("DEBUG", logger="kedro.validation"):
        assert TypeExtractor(register_pipelines()).extract_types_from_pipelines() == {}
    assert not [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]


# ---------------------------------------------------------------- the closing summary
def test_the_closing_summary_names_the_table_its_file_the_run_and_the_registration():
    from bert_kd.kedro_project.hooks import closing_summary

    text = closing_summary(
        "distill_baselines",
        {
            "distill_baselines": (
                "| method | accuracy |\n|---|---|\n| alp | 0.8 |\n",
                "data/08_reporting/distill_baselines.md",
            )
        },
        [],
        {
            "distill_baselines": {
                "registered": True,
                "uri": "models:/bert_kd-rte-student/3",
                "name": "bert_kd-rte-student",
                "version": "3",
                "method": "alp",
                "alias": "champion",
            }
        },
        "http://127.0.0.1:5000/#/experiments/1/runs/abc?workflowType=machine_learning",
    )
    assert text.splitlines() == [
        "── distill_baselines finished ──",
        "| method | accuracy |",
        "|---|---|",
        "| alp | 0.8 |",
        "table: data/08_reporting/distill_baselines.md",
        "MLflow run: http://127.0.0.1:5000/#/experiments/1/runs/abc?workflowType=machine_learning",
        "registered: alp as models:/bert_kd-rte-student/3 = models:/bert_kd-rte-student@champion",
    ]


def test_without_a_table_the_summary_gives_each_jobs_metric_and_why_nothing_was_registered():
    from bert_kd.kedro_project.hooks import closing_summary

    evaluations = [
        {
            "task": "rte",
            "primary_metric": "accuracy",
            "score": 0.61234,
            "score_examples": 24,
            "info": {"role": "teacher", "reused": True},
        },
        {
            "task": "rte",
            "primary_metric": "accuracy",
            "score": 0.5,
            "score_examples": 24,
            "info": {"role": "student", "method": "alp"},
        },
    ]
    text = closing_summary(
        "distill_alp", {}, evaluations, {"x": {"registered": False, "reason": "every student ties"}}, None
    )
    assert text.splitlines() == [
        "── distill_alp finished ──",
        "teacher (reused): dev accuracy = 0.6123 (rte, 24 rows)",
        "alp: dev accuracy = 0.5000 (rte, 24 rows)",
        "not registered (x): every student ties",
    ]


def test_a_score_at_or_below_the_majority_class_is_a_warning_with_its_cut_rows(caplog):
    from bert_kd.kedro_project.hooks import closing_summary

    def evaluation(role: str, score: float) -> dict:
        return {
            "task": "rte",
            "primary_metric": "accuracy",
            "score": score,
            "score_examples": 277,
            "metrics": {"validation": {"accuracy": score}},
            "majority_class": {"validation": {"accuracy": 0.5271}},
            "input_cut": {
                "validation": {"max_length": 64, "rows": 277, "cut": 97},
                "train": {"max_length": 64, "rows": 2490, "cut": 1024},
            },
            "info": {"role": role, "method": "bilstm" if role == "student" else None},
        }

    with caplog.at_level("WARNING"):
        text = closing_summary(
            "distill_bilstm", {}, [evaluation("teacher", 0.5668), evaluation("student", 0.5235)], {}, None
        )
    assert text.splitlines() == [
        "── distill_bilstm finished ──",
        "teacher: dev accuracy = 0.5668 (rte, 277 rows)",
        "  +0.0397 over the majority class (0.5271)",
        "  input cut at 64 tokens: 97 of 277 dev rows, 1,024 of 2,490 training rows",
        "bilstm: dev accuracy = 0.5235 (rte, 277 rows)",
        "  WARNING: accuracy 0.5235 is at or below the majority class (0.5271): no better than always answering "
        "the commonest label",
        "  input cut at 64 tokens: 97 of 277 dev rows, 1,024 of 2,490 training rows",
    ]
    assert [r.getMessage().split(":")[0] for r in caplog.records if r.levelname == "WARNING"] == ["bilstm (rte)"]


def test_the_summary_hook_collects_node_outputs_and_prints_after_every_other_hook(capsys):
    from bert_kd.kedro_project.hooks import ClosingSummaryHook

    class Catalog:
        def get(self, name):
            return type("Report", (), {"_filepath": f"data/08_reporting/{name}.md"})()

    hook = ClosingSummaryHook()
    hook.before_pipeline_run({}, None, Catalog())
    hook.after_node_run(
        None, {"t_table_md": "| a |", "t_registered_model": {"registered": False, "reason": "off"}}, Catalog()
    )
    wrapper = hook.after_pipeline_run({"pipeline_names": ["distill_baselines"]}, None, Catalog())
    next(wrapper)  # the other hooks' after_pipeline_run run here
    assert capsys.readouterr().out == ""
    with pytest.raises(StopIteration):
        next(wrapper)
    out = capsys.readouterr().out.strip().splitlines()
    assert out == [
        "── distill_baselines finished ──",
        "| a |",
        "table: data/08_reporting/t_table_md.md",
        "not registered (t): off",
    ]


def test_rows_that_connect_the_same_layers_are_handed_one_recipe(tiny_teacher_dir):
    """A 2-layer student: ALP's all / NO / PO maps and CKD's NO / PO maps connect the same layers."""
    from bert_kd.experiment.parameters import validate_parameters
    from bert_kd.kedro_project.hooks import collapse_duplicate_rows, teacher_layer_count

    params = load_parameters("local")
    params["teacher"]["model"] = str(tiny_teacher_dir)
    params["student"]["num_layers"] = 2
    assert teacher_layer_count(str(tiny_teacher_dir)) >= 2
    catalog = FakeCatalog(params)
    rows = ("nkd", "pkd", "ckd", "ckd_po", "alp_no", "alp_po", "alp")
    pipeline = FakePipeline({"params:teacher", "params:student", *(f"params:distill_methods.{r}" for r in rows)})
    ValidateParametersHook().before_pipeline_run({}, pipeline, catalog)
    alp, ckd = catalog.load("params:distill_methods.alp"), catalog.load("params:distill_methods.ckd")
    assert alp["mapping"] == "all" and ckd["mapping"] == "buckets_no"
    assert catalog.load("params:distill_methods.alp_no") == alp == catalog.load("params:distill_methods.alp_po")
    assert catalog.load("params:distill_methods.ckd_po") == ckd
    assert catalog.load("params:distill_methods.pkd")["mapping"] == "bucket_first"  # another map: its own job
    fresh = FakeCatalog(params)
    assert collapse_duplicate_rows(params, validate_parameters(params), pipeline.inputs(), fresh) == {
        "ckd_po": "ckd",
        "alp_no": "alp",
        "alp_po": "alp",
    }
    # a student as deep as the teacher: ALP-NO's buckets are not ALP's all-layer map, each row stays its own job
    params["student"]["num_layers"] = teacher_layer_count(str(tiny_teacher_dir))
    deep = FakeCatalog(params)
    assert collapse_duplicate_rows(params, validate_parameters(params), pipeline.inputs(), deep) == {}
    assert deep.load("params:distill_methods.alp_no")["mapping"] == "buckets_no"


def test_the_run_parameters_every_later_hook_sees_carry_no_password():
    """kedro-mlflow tags the parent run with the ``kedro run``'s parameters (``runtime_params``): the project's
    hook masks them first, whatever order the other implementations are registered in."""
    import pluggy
    from kedro.framework.hooks.manager import _create_hook_manager

    from bert_kd.kedro_project.run_params import CredentialsHook

    seen = []

    class Recorder:  # stands for kedro-mlflow's hook: registered last, so called first among plain ones
        @pluggy.HookimplMarker("kedro")
        def before_pipeline_run(self, run_params, pipeline, catalog):
            seen.append(repr(run_params))

    manager = _create_hook_manager()
    manager.register(CredentialsHook())
    manager.register(Recorder())
    run_params = {
        "runtime_params": {"reproduce": {"storage": "postgresql+psycopg://bert_kd:s3cret@db:5433/bert_kd_optuna"}},
        "pipeline_names": ["reproduce"],
    }
    manager.hook.before_pipeline_run(run_params=run_params, pipeline=None, catalog=None)
    assert seen and "s3cret" not in seen[0] and "bert_kd:***@db:5433" in seen[0]
