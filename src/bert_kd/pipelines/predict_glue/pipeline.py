"""``kedro run --pipelines=predict_glue --params "predict_glue.model=models:/bert_kd-rte-student@champion,task=rte"`` (or a model folder, ``models:/m-<model id>``, ``runs:/<run id>/<row>-<task>-student``)."""

from kedro.pipeline import Pipeline, node

from bert_kd.pipelines import common

from .nodes import predict_glue_test


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            node(
                predict_glue_test,
                ["params:predict_glue", "params:task", "params:glue_dir", "params:tracking"],
                "glue_submission",
                name="predict_glue_test",
                tags=common.tags_for(role="report"),
            ),
        ]
    )
