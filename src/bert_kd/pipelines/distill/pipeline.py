"""``distill_<method>`` pipelines: one namespaced block per method over a shared teacher.

Each block builds the student from the teacher, distils it with the method's recipe
(``distill_methods.<method>`` in ``parameters_distill.yml``) and evaluates it.
"""

from kedro.pipeline import Pipeline, node, pipeline

from bert_kd.pipelines.evaluate_teacher.nodes import evaluate_model

from .nodes import build_student_model, cache_teacher_outputs, compare_methods, distill_student, prepare_student_data

#: Methods of the ALP-KD comparison (Table 1 of the paper) in table order.
ALP_FAMILY = ("nkd", "rkd", "logits_mse", "pkd", "ckd", "alp", "tinybert")

SHARED_INPUTS = ("teacher_model", "teacher_tokenized", "teacher_output_cache", "glue_train", "glue_validation")
SHARED_PARAMS = ("task", "seed", "tracking", "runtime", "student")


def teacher_cache_pipeline() -> Pipeline:
    return Pipeline(
        [
            node(
                cache_teacher_outputs,
                inputs=["teacher_model", "teacher_tokenized", "params:teacher_cache", "params:runtime"],
                outputs="teacher_output_cache",
                name="cache_teacher_outputs",
            )
        ]
    )


def method_pipeline(
    method: str,
    methods_key: str = "distill_methods",
    student_key: str = "student",
    build_student=build_student_model,
    distill=distill_student,
    extra_inputs: tuple[str, ...] = (),
) -> Pipeline:
    """Student construction → distillation → evaluation for one method, namespaced ``method``.

    ``extra_inputs`` (e.g. TED's Stage I filters) are passed first to ``build_student`` and
    ``distill``; ``methods_key``/``student_key`` name the parameter blocks to read.
    """
    extra = list(extra_inputs)
    template = Pipeline(
        [
            node(build_student, [*extra, "teacher_model", "params:student", "params:task"], "student_init", name="build_student"),
            node(
                prepare_student_data,
                ["student_init", "teacher_model", "teacher_tokenized", "glue_train", "glue_validation", "params:teacher.max_seq_length"],
                "student_data",
                name="prepare_student_data",
            ),
            node(
                distill,
                [
                    *extra, "teacher_model", "student_init", "student_data", "teacher_output_cache", "params:method",
                    "params:student", "params:task", "params:seed", "params:tracking", "params:runtime",
                ],
                "student_model",
                name="distill",
            ),
            node(evaluate_model, ["student_model", "student_data", "params:task", "params:tracking"], "student_metrics", name="evaluate_student"),
        ]
    )
    parameters = {f"params:{p}": f"params:{p}" for p in SHARED_PARAMS}
    parameters["params:teacher.max_seq_length"] = "params:teacher.max_seq_length"
    parameters["params:student"] = f"params:{student_key}"
    parameters["params:method"] = f"params:{methods_key}.{method}"
    inputs = {i: i for i in (*SHARED_INPUTS, *extra)}
    return pipeline(template, namespace=method, inputs=inputs, parameters=parameters)


def comparison_pipeline(methods, output_prefix: str) -> Pipeline:
    """The Table-1-style comparison of ``methods`` with the teacher."""
    return Pipeline(
        [
            node(
                compare_methods,
                inputs=["teacher_metrics", *[f"{m}.student_metrics" for m in methods]],
                outputs=[f"{output_prefix}_table", f"{output_prefix}_table_md", f"{output_prefix}_plot"],
                name=f"compare_{output_prefix}",
            )
        ]
    )


def create_pipeline(**kwargs) -> Pipeline:
    """The ALP-KD distillation blocks (all methods, without the shared teacher part)."""
    return teacher_cache_pipeline() + sum((method_pipeline(m) for m in ALP_FAMILY), Pipeline([])) + comparison_pipeline(
        ALP_FAMILY, "distill_baselines"
    )
