"""TED Stage I: task-aware filters (Liang et al., 2023, Sec. 3.1, Eq. 4–5, Remark 3.1).

A *filter* g^k reads the token-level hidden states H^{l} (B, L, d) of one model layer l and
maps them to a filtered representation (B, L, d_t); a *task head* on the filtered sequence
turns it into a prediction (linear → softmax for classification, linear for STS-B
regression). The head pools the filtered sequence with the summary token: the FIRST token
([CLS]) for BERT-like models (the last real token for XLNet, see
:func:`bert_kd.distill.outputs.summary_position`).

Filter architectures (Remark 3.1, Sec. 6.5, Table 8), :data:`FILTER_ARCHS`:

``linear``            one linear map d → d_t (default; d_t = teacher width, so teacher and
                      student filtered spaces match; TED Sec. 4.3/5.3, App. A.2.4).
``mlp``               Linear(d, d_t) → GeLU → Linear(d_t, d_t).
``subsequent_layer``  a copy of the model's NEXT transformer layer (layer l+1 for a filter on
                      layer l; for the last layer a copy of the layer itself), followed by a
                      linear map to d_t when d != d_t.

Stage I trains the K filters of a frozen model jointly on Σ_k task-loss(head_k) (Eq. 5) with
:class:`FilterTrainingObjective` through the one training loop :func:`bert_kd.training.fit`
(see :func:`train_filters`). Student filters are either trained the same way on a (fine-tuned)
student or copied from the teacher filters at the mapped layers (:func:`copy_filters_for_student`,
App. A.4 Case 2.2; needs student width == teacher width).

:class:`TaskFilters` is the catalogued artifact (``save``/``load``: safetensors state dict +
JSON config, written atomically) and carries provenance (task, fingerprint of the model the
filters were trained on) so callers can refuse filters trained for another task or teacher
(:meth:`TaskFilters.check_compatible`; TED Table 5 shows mismatched filters silently hurt).

Layer numbers are 1-based (= index into HF ``hidden_states``; 0 = embeddings, never filtered).
"""

from __future__ import annotations

import copy
import json
import logging
import shutil
from pathlib import Path
from typing import Sequence, Union

import numpy as np
import torch
from torch import Tensor, nn

from bert_kd.distill.outputs import forward_features, summary_position
from bert_kd.models import find_layer_stack, num_layers, parameters_fingerprint
from bert_kd.training import (
    Collator,
    FitResult,
    LogFn,
    Objective,
    TrainingConfig,
    fit,
    make_loader,
    seed_everything,
    task_loss,
)

log = logging.getLogger(__name__)

#: Filter architectures of TED Remark 3.1 / Table 8.
FILTER_ARCHS: tuple[str, ...] = ("linear", "mlp", "subsequent_layer")

#: File names inside a saved filters directory.
CONFIG_FILE = "ted_filters.json"
WEIGHTS_FILE = "filters.safetensors"
FORMAT_VERSION = 1


# --------------------------------------------------------------------------- mapping


def ted_layer_map(
    strategy: Union[str, Sequence[Sequence[int]], Sequence[int]] = "distilbert",
    n_teacher: int | None = None,
    n_student: int | None = None,
) -> list[int]:
    """TED's M(·) as a flat list: entry k-1 is the ONE teacher layer of student layer k.

    ``strategy`` is any :func:`bert_kd.distill.mapping.layer_map` strategy or explicit mapping
    (``[[1], [4]]``), or already a flat list of teacher layers (``[1, 4]``). Every student layer
    must map to exactly one teacher layer within ``1..n_teacher`` (ValueError otherwise).
    """
    from bert_kd.distill.mapping import layer_map

    if n_teacher is None or n_student is None:
        raise ValueError("ted_layer_map needs n_teacher and n_student")
    if not isinstance(strategy, str) and all(
        isinstance(x, int) and not isinstance(x, bool) for x in strategy
    ):
        strategy = [[int(x)] for x in strategy]
    mapping = layer_map(strategy, n_teacher, n_student)
    flat = []
    for k, entry in enumerate(mapping, start=1):
        if len(entry) != 1:
            raise ValueError(
                f"TED maps each student layer to exactly one teacher layer, but the mapping "
                f"{strategy!r} gives student layer {k} the teacher layers {entry}"
            )
        flat.append(entry[0])
    return flat


# --------------------------------------------------------------------------- filters


def _extended_mask(attention_mask: Tensor | None, hidden: Tensor) -> Tensor | None:
    """(B, L) 0/1 mask → additive (B, 1, 1, L) mask for a copied HF transformer layer."""
    if attention_mask is None:
        return None
    mask = attention_mask[:, None, None, :].to(hidden.dtype)
    return (1.0 - mask) * torch.finfo(hidden.dtype).min


def _run_layer(layer: nn.Module, hidden: Tensor, attention_mask: Tensor | None) -> Tensor:
    out = layer(hidden, attention_mask=_extended_mask(attention_mask, hidden))
    if isinstance(out, (tuple, list)):
        out = out[0]
    if not torch.is_tensor(out):
        raise TypeError(f"{type(layer).__name__} returned {type(out).__name__}, expected hidden states")
    return out


class TaskFilter(nn.Module):
    """One filter g^k (body: (B, L, d_in) → (B, L, d_out)) plus its task head (d_out → labels)."""

    def __init__(self, arch: str, in_width: int, out_width: int, num_labels: int, layer: nn.Module | None = None):
        super().__init__()
        if arch not in FILTER_ARCHS:
            raise ValueError(f"unknown filter architecture {arch!r}; valid: {', '.join(FILTER_ARCHS)}")
        self.arch = arch
        self.layer = None
        if arch == "linear":
            self.body = nn.Linear(in_width, out_width)
        elif arch == "mlp":
            self.body = nn.Sequential(nn.Linear(in_width, out_width), nn.GELU(), nn.Linear(out_width, out_width))
        else:
            if layer is None:
                raise ValueError("a subsequent_layer filter needs a transformer layer to copy")
            self.layer = layer
            self.body = nn.Linear(in_width, out_width) if in_width != out_width else nn.Identity()
        self.head = nn.Linear(out_width, num_labels)

    def forward(self, hidden: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """The filtered representation (no head), shape (B, L, d_out)."""
        if self.layer is not None:
            hidden = _run_layer(self.layer, hidden, attention_mask)
        return self.body(hidden)


def _pool(filtered: Tensor, attention_mask: Tensor | None, pool: str) -> Tensor:
    if pool == "last" and attention_mask is not None:
        last = attention_mask.sum(dim=1).long().clamp_min(1) - 1
        return filtered[torch.arange(filtered.shape[0], device=filtered.device), last]
    return filtered[:, 0]


def _layer_skeleton(layer_config: dict) -> nn.Module:
    """A randomly initialised transformer layer of the architecture described by ``layer_config``
    (an HF config dict), to load saved ``subsequent_layer`` filter weights into."""
    from transformers import AutoConfig, AutoModelForSequenceClassification

    values = dict(layer_config)
    model_type = values.pop("model_type", None)
    if not model_type:
        raise ValueError("subsequent_layer filters need the model's HF config (layer_config.model_type)")
    config = AutoConfig.for_model(model_type, **values)
    config.num_hidden_layers = 1
    if hasattr(config, "n_layer"):
        config.n_layer = 1
    model = AutoModelForSequenceClassification.from_config(config, attn_implementation="eager")
    return copy.deepcopy(find_layer_stack(model)[2][0])


def _hf_config_dict(model: nn.Module) -> dict:
    return json.loads(model.config.to_json_string(use_diff=False))


def _model_width(model: nn.Module) -> int:
    config = model.config
    for name in ("hidden_size", "d_model", "dim"):
        if hasattr(config, name):
            return int(getattr(config, name))
    raise ValueError(f"cannot read the hidden width of {type(model).__name__}")


class TaskFilters(nn.Module):
    """The K task-aware filters of one model (teacher or student), with their provenance.

    Position ``k`` (0-based) is the filter of the k+1-th student layer; ``layers[k]`` is the
    1-based layer of THIS model it reads (teacher filters: M(k+1); student filters: k+1).

    ``in_width`` is the width of the model's hidden states, ``out_width`` the filtered width
    d_t (the teacher width); ``fingerprint`` is :func:`bert_kd.models.parameters_fingerprint`
    of the model the filters were trained on (for copied student filters: the teacher's,
    with ``copied_from="teacher"``); ``info`` is free-form (metrics, training settings) and
    saved with the filters.
    """

    def __init__(
        self,
        layers: Sequence[int],
        in_width: int,
        out_width: int,
        num_labels: int,
        arch: str = "linear",
        *,
        task: str | None = None,
        fingerprint: str | None = None,
        role: str = "teacher",
        pool: str = "first",
        layer_config: dict | None = None,
        copied_from: str | None = None,
        info: dict | None = None,
        layer_modules: Sequence[nn.Module] | None = None,
    ):
        super().__init__()
        if arch not in FILTER_ARCHS:
            raise ValueError(f"unknown filter architecture {arch!r}; valid: {', '.join(FILTER_ARCHS)}")
        layers = [int(x) for x in layers]
        if not layers:
            raise ValueError("TaskFilters needs at least one layer")
        if any(x < 1 for x in layers):
            raise ValueError(f"filter layers are 1-based transformer layers (0 = embeddings is not filtered), got {layers}")
        if len(set(layers)) != len(layers):
            raise ValueError(f"TED maps each student layer to a distinct teacher layer; filter layers {layers} repeat")
        for name, value in (("in_width", in_width), ("out_width", out_width), ("num_labels", num_labels)):
            if int(value) < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if pool not in ("first", "last"):
            raise ValueError(f"pool must be 'first' or 'last', got {pool!r}")
        if task is not None:
            from bert_kd.data.glue import normalize_task

            task = normalize_task(task)
        self.layers = layers
        self.in_width, self.out_width, self.num_labels = int(in_width), int(out_width), int(num_labels)
        self.arch = arch
        self.task = task
        self.fingerprint = fingerprint
        self.role = role
        self.pool = pool
        self.layer_config = layer_config
        self.copied_from = copied_from
        self.info = dict(info or {})
        if arch == "subsequent_layer":
            if layer_modules is None:
                if layer_config is None:
                    raise ValueError("subsequent_layer filters need layer_modules or layer_config")
                skeleton = _layer_skeleton(layer_config)
                layer_modules = [copy.deepcopy(skeleton) for _ in layers]
            if len(layer_modules) != len(layers):
                raise ValueError(f"{len(layer_modules)} layer modules for {len(layers)} filters")
        self.filters = nn.ModuleList(
            TaskFilter(arch, self.in_width, self.out_width, self.num_labels,
                       layer=layer_modules[k] if layer_modules is not None else None)
            for k in range(len(layers))
        )

    # ------------------------------------------------------------------ construction
    @classmethod
    def build(
        cls,
        model: nn.Module,
        layers: Sequence[int],
        arch: str = "linear",
        *,
        out_width: int | None = None,
        num_labels: int | None = None,
        task: str | None = None,
        role: str = "teacher",
    ) -> "TaskFilters":
        """Randomly initialised filters for ``model`` at ``layers`` (``subsequent_layer``: copies of
        the model's layers l+1, the last layer copying itself). ``out_width`` defaults to the
        model's width (pass the teacher width for student filters); ``num_labels`` to the task's
        (or the model's) label count."""
        depth = num_layers(model)
        width = _model_width(model)
        bad = [x for x in layers if not 1 <= int(x) <= depth]
        if bad:
            raise ValueError(
                f"filter layer(s) {bad} outside the model's transformer layers 1..{depth} "
                f"(the layer mapping references layers the model does not have)"
            )
        if num_labels is None:
            if task is not None:
                from bert_kd.data.glue import get_task

                num_labels = get_task(task).num_labels
            else:
                num_labels = int(model.config.num_labels)
        modules = None
        if arch == "subsequent_layer":
            stack = find_layer_stack(model)[2]
            # layer l (1-based) is stack[l - 1]; its subsequent layer l + 1 is stack[l]
            modules = [copy.deepcopy(stack[int(x) if int(x) < depth else depth - 1]) for x in layers]
            for module in modules:
                for p in module.parameters():
                    p.requires_grad_(True)
        filters = cls(
            layers,
            width,
            out_width or width,
            num_labels,
            arch,
            task=task,
            fingerprint=parameters_fingerprint(model),
            role=role,
            pool=summary_position(model),
            layer_config=_hf_config_dict(model) if arch == "subsequent_layer" else None,
            layer_modules=modules,
        )
        return filters.to(next(model.parameters()).device)

    # ------------------------------------------------------------------ provenance
    @property
    def config(self) -> dict:
        """JSON-serialisable description (saved next to the weights)."""
        return {
            "layers": list(self.layers),
            "in_width": self.in_width,
            "out_width": self.out_width,
            "num_labels": self.num_labels,
            "arch": self.arch,
            "task": self.task,
            "fingerprint": self.fingerprint,
            "role": self.role,
            "pool": self.pool,
            "layer_config": self.layer_config,
            "copied_from": self.copied_from,
        }

    def check_compatible(
        self, task: str | None = None, fingerprint: str | None = None, allow_mismatch: bool = False
    ) -> list[str]:
        """Refuse filters trained for another task or another model (ValueError).

        ``task``/``fingerprint`` of None are not checked. With ``allow_mismatch`` the problems
        are logged as warnings and returned instead. Returns the list of problems (empty = ok).
        """
        problems = []
        if task is not None:
            from bert_kd.data.glue import normalize_task

            wanted = normalize_task(task)
            if self.task is None:
                problems.append(f"the filters carry no task provenance (wanted task {wanted!r})")
            elif self.task != wanted:
                problems.append(f"the filters were trained for task {self.task!r}, not {wanted!r}")
        if fingerprint is not None:
            if self.fingerprint is None:
                problems.append(f"the filters carry no model fingerprint (wanted {fingerprint})")
            elif self.fingerprint != fingerprint:
                problems.append(
                    f"the filters were trained on the model with fingerprint {self.fingerprint}, "
                    f"not on this one ({fingerprint})"
                )
        if problems:
            message = (
                "incompatible TED filters: " + "; ".join(problems)
                + " (filters from another task/teacher silently hurt distillation, TED Table 5; "
                "pass allow_mismatch=True to use them anyway)"
            )
            if not allow_mismatch:
                raise ValueError(message)
            log.warning(message)
        return problems

    def check_model(self, model: nn.Module, what: str = "model") -> None:
        """ValueError unless ``model`` has every filtered layer and the filters' input width."""
        depth, width = num_layers(model), _model_width(model)
        bad = [x for x in self.layers if x > depth]
        if bad:
            raise ValueError(
                f"filter layer(s) {bad} outside the {what}'s transformer layers 1..{depth} "
                f"(filters at layers {self.layers})"
            )
        if width != self.in_width:
            raise ValueError(
                f"the filters read hidden states of width {self.in_width} but the {what}'s layers have width {width}"
            )

    # ------------------------------------------------------------------ forward
    def filtered(self, hidden_states: Sequence[Tensor], attention_mask: Tensor | None = None) -> list[Tensor]:
        """g^k(H^{layers[k]}) for every k: a list of (B, L, out_width) tensors.

        ``hidden_states`` is the HF tuple (index 0 = embeddings, l = layer l)."""
        if len(hidden_states) - 1 < max(self.layers):
            raise ValueError(
                f"filters read layers {self.layers} but the model produced only {len(hidden_states) - 1} layers"
            )
        result = []
        for k, layer in enumerate(self.layers):
            hidden = hidden_states[layer]
            if hidden.shape[-1] != self.in_width:
                raise ValueError(
                    f"filter {k} (layer {layer}) expects width {self.in_width}, got hidden states of shape {tuple(hidden.shape)}"
                )
            result.append(self.filters[k](hidden, attention_mask))
        return result

    def head_logits(self, filtered: Sequence[Tensor], attention_mask: Tensor | None = None) -> list[Tensor]:
        """Task-head predictions (B, num_labels) of the pooled filtered sequences."""
        return [self.filters[k].head(_pool(f, attention_mask, self.pool)) for k, f in enumerate(filtered)]

    def forward(self, hidden_states: Sequence[Tensor], attention_mask: Tensor | None = None) -> list[Tensor]:
        """Head logits of every filter (Stage I predictions)."""
        return self.head_logits(self.filtered(hidden_states, attention_mask), attention_mask)

    def heads(self) -> list[nn.Module]:
        return [f.head for f in self.filters]

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> Path:
        """Write ``ted_filters.json`` + ``filters.safetensors`` atomically (temp dir, then rename)."""
        from safetensors.torch import save_file

        path = Path(path)
        tmp = path.with_name(path.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        state = {k: v.detach().cpu().contiguous().clone() for k, v in self.state_dict().items()}
        save_file(state, str(tmp / WEIGHTS_FILE))
        payload = {"format": FORMAT_VERSION, **self.config, "info": self.info}
        (tmp / CONFIG_FILE).write_text(json.dumps(payload, indent=2, default=str))
        shutil.rmtree(path, ignore_errors=True)
        tmp.rename(path)
        return path

    @classmethod
    def load(cls, path: str | Path, map_location: str | torch.device = "cpu") -> "TaskFilters":
        """Read a directory written by :meth:`save` (provenance in ``.task``/``.fingerprint``)."""
        from safetensors.torch import load_file

        path = Path(path)
        if not (path / CONFIG_FILE).exists() or not (path / WEIGHTS_FILE).exists():
            raise FileNotFoundError(f"{path} is not a saved TED filters directory (needs {CONFIG_FILE} and {WEIGHTS_FILE})")
        payload = json.loads((path / CONFIG_FILE).read_text())
        version = payload.pop("format", None)
        if version != FORMAT_VERSION:
            raise ValueError(f"{path}: unsupported TED filters format {version!r} (expected {FORMAT_VERSION})")
        info = payload.pop("info", {})
        layers = payload.pop("layers")
        in_width, out_width, num_labels = payload.pop("in_width"), payload.pop("out_width"), payload.pop("num_labels")
        arch = payload.pop("arch")
        filters = cls(layers, in_width, out_width, num_labels, arch, info=info, **payload)
        filters.load_state_dict(load_file(str(path / WEIGHTS_FILE)), strict=True)
        return filters.to(map_location)

    def extra_repr(self) -> str:
        return (
            f"arch={self.arch}, layers={self.layers}, {self.in_width}->{self.out_width}, "
            f"num_labels={self.num_labels}, task={self.task}, role={self.role}"
        )


def copy_filters_for_student(
    teacher_filters: TaskFilters,
    mapping: Union[str, Sequence[Sequence[int]], Sequence[int], None] = None,
    student: nn.Module | None = None,
    n_teacher: int | None = None,
) -> TaskFilters:
    """Student filters copied from the teacher filters at the mapped layers (App. A.4 Case 2.2).

    Student layer k gets a deep copy of the teacher filter reading teacher layer M(k). ``mapping``
    defaults to the layers the teacher filters were trained at (position k ↔ student layer k);
    a strategy name needs ``student`` (for its depth) and ``n_teacher``. With ``student`` the
    widths and depth are checked (copying needs student width == teacher width). The copies
    are trainable and keep the teacher's fingerprint (``copied_from="teacher"``).
    """
    if mapping is None:
        teacher_layers = list(teacher_filters.layers)
    else:
        if isinstance(mapping, str):
            if student is None or n_teacher is None:
                raise ValueError("a mapping strategy name needs student= and n_teacher=")
            teacher_layers = ted_layer_map(mapping, n_teacher, num_layers(student))
        else:
            flat = [e[0] if isinstance(e, (list, tuple)) and len(e) == 1 else e for e in mapping]
            if any(isinstance(e, (list, tuple)) for e in flat):
                raise ValueError(f"TED maps each student layer to exactly one teacher layer, got mapping {mapping!r}")
            teacher_layers = [int(e) for e in flat]
    position = {layer: k for k, layer in enumerate(teacher_filters.layers)}
    missing = [layer for layer in teacher_layers if layer not in position]
    if missing:
        raise ValueError(
            f"the mapping needs teacher filters at layer(s) {missing} but the teacher filters are at {teacher_filters.layers}"
        )
    if student is not None:
        n_student = num_layers(student)
        if n_student != len(teacher_layers):
            raise ValueError(f"the mapping has {len(teacher_layers)} entries but the student has {n_student} layers")
        width = _model_width(student)
        if width != teacher_filters.in_width:
            raise ValueError(
                f"cannot copy teacher filters to the student: student width {width} != teacher width "
                f"{teacher_filters.in_width} (train student filters in Stage I instead)"
            )
    modules = [copy.deepcopy(teacher_filters.filters[position[layer]]) for layer in teacher_layers]
    result = TaskFilters(
        list(range(1, len(teacher_layers) + 1)),
        teacher_filters.in_width,
        teacher_filters.out_width,
        teacher_filters.num_labels,
        "linear",  # placeholder; replaced below so no skeleton layers are built
        task=teacher_filters.task,
        fingerprint=teacher_filters.fingerprint,
        role="student",
        pool=teacher_filters.pool,
        copied_from="teacher",
        info={"copied_from_teacher_layers": teacher_layers},
    )
    result.arch = teacher_filters.arch
    result.layer_config = teacher_filters.layer_config
    result.filters = nn.ModuleList(modules)
    for p in result.parameters():
        p.requires_grad_(True)
    device = next(teacher_filters.parameters()).device
    return result.to(device).train()


# --------------------------------------------------------------------------- Stage I objective


class FilterTrainingObjective(Objective):
    """Stage I (Eq. 5): train the filters of a FROZEN model on Σ_k task-loss(head_k).

    ``self.model`` is the filters (what is trained, selected and restored by :func:`fit`); the
    encoder is registered with :meth:`Objective.add_frozen` — which sets its parameters'
    ``requires_grad`` to False (restore them afterwards if the model trains later; :func:`train_filters`
    does). ``predict`` returns the logits of filter ``predict_position`` (0-based), or, by
    default (None), all heads concatenated along the last axis (split them with
    :func:`filters_evaluate_fn`).
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


def filters_evaluate_fn(filters: TaskFilters, task: str):
    """An ``evaluate_fn`` for :func:`fit` on concatenated per-filter logits: reports
    ``L<layer>/<metric>`` for each filter and each metric's mean over the filters under its
    plain name (so ``select_metric: accuracy`` selects on the mean per-layer accuracy)."""
    from bert_kd.metrics import glue_metrics

    layers, width = list(filters.layers), filters.num_labels

    def evaluate(predictions: np.ndarray, labels: np.ndarray) -> dict:
        predictions = np.asarray(predictions)
        if predictions.shape[-1] != width * len(layers):
            raise ValueError(f"expected {width * len(layers)} prediction columns, got {predictions.shape}")
        result, per_metric = {}, {}
        for k, layer in enumerate(layers):
            metrics = glue_metrics(task, predictions[:, k * width:(k + 1) * width], labels)
            for name, value in metrics.items():
                result[f"L{layer}/{name}"] = value
                per_metric.setdefault(name, []).append(value)
        result.update({name: float(np.mean(values)) for name, values in per_metric.items()})
        return result

    return evaluate


@torch.no_grad()
def evaluate_filters(
    model: nn.Module,
    filters: TaskFilters,
    dataset,
    collator: Collator | None,
    task: str,
    batch_size: int = 64,
    prefix: str = "",
) -> dict[int, dict[str, float]]:
    """Per-layer dev metrics of the filter heads: ``{layer: glue_metrics(...)}`` — how
    task-predictive each filtered layer is. Models are evaluated in eval mode; their modes
    are restored afterwards."""
    from bert_kd.metrics import glue_metrics

    filters.check_model(model)
    device = next(model.parameters()).device
    filters.to(device)
    modes = (model.training, filters.training)
    model.eval()
    filters.eval()
    try:
        loader = make_loader(dataset, batch_size, collator or Collator(), shuffle=False)
        preds: list[list[Tensor]] = [[] for _ in filters.layers]
        labels = []
        for batch in loader:
            batch = {k: v.to(device) for k, v in batch.items()}
            features = forward_features(model, batch, hidden_states=True, prefix=prefix)
            for k, logits in enumerate(filters(features.hidden_states, features.attention_mask)):
                preds[k].append(logits.float().cpu())
            labels.append(batch["labels"].cpu())
    finally:
        model.train(modes[0])
        filters.train(modes[1])
    y = torch.cat(labels).numpy()
    return {layer: glue_metrics(task, torch.cat(preds[k]).numpy(), y) for k, layer in enumerate(filters.layers)}


def train_filters(
    model: nn.Module,
    dataset_train,
    dataset_eval,
    layers: Union[Sequence[int], str],
    arch: str = "linear",
    task: str | None = None,
    config: TrainingConfig | None = None,
    collator: Collator | None = None,
    log_fn: LogFn | None = None,
    *,
    out_width: int | None = None,
    num_labels: int | None = None,
    role: str = "teacher",
    n_student: int | None = None,
    prefix: str = "",
    description: str = "ted-stage1",
) -> tuple[TaskFilters, dict[int, dict[str, float]]]:
    """TED Stage I: build filters on ``model`` at ``layers`` and train them (model frozen) with
    :func:`bert_kd.training.fit`. Returns the trained filters and their per-layer dev metrics
    (``{}`` without ``dataset_eval``); the metrics and the run's best epoch go to ``filters.info``.

    ``layers`` is a list of 1-based model layers (teacher: ``ted_layer_map(...)``; student:
    ``[1..K]``) or a :func:`ted_layer_map` strategy name (needs ``n_student``). For student filters
    pass ``out_width`` = teacher width and ``role="student"``. The model's parameters are bit-identical
    afterwards and their ``requires_grad`` flags and train/eval mode are restored.
    """
    if task is None:
        raise ValueError("train_filters needs the task (filter heads are task heads; provenance)")
    config = config or TrainingConfig()
    if isinstance(layers, str):
        if n_student is None:
            raise ValueError(f"layer strategy {layers!r} needs n_student")
        layers = ted_layer_map(layers, num_layers(model), n_student)
    seed_everything(config.seed)
    filters = TaskFilters.build(model, layers, arch, out_width=out_width, num_labels=num_labels, task=task, role=role)
    flags = [p.requires_grad for p in model.parameters()]
    was_training = model.training
    try:
        objective = FilterTrainingObjective(model, filters, prefix=prefix)
        evaluate_fn = filters_evaluate_fn(filters, task) if dataset_eval is not None else None
        result: FitResult = fit(
            objective,
            dataset_train,
            dataset_eval,
            config,
            collator=collator,
            evaluate_fn=evaluate_fn,
            log_fn=log_fn,
            description=description,
        )
    finally:
        for p, flag in zip(model.parameters(), flags):
            p.requires_grad_(flag)
        model.train(was_training)
    metrics = (
        evaluate_filters(model, filters, dataset_eval, collator, task, config.eval_batch_size, prefix)
        if dataset_eval is not None
        else {}
    )
    filters.info.update(
        {
            "per_layer_metrics": {str(k): v for k, v in metrics.items()},
            "best_epoch": result.best_epoch,
            "global_step": result.global_step,
        }
    )
    return filters, metrics


__all__ = [
    "FILTER_ARCHS",
    "FilterTrainingObjective",
    "TaskFilter",
    "TaskFilters",
    "copy_filters_for_student",
    "evaluate_filters",
    "filters_evaluate_fn",
    "ted_layer_map",
    "train_filters",
]
