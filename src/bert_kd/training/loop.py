"""The one training loop, :func:`fit`, with its result, predictions and run fingerprints."""

from __future__ import annotations

import json
import logging
import math
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import Dataset
from tqdm.auto import tqdm

from bert_kd.distributed import check_process_group, use_cpu_backend
from bert_kd.training.batching import Collator, make_loader, sequence_lengths, use_device_loading
from bert_kd.training.checkpoints import _allow_new_precision, load_checkpoint, release, save_checkpoint
from bert_kd.training.config import TrainingConfig, make_optimizer, resolve_mixed_precision
from bert_kd.training.objectives import Objective

log = logging.getLogger(__name__)

LogFn = Callable[[Mapping[str, float], int], None]
EvaluateFn = Callable[[np.ndarray, np.ndarray], dict]


@dataclass
class FitResult:
    """What a run produced: best metrics, the epoch they came from, and the history."""

    best_metrics: dict
    best_epoch: int
    history: list[dict] = field(default_factory=list)
    global_step: int = 0
    resumed_from_step: int = 0
    padded_per_real_token: float = float("nan")  # of the training batches this process saw
    num_processes: int = 1
    mixed_precision: str = "no"  # what "auto" resolved to


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@torch.no_grad()
def predict_logits(objective: Objective, loader: Iterable, device=None, progress: bool = False, desc="eval",
                   accelerator=None):
    """Concatenated predictions and labels of ``objective.predict`` over ``loader`` (with an
    ``accelerator``: gathered from every process, the last batch's padding dropped)."""
    was_training = objective.training
    objective.eval()
    preds, labels = [], []
    for batch in tqdm(loader, desc=desc, disable=not progress, leave=False):
        if device is not None:
            batch = {k: v.to(device) for k, v in batch.items()}
        logits, batch_labels = objective.predict(batch).float(), batch["labels"]
        if accelerator is not None:
            logits, batch_labels = accelerator.gather_for_metrics((logits, batch_labels))
        preds.append(logits.cpu())
        labels.append(batch_labels.cpu())
    objective.train(was_training)
    return torch.cat(preds).numpy(), torch.cat(labels).numpy()

def fit(
    objective: Objective,
    train_dataset: Dataset,
    eval_dataset: Dataset | None,
    config: TrainingConfig,
    *,
    collator: Collator | None = None,
    evaluate_fn: EvaluateFn | None = None,
    log_fn: LogFn | None = None,
    description: str = "train",
) -> FitResult:
    """Train ``objective`` on ``train_dataset``; evaluate each epoch; restore the best state.

    With ``config.checkpoint_dir`` a checkpoint is written every ``checkpoint_every_steps``
    (and at each epoch end); a re-run with the same directory resumes from it. Before every epoch
    (also a resumed one) ``objective.set_epoch(epoch, n_epochs)`` runs and its metrics are logged.
    """
    from accelerate import Accelerator, DistributedDataParallelKwargs
    from transformers import get_linear_schedule_with_warmup

    if len(train_dataset) == 0:
        raise ValueError(f"{description}: the training set is empty")
    seed_everything(config.seed)
    collator = collator or Collator()
    cpu = use_cpu_backend(config.cpu)
    mixed_precision = resolve_mixed_precision(config.mixed_precision, cpu=cpu)
    _allow_new_precision(mixed_precision)
    accelerator = Accelerator(
        mixed_precision=mixed_precision,
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        cpu=cpu,
        # the scheduler counts this process's optimizer steps (fit steps it only when gradients sync),
        # not Accelerate's default of num_processes scheduler steps per optimizer step
        step_scheduler_with_optimizer=False,
        # methods that pick teachers per step (or skip a module) leave some parameters unused
        kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)],
    )
    check_process_group(accelerator)
    train_lengths = sequence_lengths(train_dataset) if config.group_by_length else None
    # Each process reads every num_processes-th batch (Accelerate pads the last round): one
    # optimizer step per round, so N processes with batch B step like one process with batch N·B.
    batches = len(make_loader(train_dataset, config.batch_size, collator, shuffle=True, seed=config.seed,
                              group_by_length=config.group_by_length, lengths=train_lengths,
                              processes=accelerator.num_processes))
    steps_per_epoch = math.ceil(math.ceil(batches / accelerator.num_processes) / config.gradient_accumulation_steps)
    total_steps = config.max_steps or max(1, math.ceil(steps_per_epoch * config.epochs))
    n_epochs = math.ceil(total_steps / max(1, steps_per_epoch))
    optimizer = make_optimizer(objective, config, accelerator.device)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(config.warmup_ratio * total_steps), total_steps)
    objective, optimizer, scheduler = accelerator.prepare(objective, optimizer, scheduler)
    raw = accelerator.unwrap_model(objective)
    if config.teacher_mixed_precision != "same":
        raw.frozen_precision = resolve_mixed_precision(config.teacher_mixed_precision, cpu=config.cpu)
    eval_loader = (  # longest first: metrics need predictions aligned with labels only, not dataset order
        accelerator.prepare(
            use_device_loading(make_loader(eval_dataset, config.eval_batch_size, collator, shuffle=False,
                                           group_by_length=config.group_by_length), accelerator.device)
        )
        if eval_dataset is not None and evaluate_fn is not None
        else None
    )

    state = {"epoch": 0, "step_in_epoch": 0, "global_step": 0, "best_metric": None, "best_epoch": -1, "history": []}
    best_state = None
    ckpt = Path(config.checkpoint_dir) / "last" if config.checkpoint_dir else None
    resumed_from = 0
    if ckpt is not None and (ckpt / "trainer_state.json").exists():
        state, best_state = load_checkpoint(accelerator, ckpt)
        resumed_from = state["global_step"]
        log.info("resuming %s from %s at step %d", description, ckpt, resumed_from)

    def checkpoint():
        if ckpt is not None:
            save_checkpoint(accelerator, ckpt, state, best_state)

    progress = tqdm(
        total=total_steps,
        initial=state["global_step"],
        desc=description,
        disable=not (config.progress_bar and accelerator.is_local_main_process),
    )
    objective.train()
    running: dict[str, Tensor] = {}  # detached sums: read (a device sync) only on logging steps
    running_count = 0
    padded_tokens, real_tokens = 0, 0
    first_logged_step = state["global_step"] + 1
    # With max_steps the step budget alone ends the run: a run stopped at max_steps mid-epoch
    # counts that epoch as done, so a resume with a larger max_steps needs more epochs than n_epochs.
    while state["global_step"] < total_steps and (config.max_steps or state["epoch"] < n_epochs):
        loader = accelerator.prepare(use_device_loading(
            make_loader(train_dataset, config.batch_size, collator, shuffle=True, seed=config.seed + state["epoch"],
                        group_by_length=config.group_by_length, lengths=train_lengths,
                        processes=accelerator.num_processes), accelerator.device))
        set_epoch = getattr(raw, "set_epoch", None)  # per-epoch settings, re-applied after a resume
        epoch_metrics = set_epoch(state["epoch"], n_epochs) if set_epoch else None
        if epoch_metrics and log_fn:
            log_fn({f"train/{k}": v for k, v in epoch_metrics.items()}, state["global_step"])
        skip = state["step_in_epoch"] * config.gradient_accumulation_steps
        batches = accelerator.skip_first_batches(loader, skip) if skip else loader
        for batch in batches:
            mask = batch.get("attention_mask")
            if mask is not None:
                padded_tokens += mask.numel()
                real_tokens = real_tokens + mask.sum()  # stays a tensor: no sync
            with accelerator.accumulate(objective):
                terms = objective(batch)  # the prepared module: DDP synchronises gradients
                accelerator.backward(terms["loss"])
                if accelerator.sync_gradients and config.max_grad_norm:
                    accelerator.clip_grad_norm_(objective.parameters(), config.max_grad_norm)
                optimizer.step()
                if accelerator.sync_gradients and not optimizer.step_was_skipped:
                    scheduler.step()
                optimizer.zero_grad()
            for key, value in terms.items():
                value = value.detach()
                running[key] = running[key] + value if key in running else value
            running_count += 1
            if not accelerator.sync_gradients:
                continue
            state["global_step"] += 1
            state["step_in_epoch"] += 1
            progress.update(1)
            if state["global_step"] % config.log_every_steps == 0 or state["global_step"] == total_steps:
                averaged = {f"train/{k}": float(v) / running_count for k, v in running.items()}
                if not math.isfinite(averaged["train/loss"]):
                    raise FloatingPointError(
                        f"{description}: non-finite loss within steps {first_logged_step}..{state['global_step']} "
                        f"(averaged terms: {averaged})"
                    )
                averaged["train/lr"] = scheduler.get_last_lr()[0]
                progress.set_postfix(loss=f"{averaged['train/loss']:.4f}")
                if log_fn:
                    log_fn(averaged, state["global_step"])
                running, running_count = {}, 0
                first_logged_step = state["global_step"] + 1
            if config.checkpoint_every_steps and state["global_step"] % config.checkpoint_every_steps == 0:
                checkpoint()
            if state["global_step"] >= total_steps:
                break
        state["epoch"] += 1
        state["step_in_epoch"] = 0
        record = {"epoch": state["epoch"], "global_step": state["global_step"]}
        if eval_loader is not None and evaluate_fn is not None:
            preds, labels = predict_logits(raw, eval_loader, accelerator=accelerator)
            metrics = evaluate_fn(preds, labels)
            record.update(metrics)
            if log_fn:
                log_fn({f"eval/{k}": v for k, v in metrics.items()}, state["global_step"])
            score = metrics.get(config.select_metric) if config.select_metric else None
            better = (
                score is not None
                and (
                    state["best_metric"] is None
                    or (score > state["best_metric"] if config.greater_is_better else score < state["best_metric"])
                )
            )
            if better or config.select_metric is None:
                state["best_metric"] = score
                state["best_epoch"] = state["epoch"]
                best_state = raw.trainable_state()
            log.info("%s epoch %d: %s", description, state["epoch"], metrics)
        state["history"].append(record)
        checkpoint()
    progress.close()
    padding = padded_tokens / max(int(real_tokens), 1) if padded_tokens else float("nan")
    if log_fn and padded_tokens:
        log_fn({"train/padded_per_real_token": padding}, state["global_step"])
    if ckpt is not None and not config.keep_checkpoint and accelerator.is_main_process:
        shutil.rmtree(ckpt, ignore_errors=True)  # finished: the result is saved by the caller
    if best_state is not None:
        raw.load_state_dict(best_state, strict=False)
    best_metrics = next((r for r in state["history"] if r["epoch"] == state["best_epoch"]), {})
    release(accelerator)
    return FitResult(
        best_metrics=dict(best_metrics),
        best_epoch=state["best_epoch"],
        history=state["history"],
        global_step=state["global_step"],
        resumed_from_step=resumed_from,
        padded_per_real_token=padding,
        num_processes=accelerator.num_processes,
        mixed_precision=mixed_precision,
    )


def config_fingerprint(*parts) -> str:
    """Short stable hash of JSON-serialisable settings (keys for caches and model stores)."""
    import hashlib

    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]
