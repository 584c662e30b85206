"""``export_student``: the distilled student (method ``alp`` by default) to ONNX, verified on dev,
with a latency table against the teacher (data/08_reporting/export_latency.{csv,md})."""

from kedro.pipeline import Pipeline, node

from .nodes import export_student


def create_pipeline(method: str = "alp", **kwargs) -> Pipeline:
    return Pipeline(
        [
            node(
                export_student,
                inputs=[f"{method}.student_model", f"{method}.student_data", "teacher_model", "teacher_tokenized",
                        "params:export_student", "params:task", "params:tracking"],
                outputs=["exported_student", "export_student_report", "export_latency_table", "export_latency_table_md"],
                name="export_student",
            )
        ]
    )
