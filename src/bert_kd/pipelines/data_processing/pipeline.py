"""Ingest the GLUE task and tokenize it for the teacher."""

from kedro.pipeline import Pipeline, node

from .nodes import ingest_glue, tokenize_for_model


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            node(
                ingest_glue,
                inputs=["params:task", "params:glue_dir", "params:max_train_samples", "params:max_eval_samples", "params:seed"],
                outputs=["glue_train", "glue_validation", "glue_data_report"],
                name="ingest_glue",
            ),
            node(
                tokenize_for_model,
                inputs=["glue_train", "glue_validation", "params:teacher"],
                outputs="teacher_tokenized",
                name="tokenize_for_teacher",
            ),
        ]
    )
