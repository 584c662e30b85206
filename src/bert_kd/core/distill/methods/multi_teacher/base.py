"""Shared set-up of the multi-teacher methods: validation of teachers and α/β, the α/β → weights
rule, teacher binding (batch-column prefixes) and the averaged soft-label term (MT Eq. 1)."""

from __future__ import annotations

from typing import Sequence

from torch import Tensor, nn

from bert_kd.config.schema import NonNegativeInt, Recipe, UnitFloat
from bert_kd.core.distill import losses
from bert_kd.core.distill.methods.base import Method, hidden_size
from bert_kd.core.distill.outputs import Features
from bert_kd.core.models import num_layers

#: ``projection`` option: a learned map for every teacher, or identity when the widths match.
PROJECTION_MODES = ("always", "auto")

#: Default of the ``scale_by_t2`` option: multiply MT Eq. 1 by τ². Measured with
#: ``benchmarks/soft_label_gradient_share.py`` (docs/decisions.md): at τ = 5 the unscaled soft-label term
#: carries only 5–9% of the student-logit gradient of plain CE (1–2% at τ = 10), so the
#: method trains almost like CE alone; with τ² it carries 1.3–2.2× (0.9× at τ = 1, where both agree).
DEFAULT_SCALE_BY_T2 = True


def check_unit_interval(name: str, value) -> float:
    """``value`` as a float in [0, 1]; ``ValueError`` naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    value = float(value)
    if not (0.0 <= value <= 1.0):  # also rejects NaN
        raise ValueError(f"{name} must lie in [0, 1], got {value}")
    return value


def _num_heads(model: nn.Module) -> int | None:
    config = model.config
    for attr in ("num_attention_heads", "n_head", "n_heads"):
        value = getattr(config, attr, None)
        if value is not None:
            return int(value)
    return None


def _num_labels(model: nn.Module) -> int | None:
    value = getattr(getattr(model, "config", None), "num_labels", None)
    return None if value is None else int(value)


class MultiTeacherOptions(Recipe):
    """Shared multi-teacher options; ``teachers`` = indices into ``multi_teachers`` (default all),
    read by the pipeline, not by the method."""

    beta: UnitFloat | None = None
    teachers: list[NonNegativeInt] | None = None
    teacher_prefixes: list[str] | None = None
    scale_by_t2: bool | None = None


class MultiTeacherBase(Method):
    """Shared set-up of the multi-teacher methods: validation, α/β weights, teacher binding.

    Validation (``ValueError`` before training): empty teacher list, a teacher whose label
    count differs from the student's, ``alpha``/``beta`` outside [0, 1], a
    ``teacher_prefixes`` list of the wrong length.
    """

    uses_alpha = False
    reads_teacher_prefixes = True
    Options = MultiTeacherOptions
    default_alpha = 0.2
    default_beta = 0.5

    def __init__(self, config, student, teachers, regression=False):
        config = dict(config or {})
        teachers = list(teachers or [])
        if not teachers:
            raise ValueError(f"method {self.name!r} needs at least one teacher, got an empty teacher list")
        self.alpha, self.beta = self.alpha_beta(config)
        super().__init__(config, student, teachers, regression)
        self.scale_by_t2 = config.get("scale_by_t2", DEFAULT_SCALE_BY_T2)
        if not isinstance(self.scale_by_t2, bool):
            raise ValueError(f"scale_by_t2 of method {self.name!r} must be true or false, got {self.scale_by_t2!r}")
        n_labels = _num_labels(student)
        for k, teacher in enumerate(teachers):
            t_labels = _num_labels(teacher)
            if n_labels is not None and t_labels is not None and t_labels != n_labels:
                raise ValueError(
                    f"teacher {k} predicts {t_labels} label(s) but the student predicts {n_labels}; "
                    f"every teacher must be fine-tuned on the student's task"
                )
        self.n_teachers = len(teachers)
        self.n_student = num_layers(student)
        self.student_width = hidden_size(student)
        self.student_heads = _num_heads(student)
        self.teacher_layers = [num_layers(t) for t in teachers]
        self.teacher_widths = [hidden_size(t) for t in teachers]
        self.teacher_heads = [_num_heads(t) for t in teachers]
        self.teacher_types = [str(getattr(t.config, "model_type", type(t).__name__)) for t in teachers]
        self.teacher_names = [f"teacher_{k}" for k in range(self.n_teachers)]
        prefixes = config.get("teacher_prefixes")
        if prefixes is not None:
            if isinstance(prefixes, str) or len(prefixes) != self.n_teachers:
                raise ValueError(
                    f"teacher_prefixes must list one column prefix per teacher ({self.n_teachers}), got {prefixes!r}"
                )
            prefixes = [str(p) for p in prefixes]
        self.teacher_prefixes: list[str] | None = prefixes

    # ------------------------------------------------------------------ weights
    @classmethod
    def alpha_beta(cls, config: dict) -> tuple[float | None, float]:
        """α (when the method has one) and β from the config, each checked to lie in [0, 1]."""
        alpha = check_unit_interval("alpha", config.get("alpha", cls.default_alpha)) if cls.uses_alpha else None
        return alpha, check_unit_interval("beta", config.get("beta", cls.default_beta))

    @classmethod
    def derived_weights(cls, alpha: float | None, beta: float) -> dict[str, float]:
        """Term weights implied by α and β (see the module docstring)."""
        return {"ce": 1.0 - beta, "pred": beta}

    @classmethod
    def resolve_weights(cls, config: dict) -> dict[str, float]:
        weights = cls.derived_weights(*cls.alpha_beta(config))
        given = config.get("weights")
        if given:
            unknown = sorted(set(given) - set(cls.term_names))
            if unknown:
                raise ValueError(
                    f"unknown loss term(s) {unknown} in weights; method {cls.name!r} has {list(cls.term_names)}"
                )
            weights.update({k: float(v) for k, v in given.items()})
        return weights

    # ------------------------------------------------------------------ teachers
    def bind_teachers(self, specs: Sequence) -> MultiTeacherBase:
        """Record each teacher's batch-column prefix and name from
        [`Teacher`][objective.Teacher] specs (same order as at construction)."""
        specs = list(specs)
        if len(specs) != self.n_teachers:
            raise ValueError(f"method {self.name!r} was built for {self.n_teachers} teachers, got {len(specs)} specs")
        self.teacher_prefixes = [str(getattr(s, "prefix", "")) for s in specs]
        names = [str(getattr(s, "name", "") or f"teacher_{k}") for k, s in enumerate(specs)]
        # Keep names unique so that reports keyed by name never collide.
        self.teacher_names = [n if names.count(n) == 1 else f"{n}_{k}" for k, n in enumerate(names)]
        return self

    def prefix_of(self, k: int, batch: dict[str, Tensor]) -> str:
        """Batch-column prefix of teacher ``k``."""
        if self.teacher_prefixes is not None:
            return self.teacher_prefixes[k]
        prefixed = sorted(key for key in batch if key.endswith("input_ids") and key != "input_ids")
        if prefixed:
            raise ValueError(
                f"the batch carries other tokenizations {prefixed} but method {self.name!r} does not know which "
                f"columns each teacher reads: set the option teacher_prefixes or call method.bind_teachers(specs)"
            )
        return ""

    def prediction_terms(self, student: Features, teachers: dict[int, Features]) -> Tensor:
        """MT Eq. 1: (1/K) Σ_k soft-CE(τ), times τ² when ``scale_by_t2``; or the mean MSE to the
        teachers' scores (regression)."""
        return losses.multi_teacher_prediction_loss(
            student.logits,
            [teachers[k].logits for k in sorted(teachers)],
            self.temperature,
            self.regression,
            scale_by_t2=self.scale_by_t2,
        )

    def describe_teacher(self, k: int) -> dict:
        return {
            "index": k,
            "model_type": self.teacher_types[k],
            "prefix": None if self.teacher_prefixes is None else self.teacher_prefixes[k],
            "layers": self.teacher_layers[k],
            "width": self.teacher_widths[k],
            "heads": self.teacher_heads[k],
        }
