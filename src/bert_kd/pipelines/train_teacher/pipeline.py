"""Fine-tune the teacher (``kedro run --pipelines=train_teacher`` adds ingestion and evaluation)."""

from kedro.pipeline import Pipeline

from bert_kd.pipelines.common import TEACHER_GROUP, grouped, settings_node, tags_for

from .nodes import train_teacher


def create_pipeline(**kwargs) -> Pipeline:
    return grouped(
        Pipeline(
            [
                settings_node(
                    train_teacher,
                    ["teacher_tokenized", "params:teacher"],
                    "teacher_model",
                    name="train_teacher",
                    tags=tags_for(role="teacher"),
                )
            ]
        ),
        TEACHER_GROUP,
    )
