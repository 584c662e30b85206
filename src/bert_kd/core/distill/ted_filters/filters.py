"""TED task-aware filters g^k and their task heads (Liang et al., 2023, Eq. 4, Remark 3.1).

A *filter* reads the token-level hidden states H^{l} (B, L, d) of one model layer l and maps them
to a filtered representation (B, L, d_t); its *task head* turns the pooled filtered sequence into
a prediction. Architectures ([`FILTER_ARCHS`][], Remark 3.1 / Table 8): ``linear`` (d → d_t),
``mlp`` (Linear → GeLU → Linear) and ``subsequent_layer`` (a copy of the model's next transformer
layer, then a linear map when d != d_t).
"""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path
from typing import Sequence

import torch
from torch import Tensor, nn
from transformers import AutoConfig, AutoModelForSequenceClassification

from bert_kd.core.data.glue import get_task, normalize_task
from bert_kd.core.distill.outputs import summary_position, summary_token_index
from bert_kd.core.distill.ted_filters.persistence import read_filters_dir, write_filters_dir
from bert_kd.core.models import find_layer_stack, num_layers, parameters_fingerprint

log = logging.getLogger(__name__)

#: Filter architectures of TED Remark 3.1 / Table 8.
FILTER_ARCHS: tuple[str, ...] = ("linear", "mlp", "subsequent_layer")


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
    """The summary token's filtered state (B, d): the first or last real token of each row
    ([`summary_token_index`][], either padding side)."""
    if attention_mask is None:
        return filtered[:, 0] if pool == "first" else filtered[:, -1]
    position = summary_token_index(attention_mask, pool)
    return filtered[torch.arange(filtered.shape[0], device=filtered.device), position]


def _layer_skeleton(layer_config: dict) -> nn.Module:
    """A randomly initialised transformer layer of the architecture described by ``layer_config``
    (an HF config dict), to load saved ``subsequent_layer`` filter weights into."""
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


def model_width(model: nn.Module) -> int:
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
    d_t (the teacher width); ``fingerprint`` is [`bert_kd.core.models.parameters_fingerprint`][]
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
            raise ValueError(
                f"filter layers are 1-based transformer layers (0 = embeddings is not filtered), got {layers}"
            )
        if len(set(layers)) != len(layers):
            raise ValueError(f"TED maps each student layer to a distinct teacher layer; filter layers {layers} repeat")
        for name, value in (("in_width", in_width), ("out_width", out_width), ("num_labels", num_labels)):
            if int(value) < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if pool not in ("first", "last"):
            raise ValueError(f"pool must be 'first' or 'last', got {pool!r}")
        if task is not None:
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
            TaskFilter(
                arch,
                self.in_width,
                self.out_width,
                self.num_labels,
                layer=layer_modules[k] if layer_modules is not None else None,
            )
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
    ) -> TaskFilters:
        """Randomly initialised filters for ``model`` at ``layers`` (``subsequent_layer``: copies of
        the model's layers l+1, the last layer copying itself). ``out_width`` defaults to the
        model's width (pass the teacher width for student filters); ``num_labels`` to the task's
        (or the model's) label count."""
        depth = num_layers(model)
        width = model_width(model)
        bad = [x for x in layers if not 1 <= int(x) <= depth]
        if bad:
            raise ValueError(
                f"filter layer(s) {bad} outside the model's transformer layers 1..{depth} "
                f"(the layer mapping references layers the model does not have)"
            )
        if num_labels is None:
            if task is not None:
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
                "incompatible TED filters: "
                + "; ".join(problems)
                + " (filters from another task/teacher silently hurt distillation, TED Table 5; "
                "pass allow_mismatch=True to use them anyway)"
            )
            if not allow_mismatch:
                raise ValueError(message)
            log.warning(message)
        return problems

    def check_model(self, model: nn.Module, what: str = "model") -> None:
        """ValueError unless ``model`` has every filtered layer and the filters' input width."""
        depth, width = num_layers(model), model_width(model)
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
        """Write the filters as a directory ([`write_filters_dir`][])."""
        state = {k: v.detach().cpu().contiguous().clone() for k, v in self.state_dict().items()}
        return write_filters_dir(path, {**self.config, "info": self.info}, state)

    @classmethod
    def load(cls, path: str | Path, map_location: str | torch.device = "cpu") -> TaskFilters:
        """Read a directory written by [`save`][] (provenance in ``.task``/``.fingerprint``)."""
        payload, state = read_filters_dir(path)
        info = payload.pop("info", {})
        layers = payload.pop("layers")
        in_width, out_width, num_labels = payload.pop("in_width"), payload.pop("out_width"), payload.pop("num_labels")
        arch = payload.pop("arch")
        filters = cls(layers, in_width, out_width, num_labels, arch, info=info, **payload)
        filters.load_state_dict(state, strict=True)
        return filters.to(map_location)

    def extra_repr(self) -> str:
        return (
            f"arch={self.arch}, layers={self.layers}, {self.in_width}->{self.out_width}, "
            f"num_labels={self.num_labels}, task={self.task}, role={self.role}"
        )
