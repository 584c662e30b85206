"""``augment_glue``: ingest → teacher → transfer set; [`transfer_pipeline`][]
puts the set after the training split (``transfer_tokenized``) for the ``*_transfer`` distillation pipelines."""

from typing import Mapping

from kedro.pipeline import Pipeline, node, pipeline

from bert_kd.pipelines.common import settings_node, tags_for
from bert_kd.pipelines.distill.nodes import cache_teacher_outputs
from bert_kd.pipelines.distill.pipeline import method_pipeline, teacher_cache_pipeline

from .nodes import build_transfer_set, transfer_set_report, with_transfer_set


def create_pipeline(**kwargs) -> Pipeline:
    """The transfer-set node and its report (without the shared ingest and teacher part)."""
    return Pipeline(
        [
            settings_node(
                build_transfer_set,
                ["glue_train", "teacher_model", "params:augment", "params:teacher.max_seq_length"],
                "transfer_set",
                name="build_transfer_set",
                tags=tags_for(role="data"),
            ),
            node(
                transfer_set_report,
                "transfer_set",
                "transfer_set_report",
                name="describe_transfer_set",  # not the dataset's name: kedro-viz would show two of one name
                tags=tags_for(role="report"),
            ),
        ]
    )


def transfer_pipeline() -> Pipeline:
    """The transfer set after the teacher's tokenized training split: ``transfer_tokenized``."""
    return create_pipeline() + Pipeline(
        [
            node(
                with_transfer_set,
                ["teacher_tokenized", "transfer_set"],
                "transfer_tokenized",
                name="with_transfer_set",
                tags=tags_for(role="data"),
            )
        ]
    )


#: The distillation blocks on the transfer set read these instead of the plain training split's.
TRANSFER_INPUTS = {"teacher_tokenized": "transfer_tokenized", "teacher_output_cache": "transfer_output_cache"}
#: Tang et al.'s BiLSTM student distilled with this ``distill_methods`` row (logits-MSE) from ``tang_student``.
TANG_ROW = "logits_mse"
#: The BiLSTM student's name, from its progress bar to its card (``tang.bilstm``, ``distill_bilstm:rte``,
#: ``bilstm-rte-student``): a 2-layer BERT trained with the same row keeps ``logits_mse``.
BILSTM_ROW = "bilstm"


def transfer_cache_pipeline() -> Pipeline:
    """The teacher's outputs on the training split and the transfer set: its labels for the augmented rows."""
    return Pipeline(
        [
            settings_node(
                cache_teacher_outputs,
                ["teacher_model", "transfer_tokenized", "params:teacher_cache"],
                "transfer_output_cache",
                name="cache_teacher_outputs_on_transfer_set",
                tags=tags_for(role="teacher"),
            )
        ]
    )


def bilstm_block(paper: str = "tang") -> Pipeline:
    """Tang et al.'s BiLSTM student (``tang_student``) distilled with the ``logits_mse`` row: ``tang.bilstm``."""
    return method_pipeline(TANG_ROW, student_key="tang_student", paper=paper, row=BILSTM_ROW)


def on_transfer_set(block: Pipeline) -> Pipeline:
    """``block`` reading the transfer set (``transfer_tokenized``) and the teacher's outputs on it."""
    return pipeline(block, inputs=TRANSFER_INPUTS)


def transfer_pipelines(teacher: Pipeline, recipes: Mapping[str, Mapping]) -> dict[str, Pipeline]:
    """``augment_glue``, ``distill_bilstm``, ``distill_bilstm_transfer`` and ``distill_<row>_transfer`` for
    every ``distill_methods`` row (its block namespaced ``transfer.<row>``)."""
    on_set = teacher + transfer_pipeline() + transfer_cache_pipeline()
    result = {
        "augment_glue": teacher + create_pipeline(),
        "distill_bilstm": teacher + teacher_cache_pipeline() + bilstm_block(),
        "distill_bilstm_transfer": on_set + on_transfer_set(bilstm_block("tang_transfer")),
    }
    for row in recipes:
        result[f"distill_{row}_transfer"] = on_set + on_transfer_set(method_pipeline(row, paper="transfer"))
    return result
