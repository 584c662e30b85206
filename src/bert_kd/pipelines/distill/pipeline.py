"""``distill_<row>`` pipelines: one namespaced block per recipe row over a shared teacher.

The rows are the keys of ``distill_methods`` in ``parameters_distill.yml`` (read by the pipeline
registry): each block (``alp_kd.<row>`` in kedro-viz) builds the student from the teacher, distils
it with the row's recipe (``distill_methods.<row>``) and evaluates it.
"""

from typing import Mapping, Sequence

from kedro.pipeline import Pipeline, node, pipeline

from bert_kd.experiment.training_jobs.student import build_student_model
from bert_kd.pipelines import registration  # a module: registration reads this package's comparison helpers
from bert_kd.pipelines.common import TEACHER_GROUP, grouped, settings_node, tags_for, with_fixed
from bert_kd.pipelines.evaluate_teacher.nodes import evaluate_model

from .nodes import (
    alp_attention_report,
    cache_teacher_outputs,
    compare_methods,
    distill_student,
    layer_alignment_report,
    prepare_student_data,
)

#: The paper group (kedro-viz modular pipeline) of the ALP-KD comparison.
PAPER = "alp_kd"
#: Rows whose recipe runs this method get ALP-KD's Figure 3 (α per dev example).
FIGURE3_METHOD = "alp"

SHARED_INPUTS = (
    "teacher_model",
    "teacher_tokenized",
    "teacher_output_cache",
    "glue_train",
    "glue_validation",
    "run_settings",
)


def block_name(paper: str, method: str) -> str:
    """The namespace of one method's block: ``alp_kd.alp``, ``ted.kd``, ``multi_teacher.okd``."""
    return f"{paper}.{method}"


def teacher_cache_pipeline() -> Pipeline:
    """The teacher's outputs on the train rows, computed once (kedro-viz's group ``teacher``)."""
    node = settings_node(
        cache_teacher_outputs,
        ["teacher_model", "teacher_tokenized", "params:teacher_cache"],
        "teacher_output_cache",
        name="cache_teacher_outputs",
        tags=tags_for(role="teacher"),
    )
    return grouped(Pipeline([node]), TEACHER_GROUP)


def for_row(func, row: str):
    """``func`` with its ``row`` bound (the recipe row a block is built for), shown as ``func`` in kedro-viz."""
    return with_fixed(func, row=row)


def method_pipeline(
    method: str,
    methods_key: str = "distill_methods",
    student_key: str = "student",
    build_student=build_student_model,
    extra_inputs: tuple[str, ...] = (),
    paper: str = PAPER,
    figure3: bool = False,
    row: str | None = None,
) -> Pipeline:
    """Student construction → distillation → evaluation for one recipe row, namespaced ``<paper>.<row>``.

    ``row``: the student's name where it is not the recipe row ``method`` (``bilstm``: Tang et al.'s
    BiLSTM trained with the ``logits_mse`` recipe), the one name of its progress bar, run, LoggedModel,
    card and metrics file; ``extra_inputs`` (e.g. TED's Stage I filters) are passed first to ``build_student``, whose
    student start carries what the distillation reads from them; ``methods_key``/``student_key``
    name the parameter blocks to read; ``figure3`` adds ALP-KD's Figure 3 (an ALP recipe).
    """
    extra = list(extra_inputs)
    row = row or method
    template = Pipeline(
        [
            node(
                for_row(build_student, row),
                [*extra, "teacher_model", "params:student", "run_settings"],
                "student_init",
                name="build_student",
            ),
            node(
                prepare_student_data,
                [
                    "student_init",
                    "teacher_model",
                    "teacher_tokenized",
                    "glue_train",
                    "glue_validation",
                    "params:teacher.max_seq_length",
                ],
                "student_data",
                name="prepare_student_data",
            ),
            node(
                distill_student,
                [
                    "teacher_model",
                    "student_init",
                    "student_data",
                    "teacher_output_cache",
                    "params:method",
                    "run_settings",
                ],
                "student_model",
                name="distill",
            ),
            settings_node(
                evaluate_model, ["student_model", "student_data"], "student_metrics", name="evaluate_student"
            ),
        ]
    )
    parameters = {
        "params:teacher.max_seq_length": "params:teacher.max_seq_length",
        "params:student": f"params:{student_key}",
        "params:method": f"params:{methods_key}.{method}",
    }
    outputs = {}
    if figure3:
        template += Pipeline(
            [
                node(
                    alp_attention_report,
                    [
                        "student_model",
                        "teacher_model",
                        "student_data",
                        "params:method",
                        "params:figures",
                        "run_settings",
                    ],
                    "alp_attention_figure",
                    name="alp_attention_figure",
                    tags=tags_for(role="report"),
                )
            ]
        )
        parameters["params:figures"] = "params:figures"
        # data/08_reporting/alp_kd_figure3_<row>.{csv,png}: one dataset ("{paper}_figure3_{row}" in the catalog)
        outputs = {"alp_attention_figure": f"{paper}_figure3_{row}"}
    inputs = {i: i for i in (*SHARED_INPUTS, *extra)}
    return pipeline(
        template,
        namespace=block_name(paper, row),
        inputs=inputs,
        outputs=outputs or None,
        parameters=parameters,
        tags=tags_for(paper, row, "student"),
    )


def layer_alignment_pipeline(paper: str = PAPER) -> Pipeline:
    """ALP-KD Figure 4 (ALP vs PKD students against their teacher layers) where both rows run:
    data/08_reporting/alp_kd_figure4.{csv,png}."""
    return Pipeline(
        [
            node(
                layer_alignment_report,
                [
                    "teacher_model",
                    f"{block_name(paper, 'alp')}.student_model",
                    f"{block_name(paper, 'pkd')}.student_model",
                    f"{block_name(paper, 'alp')}.student_data",
                    "params:distill_methods.pkd",
                    "params:figures",
                ],
                f"{paper}_figure4",
                name="layer_alignment_figure",
                namespace=paper,
                tags=tags_for(paper, role="report"),
            )
        ]
    )


#: The kedro-viz group of every comparison (table, plot, registration): ``compare.compare_distill_baselines``.
COMPARE_NAMESPACE = "compare"


def compare_group(template: Pipeline) -> Pipeline:
    """``template``'s nodes in the [`COMPARE_NAMESPACE`][] group, every dataset keeping its name
    (``distill_baselines_table``, ``alp_kd.alp.student_metrics``: the catalog's and the users' names).
    Its own group, not the paper's: the paper's group would then read a reporting dataset
    (``teacher_metrics``) and write models, a cycle that switches kedro-viz's layer view off."""
    return pipeline(
        template,
        namespace=COMPARE_NAMESPACE,
        inputs={name: name for name in template.inputs() if not name.startswith("params:")},
        outputs={name: name for name in template.all_outputs()},
    )


def balanced_groups(items: Sequence[str], size: int | None = None) -> list[list[str]]:
    """``items`` in order, cut into as few groups of at most ``size`` (default [`FAN_IN`][registration.FAN_IN])
    as possible, of near-equal sizes (11 rows: 6 and 5)."""
    size = size or registration.FAN_IN  # read at call time: registration imports this package
    count = -(-len(items) // size)
    width = -(-len(items) // count)
    return [list(items[i : i + width]) for i in range(0, len(items), width)]


def gathering_pipeline(evaluations: Sequence[str], output: str, paper: str) -> Pipeline:
    """The students' ``evaluations`` (one dataset per row) gathered into ``output``, in the paper's group:
    one node ``<paper>.gather_students`` for at most [`FAN_IN`][registration.FAN_IN] rows, else one node per
    [`balanced_groups`][] group (``gather_students_1``, ``_2`` …; ``<paper>.students_1`` …) and one that joins
    them. No node reads more than ``FAN_IN`` inputs, and kedro-viz's collapsed group shows one output, not
    one per row."""
    nodes, inputs, func, level = [], list(evaluations), registration.gather_students, 0
    while len(inputs) > registration.FAN_IN:
        level += 1
        parts = []
        for index, group in enumerate(balanced_groups(inputs), start=1):
            label = f"{index}" if level == 1 else f"{level}_{index}"
            parts.append(f"{paper}.students_{label}")
            nodes.append(node(func, group, parts[-1], name=f"gather_students_{label}", namespace=paper))
        inputs, func = parts, registration.join_gathered
    nodes.append(node(func, inputs, output, name="gather_students", namespace=paper))
    return Pipeline(nodes, tags=tags_for(paper, role="report"))


def comparison_pipeline(methods, output_prefix: str, paper: str = PAPER) -> Pipeline:
    """The Table-1-style comparison of ``methods`` with the teacher and the best student's registration,
    tagged with the paper: the students gathered in the paper's group ([`gathering_pipeline`][]) into
    ``<output_prefix>_evaluations``, which the table and the registration read, in the ``compare`` group
    ([`compare_group`][])."""
    evaluations = f"{output_prefix}_evaluations"
    gathered = gathering_pipeline([f"{block_name(paper, m)}.student_metrics" for m in methods], evaluations, paper)
    return gathered + compare_group(
        Pipeline(
            [
                node(
                    registration.over_gathered(with_fixed(compare_methods, table=output_prefix)),
                    inputs=["teacher_metrics", evaluations],
                    outputs=[f"{output_prefix}_table", f"{output_prefix}_table_md", f"{output_prefix}_plot"],
                    name=f"compare_{output_prefix}",
                    tags=tags_for(paper, role="report"),
                ),
                node(  # the best student as a registered MLflow model version (not when every student ties)
                    registration.registration_node(output_prefix),
                    inputs=[f"{output_prefix}_table", "teacher_metrics", evaluations, "run_settings"],
                    outputs=f"{output_prefix}_registered_model",
                    name=f"register_{output_prefix}",
                    tags=tags_for(paper, role="report"),
                ),
            ]
        )
    )


def figure3_rows(recipes: Mapping[str, Mapping]) -> tuple[str, ...]:
    """The rows of ``recipes`` (``distill_methods``) that run ALP, each with its Figure 3."""
    return tuple(row for row, recipe in recipes.items() if (recipe or {}).get("method") == FIGURE3_METHOD)


def row_pipeline(row: str, recipes: Mapping[str, Mapping]) -> Pipeline:
    """The block of one ``distill_methods`` row (with Figure 3 for an ALP recipe)."""
    return method_pipeline(row, figure3=row in figure3_rows(recipes))


def create_pipeline(recipes: Mapping[str, Mapping] | None = None, **kwargs) -> Pipeline:
    """The ALP-KD distillation blocks, one per row of ``recipes`` (``distill_methods``, YAML order),
    their comparison and, where rows ``alp`` and ``pkd`` both run, Figure 4 (without the shared
    teacher part)."""
    recipes = dict(recipes or {})
    rows: Sequence[str] = tuple(recipes)
    if not rows:
        return teacher_cache_pipeline()
    blocks = sum((row_pipeline(row, recipes) for row in rows), Pipeline([]))
    figure4 = layer_alignment_pipeline() if {"alp", "pkd"} <= set(rows) else Pipeline([])
    return teacher_cache_pipeline() + blocks + comparison_pipeline(rows, "distill_baselines") + figure4
