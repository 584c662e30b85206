"""Multi-teacher distillation with one-to-many layer mapping and its baselines.

Each of the K teachers of ``multi_teachers`` is its own namespaced ``train_teacher`` block
(``multi_teacher.teacher_<k>``: select → tokenize → train), so the DAG shows every teacher.
"""

from kedro.pipeline import Pipeline, node, pipeline

from bert_kd.pipelines.common import settings_node, tags_for, with_fixed
from bert_kd.pipelines.data_processing.nodes import tokenize_for_model
from bert_kd.pipelines.distill.pipeline import block_name, compare_group, gathering_pipeline
from bert_kd.pipelines.registration import over_gathered
from bert_kd.pipelines.train_teacher.nodes import train_teacher

from .nodes import (
    cache_multi_teacher_outputs,
    compare_multi_teacher,
    distill_multi_teacher,
    evaluate_multi_student,
    evaluate_multi_teachers,
    gather_teachers,
    multi_teacher_contributions,
    prepare_multi_teacher_data,
    register_best_multi_student,
    select_teacher,
)

#: Configurations of ``multi_teacher_configs`` run by ``distill_multi_teacher_baselines``
#: (Table 2: by teachers; Table 3: by strategy).
BASELINE_CONFIGS = ("multi_teacher", "single_teacher", "single_teacher_2", "okd", "multi_pkd", "rse_kd", "rl_kd")

#: Configurations running the MT method, whose per-teacher / per-group loss shares are reported.
CONTRIBUTION_CONFIGS = ("multi_teacher",)

#: The paper group (kedro-viz modular pipeline).
PAPER = "multi_teacher"

#: Teacher blocks when the configuration cannot be read (the paper's two-teacher setting).
DEFAULT_TEACHER_COUNT = 2


def teacher_namespace(slot: int) -> str:
    return f"{PAPER}.teacher_{slot}"


def teacher_block(slot: int) -> Pipeline:
    """``multi_teachers[slot]`` → its own tokenization → ``train_teacher``, namespaced ``multi_teacher.teacher_<slot>``."""
    select = with_fixed(select_teacher, slot=slot)
    template = Pipeline(
        [
            node(select, "params:multi_teachers", "teacher_params", name="select_teacher"),
            node(
                tokenize_for_model,
                ["glue_train", "glue_validation", "teacher_params"],
                "teacher_tokenized",
                name="tokenize_for_teacher",
            ),
            settings_node(
                train_teacher, ["teacher_tokenized", "teacher_params"], "teacher_model", name="train_teacher"
            ),
        ]
    )
    return pipeline(
        template,
        namespace=teacher_namespace(slot),
        inputs={"glue_train", "glue_validation", "run_settings"},
        parameters={"params:multi_teachers": "params:multi_teachers"},
        tags=tags_for(PAPER, role="teacher"),
    )


def teachers_pipeline(count: int = DEFAULT_TEACHER_COUNT) -> Pipeline:
    common_inputs = ["glue_train", "glue_validation", "params:multi_teachers"]
    models = [f"{teacher_namespace(k)}.teacher_model" for k in range(count)]
    tags = tags_for(PAPER, role="teacher")
    return sum((teacher_block(k) for k in range(count)), Pipeline([])) + Pipeline(
        [
            node(
                gather_teachers,
                ["params:multi_teachers", *models],
                "multi_teacher_models",
                name="gather_multi_teachers",
            ),
            settings_node(
                evaluate_multi_teachers,
                ["multi_teacher_models", *common_inputs],
                "multi_teacher_metrics",
                name="evaluate_multi_teachers",
            ),
            node(
                prepare_multi_teacher_data,
                ["multi_teacher_models", *common_inputs, "params:multi_student"],
                "multi_teacher_data",
                name="prepare_multi_teacher_data",
            ),
            settings_node(
                cache_multi_teacher_outputs,
                ["multi_teacher_models", "multi_teacher_data", "params:teacher_cache"],
                "multi_teacher_caches",
                name="cache_multi_teacher_outputs",
            ),
        ],
        namespace=PAPER,
        tags=tags,
        prefix_datasets_with_namespace=False,
    )


def configuration_pipeline(name: str) -> Pipeline:
    """Distil and evaluate one configuration of ``multi_teacher_configs``, namespaced ``multi_teacher.<name>``."""
    template = Pipeline(
        [
            node(
                distill_multi_teacher,
                [
                    "multi_teacher_models",
                    "multi_teacher_data",
                    "multi_teacher_caches",
                    "params:config",
                    "params:multi_student",
                    "run_settings",
                ],
                "student_model",
                name="distill",
            ),
            settings_node(
                evaluate_multi_student,
                ["student_model", "multi_teacher_data"],
                "student_metrics",
                name="evaluate_student",
            ),
        ]
    )
    outputs = None
    if name in CONTRIBUTION_CONFIGS:  # data/08_reporting/<name>_contributions.{csv,png}
        template += Pipeline(
            [
                node(
                    multi_teacher_contributions,
                    ["student_model", "run_settings"],
                    ["contributions_table", "contributions_plot"],
                    name="contributions_figure",
                    tags=tags_for(role="report"),
                )
            ]
        )
        outputs = {
            "contributions_table": f"{name}_contributions_table",
            "contributions_plot": f"{name}_contributions_plot",
        }
    shared = ("multi_teacher_models", "multi_teacher_data", "multi_teacher_caches", "run_settings")
    parameters = {
        "params:multi_student": "params:multi_student",
        "params:config": f"params:multi_teacher_configs.{name}",
    }
    return pipeline(
        template,
        namespace=block_name(PAPER, name),
        inputs={s: s for s in shared},
        outputs=outputs,
        parameters=parameters,
        tags=tags_for(PAPER, name, "student"),
    )


def comparison(configs) -> Pipeline:
    """Tables 2/3 (every configuration against its teachers) and the best student's registration, in
    the ``compare`` group, over the students gathered in the paper's group ([`gathering_pipeline`][])."""
    evaluations = "distill_multi_teacher_baselines_evaluations"
    gathered = gathering_pipeline([f"{block_name(PAPER, c)}.student_metrics" for c in configs], evaluations, PAPER)
    return gathered + compare_group(
        Pipeline(
            [
                node(
                    over_gathered(compare_multi_teacher),
                    ["multi_teacher_metrics", evaluations],
                    [
                        "distill_multi_teacher_baselines_table",
                        "distill_multi_teacher_baselines_table_md",
                        "distill_multi_teacher_baselines_plot",
                    ],
                    name="compare_multi_teacher",
                    tags=tags_for(PAPER, role="report"),
                ),
                node(
                    register_best_multi_student,  # the best student as a registered MLflow model (not when all tie)
                    ["distill_multi_teacher_baselines_table", "multi_teacher_metrics", evaluations, "run_settings"],
                    "distill_multi_teacher_baselines_registered_model",
                    name="register_multi_teacher_student",
                    tags=tags_for(PAPER, role="report"),
                ),
            ]
        )
    )


def create_pipeline(teacher_count: int = DEFAULT_TEACHER_COUNT, **kwargs) -> Pipeline:
    """``distill_multi_teacher_baselines``: every configuration and the Table 2/3 comparison."""
    return (
        teachers_pipeline(teacher_count)
        + sum((configuration_pipeline(c) for c in BASELINE_CONFIGS), Pipeline([]))
        + comparison(BASELINE_CONFIGS)
    )
