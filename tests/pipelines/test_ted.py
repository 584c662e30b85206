"""End to end: TED Stage I then Stage II, and the KD / LWD / TED comparison."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.pipelines.conftest import TINY_TRAINING, mlflow_runs

TED_STUDENT = {
    "num_layers": 2,
    "layer_selection": "distilbert",
    "training": {**TINY_TRAINING, "aux_learning_rate": 1e-3},
}


def test_train_ted_filters_then_distill_ted(run_pipeline):
    _, root, uri = run_pipeline("train_ted_filters", ted_student=TED_STUDENT)
    (filters,) = [p / "stage1" for p in (root / "data/06_models/store/ted_filters").iterdir()]
    assert (filters / "teacher").exists() and (filters / "student").exists()
    runs = mlflow_runs(uri)
    stage1 = runs[runs["tags.mlflow.runName"] == "train_ted_filters:rte"].iloc[0]
    assert "metrics.filters/teacher/layer_1/accuracy" in runs.columns  # distilbert(4, 2) = [1, 4]
    assert 0 <= stage1["metrics.filters/teacher/layer_4/accuracy"] <= 1
    # per-layer filter quality: teacher filters at M(k) = [1, 4], the copied student filters at k = 1, 2
    quality = pd.read_csv(root / "data/08_reporting/ted_filter_quality.csv")
    assert list(zip(quality["filters"], quality["k"], quality["model_layer"])) == [
        ("teacher", 1, 1),
        ("teacher", 2, 4),
        ("student", 1, 1),
        ("student", 2, 2),
    ]
    assert quality.loc[quality["filters"] == "teacher", "accuracy"].tolist() == [
        round(stage1[f"metrics.filters/teacher/layer_{k}/accuracy"], 4) for k in (1, 4)
    ]
    assert quality["accuracy"].between(0, 1).all() and quality["majority_class"].between(0.5, 1).all()
    assert (root / "data/08_reporting/ted_filter_quality.png").stat().st_size > 1000

    _, root, uri = run_pipeline("distill_ted", ted_student=TED_STUDENT)
    runs = mlflow_runs(uri)
    ted = runs[runs["tags.mlflow.runName"] == "distill_ted:rte"].iloc[0]
    assert ted["metrics.train/ted"] >= 0 and ted["metrics.train/pred"] >= 0
    assert 0 <= ted["metrics.final/validation/accuracy"] <= 1


def test_distill_ted_baselines_table(run_pipeline):
    _, root, _ = run_pipeline("distill_ted_baselines", ted_student=TED_STUDENT)
    table = pd.read_csv(root / "data/08_reporting/distill_ted_baselines.csv")
    assert list(table["method"]) == ["teacher", "majority class", "kd", "lwd", "ted"]


def test_stage_two_start_hands_the_filters_beside_the_recipe(tiny_teacher_dir):
    """TED's Stage I filters reach the method as objects of the student start, never through the
    recipe that keys the student; the recipe's own settings win."""
    from types import SimpleNamespace

    from bert_kd.core.models import ModelBundle, load_classifier, load_tokenizer, parameters_fingerprint
    from bert_kd.experiment.training_jobs.ted_filters import FilteredStudentStart

    teacher = ModelBundle(load_classifier(str(tiny_teacher_dir), 2), load_tokenizer(str(tiny_teacher_dir)), {})
    filters = {"teacher": SimpleNamespace(fingerprint=parameters_fingerprint(teacher.model)), "student": None}
    start = FilteredStudentStart(
        None, None, {}, params={"num_layers": 2}, upstream={"ted_filters": "k"}, filters=filters
    )
    spec, objects = start.method_inputs({"method": "ted", "weights": {"ted": 1.0}}, teacher, "RTE")
    assert spec == {"method": "ted", "weights": {"ted": 1.0}, "student_filters": "copy", "task": "rte"}
    assert objects == {"teacher_filters": filters["teacher"]}
    assert start.method_inputs({"method": "kd"}, teacher, "rte") == ({"method": "kd"}, {})
    other = {**filters, "teacher": SimpleNamespace(fingerprint="another teacher")}
    with pytest.raises(ValueError, match="allow_filter_mismatch"):
        FilteredStudentStart(None, None, {}, filters=other).method_inputs({"method": "ted"}, teacher, "rte")
    assert (
        FilteredStudentStart(None, None, {}, filters=other).method_inputs(
            {"method": "ted", "allow_filter_mismatch": True}, teacher, "rte"
        )[0]["allow_filter_mismatch"]
        is True
    )
