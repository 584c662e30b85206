"""What a run trains and how it is scored: Objective, plain fine-tuning, the task loss."""

from __future__ import annotations

import contextlib
from typing import Mapping

import torch
from torch import Tensor, nn

from bert_kd.core.data.augment import NO_LABEL
from bert_kd.core.training.config import TrainingConfig


class Objective(nn.Module):
    """What is trained and how it is scored (Lightning's module, without the trainer).

    Subclasses set ``self.model`` (the network that is evaluated and saved), register frozen
    references with [`add_frozen`][] and implement [`training_step`][].
    """

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        self._frozen_names: list[str] = []
        self.frozen_precision = "same"  # set by fit from TrainingConfig.teacher_mixed_precision (resolved)

    def frozen_autocast(self):
        """The autocast context for forwards of frozen references (teachers): a no-op with
        "same", fp32 with "no", else bf16/fp16 independently of the student's precision."""
        if self.frozen_precision == "same":
            return contextlib.nullcontext()
        device = next(self.parameters()).device.type
        if self.frozen_precision == "no":
            return torch.autocast(device, enabled=False)
        return torch.autocast(device, dtype=torch.bfloat16 if self.frozen_precision == "bf16" else torch.float16)

    def add_frozen(self, name: str, module: nn.Module) -> nn.Module:
        """Register a module that must never change (teachers, teacher filters)."""
        for p in module.parameters():
            p.requires_grad_(False)
        self.add_module(name, module)
        self._frozen_names.append(name)
        return module.eval()

    def train(self, mode: bool = True) -> Objective:
        super().train(mode)
        for name in self._frozen_names:
            getattr(self, name).eval()
        return self

    def set_epoch(self, epoch: int, n_epochs: int) -> Mapping[str, float]:
        """Called by [`fit`][] before every epoch (0-based ``epoch`` of ``n_epochs``, again after a
        resume), for objectives whose settings depend on the epoch only; returns metrics to log
        as ``train/<name>`` (none by default)."""
        return {}

    def forward(self, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        """The training step, so a DDP wrapper's forward (which synchronises gradients) runs it."""
        return self.training_step(batch)

    def training_step(self, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        """Return ``{"loss": total, <term>: value, ...}`` for one batch."""
        raise NotImplementedError

    def predict(self, batch: dict[str, Tensor]) -> Tensor:
        """Logits (or regression scores) used for evaluation."""
        inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in batch}
        return self.model(**inputs).logits

    def parameter_groups(self, config: TrainingConfig) -> list[dict]:
        """AdamW groups: the model with weight decay (not on biases/LayerNorm), auxiliary modules
        at ``aux_learning_rate``, and a module that names its own rate (``group_learning_rate``, e.g. RL-KD's
        policy) in a group of its own, without weight decay."""
        decay, no_decay, aux = [], [], []
        own = {}
        for module in self.modules():
            rate = getattr(module, "group_learning_rate", None)
            if rate is not None:
                own.update({id(p): float(rate) for p in module.parameters()})
        own_groups: dict[float, list] = {}
        for name, param in self.named_parameters():
            if not param.requires_grad:
                continue
            if id(param) in own:
                own_groups.setdefault(own[id(param)], []).append(param)
            elif not name.startswith("model."):
                aux.append(param)
            elif param.ndim < 2:
                no_decay.append(param)
            else:
                decay.append(param)
        groups = [
            {"params": decay, "weight_decay": config.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ]
        if aux:
            groups.append(
                {
                    "params": aux,
                    "weight_decay": config.weight_decay,
                    "lr": config.aux_learning_rate or config.learning_rate,
                }
            )
        groups += [{"params": params, "weight_decay": 0.0, "lr": rate} for rate, params in own_groups.items()]
        return [g for g in groups if g["params"]]

    def epoch_report(self) -> dict[str, float]:
        """What the objective observed over the epoch just trained (the training loop logs it as ``train/<k>``
        and keeps it in the epoch's history under ``observed``); ``{}`` by default."""
        return {}

    def trainable_state(self) -> dict[str, Tensor]:
        """The trainable part of the state (model + auxiliary modules), on CPU."""
        frozen = tuple(name + "." for name in self._frozen_names)
        return {k: v.detach().cpu().clone() for k, v in self.state_dict().items() if not k.startswith(frozen)}


class SupervisedObjective(Objective):
    """Plain fine-tuning: the model's own task loss (cross-entropy, or MSE for regression)."""

    def training_step(self, batch):
        logits = self.predict(batch)
        loss = task_loss(logits, batch["labels"])
        return {"loss": loss, "ce": loss.detach()}


def task_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """Cross-entropy for classification, MSE for a single-output regression head (STS-B), over the rows
    with a gold label: a transfer set's rows ([`NO_LABEL`][]) count for
    nothing, and a batch of them alone gives 0."""
    gold = labels != NO_LABEL
    if not bool(gold.all()):
        if not bool(gold.any()):
            return logits.sum() * 0.0
        logits, labels = logits[gold], labels[gold]
    if logits.shape[-1] == 1:
        return nn.functional.mse_loss(logits.squeeze(-1), labels.float())
    return nn.functional.cross_entropy(logits, labels.long())
