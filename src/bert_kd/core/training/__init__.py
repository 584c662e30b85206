"""The one training loop (fine-tuning, distillation, TED filters): [`fit`][] runs an [`Objective`][]."""

from bert_kd.core.training.batching import (
    PADDED_BY_TOKENIZER,
    SPAN_PAD,
    Collator,
    LengthGroupedBatchSampler,
    make_loader,
    padding_ratio,
    sequence_lengths,
    use_device_loading,
)
from bert_kd.core.training.checkpoints import allow_new_precision, load_checkpoint, release, save_checkpoint
from bert_kd.core.training.config import TrainingConfig, cpu_has_bf16, make_optimizer, resolve_mixed_precision
from bert_kd.core.training.loop import (
    EvaluateFn,
    FitResult,
    LogFn,
    config_fingerprint,
    fit,
    module_device,
    predict_logits,
    seed_everything,
)
from bert_kd.core.training.objectives import Objective, SupervisedObjective, task_loss
from bert_kd.core.training.precision import resolve_precision

__all__ = [
    "PADDED_BY_TOKENIZER",
    "SPAN_PAD",
    "Collator",
    "EvaluateFn",
    "FitResult",
    "LengthGroupedBatchSampler",
    "LogFn",
    "Objective",
    "SupervisedObjective",
    "TrainingConfig",
    "allow_new_precision",
    "config_fingerprint",
    "cpu_has_bf16",
    "fit",
    "load_checkpoint",
    "make_loader",
    "make_optimizer",
    "module_device",
    "padding_ratio",
    "predict_logits",
    "release",
    "resolve_mixed_precision",
    "resolve_precision",
    "save_checkpoint",
    "seed_everything",
    "sequence_lengths",
    "task_loss",
    "use_device_loading",
]
