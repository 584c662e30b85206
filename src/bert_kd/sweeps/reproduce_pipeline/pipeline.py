"""``kedro run --pipelines=reproduce --params "reproduce.table=cpu_protocol,reproduce.tasks=mrpc"``."""

from kedro.pipeline import Pipeline, node

from .nodes import REPRODUCE_RUN, reproduce_tables


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            node(
                reproduce_tables,
                ["params:reproduce", REPRODUCE_RUN],
                ["reproduce_table_csv", "reproduce_table_md", "reproduce_table_png"],
                name="reproduce_tables",
            ),
        ]
    )
