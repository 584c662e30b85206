"""``export_student``: the distilled student (method ``alp`` by default) to ONNX, verified on dev,
with a latency table against the teacher (data/08_reporting/export_latency.{csv,md})."""

from kedro.pipeline import Pipeline

from bert_kd.pipelines.common import settings_node, tags_for


def create_pipeline(method: str = "alp", paper: str = "alp_kd", **kwargs) -> Pipeline:
    from .nodes import export_student

    block = f"{paper}.{method}"
    return Pipeline(
        [
            settings_node(
                export_student,
                [
                    f"{block}.student_model",
                    f"{block}.student_data",
                    "teacher_model",
                    "teacher_tokenized",
                    "params:export_student",
                ],
                ["exported_student", "export_student_report", "export_latency_table", "export_latency_table_md"],
                name="export_student",
                tags=tags_for(paper, method, "report"),
            ),
        ]
    )
