"""The one training loop, [`fit`][], with its result, predictions and run fingerprints."""

from __future__ import annotations

import itertools
import json
import logging
import math
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset
from tqdm.auto import tqdm

from bert_kd.config.errors import ParameterError, TrainingDivergedError, learning_rate_parameters
from bert_kd.core.training.batching import Collator, make_loader, sequence_lengths, use_device_loading
from bert_kd.core.training.checkpoints import allow_new_precision, load_checkpoint, release, save_checkpoint
from bert_kd.core.training.compiled_step import (
    CompileCounts,
    compiled_update,
    remember_compiled,
    resolve_compile,
    run_signature,
)
from bert_kd.core.training.config import (
    TrainingConfig,
    freeze_word_embeddings,
    make_optimizer,
    precision_problem,
    resolve_mixed_precision,
)
from bert_kd.core.training.distributed import check_process_group, use_cpu_backend
from bert_kd.core.training.objectives import Objective
from bert_kd.core.training.precision import (
    CUDA_GRAPH_PAD_MULTIPLE,
    compiled_for_the_run,
    set_tf32,
    uses_cuda_graphs,
    uses_tf32,
)
from bert_kd.core.training.seeding import seed_everything

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
    compile: bool | str = False  # what the run compiled with ("auto" resolved)
    compile_counts: dict = field(default_factory=dict)  # compile/graphs, compile/recompiles, compile/seconds


#: Wall seconds this process's fits spent per phase (``data``: waiting for training batches, ``train``: the
#: steps, compilation included, ``eval``: the per-epoch evaluation, ``checkpoint``: writing checkpoints), summed
#: over every fit so far: a sweep worker records the difference over a trial ([`phase_seconds`][]).
_PHASE_SECONDS: dict[str, float] = {"data": 0.0, "train": 0.0, "eval": 0.0, "checkpoint": 0.0}


def phase_seconds() -> dict[str, float]:
    """This process's fits' wall seconds per phase so far (a copy of `_PHASE_SECONDS`)."""
    return dict(_PHASE_SECONDS)


class _timed:
    """Add the wall seconds of a ``with`` block to one phase of `_PHASE_SECONDS`."""

    def __init__(self, phase: str):
        self.phase = phase

    def __enter__(self):
        self.start = time.perf_counter()

    def __exit__(self, *exc):
        _PHASE_SECONDS[self.phase] += time.perf_counter() - self.start


class paused_bar:
    """A ``with`` block whose wall seconds a tqdm ``bar`` leaves out of its rate: tqdm computes its rate (and the
    time left it shows) from the seconds since its start and since its last print, so both are moved on by the
    block's seconds. Around an epoch's dev evaluation, after which the bar's rate would otherwise fall to a third
    or a quarter of the training steps' rate. Nothing for a disabled bar."""

    def __init__(self, bar):
        self.bar = bar

    def __enter__(self):
        self.start = None if getattr(self.bar, "disable", True) else self.bar._time()

    def __exit__(self, *exc):
        if self.start is not None:
            paused = self.bar._time() - self.start
            self.bar.start_t += paused
            self.bar.last_print_t += paused


def module_device(module: torch.nn.Module) -> torch.device | None:
    """The device of ``module``'s first parameter (or buffer); None for a module that has neither."""
    for tensor in itertools.chain(module.parameters(), module.buffers()):
        return tensor.device
    return None


@torch.no_grad()
def predict_logits(
    objective: Objective, loader: Iterable, device=None, progress: bool = False, desc="eval", accelerator=None
):
    """Concatenated predictions and labels of ``objective.predict`` over ``loader`` (with an
    ``accelerator``: gathered from every process, the last batch's padding dropped). Batches go to
    ``device``, by default the objective's own (a model left on the GPU by ``fit`` is fed GPU batches)."""
    device = device if device is not None else module_device(objective)
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


def make_accelerator(config: TrainingConfig) -> tuple[Any, str]:
    """(Accelerator, resolved ``mixed_precision``) for ``config``'s device, precision and gradient
    accumulation; the process group of a DDP run is checked ([`bert_kd.core.training.distributed.check_process_group`][])."""
    from accelerate import Accelerator, DistributedDataParallelKwargs

    cpu = use_cpu_backend(config.cpu)
    problem = precision_problem(config.mixed_precision, cpu=config.cpu)
    if problem is not None:  # the parameter hook refuses it before keying; a direct caller here
        raise ParameterError([("runtime.mixed_precision", problem)])
    mixed_precision = resolve_mixed_precision(config.mixed_precision, cpu=cpu, compile=config.compile)
    allow_new_precision(mixed_precision)
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
    return accelerator, mixed_precision


def plan_steps(batches: int, processes: int, config: TrainingConfig) -> tuple[int, int]:
    """(optimizer steps of the run, epochs) for ``batches`` training batches an epoch. Each process
    reads every ``processes``-th batch (Accelerate pads the last round): one optimizer step per
    round, so N processes with batch B step like one process with batch N·B."""
    steps_per_epoch = math.ceil(math.ceil(batches / processes) / config.gradient_accumulation_steps)
    total_steps = config.max_steps or max(1, math.ceil(steps_per_epoch * config.epochs))
    return total_steps, math.ceil(total_steps / max(1, steps_per_epoch))


class _RunningLosses:
    """Sums of the training terms since the last logged step, kept detached on the device (read,
    a device sync, only on logging steps)."""

    def __init__(self, first_step: int):
        self.sums: dict[str, Tensor] = {}
        self.count = 0
        self.first_step = first_step

    def add(self, terms: Mapping[str, Tensor]) -> None:
        """Add one (micro-)batch's loss terms."""
        for key, value in terms.items():
            value = value.detach()
            self.sums[key] = self.sums[key] + value if key in self.sums else value
        self.count += 1

    def mean_loss(self) -> float:
        """The mean loss of the batches since the last `take_averages` (a device sync)."""
        return float(self.sums["loss"]) / self.count

    def take_averages(self, step: int) -> dict[str, float]:
        """``train/<term>`` averages over the batches since the last call (then start again)."""
        averaged = {f"train/{k}": float(v) / self.count for k, v in self.sums.items()}
        self.sums, self.count, self.first_step = {}, 0, step + 1
        return averaged


#: The divergence rule: a job has diverged when the mean training loss of a logged window of steps is
#: non-finite, or above ``DIVERGENCE_FACTOR`` × max(the first optimizer step's mean loss,
#: ``DIVERGENCE_FLOOR``). The first step's loss is computed before any update, so it is the job's
#: starting loss whatever the learning rate; 100× is far outside what a converging run does (warm-up
#: bumps, a new task head), and the floor keeps a job that starts near zero loss (a student
#: initialised from its teacher) from stopping on noise (its limit is at least 10).
DIVERGENCE_FACTOR = 100.0
DIVERGENCE_FLOOR = 0.1


def divergence_limit(first_loss: float) -> float:
    """The highest logged mean loss a job that started at ``first_loss`` may reach."""
    return DIVERGENCE_FACTOR * max(first_loss, DIVERGENCE_FLOOR)


def diverged(window_loss: float, first_loss: float) -> bool:
    """Whether a logged window's mean loss says the job diverged (see [`DIVERGENCE_FACTOR`][])."""
    return not math.isfinite(window_loss) or window_loss > divergence_limit(first_loss)


def divergence_error(
    description: str, learning_rate: float, window_loss: float, first_loss: float, steps: tuple[int, int]
) -> TrainingDivergedError:
    """The user error of a diverged job: the loss, the steps, the learning rate and its parameter."""
    first, last = steps
    where_steps = f"step {last}" if first == last else f"steps {first}..{last}"
    if math.isfinite(window_loss):
        what = (
            f"{description}: the training loss rose from {first_loss:.4g} (first step) to {window_loss:.4g} "
            f"(mean of {where_steps}), over {DIVERGENCE_FACTOR:g}× its start"
        )
    else:
        what = f"{description}: the training loss became {window_loss} within {where_steps}"
    parameters = learning_rate_parameters(learning_rate)
    where = (
        " or ".join(f"{name}={learning_rate:g}" for name in parameters)
        if parameters
        else f"the learning_rate of {description} ({learning_rate:g})"
    )
    target = parameters[0] if parameters else "<job>.training.learning_rate"
    fix = (
        f"lower the learning rate (e.g. --params {target}={learning_rate / 10:g}) and run again; "
        "nothing of this job was stored"
    )
    return TrainingDivergedError(what, where, fix, step=last, learning_rate=learning_rate)


class _Run:
    """One fit's prepared parts and its resumable ``state`` (what ``trainer_state.json`` holds):
    the steps of an epoch, loss logging, evaluation with best-epoch selection, checkpoints."""

    def __init__(
        self,
        accelerator,
        objective,
        optimizer,
        scheduler,
        config: TrainingConfig,
        total_steps: int,
        log_fn: LogFn | None,
        description: str,
        compile_setting: bool | str = False,
    ):
        self.accelerator, self.objective, self.optimizer, self.scheduler = accelerator, objective, optimizer, scheduler
        self.compile_setting = compile_setting
        # the compiled parameter update (clip + AdamW), without a loss scaler (fp16) only: the scaler's
        # unscale-and-skip logic stays Accelerate's
        self.update = compiled_update(compile_setting) if accelerator.scaler is None else None
        self.trained_parameters = [p for p in objective.parameters() if p.requires_grad]
        self.raw = accelerator.unwrap_model(objective)
        self.config, self.total_steps, self.log_fn, self.description = config, total_steps, log_fn, description
        self.state = {
            "epoch": 0,
            "step_in_epoch": 0,
            "global_step": 0,
            "best_metric": None,
            "best_epoch": -1,
            "history": [],
        }
        self.best_state = None
        self.checkpoint_path = Path(config.checkpoint_dir) / "last" if config.checkpoint_dir else None
        self.resumed_from = 0
        self.padded_tokens, self.real_tokens = 0, 0  # real_tokens stays a tensor: no device sync per batch

    def begin(self) -> None:
        """Resume from the checkpoint a run with the same ``checkpoint_dir`` left (if any); start
        the progress bar and the loss sums; put the objective in training mode."""
        if self.checkpoint_path is not None and (self.checkpoint_path / "trainer_state.json").exists():
            self.state, self.best_state = load_checkpoint(self.accelerator, self.checkpoint_path)
            self.resumed_from = self.state["global_step"]
            log.info("resuming %s from %s at step %d", self.description, self.checkpoint_path, self.resumed_from)
        self.progress = tqdm(
            total=self.total_steps,
            initial=self.state["global_step"],
            desc=self.description,
            disable=not (self.config.progress_bar and self.accelerator.is_local_main_process),
        )
        self.objective.train()
        self.losses = _RunningLosses(self.state["global_step"] + 1)

    def checkpoint(self) -> None:
        """Save the resumable state (with ``checkpoint_dir`` only)."""
        if self.checkpoint_path is not None:
            with _timed("checkpoint"):
                save_checkpoint(self.accelerator, self.checkpoint_path, self.state, self.best_state)

    def train_epoch(self, loader, n_epochs: int) -> None:
        """Tell the objective its epoch (logging what it returns), then train on the batches of
        ``loader`` a resumed epoch has not seen yet, until the epoch or the step budget ends."""
        set_epoch = getattr(self.raw, "set_epoch", None)  # per-epoch settings, re-applied after a resume
        epoch_metrics = set_epoch(self.state["epoch"], n_epochs) if set_epoch else None
        if epoch_metrics and self.log_fn:
            self.log_fn({f"train/{k}": v for k, v in epoch_metrics.items()}, self.state["global_step"])
        skip = self.state["step_in_epoch"] * self.config.gradient_accumulation_steps
        batches = iter(self.accelerator.skip_first_batches(loader, skip) if skip else loader)
        while True:
            with _timed("data"):
                batch = next(batches, None)
            if batch is None:
                break
            mask = batch.get("attention_mask")
            if mask is not None:
                self.padded_tokens += mask.numel()
                self.real_tokens = self.real_tokens + mask.sum()
            with _timed("train"):
                self.losses.add(self.train_on(batch))
            if not self.accelerator.sync_gradients:
                continue
            self.after_optimizer_step()
            if self.state["global_step"] >= self.total_steps:
                break

    def train_on(self, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        """Forward and backward of one (micro-)batch; clip, step the optimizer and the schedule
        when gradients sync (the last batch of an accumulation round). Returns the loss terms."""
        accelerator, config = self.accelerator, self.config
        if uses_cuda_graphs(self.compile_setting):  # a new step: the last step's graph outputs may be overwritten
            torch.compiler.cudagraph_mark_step_begin()
        with accelerator.accumulate(self.objective):
            terms = self.objective(batch)  # the prepared module: DDP synchronises gradients
            accelerator.backward(terms["loss"])
            if self.update is not None and accelerator.sync_gradients:  # clip and step in one compiled region
                self.update(self.optimizer.optimizer, self.trained_parameters, float(config.max_grad_norm or 0.0))
            else:
                if accelerator.sync_gradients and config.max_grad_norm:
                    accelerator.clip_grad_norm_(self.objective.parameters(), config.max_grad_norm)
                self.optimizer.step()
            if accelerator.sync_gradients and not self.optimizer.step_was_skipped:
                self.scheduler.step()
            self.optimizer.zero_grad()
        return terms

    def after_optimizer_step(self) -> None:
        """Count the step; log the averaged losses every ``log_every_steps`` (and at the last step);
        checkpoint every ``checkpoint_every_steps``."""
        state, config = self.state, self.config
        state["global_step"] += 1
        state["step_in_epoch"] += 1
        self.progress.update(1)
        if state.get("first_loss") is None:  # the job's starting loss, the divergence rule's reference
            state["first_loss"] = self.losses.mean_loss()
        if state["global_step"] % config.log_every_steps == 0 or state["global_step"] == self.total_steps:
            first_step = self.losses.first_step
            averaged = self.losses.take_averages(state["global_step"])
            if diverged(averaged["train/loss"], state["first_loss"]):
                raise divergence_error(
                    self.description,
                    config.learning_rate,
                    averaged["train/loss"],
                    state["first_loss"],
                    (first_step, state["global_step"]),
                )
            averaged["train/lr"] = float(self.scheduler.get_last_lr()[0])  # a tensor under a compiled update
            self.progress.set_postfix(loss=f"{averaged['train/loss']:.4f}")
            if self.log_fn:
                self.log_fn(averaged, state["global_step"])
        if config.checkpoint_every_steps and state["global_step"] % config.checkpoint_every_steps == 0:
            self.checkpoint()

    def end_epoch(self, eval_loader, evaluate_fn: EvaluateFn | None) -> None:
        """Close the epoch: evaluate (with ``eval_loader``), keep the best state, record the
        epoch in the history, checkpoint; the progress bar's rate leaves all of it out ([`paused_bar`][])."""
        with paused_bar(self.progress):
            self._end_epoch(eval_loader, evaluate_fn)

    def _end_epoch(self, eval_loader, evaluate_fn: EvaluateFn | None) -> None:
        state = self.state
        state["epoch"] += 1
        state["step_in_epoch"] = 0
        record = {"epoch": state["epoch"], "global_step": state["global_step"]}
        observed = self.raw.epoch_report() if hasattr(self.raw, "epoch_report") else {}
        if observed:  # what the objective saw over the epoch (RL-KD: its teachers' selection shares)
            record["observed"] = dict(observed)
            if self.log_fn:
                self.log_fn({f"train/{k}": v for k, v in observed.items()}, state["global_step"])
        if eval_loader is not None and evaluate_fn is not None:
            with _timed("eval"):
                preds, labels = predict_logits(self.raw, eval_loader, accelerator=self.accelerator)
                metrics = evaluate_fn(preds, labels)
            record.update(metrics)
            if self.log_fn:
                self.log_fn({f"eval/{k}": v for k, v in metrics.items()}, state["global_step"])
            self.select(metrics)
            with self.progress.external_write_mode():  # on its own line, not glued to the bar's
                log.info("%s epoch %d: %s", self.description, state["epoch"], rounded_metrics(metrics))
        state["history"].append(record)
        self.checkpoint()

    def select(self, metrics: Mapping) -> None:
        """Keep this epoch's trainable state if its ``select_metric`` is the best so far (by
        ``greater_is_better``); without a ``select_metric``, every epoch's (the last one wins). An objective
        whose ``selectable`` is false for this epoch (a staged recipe before its last stage) is not kept."""
        if not getattr(self.raw, "selectable", True):
            return
        config, state = self.config, self.state
        score = metrics.get(config.select_metric) if config.select_metric else None
        best = state["best_metric"]
        better = score is not None and (best is None or (score > best if config.greater_is_better else score < best))
        if better or config.select_metric is None:
            state["best_metric"] = score
            state["best_epoch"] = state["epoch"]
            self.best_state = self.raw.trainable_state()

    def abandon(self) -> None:
        """A diverged run: close the progress bar, delete its checkpoint (a rerun must not resume
        the diverged weights) and release the accelerator."""
        self.progress.close()
        if self.checkpoint_path is not None and self.accelerator.is_main_process:
            shutil.rmtree(self.checkpoint_path, ignore_errors=True)
        release(self.accelerator)

    def finish(self, mixed_precision: str, compile_counts: CompileCounts | None = None) -> FitResult:
        """Log the padding share, remove a finished run's checkpoint (unless kept), restore the
        best state and release the accelerator's references."""
        state, accelerator = self.state, self.accelerator
        self.progress.close()
        padding = self.padded_tokens / max(int(self.real_tokens), 1) if self.padded_tokens else float("nan")
        if self.log_fn and self.padded_tokens:
            self.log_fn({"train/padded_per_real_token": padding}, state["global_step"])
        if self.log_fn and compile_counts is not None:  # what this run compiled (0 graphs: reused)
            self.log_fn(compile_counts.as_metrics(), state["global_step"])
        if self.checkpoint_path is not None and not self.config.keep_checkpoint and accelerator.is_main_process:
            shutil.rmtree(self.checkpoint_path, ignore_errors=True)  # finished: the result is saved by the caller
        if self.best_state is not None:
            self.raw.load_state_dict(self.best_state, strict=False)
        best_record = next((r for r in state["history"] if r["epoch"] == state["best_epoch"]), {})
        best_metrics = {k: v for k, v in best_record.items() if k != "observed"}
        release(accelerator)
        return FitResult(
            best_metrics=dict(best_metrics),
            best_epoch=state["best_epoch"],
            history=state["history"],
            global_step=state["global_step"],
            resumed_from_step=self.resumed_from,
            padded_per_real_token=padding,
            num_processes=accelerator.num_processes,
            mixed_precision=mixed_precision,
            compile=self.compile_setting,
            compile_counts=compile_counts.as_metrics() if compile_counts is not None else {},
        )


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
    from transformers import get_linear_schedule_with_warmup

    if len(train_dataset) == 0:
        raise ValueError(f"{description}: the training set is empty")
    seed_everything(config.seed)
    collator = collator or Collator()
    accelerator, mixed_precision = make_accelerator(config)
    if accelerator.device.type == "cuda":  # CPU runs leave the flags alone: setting them moved CPU float rounding
        set_tf32(uses_tf32(config.tf32, mixed_precision, accelerator.device))
    train_lengths = sequence_lengths(train_dataset) if config.group_by_length else None

    def train_loader(seed: int) -> DataLoader:
        return make_loader(
            train_dataset,
            config.batch_size,
            collator,
            shuffle=True,
            seed=seed,
            group_by_length=config.group_by_length,
            lengths=train_lengths,
            processes=accelerator.num_processes,
        )

    total_steps, n_epochs = plan_steps(len(train_loader(config.seed)), accelerator.num_processes, config)
    signature = run_signature(objective.model, config.batch_size, config.compile, mixed_precision)
    compile_setting = resolve_compile(config.compile, accelerator.device, total_steps, signature)
    if uses_cuda_graphs(compile_setting) and collator.pad_to_multiple_of is None:  # a few shapes, a few graphs
        collator = collator.padded_to_multiple(CUDA_GRAPH_PAD_MULTIPLE)  # train_loader reads it from here on
    freeze_word_embeddings(objective.model, config.word_embeddings)
    optimizer = make_optimizer(objective, config, accelerator.device, tensor_lr=bool(compile_setting))
    scheduler = get_linear_schedule_with_warmup(optimizer, int(config.warmup_ratio * total_steps), total_steps)
    objective, optimizer, scheduler = accelerator.prepare(objective, optimizer, scheduler)
    run = _Run(accelerator, objective, optimizer, scheduler, config, total_steps, log_fn, description, compile_setting)
    if config.teacher_mixed_precision != "same":
        run.raw.frozen_precision = resolve_mixed_precision(
            config.teacher_mixed_precision, cpu=config.cpu, compile=config.compile
        )
    eval_loader = (  # longest first: metrics need predictions aligned with labels only, not dataset order
        accelerator.prepare(
            use_device_loading(
                make_loader(
                    eval_dataset,
                    config.eval_batch_size,
                    collator,
                    shuffle=False,
                    group_by_length=config.group_by_length,
                ),
                accelerator.device,
            )
        )
        if eval_dataset is not None and evaluate_fn is not None
        else None
    )
    run.begin()
    # With max_steps the step budget alone ends the run: a run stopped at max_steps mid-epoch
    # counts that epoch as done, so a resume with a larger max_steps needs more epochs than n_epochs.
    compiled_before = CompileCounts.now() if compile_setting else None
    try:
        with compiled_for_the_run([run.raw.model, *getattr(run.raw, "teachers", ())], compile_setting):
            while run.state["global_step"] < total_steps and (config.max_steps or run.state["epoch"] < n_epochs):
                run.train_epoch(
                    accelerator.prepare(
                        use_device_loading(train_loader(config.seed + run.state["epoch"]), accelerator.device)
                    ),
                    n_epochs,
                )
                run.end_epoch(eval_loader, evaluate_fn)
    except TrainingDivergedError:
        run.abandon()
        raise
    if compiled_before is None:
        return run.finish(mixed_precision)
    remember_compiled(signature)  # compile: auto reuses this process's graphs for a run of the same signature
    return run.finish(mixed_precision, CompileCounts.now().since(compiled_before))


def config_fingerprint(*parts) -> str:
    """Short stable hash of JSON-serialisable settings (keys for caches and model stores)."""
    import hashlib

    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def rounded_metrics(metrics: Mapping) -> dict:
    """An epoch's dev metrics as its log line shows them: numbers to 4 decimals (``{'accuracy': 0.8085}``)."""
    return {
        k: round(float(v), 4) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
        for k, v in metrics.items()
    }
