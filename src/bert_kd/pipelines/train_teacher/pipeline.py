"""Fine-tune the teacher (``kedro run --pipeline=train_teacher`` adds ingestion and evaluation)."""

from kedro.pipeline import Pipeline, node

from .nodes import train_teacher


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            node(
                train_teacher,
                inputs=["teacher_tokenized", "params:task", "params:teacher", "params:seed", "params:tracking", "params:runtime"],
                outputs="teacher_model",
                name="train_teacher",
            )
        ]
    )
