"""Ingest the GLUE task and tokenize it for the teacher (plus the run-wide ``run_settings``)."""

from kedro.pipeline import Pipeline, node

from bert_kd.pipelines.common import DATA_GROUP, grouped, run_settings_node, settings_node, tags_for

from .nodes import ingest_glue, tokenize_for_model


def create_pipeline(**kwargs) -> Pipeline:
    """The run settings, the GLUE rows and their tokenization for the teacher (kedro-viz's group ``data``)."""
    data = Pipeline(
        [
            settings_node(
                ingest_glue,
                [],
                ["glue_train", "glue_validation", "glue_data_report"],
                name="ingest_glue",
                tags=tags_for(role="data"),
            ),
            node(
                tokenize_for_model,
                inputs=["glue_train", "glue_validation", "params:teacher"],
                outputs="teacher_tokenized",
                name="tokenize_for_teacher",
                tags=tags_for(role="teacher"),
            ),
        ]
    )
    return run_settings_node() + grouped(data, DATA_GROUP)
