"""Multi-teacher distillation with one-to-many layer mapping and its baselines."""

from kedro.pipeline import Pipeline, node, pipeline

from .nodes import (
    cache_multi_teacher_outputs,
    compare_multi_teacher,
    distill_multi_teacher,
    evaluate_multi_student,
    evaluate_multi_teachers,
    prepare_multi_teacher_data,
    train_multi_teachers,
)

#: Configurations of ``multi_teacher_configs`` run by ``distill_multi_teacher_baselines``
#: (Table 2: by teachers; Table 3: by strategy).
BASELINE_CONFIGS = ("multi_teacher", "single_teacher", "single_teacher_2", "okd", "multi_pkd", "rse_kd")


def teachers_pipeline() -> Pipeline:
    common_inputs = ["glue_train", "glue_validation", "params:multi_teachers"]
    return Pipeline(
        [
            node(train_multi_teachers, [*common_inputs, "params:task", "params:seed", "params:tracking", "params:runtime"],
                 "multi_teacher_models", name="train_multi_teachers"),
            node(evaluate_multi_teachers, ["multi_teacher_models", *common_inputs, "params:task", "params:tracking"],
                 "multi_teacher_metrics", name="evaluate_multi_teachers"),
            node(prepare_multi_teacher_data, ["multi_teacher_models", *common_inputs, "params:multi_student"],
                 "multi_teacher_data", name="prepare_multi_teacher_data"),
            node(cache_multi_teacher_outputs, ["multi_teacher_models", "multi_teacher_data", "params:teacher_cache"],
                 "multi_teacher_caches", name="cache_multi_teacher_outputs"),
        ]
    )


def configuration_pipeline(name: str) -> Pipeline:
    """Distil and evaluate one configuration of ``multi_teacher_configs``, namespaced ``mt_<name>``."""
    template = Pipeline(
        [
            node(distill_multi_teacher,
                 ["multi_teacher_models", "multi_teacher_data", "multi_teacher_caches", "params:config", "params:multi_student",
                  "params:task", "params:seed", "params:tracking", "params:runtime"],
                 "student_model", name="distill"),
            node(evaluate_multi_student, ["student_model", "multi_teacher_data", "params:task", "params:tracking"],
                 "student_metrics", name="evaluate_student"),
        ]
    )
    shared = ("multi_teacher_models", "multi_teacher_data", "multi_teacher_caches")
    parameters = {f"params:{p}": f"params:{p}" for p in ("multi_student", "task", "seed", "tracking", "runtime")}
    parameters["params:config"] = f"params:multi_teacher_configs.{name}"
    return pipeline(template, namespace=f"mt_{name}", inputs={s: s for s in shared}, parameters=parameters)


def comparison(configs) -> Pipeline:
    return Pipeline(
        [
            node(compare_multi_teacher, ["multi_teacher_metrics", *[f"mt_{c}.student_metrics" for c in configs]],
                 ["distill_multi_teacher_baselines_table", "distill_multi_teacher_baselines_table_md",
                  "distill_multi_teacher_baselines_plot"], name="compare_multi_teacher")
        ]
    )


def create_pipeline(**kwargs) -> Pipeline:
    """``distill_multi_teacher_baselines``: every configuration and the Table 2/3 comparison."""
    return teachers_pipeline() + sum((configuration_pipeline(c) for c in BASELINE_CONFIGS), Pipeline([])) + comparison(
        BASELINE_CONFIGS
    )
