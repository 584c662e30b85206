"""TED Stage I objective (Liang et al., 2023, Eq. 5): the filters of a frozen model on Σ_k task-loss."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from bert_kd.core.distill.outputs import forward_features
from bert_kd.core.distill.ted_filters.filters import TaskFilters
from bert_kd.core.training import Objective, task_loss


class FilterTrainingObjective(Objective):
    """Stage I (Eq. 5): train the filters of a FROZEN model on Σ_k task-loss(head_k).

    ``self.model`` is the filters (what is trained, selected and restored by [`fit`][training.loop.fit]); the
    encoder is registered with [`Objective.add_frozen`][training.objectives.Objective.add_frozen] — which sets its parameters'
    ``requires_grad`` to False (restore them afterwards if the model trains later; [`train_filters`][]
    does). ``predict`` returns the logits of filter ``predict_position`` (0-based), or, by
    default (None), all heads concatenated along the last axis (split them with
    [`filters_evaluate_fn`][]).
    """

    def __init__(self, model: nn.Module, filters: TaskFilters, predict_position: int | None = None, prefix: str = ""):
        filters.check_model(model)
        super().__init__(filters)
        self.add_frozen("encoder", model)
        if predict_position is not None and not 0 <= predict_position < len(filters.layers):
            raise ValueError(f"predict_position must be in 0..{len(filters.layers) - 1}, got {predict_position}")
        self.predict_position = predict_position
        self.prefix = prefix

    @property
    def filters(self) -> TaskFilters:
        return self.model

    def head_logits(self, batch: dict[str, Tensor]) -> list[Tensor]:
        with torch.no_grad():
            features = forward_features(self.encoder, batch, hidden_states=True, prefix=self.prefix)
        hidden = tuple(h.detach() for h in features.hidden_states)
        return self.filters(hidden, features.attention_mask)

    def training_step(self, batch):
        logits = self.head_logits(batch)
        per_layer = [task_loss(l, batch["labels"]) for l in logits]
        total = sum(per_layer)
        result = {"loss": total}
        result.update({f"ce_L{layer}": v.detach() for layer, v in zip(self.filters.layers, per_layer)})
        return result

    def predict(self, batch):
        logits = self.head_logits(batch)
        if self.predict_position is not None:
            return logits[self.predict_position]
        return torch.cat(logits, dim=-1)
