"""Evaluate the fine-tuned teacher on the task's dev set(s)."""

from kedro.pipeline import Pipeline

from bert_kd.pipelines.common import TEACHER_GROUP, grouped, settings_node, tags_for

from .nodes import evaluate_model


def create_pipeline(**kwargs) -> Pipeline:
    return grouped(
        Pipeline(
            [
                settings_node(
                    evaluate_model,
                    ["teacher_model", "teacher_tokenized"],
                    "teacher_metrics",
                    name="evaluate_teacher",
                    tags=tags_for(role="teacher"),
                )
            ]
        ),
        TEACHER_GROUP,
    )
