"""TED Stage I driver: build filters on a frozen model, train them with [`bert_kd.core.training.fit`][training.loop.fit]
and report each filtered layer's dev metrics (Liang et al., 2023, Sec. 3.1)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence, Union

import numpy as np
import torch
from torch import Tensor, nn

from bert_kd.core.distill.outputs import forward_features
from bert_kd.core.distill.ted_filters.filter_objective import FilterTrainingObjective
from bert_kd.core.distill.ted_filters.filters import TaskFilters
from bert_kd.core.distill.ted_filters.teacher_layers import ted_layer_map
from bert_kd.core.metrics import glue_metrics
from bert_kd.core.models import num_layers
from bert_kd.core.training import (
    Collator,
    FitResult,
    LogFn,
    TrainingConfig,
    fit,
    make_loader,
    module_device,
    seed_everything,
)


def filters_evaluate_fn(filters: TaskFilters, task: str):
    """An ``evaluate_fn`` for [`fit`][training.loop.fit] on concatenated per-filter logits: reports
    ``L<layer>/<metric>`` for each filter and each metric's mean over the filters under its
    plain name (so ``select_metric: accuracy`` selects on the mean per-layer accuracy)."""
    layers, width = list(filters.layers), filters.num_labels

    def evaluate(predictions: np.ndarray, labels: np.ndarray) -> dict:
        predictions = np.asarray(predictions)
        if predictions.shape[-1] != width * len(layers):
            raise ValueError(f"expected {width * len(layers)} prediction columns, got {predictions.shape}")
        result, per_metric = {}, {}
        for k, layer in enumerate(layers):
            metrics = glue_metrics(task, predictions[:, k * width : (k + 1) * width], labels)
            for name, value in metrics.items():
                result[f"L{layer}/{name}"] = value
                per_metric.setdefault(name, []).append(value)
        result.update({name: float(np.mean(values)) for name, values in per_metric.items()})
        return result

    return evaluate


@torch.no_grad()
def evaluate_filters(
    model: nn.Module,
    filters: TaskFilters,
    dataset,
    collator: Collator | None,
    task: str,
    batch_size: int = 64,
    prefix: str = "",
) -> dict[int, dict[str, float]]:
    """Per-layer dev metrics of the filter heads: ``{layer: glue_metrics(...)}`` — how
    task-predictive each filtered layer is. Models are evaluated in eval mode; their modes
    are restored afterwards."""
    filters.check_model(model)
    device = module_device(model)
    filters.to(device)
    modes = (model.training, filters.training)
    model.eval()
    filters.eval()
    try:
        loader = make_loader(dataset, batch_size, collator or Collator(), shuffle=False)
        preds: list[list[Tensor]] = [[] for _ in filters.layers]
        labels = []
        for batch in loader:
            batch = {k: v.to(device) for k, v in batch.items()}
            features = forward_features(model, batch, hidden_states=True, prefix=prefix)
            for k, logits in enumerate(filters(features.hidden_states, features.attention_mask)):
                preds[k].append(logits.float().cpu())
            labels.append(batch["labels"].cpu())
    finally:
        model.train(modes[0])
        filters.train(modes[1])
    y = torch.cat(labels).numpy()
    return {layer: glue_metrics(task, torch.cat(preds[k]).numpy(), y) for k, layer in enumerate(filters.layers)}


@dataclass(frozen=True)
class FilterPlacement:
    """Where TED Stage I puts filters and what their heads predict.

    ``layers``: 1-based model layers (teacher: ``ted_layer_map(...)``; student: ``[1..K]``) or a
    [`ted_layer_map`][] strategy name (needs ``n_student``); ``arch``: one of ``FILTER_ARCHS``; ``task``:
    the GLUE task of the heads (and the filters' provenance). For student filters ``out_width`` is the
    teacher's width and ``role`` is ``"student"``; ``prefix``: the column prefix of the model's inputs."""

    layers: Union[Sequence[int], str]
    task: str
    arch: str = "linear"
    out_width: int | None = None
    num_labels: int | None = None
    role: str = "teacher"
    n_student: int | None = None
    prefix: str = ""


@dataclass(frozen=True)
class FilterTraining:
    """How TED Stage I trains its filters: the training settings, the batch collator, where the step
    metrics go and the progress bar's label."""

    config: TrainingConfig = field(default_factory=TrainingConfig)
    collator: Collator | None = None
    log_fn: LogFn | None = None
    description: str = "ted-stage1"


def train_filters(
    model: nn.Module,
    dataset_train,
    dataset_eval,
    placement: FilterPlacement,
    training: FilterTraining | None = None,
) -> tuple[TaskFilters, dict[int, dict[str, float]]]:
    """TED Stage I: build filters on ``model`` as ``placement`` says and train them (model frozen) with
    [`bert_kd.core.training.fit`][training.loop.fit] as ``training`` says. Returns the trained filters and their per-layer
    dev metrics (``{}`` without ``dataset_eval``); the metrics and the run's best epoch go to
    ``filters.info``. The model's parameters are bit-identical afterwards and their ``requires_grad`` flags
    and train/eval mode are restored.
    """
    training = training or FilterTraining()
    config, collator, task, prefix = training.config, training.collator, placement.task, placement.prefix
    layers = placement.layers
    if isinstance(layers, str):
        if placement.n_student is None:
            raise ValueError(f"layer strategy {layers!r} needs n_student")
        layers = ted_layer_map(layers, num_layers(model), placement.n_student)
    seed_everything(config.seed)
    filters = TaskFilters.build(
        model,
        layers,
        placement.arch,
        out_width=placement.out_width,
        num_labels=placement.num_labels,
        task=task,
        role=placement.role,
    )
    flags = [p.requires_grad for p in model.parameters()]
    was_training = model.training
    try:
        objective = FilterTrainingObjective(model, filters, prefix=prefix)
        evaluate_fn = filters_evaluate_fn(filters, task) if dataset_eval is not None else None
        result: FitResult = fit(
            objective,
            dataset_train,
            dataset_eval,
            config,
            collator=collator,
            evaluate_fn=evaluate_fn,
            log_fn=training.log_fn,
            description=training.description,
        )
    finally:
        for p, flag in zip(model.parameters(), flags):
            p.requires_grad_(flag)
        model.train(was_training)
    metrics = (
        evaluate_filters(model, filters, dataset_eval, collator, task, config.eval_batch_size, prefix)
        if dataset_eval is not None
        else {}
    )
    filters.info.update(
        {
            "per_layer_metrics": {str(k): v for k, v in metrics.items()},
            "best_epoch": result.best_epoch,
            "global_step": result.global_step,
        }
    )
    return filters, metrics
