"""Helpers of the training tests: a tiny seeded model, a fast config, weight comparisons."""

from __future__ import annotations

import torch

from bert_kd.core.models import load_classifier
from bert_kd.core.training import SupervisedObjective, TrainingConfig, make_loader, predict_logits, task_loss


def new_model(tiny_teacher_dir, seed: int = 0):
    """The tiny 4-layer BERT of conftest with a fresh, seeded classification head."""
    torch.manual_seed(seed)
    return load_classifier(str(tiny_teacher_dir), 2)


def base_config(**overrides) -> TrainingConfig:
    values = dict(
        epochs=1,
        batch_size=8,
        eval_batch_size=16,
        learning_rate=1e-3,
        warmup_ratio=0.0,
        progress_bar=False,
        cpu=True,
        seed=7,
    )
    values.update(overrides)
    return TrainingConfig(**values)


def accuracy(preds, labels):
    return {"accuracy": float((preds.argmax(-1) == labels).mean())}


def state_copy(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def assert_states_close(a: dict, b: dict, atol: float = 1e-6) -> None:
    assert a.keys() == b.keys()
    worst = max((a[k].float() - b[k].float()).abs().max().item() for k in a)
    assert worst <= atol, f"states differ by up to {worst}"


def mean_train_loss(model, dataset, collator) -> float:
    objective = SupervisedObjective(model)
    preds, labels = predict_logits(objective, make_loader(dataset, 16, collator, shuffle=False))
    return float(task_loss(torch.from_numpy(preds), torch.from_numpy(labels)))
