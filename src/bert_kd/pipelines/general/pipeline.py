"""``distill_general``: tokenize the corpus once (``corpus_shards``), distil the general student
(``general_student``: its store folder is what ``student.model`` names for the task stage)."""

from kedro.pipeline import Pipeline

from bert_kd.pipelines.common import run_settings_node, settings_node, tags_for

from .nodes import distill_general, tokenize_corpus


def create_pipeline(**kwargs) -> Pipeline:
    return run_settings_node() + Pipeline(
        [
            settings_node(
                tokenize_corpus,
                ["params:general"],
                "corpus_shards",
                name="tokenize_corpus",
                tags=tags_for(paper="tinybert", role="data"),
            ),
            settings_node(
                distill_general,
                ["corpus_shards", "params:general"],
                "general_student",
                name="distill_general",
                tags=tags_for(paper="tinybert", role="student"),
            ),
        ]
    )


#: The kedro-viz group of TinyBERT's two stages.
PAPER = "tinybert_general"


def two_stage_pipeline(method: str = "tinybert") -> Pipeline:
    """The task stage of ``method`` (a ``distill_methods`` row) started from ``general_student``."""
    from bert_kd.pipelines.distill.pipeline import method_pipeline

    from .nodes import start_from_general

    return method_pipeline(method, build_student=start_from_general, extra_inputs=("general_student",), paper=PAPER)
