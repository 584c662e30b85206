"""The generic distillation objective: a student, K frozen teachers and one loss recipe.

L = Σ_name weight_name · term_name, where the terms come from a :class:`~bert_kd.distill.methods.Method`
(ALP-KD's L = β·L_ce + η·L_KD + λ·L_ALP is the recipe {ce: β, kd: η, alp: λ}). Teachers run live
or are served from a :class:`TeacherCache` when the recipe only reads logits and [CLS] states.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from bert_kd.distill.outputs import Features, forward_features
from bert_kd.training import Collator, Objective, make_loader


@dataclass
class TeacherCache:
    """Teacher logits and per-layer [CLS] states of one split, looked up by example ``idx``.

    ``cls`` has shape (examples, layers + 1, hidden); ``row_of_idx[idx]`` is the row of an example.
    """

    logits: Tensor
    cls: Tensor
    row_of_idx: Tensor
    key: str = ""

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
def build_teacher_cache(teacher: nn.Module, dataset, batch_size: int = 64, prefix: str = "", key: str = "",
                        collator=None, progress: bool = True, autocast_dtype: torch.dtype | None = None) -> TeacherCache:
    """Run the teacher once (eval mode) over ``dataset`` and keep its logits and [CLS] states
    (stored in fp32; ``autocast_dtype=torch.bfloat16`` computes them under bf16 autocast)."""
    was_training = teacher.training
    teacher.eval()
    loader = make_loader(dataset, batch_size, collator or Collator(), shuffle=False)
    device = next(teacher.parameters()).device
    logits, cls, idx = [], [], []
    for batch in tqdm(loader, desc="teacher cache", disable=not progress, leave=False):
        batch = {k: v.to(device) for k, v in batch.items()}
        with torch.autocast(device.type, dtype=autocast_dtype or torch.float32, enabled=autocast_dtype is not None):
            features = forward_features(teacher, batch, hidden_states=True, prefix=prefix)
        logits.append(features.logits.float().cpu())
        cls.append(features.cls().float().cpu())
        idx.append(batch["idx"].cpu())
    teacher.train(was_training)
    all_idx = torch.cat(idx)
    row_of_idx = torch.full((int(all_idx.max()) + 1,), -1, dtype=torch.long)
    row_of_idx[all_idx] = torch.arange(len(all_idx))
    return TeacherCache(torch.cat(logits), torch.cat(cls), row_of_idx, key)


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
        with torch.no_grad(), self.frozen_autocast():  # teachers may run in bf16 apart from the student
            features = forward_features(
                self.teachers[k],
                batch,
                hidden_states=bool(needs.get("hidden") or needs.get("cls")),
                attention_scores=bool(needs.get("attention")),
                prefix=spec.prefix,
            )
        return features if self.frozen_precision == "same" else as_float32(features)

    def student_features(self, batch: dict[str, Tensor]) -> Features:
        """The student's forward pass with what the method reads."""
        needs = self.method.student_needs
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

    return dataclasses.replace(features, **{f.name: cast(getattr(features, f.name)) for f in dataclasses.fields(features)})


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


@torch.no_grad()
def collect_diagnostics(objective: DistillationObjective, loader) -> dict:
    """Let the method observe student and teacher features over ``loader`` (e.g. ALP's α map)."""
    if not objective.method.observes:
        return {}
    was_training = objective.training
    objective.eval()
    device = next(objective.model.parameters()).device
    for batch in loader:
        batch = {k: v.to(device) for k, v in batch.items()}
        student = objective.student_features(batch)
        # live teachers: the cache holds training examples only, and dev ids overlap train ids
        teachers = {k: objective.teacher_features(k, batch, allow_cache=False) for k in range(len(objective.teacher_specs))}
        objective.method.observe(student, teachers, batch)
    objective.train(was_training)
    return objective.method.diagnostics()
