"""TED: ``train_ted_filters`` (Stage I) and the Stage II methods ``ted``, ``ted_kl``, ``kd``, ``lwd``."""

from kedro.pipeline import Pipeline, node

from bert_kd.pipelines.distill.pipeline import comparison_pipeline, method_pipeline

from .nodes import distill_with_filters, ted_student_init, train_ted_filters

TED_METHODS = ("kd", "lwd", "ted")  # the paper's Table 4 comparison
TED_VARIANTS = ("ted_kl",)


def stage_one_pipeline() -> Pipeline:
    return Pipeline(
        [
            node(
                train_ted_filters,
                ["teacher_model", "teacher_tokenized", "params:task", "params:ted", "params:ted_student", "params:seed",
                 "params:tracking", "params:runtime"],
                "ted_filters",
                name="train_ted_filters",
            )
        ]
    )


def ted_method_pipeline(method: str) -> Pipeline:
    return method_pipeline(
        method, methods_key="ted_methods", student_key="ted_student", build_student=ted_student_init,
        distill=distill_with_filters, extra_inputs=("ted_filters",),
    )


def create_pipeline(**kwargs) -> Pipeline:
    """Stage I plus the KD / LWD / TED comparison table."""
    return stage_one_pipeline() + sum((ted_method_pipeline(m) for m in TED_METHODS), Pipeline([])) + comparison_pipeline(
        TED_METHODS, "distill_ted_baselines"
    )
