"""Engineering settings of a training run: TrainingConfig, mixed precision, the optimizer."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Mapping

import torch

from bert_kd.config.schema import DEFAULT_SEED, MAX_SEED, Runtime, Training, typed
from bert_kd.core.training.precision import compiles_on, resolve_precision, training_device


def _schema_default(block: type[Training] | type[Runtime], name: str):
    """The schema's default for a ``training:`` or ``runtime`` key: the project's one set of training
    defaults ([`bert_kd.config.schema.Training`][], [`bert_kd.config.schema.Runtime`][])."""
    return block.model_fields[name].default


@dataclass
class TrainingConfig:
    """Engineering settings of a run (no maths here); the defaults are the schema's (comments there)."""

    epochs: float = _schema_default(Training, "epochs")
    batch_size: int = _schema_default(Training, "batch_size")
    eval_batch_size: int = _schema_default(Training, "eval_batch_size")
    learning_rate: float = _schema_default(Training, "learning_rate")
    aux_learning_rate: float | None = _schema_default(Training, "aux_learning_rate")
    weight_decay: float = _schema_default(Training, "weight_decay")
    warmup_ratio: float = _schema_default(Training, "warmup_ratio")
    max_grad_norm: float = _schema_default(Training, "max_grad_norm")
    seed: int = DEFAULT_SEED
    mixed_precision: str = _schema_default(Runtime, "mixed_precision")
    # Not the schema's default (True): job keys take this field's value, and a runtime block or a flat dict
    # that leaves group_by_length out has always meant random batches; reading Runtime's default here
    # would change those jobs' keys. The project default is conf's runtime.group_by_length: docs/decisions.md
    group_by_length: bool = False
    teacher_mixed_precision: str = _schema_default(Runtime, "teacher_mixed_precision")
    gradient_accumulation_steps: int = _schema_default(Training, "gradient_accumulation_steps")
    max_steps: int | None = _schema_default(Training, "max_steps")
    word_embeddings: str = _schema_default(Training, "word_embeddings")
    log_every_steps: int = _schema_default(Training, "log_every_steps")
    checkpoint_dir: str | None = None
    checkpoint_every_steps: int = _schema_default(Runtime, "checkpoint_every_steps")
    keep_checkpoint: bool = _schema_default(Runtime, "keep_checkpoint")
    select_metric: str | None = None  # key of the evaluate_fn result; None = keep the last epoch
    greater_is_better: bool = True
    progress_bar: bool = _schema_default(Runtime, "progress_bar")
    cpu: bool = _schema_default(Runtime, "cpu")
    tf32: bool = _schema_default(Runtime, "tf32")
    compile: bool | str = _schema_default(Runtime, "compile")
    fused_optimizer: bool | str = _schema_default(Runtime, "fused_optimizer")

    @classmethod
    def from_schema(
        cls,
        training: Training,
        runtime: Runtime,
        *,
        seed: int,
        select_metric: str | None,
        greater_is_better: bool = True,
        checkpoint_dir: str | Path | None = None,
    ) -> TrainingConfig:
        """Build from a validated ``training:`` block ([`bert_kd.config.schema.Training`][]) and the
        ``runtime`` settings ([`bert_kd.config.schema.Runtime`][]); a flat dict goes through
        [`from_dict`][].

        A key the parameters leave out, or set to null, keeps the schema's default (except
        ``group_by_length``: a runtime block without it keeps random batches, see the field's comment);
        runtime settings win over the block's (``eval_batch_size``, ``log_every_steps``).
        """
        values = training.model_dump()
        chosen = runtime.model_dump(exclude_unset=True)
        values.update({k: v for k, v in chosen.items() if k in _FIELD_NAMES and v is not None})
        _check_run_settings(seed, select_metric, greater_is_better, checkpoint_dir)
        values.update(
            seed=seed,
            select_metric=select_metric,
            greater_is_better=greater_is_better,
            checkpoint_dir=None if checkpoint_dir is None else str(checkpoint_dir),
        )
        return cls(**values)

    @classmethod
    def from_dict(cls, values: Mapping | None) -> TrainingConfig:
        """Build from one flat dict of this class's fields (a notebook's, a test's): the keys of a
        ``training:`` block and of ``runtime`` are validated by the schema (a bad value is a
        ParameterError naming it); an unknown key is a ValueError naming it."""
        values = dict(values or {})
        unknown = sorted(set(values) - _FIELD_NAMES)
        if unknown:
            raise ValueError(f"unknown training parameter(s) {unknown}; valid: {sorted(_FIELD_NAMES)}")
        training = {k: v for k, v in values.items() if k in Training.model_fields}
        run_settings = {"seed": cls.seed, "select_metric": cls.select_metric}  # the dataclass defaults
        # select_metric is also a runtime key (the parameters' choice), but here it is this run's setting
        runtime = {
            k: v for k, v in values.items() if k in Runtime.model_fields and k not in training and k not in run_settings
        }
        run_settings.update({k: v for k, v in values.items() if k not in training and k not in runtime})
        return cls.from_schema(
            typed(Training, training, "training"), typed(Runtime, runtime, "runtime"), **run_settings
        )


#: TrainingConfig's fields: the schema's ``training:`` and ``runtime`` keys, and the settings of one run
#: (``seed``, ``select_metric``, ``greater_is_better``, ``checkpoint_dir``) that neither block holds.
_FIELD_NAMES = frozenset(f.name for f in fields(TrainingConfig))


def _check_run_settings(seed, select_metric, greater_is_better, checkpoint_dir) -> None:
    """The settings the schema's blocks do not cover: a ValueError naming the one that is wrong."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"training.seed must be an integer in 0 … {MAX_SEED}, got {seed!r}")
    if select_metric is not None and not isinstance(select_metric, str):
        raise ValueError(f"training.select_metric must be a metric name or null, got {select_metric!r}")
    if not isinstance(greater_is_better, bool):
        raise ValueError(f"training.greater_is_better must be true or false, got {greater_is_better!r}")
    if checkpoint_dir is not None and not isinstance(checkpoint_dir, (str, Path)):
        raise ValueError(f"training.checkpoint_dir must be a path or null, got {checkpoint_dir!r}")


def make_optimizer(
    objective, config: TrainingConfig, device: torch.device, tensor_lr: bool = False
) -> torch.optim.AdamW:
    """AdamW over the objective's parameter groups; on CPU and CUDA (``fused_optimizer: auto``)
    PyTorch's fused kernel (one launch for all parameters on a GPU): on CPU the per-tensor loop spent a quarter of a 2-layer student's CPU step updating
    the 11.7M-entry word embedding. Fused and per-tensor AdamW agree to float rounding (≈ 1e-7),
    not bit for bit, so the setting is an engineering one (not part of job keys). ``tensor_lr`` (a
    compiled update, [`bert_kd.core.training.compiled_step`][]): the learning rates are tensors, which the
    schedule fills in place, so the compiled update reads them as inputs instead of compiling again for
    every new value; and the AdamW is PyTorch's traceable one (on a GPU its multi-tensor form, ``capturable``
    for CUDA graphs), not the fused kernel, which TorchDynamo leaves out of the graph."""
    groups = objective.parameter_groups(config)
    if tensor_lr:
        cuda = device.type == "cuda"
        groups = [{**g, "lr": torch.tensor(float(g["lr"]), device=device)} if "lr" in g else g for g in groups]
        lr = torch.tensor(float(config.learning_rate), device=device)
        return torch.optim.AdamW(groups, lr=lr, foreach=cuda, capturable=cuda)
    fused = device.type in ("cpu", "cuda") if config.fused_optimizer == "auto" else bool(config.fused_optimizer)
    return torch.optim.AdamW(groups, lr=config.learning_rate, fused=fused or None)


def freeze_word_embeddings(model: torch.nn.Module, setting: str) -> int:
    """``training.word_embeddings: frozen``: the model's input word-embedding matrix stops taking gradients, so
    neither backward nor AdamW touches it (an MLM head tied to it is frozen with it); returns the entries frozen
    (0 for ``train``). A 2-layer MiniLM student's matrix is 11.7 M of its 15.6 M parameters."""
    if setting == "train":
        return 0
    if setting != "frozen":
        raise ValueError(f"training.word_embeddings must be train or frozen, got {setting!r}")
    try:
        embeddings = model.get_input_embeddings()
    except (AttributeError, NotImplementedError):
        embeddings = None
    if not isinstance(embeddings, torch.nn.Embedding):  # the BiLSTM's own table
        embeddings = getattr(model, "embeddings", None)
    if not isinstance(embeddings, torch.nn.Embedding):
        raise ValueError(
            f"training.word_embeddings: frozen needs a model with input word embeddings; {type(model).__name__} has "
            "none (set training.word_embeddings: train)"
        )
    embeddings.weight.requires_grad_(False)
    return embeddings.weight.numel()


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


CPU_ISA_PINS = ("MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA")


def numeric_path() -> str:
    """Which fp32 kernels this process computes with: ``cpu AVX2``, ``cpu AVX512`` (PyTorch's CPU
    capability: ``ATEN_CPU_CAPABILITY`` lowers it), with the MKL / oneDNN instruction-set pins when set
    (``cpu AVX2 MKL_CBWR=AVX2 ONEDNN_MAX_CPU_ISA=AVX2``), or the GPU's name. The same job on another path
    gives other float rounding, and a retrained teacher other weights (0.3 points on SST-2 dev):
    results record it; job keys do not (they name the experiment, not the hardware)."""
    if torch.cuda.is_available():
        return f"cuda {torch.cuda.get_device_name()}"
    pins = [f"{name}={os.environ[name]}" for name in CPU_ISA_PINS if os.environ.get(name)]
    return " ".join([f"cpu {torch.backends.cpu.get_cpu_capability()}", *pins])


def trains_on_cpu(cpu: bool = False) -> bool:
    """Whether a fit with ``cpu`` (``runtime.cpu``) trains on the CPU: asked for, or no CUDA GPU."""
    return bool(cpu) or not torch.cuda.is_available()


def precision_problem(requested: str, cpu: bool = False) -> str | None:
    """Why the training precision ``requested`` (``runtime.mixed_precision``) cannot run as said on
    this device, or None. fp16 on a CPU: Accelerate has no fp16 autocast there and trains in fp32,
    while the job's key, manifest and MLflow run would say fp16 (a duplicate fp32 result under an
    fp16 label)."""
    if requested == "fp16" and trains_on_cpu(cpu):
        return (
            "fp16 needs a CUDA GPU and this run trains on the CPU, where it would train in fp32 under an fp16 "
            "key; use bf16 (CPU autocast), auto (fp32 on a CPU, bf16 on a CUDA GPU with bf16) or no"
        )
    return None


def compile_problem(setting, cpu: bool = False) -> str | None:
    """Why the ``runtime.compile`` setting cannot run as said on this device, or None: a mode that
    replays CUDA graphs (``reduce-overhead``, ``max-autotune``, the ``cudagraphs`` backend) on a run that
    trains on the CPU, where there are no CUDA graphs to replay and the tiny pipeline took 294 s instead of
    37 s, under a key of its own."""
    from bert_kd.core.training.precision import compile_backend, uses_cuda_graphs

    if uses_cuda_graphs(setting) and trains_on_cpu(cpu):
        return (
            f"{compile_backend(setting)} replays CUDA graphs and needs a CUDA GPU; this run trains on the CPU; "
            "use true (inductor), a backend that runs on a CPU (eager, aot_eager) or false"
        )
    return None


def resolve_mixed_precision(value: str, cpu: bool = False, compile=False) -> str:
    """Accelerate's ``mixed_precision`` for ``value`` on the device a run with ``runtime.cpu = cpu`` and
    ``runtime.compile = compile`` trains on ([`bert_kd.core.training.precision.resolve_precision`][]:
    "auto" is the recorded fastest on a CUDA device with bf16, "no" (fp32) elsewhere, CPUs included);
    other values pass through."""
    device = training_device(cpu)
    return resolve_precision(value, device, compiles_on(compile, device))
