"""The one training loop: fine-tuning, distillation and TED filter training all run through it.

Maths lives in an :class:`Objective` (a student or filters to train, frozen references,
loss terms); engineering lives in :func:`fit` (HF Accelerate for devices, precision and
multi-GPU, AdamW with linear warm-up/decay, clipping, evaluation each epoch, best-checkpoint
selection, periodic checkpoints a re-run resumes from, progress bar, metric logging).
Training batches are grouped by length (less padding); under DDP the prepared (wrapped)
objective is called, so gradients are synchronised, and evaluation gathers every process.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import random
import shutil
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np
import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader, Dataset
from tqdm.auto import tqdm

from bert_kd.distributed import check_process_group, use_cpu_backend
from bert_kd.jobs import write_atomically

log = logging.getLogger(__name__)

LogFn = Callable[[Mapping[str, float], int], None]
EvaluateFn = Callable[[np.ndarray, np.ndarray], dict]


@dataclass
class TrainingConfig:
    """Engineering settings of a run (no maths here)."""

    epochs: float = 3.0
    batch_size: int = 32
    eval_batch_size: int = 64
    learning_rate: float = 5e-5
    aux_learning_rate: float | None = None  # projections, ALP/TED modules; None = learning_rate
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    max_grad_norm: float = 1.0
    seed: int = 42
    mixed_precision: str = "no"  # "auto" (bf16 where the hardware has it; not the default, see NOTES), "fp16", "bf16"
    group_by_length: bool = False  # batches of similar length (LengthGroupedBatchSampler); off: see NOTES (issue 10)
    teacher_mixed_precision: str = "same"  # teachers' forwards: "same" as the student, or "auto"/"no"/"bf16"/"fp16"
    gradient_accumulation_steps: int = 1
    max_steps: int | None = None
    log_every_steps: int = 10
    checkpoint_dir: str | None = None
    checkpoint_every_steps: int = 0  # 0 = at the end of each epoch only
    keep_checkpoint: bool = False  # keep the last checkpoint once training has finished
    select_metric: str | None = None  # key of the evaluate_fn result; None = keep the last epoch
    greater_is_better: bool = True
    progress_bar: bool = True
    cpu: bool = False
    fused_optimizer: bool | str = "auto"  # one fused AdamW kernel: "auto" = on CPU and CUDA (≈ 13× faster optimizer steps here, benchmarks/optimizer_step.py)

    @classmethod
    def from_dict(cls, values: Mapping | None) -> "TrainingConfig":
        """Build from a parameters dict; unknown keys are an error naming them."""
        values = dict(values or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown training parameter(s) {unknown}; valid: {sorted(known)}")
        for name, kind in _NUMERIC_FIELDS.items():
            if name in values and not (values[name] is None and name in _OPTIONAL_FIELDS):
                values[name] = _coerce_number(name, values[name], kind)
        config = cls(**values)
        for name in ("batch_size", "eval_batch_size", "gradient_accumulation_steps", "log_every_steps"):
            if int(getattr(config, name)) < 1:
                raise ValueError(f"training.{name} must be >= 1, got {getattr(config, name)}")
        if config.max_steps is not None and config.max_steps < 1:
            raise ValueError(f"training.max_steps must be >= 1 (or null), got {config.max_steps}")
        if config.epochs <= 0 and not config.max_steps:
            raise ValueError(f"training.epochs must be > 0, got {config.epochs}")
        if config.learning_rate <= 0:
            raise ValueError(f"training.learning_rate must be > 0, got {config.learning_rate}")
        if config.mixed_precision not in MIXED_PRECISIONS:
            raise ValueError(f"training.mixed_precision must be one of {MIXED_PRECISIONS}, got {config.mixed_precision!r}")
        if config.teacher_mixed_precision not in ("same", *MIXED_PRECISIONS):
            raise ValueError(f"training.teacher_mixed_precision must be 'same' or one of {MIXED_PRECISIONS}, "
                             f"got {config.teacher_mixed_precision!r}")
        if config.fused_optimizer not in ("auto", True, False):
            raise ValueError(f"training.fused_optimizer must be auto, true or false, got {config.fused_optimizer!r}")
        if not isinstance(config.group_by_length, bool):
            raise ValueError(f"training.group_by_length must be true or false, got {config.group_by_length!r}")
        return config


def make_optimizer(objective, config: TrainingConfig, device: torch.device) -> torch.optim.AdamW:
    """AdamW over the objective's parameter groups; on CPU and CUDA (``fused_optimizer: auto``)
    PyTorch's fused kernel (one launch for all parameters on a GPU): on CPU the per-tensor loop spent a quarter of a 2-layer student's CPU step updating
    the 11.7M-entry word embedding. Fused and per-tensor AdamW agree to float rounding (≈ 1e-7),
    not bit for bit, so the setting is an engineering one (not part of job keys)."""
    fused = device.type in ("cpu", "cuda") if config.fused_optimizer == "auto" else bool(config.fused_optimizer)
    return torch.optim.AdamW(objective.parameter_groups(config), lr=config.learning_rate, fused=fused or None)


MIXED_PRECISIONS = ("auto", "no", "fp16", "bf16")


def cpu_has_bf16(cpuinfo: str | None = None) -> bool:
    """The CPU computes bf16 natively (AMX or AVX-512-BF16 in /proc/cpuinfo's flags)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return False
    flags = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags.update(line.partition(":")[2].split())
    return bool(flags & {"amx_bf16", "avx512_bf16"})


def resolve_mixed_precision(value: str, cpu: bool = False) -> str:
    """Accelerate's ``mixed_precision`` for ``value``: "auto" is bf16 on GPUs that support it
    and on CPUs with AMX/AVX-512-BF16, "no" (fp32) otherwise; other values pass through."""
    if value != "auto":
        return value
    if not cpu and torch.cuda.is_available():
        return "bf16" if torch.cuda.is_bf16_supported() else "no"
    return "bf16" if cpu_has_bf16() else "no"


_NUMERIC_FIELDS = {
    "epochs": float, "batch_size": int, "eval_batch_size": int, "learning_rate": float,
    "aux_learning_rate": float, "weight_decay": float, "warmup_ratio": float, "max_grad_norm": float,
    "seed": int, "gradient_accumulation_steps": int, "max_steps": int, "log_every_steps": int,
    "checkpoint_every_steps": int,
}
_OPTIONAL_FIELDS = ("aux_learning_rate", "max_steps")


def _coerce_number(name: str, value, kind: type):
    """``value`` as ``kind`` (YAML may give "5e-5" as a string); a ValueError naming the key otherwise."""
    try:
        if isinstance(value, bool):
            raise TypeError
        number = float(value)
        if kind is int and not number.is_integer():
            raise TypeError
        return int(number) if kind is int else number
    except (TypeError, ValueError):
        raise ValueError(f"training.{name} must be {'an integer' if kind is int else 'a number'}, got {value!r}") from None


class Objective(nn.Module):
    """What is trained and how it is scored (Lightning's module, without the trainer).

    Subclasses set ``self.model`` (the network that is evaluated and saved), register frozen
    references with :meth:`add_frozen` and implement :meth:`training_step`.
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

    def train(self, mode: bool = True) -> "Objective":
        super().train(mode)
        for name in self._frozen_names:
            getattr(self, name).eval()
        return self

    def set_epoch(self, epoch: int, n_epochs: int) -> Mapping[str, float]:
        """Called by :func:`fit` before every epoch (0-based ``epoch`` of ``n_epochs``, again after a
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
        at ``aux_learning_rate``."""
        decay, no_decay, aux = [], [], []
        for name, param in self.named_parameters():
            if not param.requires_grad:
                continue
            if not name.startswith("model."):
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
        return [g for g in groups if g["params"]]

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
    """Cross-entropy for classification, MSE for a single-output regression head (STS-B)."""
    if logits.shape[-1] == 1:
        return nn.functional.mse_loss(logits.squeeze(-1), labels.float())
    return nn.functional.cross_entropy(logits, labels.long())


# --------------------------------------------------------------------------- data


#: Value that pads multi-teacher span-id columns (``*span_ids``) in a batch; not a token of the row.
SPAN_PAD = -2
#: Token-level model inputs a tokenizer pads itself (``tokenizer.pad``).
PADDED_BY_TOKENIZER = ("input_ids", "attention_mask", "token_type_ids", "special_tokens_mask")


class Collator:
    """Pads every ``[prefix]input_ids`` group of a batch by its own tokenizer's rules.

    ``tokenizers``: prefix → tokenizer (``""`` = the main inputs, ``"t0_"`` = a teacher's own
    tokenization). A group with a tokenizer is padded by ``tokenizer.pad``: its padding side (XLNet
    pads on the left, so its sequence summary reads the last real token), pad id and token-type pad
    id. A group without one is right-padded with ``pad_ids[prefix]`` (default 0), masks with 0.

    Other fields pass through: ``label``/``labels`` → ``labels``, ``idx`` → long; a field of a
    group whose rows are as long as that group's ``input_ids`` (e.g. per-token character offsets)
    is padded with zeros on the group's padding side; any other numeric field is stacked as a
    tensor (a ragged one that matches no group is an error); text fields are dropped.
    """

    def __init__(self, pad_ids: Mapping[str, int] | None = None, tokenizers: Mapping[str, object] | None = None):
        self.pad_ids = dict(pad_ids or {})
        self.tokenizers = dict(tokenizers or {})
        for tokenizer in self.tokenizers.values():  # padding pre-tokenized rows is what pad() is for
            warned = getattr(tokenizer, "deprecation_warnings", None)
            if isinstance(warned, dict):
                warned["Asking-to-pad-a-fast-tokenizer"] = True

    def __call__(self, rows: Sequence[Mapping]) -> dict[str, Tensor]:
        first = rows[0]
        prefixes = sorted((key[: -len("input_ids")] for key in first if key.endswith("input_ids")), key=len, reverse=True)
        batch: dict[str, Tensor] = {}
        for prefix in prefixes:
            batch.update(self._pad_group(rows, prefix))
        for key in first:
            if key in batch:
                continue
            values = [row[key] for row in rows]
            if key in ("labels", "label"):
                batch["labels"] = torch.tensor(values)
            elif key == "idx":
                batch["idx"] = torch.tensor(values, dtype=torch.long)
            elif key.endswith("span_ids"):  # multi-teacher shared spans: one id per real token; the method re-places them
                longest = max(len(v) for v in values)
                batch[key] = torch.tensor([list(v) + [SPAN_PAD] * (longest - len(v)) for v in values], dtype=torch.long)
            else:
                group = next((p for p in prefixes if key.startswith(p)), None)
                aligned = group is not None and all(
                    isinstance(row[key], (list, tuple)) and len(row[key]) == len(row[group + "input_ids"]) for row in rows)
                if aligned:
                    batch[key] = _pad_aligned(values, max(len(row[group + "input_ids"]) for row in rows), self._side(group))
                elif not any(isinstance(v, str) for v in values):
                    try:
                        batch[key] = torch.tensor(values)
                    except (TypeError, ValueError):
                        if any(isinstance(v, (list, tuple)) for v in values):
                            raise ValueError(
                                f"collator: field {key!r} has rows of different lengths that match no input_ids group "
                                "(name it <prefix><field> with one entry per token of that prefix, or drop the column)"
                            ) from None
                        # other non-numeric values (None, objects) are left out, as text is
        return batch

    def _side(self, prefix: str) -> str:
        tokenizer = self.tokenizers.get(prefix)
        return getattr(tokenizer, "padding_side", "right") if tokenizer is not None else "right"

    def _pad_group(self, rows: Sequence[Mapping], prefix: str) -> dict[str, Tensor]:
        keys = [prefix + name for name in PADDED_BY_TOKENIZER if prefix + name in rows[0]]
        tokenizer = self.tokenizers.get(prefix)
        if tokenizer is not None:
            padded = tokenizer.pad([{key[len(prefix):]: row[key] for key in keys} for row in rows],
                                   padding=True, return_tensors="pt")
            return {prefix + name: torch.as_tensor(value) for name, value in padded.items()}
        longest = max(len(row[prefix + "input_ids"]) for row in rows)
        result = {}
        for key in keys:
            pad = self.pad_ids.get(prefix, 0) if key.endswith("input_ids") else 0
            result[key] = torch.tensor([list(row[key]) + [pad] * (longest - len(row[key])) for row in rows])
        return result


def _pad_aligned(values: Sequence[Sequence], longest: int, side: str) -> Tensor:
    """Zero-pad token-aligned per-row sequences (scalars or tuples per token) to ``longest``."""
    tensors = [torch.as_tensor(v) for v in values]
    out = torch.zeros((len(tensors), longest, *tensors[0].shape[1:]), dtype=tensors[0].dtype)
    for i, t in enumerate(tensors):
        if side == "left":
            out[i, longest - len(t):] = t
        else:
            out[i, : len(t)] = t
    return out


def sequence_lengths(dataset: Dataset, column: str = "input_ids") -> list[int]:
    """Token count of every example (the ``column`` of a tokenized split)."""
    try:
        values = dataset[column]  # a datasets.Dataset column: no per-row dict building
    except (KeyError, TypeError, IndexError, ValueError):
        values = None
    if values is None or len(values) != len(dataset):
        values = [dataset[i][column] for i in range(len(dataset))]
    return [len(v) for v in values]


class LengthGroupedBatchSampler:
    """Batches of similar length in a random order, deterministic per ``seed``.

    A random permutation is cut into mega-batches of ``mega_batch_batches`` batches; each
    mega-batch is sorted by length (longest first) and cut into batches; then the order of all
    batches is shuffled. (transformers' ``LengthGroupedSampler`` keeps each mega-batch's sorted
    order, so on a small set an epoch runs from the longest to the shortest examples.)

    ``processes`` > 1 (several training processes, each reading every ``processes``-th batch, as
    Accelerate shards a batch sampler): the batches are formed at the global size
    ``batch_size × processes`` exactly as one process would form them, and each is yielded as
    ``processes`` consecutive parts of ``batch_size`` — so N processes step on the same global
    batches as one process with batch N·B.
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, seed: int = 0, mega_batch_batches: int = 50,
                 processes: int = 1):
        if batch_size < 1 or mega_batch_batches < 1 or processes < 1:
            raise ValueError(f"batch_size, mega_batch_batches and processes must be ≥ 1, "
                             f"got {batch_size}, {mega_batch_batches}, {processes}")
        self.lengths, self.batch_size, self.seed = list(lengths), batch_size, seed
        self.global_batch_size = batch_size * processes
        self.mega_batch_size = self.global_batch_size * mega_batch_batches

    def __len__(self) -> int:
        return sum(math.ceil(len(part) / self.batch_size) for part in self._global_batches())

    def _global_batches(self) -> Iterator[range]:
        for chunk in self._mega_batches():
            for start in range(0, len(chunk), self.global_batch_size):
                yield range(start, min(start + self.global_batch_size, len(chunk)))

    def _mega_batches(self) -> list[range]:
        return [range(start, min(start + self.mega_batch_size, len(self.lengths)))
                for start in range(0, len(self.lengths), self.mega_batch_size)]

    def __iter__(self) -> Iterator[list[int]]:
        generator = torch.Generator().manual_seed(self.seed)
        order = torch.randperm(len(self.lengths), generator=generator).tolist()
        batches = []
        for chunk in self._mega_batches():
            mega = sorted((order[i] for i in chunk), key=lambda i: -self.lengths[i])
            batches += [mega[i:i + self.global_batch_size] for i in range(0, len(mega), self.global_batch_size)]
        for position in torch.randperm(len(batches), generator=generator).tolist():
            batch = batches[position]
            for start in range(0, len(batch), self.batch_size):  # one part per process
                yield batch[start:start + self.batch_size]


def make_loader(
    dataset: Dataset,
    batch_size: int,
    collator: Collator,
    shuffle: bool,
    seed: int = 0,
    group_by_length: bool = False,
    lengths: Sequence[int] | None = None,
    processes: int = 1,
) -> DataLoader:
    """A DataLoader whose order depends only on ``seed``.

    ``group_by_length`` with ``shuffle``: :class:`LengthGroupedBatchSampler` (batches of similar
    length, shuffled; formed at the global batch size of ``processes`` training processes);
    without ``shuffle``: longest first, a fixed order (predictions come out in that order, with
    their labels).
    """
    generator = torch.Generator().manual_seed(seed)
    if not group_by_length:
        return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, collate_fn=collator, generator=generator)
    lengths = list(lengths) if lengths is not None else sequence_lengths(dataset)
    if len(lengths) != len(dataset):
        raise ValueError(f"make_loader: {len(lengths)} lengths for {len(dataset)} examples")
    if shuffle:
        sampler = LengthGroupedBatchSampler(lengths, batch_size, seed, processes=processes)
        return DataLoader(dataset, batch_sampler=sampler, collate_fn=collator)
    sampler = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, collate_fn=collator)


def use_device_loading(loader: DataLoader, device: torch.device) -> DataLoader:
    """On a GPU: collate in worker processes (up to 4, the CPU's cores shared between this
    machine's processes) into pinned memory, so batches are ready and copied asynchronously
    while the GPU computes. On CPU nothing changes (workers would take cores from the compute)."""
    if device.type == "cuda":
        local_processes = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1))
        loader.num_workers = max(0, min(4, (os.cpu_count() or 1) // local_processes - 1))
        loader.pin_memory = True
    return loader


def padding_ratio(batches: Iterable[Mapping[str, Tensor]]) -> float:
    """Padded over real tokens of the main ``attention_mask`` (1.0 = no padding)."""
    padded = real = 0
    for batch in batches:
        mask = batch["attention_mask"]
        padded += mask.numel()
        real += int(mask.sum())
    return padded / max(real, 1)


# --------------------------------------------------------------------------- loop


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


def save_checkpoint(accelerator, directory: Path, state: dict, best_state) -> None:
    """Write the resumable state to ``directory`` all at once. Every process calls it: Accelerate's
    ``save_state`` writes the model, optimizer and scheduler from the main process and each
    process's RNG state (``random_states_<rank>.pkl``); the main process then publishes the
    staging directory with :func:`bert_kd.jobs.write_atomically`."""
    staging = directory.with_name(directory.name + ".staging")
    if accelerator.is_main_process:
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(staging))
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        if best_state is not None:
            torch.save(best_state, staging / "best_trainable_state.pt")
        (staging / "trainer_state.json").write_text(json.dumps(state, indent=2))
        write_atomically(directory, lambda target: _move_files(staging, target))
        staging.rmdir()
    accelerator.wait_for_everyone()


def _move_files(source: Path, target: Path) -> None:
    for path in source.iterdir():
        os.replace(path, target / path.name)


def load_checkpoint(accelerator, directory: Path) -> tuple[dict, dict | None]:
    """Restore what :func:`save_checkpoint` wrote (every process); (trainer state, best state).
    A process without its own RNG state (a checkpoint from another process count) is warned about."""
    rng_file = directory / f"random_states_{accelerator.process_index}.pkl"
    if not rng_file.exists():
        log.warning("%s is missing: process %d resumes without its saved random state (checkpoint written "
                    "by another number of processes?)", rng_file, accelerator.process_index)
    accelerator.load_state(str(directory))
    state = json.loads((directory / "trainer_state.json").read_text())
    best_file = directory / "best_trainable_state.pt"
    return state, (torch.load(best_file, weights_only=True) if best_file.exists() else None)


def _allow_new_precision(mixed_precision: str) -> None:
    """Accelerate keeps one process-wide state and refuses an Accelerator with another precision
    than the first; a later fit with another ``mixed_precision`` resets that state (the process
    group, held apart in PartialState, stays)."""
    from accelerate.state import AcceleratorState

    shared = AcceleratorState._shared_state
    if shared and shared.get("_mixed_precision") != mixed_precision:
        AcceleratorState._reset_state(reset_partial_state=False)


def release(accelerator) -> None:
    """Drop the accelerator's references to the model, optimizer, scheduler and loaders (what
    ``Accelerator.free_memory`` does, without its full ``gc.collect()``: 0.1–0.6 s per fit here,
    6% of a 20-step student run; reference counting frees these objects)."""
    for name in ("_models", "_optimizers", "_schedulers", "_dataloaders"):
        getattr(accelerator, name, []).clear()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


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
