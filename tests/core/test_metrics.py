"""bert_kd.core.metrics checked against sklearn.metrics and scipy.stats."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

from bert_kd.core.data.glue import TASKS
from bert_kd.core.metrics import glue_metrics, primary_metric

RNG = np.random.default_rng(0)


def _logits(n: int, c: int) -> np.ndarray:
    return RNG.normal(size=(n, c))


@pytest.mark.parametrize("n", [7, 200])
def test_cola_mcc_matches_sklearn(n: int) -> None:
    logits, y = _logits(n, 2), RNG.integers(0, 2, n)
    out = glue_metrics("CoLA", logits, y)
    pred = logits.argmax(1)
    assert set(out) == {"matthews_correlation", "accuracy"}
    assert out["matthews_correlation"] == pytest.approx(matthews_corrcoef(y, pred))
    assert out["accuracy"] == pytest.approx(accuracy_score(y, pred))


def test_mcc_degenerate_is_zero_like_sklearn() -> None:
    y, pred = np.array([0, 1, 1, 0]), np.ones(4, dtype=int)
    assert glue_metrics("cola", pred, y)["matthews_correlation"] == matthews_corrcoef(y, pred) == 0.0


@pytest.mark.parametrize("task", ["mrpc", "QQP"])
def test_f1_tasks_match_sklearn(task: str) -> None:
    logits, y = _logits(150, 2), RNG.integers(0, 2, 150)
    pred = logits.argmax(1)
    out = glue_metrics(task, logits, y)
    assert out["accuracy"] == pytest.approx(accuracy_score(y, pred))
    assert out["f1"] == pytest.approx(f1_score(y, pred, pos_label=1))
    assert out["combined"] == pytest.approx((out["accuracy"] + out["f1"]) / 2)
    # class ids give the same result as logits
    assert glue_metrics(task, pred, y) == out


def test_f1_no_positives_is_zero() -> None:
    out = glue_metrics("mrpc", np.zeros(4, dtype=int), np.zeros(4, dtype=int))
    assert out == {"accuracy": 1.0, "f1": 0.0, "combined": 0.5}


@pytest.mark.parametrize("shape", [(120, 1), (120,)])
def test_stsb_matches_scipy(shape: tuple[int, ...]) -> None:
    y = RNG.uniform(0, 5, 120)
    pred = (y + RNG.normal(scale=1.0, size=120)).reshape(shape)
    out = glue_metrics("STS-B", pred, y)
    flat = pred.reshape(-1)
    assert out["pearson"] == pytest.approx(stats.pearsonr(flat, y)[0])
    assert out["spearmanr"] == pytest.approx(stats.spearmanr(flat, y)[0])
    assert out["combined"] == pytest.approx((out["pearson"] + out["spearmanr"]) / 2)


def test_stsb_constant_predictions_nan() -> None:
    out = glue_metrics("stsb", np.ones(5), np.arange(5.0))
    assert np.isnan(out["pearson"]) and np.isnan(out["combined"])


@pytest.mark.parametrize("task,c", [("mnli", 3), ("qnli", 2), ("rte", 2), ("wnli", 2), ("sst-2", 2)])
def test_accuracy_tasks(task: str, c: int) -> None:
    logits, y = _logits(90, c), RNG.integers(0, c, 90)
    out = glue_metrics(task, logits, y)
    assert out == {"accuracy": pytest.approx(accuracy_score(y, logits.argmax(1)))}
    assert all(isinstance(v, float) for v in out.values())


def test_multiclass_mcc_matches_sklearn() -> None:
    from bert_kd.core.metrics import matthews_correlation

    y, pred = RNG.integers(0, 3, 80), RNG.integers(0, 3, 80)
    assert matthews_correlation(pred, y) == pytest.approx(matthews_corrcoef(y, pred))


def test_primary_metric() -> None:
    assert primary_metric("CoLA") == "matthews_correlation"
    assert primary_metric("sts-b") == "combined"
    assert primary_metric("MRPC") == "combined" and primary_metric("qqp") == "combined"
    for t in ("sst2", "mnli", "qnli", "rte", "wnli"):
        assert primary_metric(t) == "accuracy"
    # the primary metric is always among the returned keys
    for name, spec in TASKS.items():
        n = 10
        preds = RNG.uniform(0, 5, n) if spec.is_regression else _logits(n, spec.num_labels)
        labels = RNG.uniform(0, 5, n) if spec.is_regression else RNG.integers(0, spec.num_labels, n)
        assert primary_metric(name) in glue_metrics(name, preds, labels)


def test_bad_inputs() -> None:
    with pytest.raises(ValueError, match="predictions but"):
        glue_metrics("rte", np.zeros(3, dtype=int), np.zeros(4, dtype=int))
    with pytest.raises(ValueError, match="zero examples"):
        glue_metrics("rte", np.zeros(0, dtype=int), np.zeros(0, dtype=int))
    with pytest.raises(ValueError, match="class ids"):
        glue_metrics("rte", np.array([0.3, 0.7]), np.array([0, 1]))
    with pytest.raises(ValueError, match="Unknown GLUE task"):
        glue_metrics("squad", np.zeros(2), np.zeros(2))


def test_paper_metric_is_what_the_papers_report():
    from bert_kd.core.metrics import paper_metric

    assert paper_metric("cola") == "matthews_correlation"
    assert paper_metric("STS-B") == "pearson"
    assert {paper_metric(t) for t in ("mrpc", "qqp", "sst2", "mnli", "qnli", "rte")} == {"accuracy"}
