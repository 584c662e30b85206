"""``kedro run --pipelines=evaluate --params "evaluate.model=models:/bert_kd-rte-student@champion,task=rte"`` (or a model folder, ``models:/m-<model id>``, ``runs:/<run id>/<row>-<task>-student``)."""

from kedro.pipeline import Pipeline, node

from .nodes import evaluate_model_source


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            node(
                evaluate_model_source,
                [
                    "params:evaluate",
                    "params:task",
                    "params:glue_dir",
                    "params:max_eval_samples",
                    "params:seed",
                    "params:tracking",
                ],
                "evaluation_metrics",
                name="evaluate_model_source",
            ),
        ]
    )
