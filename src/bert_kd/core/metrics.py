"""GLUE evaluation metrics implemented with numpy/scipy (no Kedro, no sklearn).

Primary metrics (what model selection should maximise):
CoLA ``matthews_correlation``; STS-B ``combined`` = mean(pearson, spearmanr);
MRPC/QQP ``combined`` = mean(accuracy, f1) (as in the GLUE score); others ``accuracy``.
Degenerate inputs (e.g. constant predictions for STS-B) give ``nan`` correlations,
as scipy does; MCC and F1 give 0.0 in that case, as sklearn does.
"""

from __future__ import annotations

import warnings

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from bert_kd.core.data.glue import TASKS, normalize_task


def primary_metric(task: str) -> str:
    """Name of the metric used to rank models on ``task``."""
    return TASKS[normalize_task(task)].primary_metric


#: The number the papers report (and select on) per task, where it is not accuracy: ALP-KD Table 1
#: ("MCC for CoLA, Pearson for STS-B, accuracy for the rest"); TED Table 14 lists Matthews for CoLA,
#: Acc/F1 for MRPC/QQP, Pearson/Spearman for STS-B and accuracy elsewhere (its first number is the one
#: taken here); the multi-teacher paper reports accuracy on QNLI, SST-2 and MNLI-m.
PAPER_METRICS = {"cola": "matthews_correlation", "stsb": "pearson"}


def paper_metric(task: str) -> str:
    """The metric the reproduced papers report on ``task`` (what sweep tables select and report)."""
    return PAPER_METRICS.get(normalize_task(task), "accuracy")


def metric_names(task: str) -> list[str]:
    """The keys [`glue_metrics`][] returns for ``task`` (what a run may select its best epoch on)."""
    spec = TASKS[normalize_task(task)]
    labels = np.array([0.0, 1.0, 0.5]) if spec.is_regression else np.array([0, 1, 1])
    return sorted(glue_metrics(task, labels if spec.is_regression else np.array([0, 1, 0]), labels))


def metric_label(name: str) -> str:
    """Human name of a metric key (for captions)."""
    return {
        "matthews_correlation": "MCC",
        "pearson": "Pearson",
        "spearmanr": "Spearman",
        "accuracy": "accuracy",
        "f1": "F1",
        "combined": "combined",
    }.get(name, name)


def _as_predictions(predictions: ArrayLike, is_regression: bool) -> np.ndarray:
    """Logits (N, C) -> argmax ids; (N, 1) or (N,) scores -> flat array."""
    p = np.asarray(predictions)
    if p.ndim == 2 and is_regression and p.shape[1] == 1:
        return p[:, 0].astype(np.float64)
    if p.ndim == 2 and not is_regression:
        if p.shape[1] < 2:
            raise ValueError(f"classification logits need >= 2 columns, got shape {p.shape}")
        return p.argmax(axis=1)
    if p.ndim != 1:
        raise ValueError(f"predictions must have shape (N,), (N, 1) or (N, C); got {p.shape}")
    if is_regression:
        return p.astype(np.float64)
    if p.dtype.kind == "f" and not np.all(np.mod(p, 1) == 0):
        raise ValueError("1-D classification predictions must be class ids (integers)")
    return p.astype(np.int64)


def accuracy(pred: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(pred == labels))


def f1_binary(pred: np.ndarray, labels: np.ndarray, positive: int = 1) -> float:
    """F1 of the positive class; 0.0 when undefined (no positives predicted or present)."""
    tp = np.sum((pred == positive) & (labels == positive))
    denom = np.sum(pred == positive) + np.sum(labels == positive)
    return float(2 * tp / denom) if denom else 0.0


def matthews_correlation(pred: np.ndarray, labels: np.ndarray) -> float:
    """Multiclass Matthews correlation (Gorodkin's R_K, same as sklearn); 0.0 if undefined."""
    classes, inv = np.unique(np.concatenate([labels, pred]), return_inverse=True)
    k, n = len(classes), len(labels)
    cm = np.zeros((k, k), dtype=np.float64)
    np.add.at(cm, (inv[:n], inv[n:]), 1)
    t_sum, p_sum = cm.sum(axis=1), cm.sum(axis=0)
    cov_tp = np.trace(cm) * n - t_sum @ p_sum
    cov_pp = n * n - p_sum @ p_sum
    cov_tt = n * n - t_sum @ t_sum
    if cov_pp * cov_tt == 0:
        return 0.0
    return float(cov_tp / np.sqrt(cov_tt * cov_pp))


def _correlations(pred: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        pearson = float(stats.pearsonr(pred, labels)[0])
        spearman = float(stats.spearmanr(pred, labels)[0])
    return pearson, spearman


def glue_metrics(task: str, predictions: ArrayLike, labels: ArrayLike) -> dict[str, float]:
    """GLUE metrics for ``task`` from logits (N, C)/(N, 1) or class ids/scores (N,)."""
    spec = TASKS[normalize_task(task)]
    pred = _as_predictions(predictions, spec.is_regression)
    y = np.asarray(labels)
    if y.ndim != 1:
        raise ValueError(f"labels must be 1-D, got shape {y.shape}")
    if len(y) != len(pred):
        raise ValueError(f"{len(pred)} predictions but {len(y)} labels")
    if len(y) == 0:
        raise ValueError("cannot compute metrics on zero examples")

    if spec.is_regression:
        pearson, spearman = _correlations(pred, y.astype(np.float64))
        return {"pearson": pearson, "spearmanr": spearman, "combined": (pearson + spearman) / 2}
    y = y.astype(np.int64)
    acc = accuracy(pred, y)
    if spec.name == "cola":
        return {"matthews_correlation": matthews_correlation(pred, y), "accuracy": acc}
    if spec.name in ("mrpc", "qqp"):
        f1 = f1_binary(pred, y)
        return {"accuracy": acc, "f1": f1, "combined": (acc + f1) / 2}
    return {"accuracy": acc}
