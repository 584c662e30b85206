"""``distill_<method>`` pipelines: one namespaced block per method over a shared teacher.

Each block (``alp_kd.<method>`` in kedro-viz) builds the student from the teacher, distils it with
the method's recipe (``distill_methods.<method>`` in ``parameters_distill.yml``) and evaluates it.
"""

from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node, pipeline

from bert_kd.pipelines.common import settings_node, tags_for
from bert_kd.pipelines.evaluate_teacher.nodes import evaluate_model

from .nodes import (
    alp_attention_report,
    build_student_model,
    cache_teacher_outputs,
    compare_methods,
    distill_student,
    layer_alignment_report,
    prepare_student_data,
    registration_node,
)

#: The paper group (kedro-viz modular pipeline) of the ALP-KD comparison.
PAPER = "alp_kd"
#: Methods of the ALP-KD comparison in table order: Table 1's rows (``pkd`` = ALP-KD's PKD with
#: ``bucket_first``, ``ckd`` = CKD-NO, ``ckd_po``, ``alp_no``, ``alp_po``, ``alp``) and the
#: other baselines (NKD, RKD, logits-MSE, TinyBERT).
ALP_FAMILY = ("nkd", "rkd", "logits_mse", "pkd", "ckd", "ckd_po", "alp_no", "alp_po", "alp", "tinybert")

#: The ALP rows of Table 1, each with its Figure 3 (α per dev example).
ALP_ROWS = ("alp_no", "alp_po", "alp")

SHARED_INPUTS = ("teacher_model", "teacher_tokenized", "teacher_output_cache", "glue_train", "glue_validation", "run_settings")


def block_name(paper: str, method: str) -> str:
    """The namespace of one method's block: ``alp_kd.alp``, ``ted.kd``, ``multi_teacher.okd``."""
    return f"{paper}.{method}"


def teacher_cache_pipeline() -> Pipeline:
    return Pipeline([settings_node(cache_teacher_outputs, ["teacher_model", "teacher_tokenized", "params:teacher_cache"],
                                   "teacher_output_cache", name="cache_teacher_outputs", tags=tags_for(role="teacher"))])


def method_pipeline(
    method: str,
    methods_key: str = "distill_methods",
    student_key: str = "student",
    build_student=build_student_model,
    distill=distill_student,
    extra_inputs: tuple[str, ...] = (),
    paper: str = PAPER,
) -> Pipeline:
    """Student construction → distillation → evaluation for one method, namespaced ``<paper>.<method>``.

    ``extra_inputs`` (e.g. TED's Stage I filters) are passed first to ``build_student`` and
    ``distill``; ``methods_key``/``student_key`` name the parameter blocks to read.
    """
    extra = list(extra_inputs)
    template = Pipeline(
        [
            settings_node(build_student, [*extra, "teacher_model", "params:student"], "student_init", name="build_student"),
            node(
                prepare_student_data,
                ["student_init", "teacher_model", "teacher_tokenized", "glue_train", "glue_validation", "params:teacher.max_seq_length"],
                "student_data",
                name="prepare_student_data",
            ),
            settings_node(
                distill,
                [*extra, "teacher_model", "student_init", "student_data", "teacher_output_cache", "params:method", "params:student"],
                "student_model",
                name="distill",
                fixed={"row": method},
            ),
            settings_node(evaluate_model, ["student_model", "student_data"], "student_metrics", name="evaluate_student"),
        ]
    )
    parameters = {
        "params:teacher.max_seq_length": "params:teacher.max_seq_length",
        "params:student": f"params:{student_key}",
        "params:method": f"params:{methods_key}.{method}",
    }
    outputs = {}
    if paper == PAPER and method in ALP_ROWS:
        template += Pipeline([settings_node(
            alp_attention_report, ["student_model", "teacher_model", "student_data", "params:method", "params:figures"],
            ["alp_attention_table", "alp_attention_plot"], name="alp_attention_figure", fixed={"row": method},
            tags=tags_for(role="report"))])
        parameters["params:figures"] = "params:figures"
        # data/08_reporting/alp_kd_figure3_<row>.{csv,png} (the "{name}_table" / "{name}_plot" entries)
        outputs = {"alp_attention_table": f"{paper}_figure3_{method}_table",
                   "alp_attention_plot": f"{paper}_figure3_{method}_plot"}
    inputs = {i: i for i in (*SHARED_INPUTS, *extra)}
    return pipeline(template, namespace=block_name(paper, method), inputs=inputs, outputs=outputs or None,
                    parameters=parameters, tags=tags_for(paper, method, "student"))


def layer_alignment_pipeline(paper: str = PAPER) -> Pipeline:
    """ALP-KD Figure 4 (ALP vs PKD students against their teacher layers) where both rows run:
    data/08_reporting/alp_kd_figure4.{csv,png}."""
    return Pipeline([settings_node(
        layer_alignment_report,
        ["teacher_model", f"{block_name(paper, 'alp')}.student_model", f"{block_name(paper, 'pkd')}.student_model",
         f"{block_name(paper, 'alp')}.student_data", "params:distill_methods.pkd", "params:figures"],
        [f"{paper}_figure4_table", f"{paper}_figure4_plot"], name="layer_alignment_figure", namespace=paper,
        tags=tags_for(paper, role="report"))])


def comparison_pipeline(methods, output_prefix: str, paper: str = PAPER) -> Pipeline:
    """The Table-1-style comparison of ``methods`` with the teacher, tagged with the paper; outside the
    paper's group, which would otherwise read a reporting dataset (``teacher_metrics``) and write
    models, a cycle that switches kedro-viz's layer view off."""
    return Pipeline(
        [
            node(
                update_wrapper(partial(compare_methods, table=output_prefix), compare_methods),
                inputs=["teacher_metrics", *[f"{block_name(paper, m)}.student_metrics" for m in methods]],
                outputs=[f"{output_prefix}_table", f"{output_prefix}_table_md", f"{output_prefix}_plot"],
                name=f"compare_{output_prefix}",
                tags=tags_for(paper, role="report"),
            ),
            node(  # the best student as a registered MLflow model version (not when every student ties)
                registration_node(output_prefix),
                inputs=[f"{output_prefix}_table", "teacher_metrics",
                        *[f"{block_name(paper, m)}.student_metrics" for m in methods], "run_settings"],
                outputs=f"{output_prefix}_registered_model",
                name=f"register_{output_prefix}",
                tags=tags_for(paper, role="report"),
            ),
        ]
    )


def create_pipeline(**kwargs) -> Pipeline:
    """The ALP-KD distillation blocks (all methods, without the shared teacher part)."""
    return teacher_cache_pipeline() + sum((method_pipeline(m) for m in ALP_FAMILY), Pipeline([])) + comparison_pipeline(
        ALP_FAMILY, "distill_baselines"
    ) + layer_alignment_pipeline()
