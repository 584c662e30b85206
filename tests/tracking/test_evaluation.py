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
