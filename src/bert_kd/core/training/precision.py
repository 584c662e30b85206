"""The numeric path of a run: mixed precision, TF32 matmuls and ``torch.compile``, resolved for the
device the run trains on, and the part of them that enters job keys.

Kept free of the rest of the package (torch and the parameter schema only), so key code and checks can call it.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterable, Iterator, Mapping

import torch

from bert_kd.config.schema import COMPILE_MODES
from bert_kd.core.training.speed_record import fastest_precision

#: ``mixed_precision`` values: ``auto`` resolves per device, the others are Accelerate's.
PRECISIONS = ("auto", "no", "bf16", "fp16")


def training_device(cpu: bool = False) -> str:
    """``cuda`` where a run trains on a GPU (one is visible and ``runtime.cpu`` is off), else ``cpu``."""
    return "cuda" if not cpu and torch.cuda.is_available() else "cpu"


def resolve_precision(requested: str, device: str | torch.device, compiled: bool = False) -> str:
    """Accelerate's ``mixed_precision`` for ``requested`` on ``device``: ``auto`` on a CUDA device that
    computes bf16 is the fastest precision recorded for an eager or a ``compiled`` step
    ([`fastest_precision`][]: fp32 with TF32 eager, bf16 compiled),
    ``no`` (fp32) elsewhere, CPUs included (bf16 on a CPU trained slower than fp32 here); ``no``, ``bf16``
    and ``fp16`` pass through."""
    if requested not in PRECISIONS:
        raise ValueError(f"mixed_precision must be one of {', '.join(PRECISIONS)}, got {requested!r}")
    if requested != "auto":
        return requested
    kind = torch.device(device).type if not isinstance(device, torch.device) else device.type
    if kind == "cuda" and torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        return fastest_precision(compiled)
    return "no"


def uses_tf32(tf32: bool, precision: str, device: str | torch.device) -> bool:
    """TF32 matmuls run: allowed (``runtime.tf32``), on CUDA, for fp32 work (resolved precision ``no``)."""
    kind = torch.device(device).type if not isinstance(device, torch.device) else device.type
    return bool(tf32) and kind == "cuda" and precision == "no"


def set_tf32(enabled: bool) -> None:
    """Let CUDA matmuls and cuDNN convolutions of fp32 tensors run on TF32 tensor cores (or not)."""
    torch.backends.cuda.matmul.allow_tf32 = bool(enabled)
    torch.backends.cudnn.allow_tf32 = bool(enabled)


def numeric_key_material(settings: Mapping) -> dict:
    """The numeric-path part of a job's training settings (``vars(TrainingConfig)``) as key material:
    ``mixed_precision`` resolved for the device (``auto`` on a CPU is ``no``, so keys made before
    ``auto`` existed keep their value); ``teacher_mixed_precision`` only where it resolves to another precision
    than the student's (a teacher forward at the student's precision is the same numbers as ``same``: ``auto``
    on a CPU keeps the student's key); ``tf32`` and ``compile`` only where they change the numbers
    (TF32: CUDA fp32 work; compile: on), so CPU keys stay as they were."""
    device = training_device(bool(settings.get("cpu", False)))
    compiled = compiles_on(settings.get("compile"), device)
    material = {}
    if "mixed_precision" in settings:
        material["mixed_precision"] = resolve_precision(str(settings["mixed_precision"]), device, compiled)
    if settings.get("teacher_mixed_precision", "same") != "same":
        student = material.get("mixed_precision", resolve_precision("auto", device, compiled))
        resolved = resolve_precision(str(settings["teacher_mixed_precision"]), device, compiled)
        material["teacher_mixed_precision"] = "same" if resolved == student else resolved
    if uses_tf32(settings.get("tf32", True), material.get("mixed_precision", "no"), device):
        material["tf32"] = True
    if compiled:
        material["compile"] = compile_backend(settings["compile"])
    return material


def compiles_on(setting, device: str) -> bool:
    """Whether a ``compile`` setting may compile on ``device`` (its key names it): any setting but off,
    and ``auto`` only on a CUDA GPU (on a CPU ``auto`` is off: keyed as what runs)."""
    return bool(setting) and not (setting == "auto" and device != "cuda")


#: ``torch.compile`` modes of the inductor backend that a ``compile`` setting may name instead of a backend
#: ([`COMPILE_MODES`][], where ``runtime.compile`` is validated).
INDUCTOR_MODES = COMPILE_MODES


def compile_model(model, setting) -> None:
    """``torch.compile`` ``model`` in place as a ``compile`` setting says (state_dict names stay): a
    backend name, or one of [`INDUCTOR_MODES`][]; dynamic shapes, because batch lengths vary (batches are
    padded to their longest row, or under CUDA graphs to a multiple of [`CUDA_GRAPH_PAD_MULTIPLE`][])."""
    backend = compile_backend(setting)
    if backend in INDUCTOR_MODES:
        model.compile(dynamic=True, mode=backend)
    else:
        model.compile(dynamic=True, backend=backend)


#: Under a compile setting that replays CUDA graphs, batches are padded to a multiple of this many tokens:
#: one graph is recorded per distinct batch shape, and padding to each batch's longest row gave the
#: prepared GPU run's short SST-2 job one shape per length (docs/gpu.md).
CUDA_GRAPH_PAD_MULTIPLE = 32


@contextmanager
def compiled_for_the_run(modules: Iterable[torch.nn.Module], setting) -> Iterator[None]:
    """The trained model and the frozen teachers of a run compiled as its ``compile`` setting says, for
    the run's duration; their plain forward restored after it (a model object also serves later jobs,
    evaluation and caches, single passes that compiling would only slow). Compiling the student alone left
    live ALP of BERT-base 12→4 at 1,204 examples/s on an H100, the student and its teacher 2,667
    (docs/gpu.md)."""
    modules = list(modules) if setting else []
    saved = [module._compiled_call_impl for module in modules]
    for module in modules:
        compile_model(module, setting)
    try:
        yield
    finally:
        for module, call in zip(modules, saved):
            module._compiled_call_impl = call


def compile_backend(setting) -> str | None:
    """The ``torch.compile`` backend (or inductor mode) of a ``compile`` setting: ``inductor`` for
    ``true``, the name given, ``None`` when off."""
    if not setting:
        return None
    return "inductor" if setting is True else str(setting)


def uses_cuda_graphs(setting) -> bool:
    """A ``compile`` setting whose compiled steps replay CUDA graphs (``reduce-overhead``, ``max-autotune``,
    the ``cudagraphs`` backend): the loop marks where each training step begins."""
    return compile_backend(setting) in ("reduce-overhead", "max-autotune", "cudagraphs")


def trial_precision_material(runtime: Mapping) -> dict:
    """A sweep trial's precision key material from its ``runtime`` parameters: ``mixed_precision`` and
    ``teacher_mixed_precision`` resolved for the device as the trial's jobs resolve them (a value left
    out stays ``None``, ``same`` stays ``same``, so every key made on a CPU keeps its value), plus
    ``tf32`` / ``compile`` where they change the numbers ([`numeric_key_material`][])."""
    device = training_device(bool(runtime.get("cpu", False)))
    compiled = compiles_on(runtime.get("compile"), device)

    def resolved(value):
        return value if value in (None, "same") else resolve_precision(str(value), device, compiled)

    material = {key: resolved(runtime.get(key)) for key in ("mixed_precision", "teacher_mixed_precision")}
    student = resolve_precision(str(runtime.get("mixed_precision") or "auto"), device, compiled)
    if material["teacher_mixed_precision"] not in (None, "same") and material["teacher_mixed_precision"] == student:
        material["teacher_mixed_precision"] = "same"  # the teacher at the student's precision: the same numbers
    if uses_tf32(runtime.get("tf32", True), student, device):
        material["tf32"] = True
    if compiled:
        material["compile"] = compile_backend(runtime["compile"])
    return material
