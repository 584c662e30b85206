"""bert_kd.tracking.evaluation: an evaluation's metrics as its run records them."""


def test_an_evaluations_noise_band_is_a_metric_of_its_run():
    from bert_kd.tracking.evaluation import NOISE_BAND, flat_eval_metrics

    evaluation = {
        "metrics": {"validation": {"accuracy": 0.78}},
        "score": 0.78,
        "score_examples": 872,
        **dict.fromkeys(("parameters", "encoder_parameters", "size_on_disk_bytes", "throughput_examples_per_s"), 1),
    }
    assert flat_eval_metrics(evaluation)[NOISE_BAND] == 0.0169  # 0.5 / √872


def test_a_score_at_or_below_the_majority_class_is_a_metric_and_a_warning_tag_of_its_run():
    from bert_kd.tracking.evaluation import INPUT_CUT_ROWS, MAJORITY_CLASS, OVER_MAJORITY, flat_eval_metrics, floor_tag

    evaluation = {
        "primary_metric": "accuracy",
        "metrics": {"validation": {"accuracy": 0.5235}},
        "majority_class": {"validation": {"accuracy": 0.5271}},
        "input_cut": {"validation": {"max_length": 64, "rows": 277, "cut": 97}},
        "score": 0.5235,
        **dict.fromkeys(("parameters", "encoder_parameters", "size_on_disk_bytes", "throughput_examples_per_s"), 1),
    }
    flat = flat_eval_metrics(evaluation)
    assert (flat[MAJORITY_CLASS], flat[OVER_MAJORITY], flat[INPUT_CUT_ROWS]) == (0.5271, -0.0036, 97)
    assert floor_tag(evaluation)["floor"].startswith("WARNING: accuracy 0.5235 is at or below")
    assert floor_tag({**evaluation, "score": 0.6}) == {"floor": "above"}
    assert floor_tag({**evaluation, "majority_class": {"validation": None}}) == {}


def test_a_kedro_runs_parent_carries_each_evaluated_models_score(store):
    """The parent run the terminal links to shows ``score/teacher`` and ``score/<method>``, not only ``eta/…``."""
    import mlflow

    from bert_kd.tracking.evaluation import log_evaluation_to_run

    with mlflow.start_run(run_name="parent") as parent:
        with mlflow.start_run(run_name="alp", nested=True, tags={"method": "alp"}) as child:
            pass
        evaluation = {
            "metrics": {"validation": {"accuracy": 0.80853}},
            "score": 0.80853,
            "score_examples": 872,
            **dict.fromkeys(("parameters", "encoder_parameters", "size_on_disk_bytes", "throughput_examples_per_s"), 1),
        }
        log_evaluation_to_run(evaluation, child.info.run_id)
        log_evaluation_to_run(evaluation, parent.info.run_id)  # the parent's own: no score/ copy of itself
    metrics = store.client.get_run(parent.info.run_id).data.metrics
    assert metrics["score/alp"] == 0.8085
    assert [key for key in metrics if key.startswith("score/")] == ["score/alp"]
    assert store.client.get_run(child.info.run_id).data.metrics["final/score"] == 0.8085
