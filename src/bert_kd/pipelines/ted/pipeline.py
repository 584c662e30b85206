"""TED: ``train_ted_filters`` (Stage I) and the Stage II methods ``ted``, ``ted_kl``, ``kd``, ``lwd``
(kedro-viz group ``ted``: ``ted.train_ted_filters``, ``ted.<method>``, ``ted.compare_…``)."""

from kedro.pipeline import Pipeline, node

from bert_kd.pipelines.common import tags_for
from bert_kd.pipelines.distill.pipeline import comparison_pipeline, method_pipeline

from .nodes import ted_filter_quality, ted_student_init, train_ted_filters

PAPER = "ted"
TED_METHODS = ("kd", "lwd", "ted")  # the paper's Table 4 comparison


def stage_one_pipeline() -> Pipeline:
    return Pipeline(
        [
            node(
                train_ted_filters,
                ["teacher_model", "teacher_tokenized", "params:ted", "params:ted_student", "run_settings"],
                "ted_filters",
                name="train_ted_filters",
                namespace=PAPER,
                tags=tags_for(PAPER, role="teacher"),
            ),
            # per-layer filter quality: data/08_reporting/ted_filter_quality.{csv,png}
            node(
                ted_filter_quality,
                ["ted_filters", "teacher_model", "teacher_tokenized", "params:ted_student", "run_settings"],
                ["ted_filter_quality_table", "ted_filter_quality_plot"],
                name="ted_filter_quality_figure",
                namespace=PAPER,
                tags=tags_for(PAPER, role="report"),
            ),
        ]
    )


def ted_method_pipeline(method: str) -> Pipeline:
    return method_pipeline(
        method,
        methods_key="ted_methods",
        student_key="ted_student",
        build_student=ted_student_init,
        extra_inputs=("ted_filters",),
        paper=PAPER,
    )


def create_pipeline(**kwargs) -> Pipeline:
    """Stage I plus the KD / LWD / TED comparison table."""
    return (
        stage_one_pipeline()
        + sum((ted_method_pipeline(m) for m in TED_METHODS), Pipeline([]))
        + comparison_pipeline(TED_METHODS, "distill_ted_baselines", paper=PAPER)
    )
