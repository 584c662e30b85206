"""Evaluate the fine-tuned teacher on the task's dev set(s)."""

from kedro.pipeline import Pipeline, node

from .nodes import evaluate_model


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            node(
                evaluate_model,
                inputs=["teacher_model", "teacher_tokenized", "params:task", "params:tracking"],
                outputs="teacher_metrics",
                name="evaluate_teacher",
            )
        ]
    )
