"""The generic distillation objective: a student, K frozen teachers and one loss recipe.

L = Σ_name weight_name · term_name, where the terms come from a [`Method`][methods.base.Method]
(ALP-KD's L = β·L_ce + η·L_KD + λ·L_ALP is the recipe {ce: β, kd: η, alp: λ}). Teachers run live
or are served from a [`TeacherCache`][] when the recipe only reads logits and [CLS] states.
"""

from __future__ import annotations

import math
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from bert_kd.core.distill.outputs import Features, forward_features
from bert_kd.core.models import attention_implementation
from bert_kd.core.training import Collator, Objective, make_loader, module_device, sequence_lengths


@dataclass
class TeacherCache:
    """Teacher logits and per-layer [CLS] states of one split, looked up by example ``idx``.

    ``cls`` has shape (examples, layers + 1, hidden); ``row_of_idx[idx]`` is the row of an example.
    """

    logits: Tensor
    cls: Tensor
    row_of_idx: Tensor
    key: str = ""
    directory: Path | None = None  # where its arrays are memory-mapped from; None: held in memory

    def lookup(self, idx: Tensor) -> Features:
        idx_cpu = idx.cpu()
        inside = (idx_cpu >= 0) & (idx_cpu < len(self.row_of_idx))  # idx past the table: missing, not IndexError
        rows = torch.full_like(idx_cpu, -1)
        rows[inside] = self.row_of_idx[idx_cpu[inside]]
        if (rows < 0).any():
            missing = idx.cpu()[rows < 0][:5].tolist()
            raise KeyError(f"teacher cache {self.key!r} has no entry for example idx {missing}")
        logits = self.logits[rows].to(idx.device)
        cls = self.cls[rows].to(idx.device)
        return Features(logits=logits, attention_mask=torch.ones(len(rows), 1, device=idx.device), extras={"cls": cls})


@torch.no_grad()
def build_teacher_cache(
    teacher: nn.Module,
    dataset,
    batch_size: int = 64,
    key: str = "",
    collator=None,
    progress: bool = True,
    autocast_dtype: torch.dtype | None = None,
    directory: str | Path | None = None,
) -> TeacherCache:
    """Run the teacher once (eval mode) over ``dataset`` and keep its logits and [CLS] states
    (stored in fp32; ``autocast_dtype=torch.bfloat16`` computes them under bf16 autocast).

    The rows go longest first, so each batch pads to about its own length (6,000 SST-2 rows: 1.03
    padded tokens per real one, against 3.24 in dataset order; the cache is kept per ``idx``, so the order is free). The
    values are those of dataset-order batches to float rounding (padding keys are masked out).

    ``directory``: each batch is written as it comes into ``.npy`` files there, mapped once complete
    ([`save_teacher_cache`][] moves them into a store entry, [`load_teacher_cache`][] maps them back), so the cache
    of a transfer set of a million rows (about 10 kB a row for MiniLM-L6's [CLS] states) is never held in memory;
    None keeps the arrays in memory."""
    was_training = teacher.training
    teacher.eval()
    lengths = sequence_lengths(dataset, "input_ids")
    loader = make_loader(
        dataset, batch_size, collator or Collator(), shuffle=False, group_by_length=True, lengths=lengths
    )
    device = module_device(teacher)
    arrays = _CacheArrays(len(dataset), directory)
    for batch in tqdm(loader, desc="teacher cache", disable=not progress, leave=False):
        batch = {k: v.to(device) for k, v in batch.items()}
        with torch.autocast(device.type, dtype=autocast_dtype or torch.float32, enabled=autocast_dtype is not None):
            features = forward_features(teacher, batch, hidden_states=True)
        arrays.append(batch["idx"], logits=features.logits, cls=features.cls())
    teacher.train(was_training)
    return arrays.cache(key)


class _CacheArrays:
    """The cache's arrays filled batch by batch: allocated at the first batch (its shapes), in memory or as
    ``.npy`` files in ``directory`` written at each batch's rows (plain writes: the rows go to the page cache,
    not into this process's memory) and memory-mapped once complete."""

    def __init__(self, rows: int, directory: str | Path | None):
        self.rows, self.filled, self.idx = rows, 0, []
        self.directory = None if directory is None else Path(directory)
        self.arrays: dict[str, np.ndarray] = {}  # in memory
        self.files: dict[str, tuple[object, int, int]] = {}  # on disk: (open file, data offset, bytes a row)

    def _allocate(self, name: str, shape: tuple[int, ...]) -> None:
        if self.directory is None:
            self.arrays[name] = np.empty(shape, dtype=np.float32)
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{name}.npy"
        header = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=shape)  # header, sized file
        offset, row_bytes = header.offset, header[:1].nbytes
        del header
        self.files[name] = (open(path, "r+b"), offset, row_bytes)  # noqa: SIM115 (closed in cache())

    def append(self, idx: Tensor, **values: Tensor) -> None:
        end = self.filled + len(idx)
        for name, value in values.items():
            value = np.ascontiguousarray(value.detach().float().cpu().numpy())
            if name not in self.arrays and name not in self.files:
                self._allocate(name, (self.rows, *value.shape[1:]))
            if name in self.arrays:
                self.arrays[name][self.filled : end] = value
            else:
                handle, offset, row_bytes = self.files[name]
                handle.seek(offset + self.filled * row_bytes)
                handle.write(value.tobytes())
        self.idx.append(idx.cpu())
        self.filled = end

    def cache(self, key: str) -> TeacherCache:
        for handle, _, _ in self.files.values():
            handle.close()
        if self.filled != self.rows:
            raise RuntimeError(f"teacher cache {key!r}: {self.filled} rows computed, the split has {self.rows}")
        all_idx = torch.cat(self.idx)
        row_of_idx = torch.full((int(all_idx.max()) + 1,), -1, dtype=torch.long)
        row_of_idx[all_idx] = torch.arange(len(all_idx))
        if self.directory is None:
            tensors = {name: torch.from_numpy(array) for name, array in self.arrays.items()}
            return TeacherCache(tensors["logits"], tensors["cls"], row_of_idx, key)
        np.save(self.directory / "row_of_idx.npy", row_of_idx.numpy())
        return load_teacher_cache(self.directory, key)


#: The files of a stored teacher cache ([`save_teacher_cache`][], [`load_teacher_cache`][]).
CACHE_ARRAYS = ("logits", "cls", "row_of_idx")


def save_teacher_cache(cache: TeacherCache, directory: str | Path) -> None:
    """Write ``cache`` as ``.npy`` files into ``directory``: moved there when it was built into files (no copy of a
    large cache; ``cache.directory`` then names where its maps' files now are), written from memory otherwise."""
    directory = Path(directory)
    moved = 0
    for name in CACHE_ARRAYS:
        target = directory / f"{name}.npy"
        if cache.directory is not None and (cache.directory / target.name).is_file():
            shutil.move(cache.directory / target.name, target)  # a rename (a copy across file systems); maps stay valid
            moved += 1
        else:
            np.save(target, getattr(cache, name).numpy())
    if moved == len(CACHE_ARRAYS):
        cache.directory = directory


def load_teacher_cache(directory: str | Path, key: str = "") -> TeacherCache:
    """A cache written by [`save_teacher_cache`][], memory-mapped (copy-on-write): rows are read as looked up."""
    directory = Path(directory)
    arrays = {name: torch.from_numpy(np.load(directory / f"{name}.npy", mmap_mode="c")) for name in CACHE_ARRAYS}
    return TeacherCache(arrays["logits"], arrays["cls"], arrays["row_of_idx"], key, directory)


@dataclass
class Teacher:
    """A frozen teacher, the batch columns of its own tokenization, and an optional cache."""

    model: nn.Module
    prefix: str = ""
    cache: TeacherCache | None = None
    name: str = "teacher"


class DistillationObjective(Objective):
    """Train ``student`` (and the method's auxiliary modules) against frozen ``teachers``."""

    def __init__(self, student: nn.Module, teachers: list[Teacher], method, weights: dict[str, float]):
        super().__init__(student)
        if not teachers:
            raise ValueError("distillation needs at least one teacher")
        self.teacher_specs = teachers
        for k, teacher in enumerate(teachers):
            self.add_frozen(f"teacher_{k}", teacher.model)
        self.method = method
        method.bind_teachers(teachers)
        self.weights = validate_weights(weights, method.term_names)
        self.stage: int | None = None  # 0-based stage of a staged recipe, set by set_epoch

    def set_epoch(self, epoch: int, n_epochs: int) -> dict[str, float]:
        """Told by the training loop at the start of every epoch (0-based, also after a resume):
        a staged recipe (``stages``) switches to the weights of the stage ``epoch`` falls in.
        Returns metrics to log (``{"stage": 1-based stage}``), ``{}`` for an unstaged recipe."""
        schedule = getattr(self.method, "schedule", None)
        if schedule is None:
            return {}
        self.stage = schedule.stage_at(epoch, n_epochs)
        self.weights = dict(schedule.stages[self.stage].weights)
        self.method.weights = dict(self.weights)  # Method.wants() follows the active stage
        return {"stage": float(self.stage + 1)}

    @property
    def selectable(self) -> bool:
        """Whether the epoch just trained may be kept as the best: every epoch of an unstaged recipe, only the last
        stage's of a staged one (TinyBERT's student is the one after its prediction-layer stage, never an
        intermediate-layer epoch whose classifier that stage has not trained)."""
        schedule = getattr(self.method, "schedule", None)
        return schedule is None or self.stage is None or self.stage == len(schedule.stages) - 1

    def epoch_report(self) -> dict[str, float]:
        """The method's observations over the epoch just trained (RL-KD: each teacher's selection share)."""
        return self.method.epoch_report()

    @property
    def teachers(self) -> list[nn.Module]:
        return [getattr(self, f"teacher_{k}") for k in range(len(self.teacher_specs))]

    def uses_cache(self, k: int) -> bool:
        """Teacher k is served from its cache: the method reads only logits and [CLS] states."""
        needs = self.method.teacher_needs
        return self.teacher_specs[k].cache is not None and not needs.get("hidden") and not needs.get("attention")

    def teacher_features(self, k: int, batch: dict[str, Tensor], allow_cache: bool = True) -> Features:
        """Teacher k's features for ``batch``: from the cache (which covers the training split
        only) when the method and ``allow_cache`` allow, else live."""
        spec = self.teacher_specs[k]
        needs = self.method.teacher_needs
        if allow_cache and self.uses_cache(k):
            return spec.cache.lookup(batch["idx"])
        attention = bool(needs.get("attention"))
        # no_grad, not inference_mode: the losses save teacher tensors for backward, which inference
        # tensors refuse, and the copy that would need costs what inference_mode saves (measured on the main job)
        with (
            torch.no_grad(),
            self.frozen_autocast(),
            attention_implementation(self.teachers[k], self.method.teacher_attention),
        ):
            features = forward_features(
                self.teachers[k],
                batch,
                hidden_states=bool(needs.get("hidden") or needs.get("cls")),
                attention_scores=attention,
                prefix=spec.prefix,
            )
        return features if self.frozen_precision == "same" else as_float32(features)

    def student_features(self, batch: dict[str, Tensor]) -> Features:
        """The student's forward pass with what the method reads."""
        needs = self.method.student_needs
        with attention_implementation(self.model, self.method.student_attention):
            return forward_features(
                self.model,
                batch,
                hidden_states=bool(needs.get("hidden") or needs.get("cls")),
                attention_scores=bool(needs.get("attention")),
            )

    def training_step(self, batch):
        student = self.student_features(batch)
        chosen = self.method.choose_teachers(len(self.teacher_specs), self.training)
        teachers = {k: self.teacher_features(k, batch) for k in chosen}
        terms = self.method.terms(student, teachers, batch)
        total = sum(self.weights[name] * value for name, value in terms.items() if self.weights.get(name, 0.0) != 0.0)
        if not torch.is_tensor(total):
            raise ValueError(f"all loss weights are zero for method {self.method.name!r}")
        result = {"loss": total}
        result.update({name: value.detach() for name, value in terms.items()})
        return result


def as_float32(features: Features) -> Features:
    """``features`` with every floating tensor in fp32 (teacher outputs computed in bf16/fp16)."""
    import dataclasses

    def cast(value):
        if torch.is_tensor(value) and value.is_floating_point():
            return value.float()
        if isinstance(value, (list, tuple)):
            return type(value)(cast(v) for v in value)
        if isinstance(value, dict):
            return {k: cast(v) for k, v in value.items()}
        return value

    return dataclasses.replace(
        features, **{f.name: cast(getattr(features, f.name)) for f in dataclasses.fields(features)}
    )


def validate_weights(weights: dict[str, float], term_names: tuple[str, ...]) -> dict[str, float]:
    """Loss weights: known term names only, non-negative, not all zero."""
    weights = {str(k): float(v) for k, v in (weights or {}).items()}
    unknown = sorted(set(weights) - set(term_names))
    if unknown:
        raise ValueError(f"unknown loss term(s) {unknown} in weights; this method has {list(term_names)}")
    negative = {k: v for k, v in weights.items() if v < 0}
    if negative:
        raise ValueError(f"loss weights must be >= 0, got {negative}")
    if not any(v > 0 for v in weights.values()):
        raise ValueError(f"at least one loss weight must be > 0 (terms: {list(term_names)})")
    return weights


@dataclass(frozen=True)
class Stage:
    """One stage of a staged recipe: its full weights (absent terms 0) and its length, either
    ``epochs`` (a count) or ``fraction`` (of the run's epochs); the last stage has neither."""

    weights: dict[str, float]
    epochs: int | None = None
    fraction: float | None = None


@dataclass(frozen=True)
class WeightSchedule:
    """Per-epoch loss weights: ``stages`` run one after another, the last one to the end of training.

    Stage lengths: ``epochs: n`` is n epochs; ``fraction: f`` is ``floor(f · E + 0.5)`` epochs of
    a run of E epochs (the nearest whole epoch, halves up). The stage of an epoch depends only on
    (epoch, E), so a resumed run is back in the right stage. E.g. TinyBERT's task-specific
    distillation (Jiao et al., 2020, Sec. 3.2): ``[{fraction: 0.6, weights: {emb: 1, hidden: 1,
    attn: 1}}, {weights: {pred: 1}}]`` is 3 + 2 epochs of a 5-epoch run.
    """

    stages: tuple[Stage, ...]

    @classmethod
    def parse(cls, stages, term_names: Sequence[str], key: str = "stages") -> WeightSchedule:
        """Validate a recipe's ``stages`` list; ValueError naming ``key[i].<field>`` otherwise."""
        if not isinstance(stages, (list, tuple)) or not stages:
            raise ValueError(f"{key} must be a non-empty list of stages ({{epochs|fraction, weights}}), got {stages!r}")
        parsed = []
        for i, stage in enumerate(stages):
            where = f"{key}[{i}]"
            if not isinstance(stage, Mapping):
                raise ValueError(f"{where} must be a mapping {{epochs|fraction, weights}}, got {stage!r}")
            unknown = sorted(set(stage) - {"epochs", "fraction", "weights"})
            if unknown:
                raise ValueError(f"{where}: unknown key(s) {unknown}; a stage has epochs or fraction, and weights")
            last = i == len(stages) - 1
            epochs, fraction = stage.get("epochs"), stage.get("fraction")
            if last and (epochs is not None or fraction is not None):
                raise ValueError(
                    f"{where} is the last stage and runs to the end of training: drop its "
                    f"{'epochs' if epochs is not None else 'fraction'}"
                )
            if not last and (epochs is None) == (fraction is None):
                raise ValueError(f"{where} needs exactly one of epochs (a count) or fraction (of the run's epochs)")
            if epochs is not None:
                if (
                    isinstance(epochs, bool)
                    or not isinstance(epochs, (int, float))
                    or epochs < 1
                    or not float(epochs).is_integer()
                ):
                    raise ValueError(f"{where}.epochs must be a whole number >= 1, got {epochs!r}")
                epochs = int(epochs)
            if fraction is not None and (
                isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction < 1
            ):
                raise ValueError(f"{where}.fraction must be a number in (0, 1), got {fraction!r}")
            given = stage.get("weights")
            if not isinstance(given, Mapping) or not given:
                raise ValueError(f"{where}.weights must be a mapping term → weight (absent terms are 0), got {given!r}")
            try:
                weights = validate_weights(dict(given), tuple(term_names))
            except ValueError as exc:
                raise ValueError(f"{where}.weights: {exc}") from None
            full = {term: round(weights.get(term, 0.0), 10) for term in term_names}
            parsed.append(Stage(full, epochs, float(fraction) if fraction is not None else None))
        fractions = sum(s.fraction or 0.0 for s in parsed)
        if fractions >= 1:
            raise ValueError(f"{key}: the fractions sum to {fractions:g} >= 1, leaving nothing for the last stage")
        return cls(tuple(parsed))

    def stage_lengths(self, n_epochs: int) -> list[int]:
        """Epochs of every stage in a run of ``n_epochs``; ValueError naming ``stages`` when a stage
        would get no epoch."""
        lengths = [
            s.epochs if s.epochs is not None else math.floor(s.fraction * n_epochs + 0.5) for s in self.stages[:-1]
        ]
        lengths.append(n_epochs - sum(lengths))
        empty = [i for i, n in enumerate(lengths) if n < 1]
        if empty:
            raise ValueError(
                f"stages: with {n_epochs} training epoch(s) the stages get {lengths} epochs, so "
                f"{', '.join(f'stages[{i}]' for i in empty)} would never run; give more training epochs or shorter stages"
            )
        return lengths

    def stage_at(self, epoch: int, n_epochs: int) -> int:
        """The 0-based stage of 0-based ``epoch`` in a run of ``n_epochs``."""
        end = 0
        for i, length in enumerate(self.stage_lengths(n_epochs)):
            end += length
            if epoch < end:
                return i
        return len(self.stages) - 1

    def weights_at(self, epoch: int, n_epochs: int) -> dict[str, float]:
        return dict(self.stages[self.stage_at(epoch, n_epochs)].weights)


@torch.no_grad()
def collect_diagnostics(objective: DistillationObjective, loader) -> dict:
    """Let the method observe student and teacher features over ``loader`` (e.g. ALP's α map)."""
    if not objective.method.observes:
        return {}
    was_training = objective.training
    objective.eval()
    device = module_device(objective.model)
    for batch in loader:
        batch = {k: v.to(device) for k, v in batch.items()}
        student = objective.student_features(batch)
        # live teachers: the cache holds training examples only, and dev ids overlap train ids
        teachers = {
            k: objective.teacher_features(k, batch, allow_cache=False) for k in range(len(objective.teacher_specs))
        }
        objective.method.observe(student, teachers, batch)
    objective.train(was_training)
    return objective.method.diagnostics()
