"""A distillation method is a recipe: named loss terms, what they read, and their modules.

Subclass :class:`Method`, list ``term_names`` and ``default_weights``, say what the terms need
from the student and the teachers (``cls``, ``hidden``, ``attention``), create trainable
auxiliary modules (projections, attention, filters) in ``__init__``, and return the unweighted
terms from :meth:`Method.terms`. Register it with :func:`register_method` — one file per method.
"""

from __future__ import annotations

from typing import Callable

from torch import Tensor, nn

from bert_kd.distill import losses
from bert_kd.distill.outputs import Features
from bert_kd.training import task_loss

METHODS: dict[str, type["Method"]] = {}


def register_method(name: str) -> Callable[[type["Method"]], type["Method"]]:
    """Class decorator: make a method available by ``name`` (torchdistill-style registry)."""

    def decorate(cls: type["Method"]) -> type["Method"]:
        if name in METHODS:
            raise ValueError(f"method {name!r} is registered twice")
        cls.name = name
        METHODS[name] = cls
        return cls

    return decorate


class Method(nn.Module):
    """Base recipe: task loss ``ce`` and Hinton/Tang prediction terms, shared by every method.

    ``config`` holds the method's parameters (``temperature``, ``mapping``, ``weights`` …);
    ``student``/``teachers`` are the HF models (read for sizes only, never stored).
    """

    name = "base"
    term_names: tuple[str, ...] = ("ce",)
    default_weights: dict[str, float] = {"ce": 1.0}
    #: β = 1 − Σ other weights when ``ce`` is not given (ALP-KD's convention).
    ce_is_complement = False
    student_needs: dict[str, bool] = {}
    teacher_needs: dict[str, bool] = {}
    uses_teachers = True
    known_options: tuple[str, ...] = ()

    def __init__(self, config: dict, student: nn.Module, teachers: list[nn.Module], regression: bool = False):
        super().__init__()
        options = {k: v for k, v in config.items() if k not in ("method", "weights")}
        unknown = sorted(set(options) - set(self.known_options) - {"temperature"})
        if unknown:
            raise ValueError(
                f"unknown option(s) {unknown} for method {self.name!r}; valid: {sorted(self.known_options + ('temperature',))}"
            )
        self.config = config
        self.regression = regression
        self.temperature = float(config.get("temperature", 1.0))
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        self.weights = self.resolve_weights(config.get("weights"))

    def resolve_weights(self, given: dict | None) -> dict[str, float]:
        weights = dict(self.default_weights)
        if given:
            weights.update({k: float(v) for k, v in given.items()})
            if self.ce_is_complement and "ce" not in given:
                rest = sum(v for k, v in weights.items() if k != "ce")
                if rest > 1:
                    raise ValueError(
                        f"weights {given} sum to {rest} > 1 so β = 1 − η − λ would be negative; give 'ce' explicitly"
                    )
                weights["ce"] = 1.0 - rest
        return weights

    def wants(self, term: str) -> bool:
        return self.weights.get(term, 0.0) > 0

    def choose_teachers(self, n_teachers: int, training: bool) -> list[int]:
        """Indices of the teachers used for this batch (all of them by default)."""
        return list(range(n_teachers)) if self.uses_teachers else []

    def terms(self, student: Features, teachers: dict[int, Features], batch: dict[str, Tensor]) -> dict[str, Tensor]:
        return {"ce": task_loss(student.logits, batch["labels"])}

    # ------------------------------------------------------------------ shared terms
    def prediction_loss(self, student: Features, teachers: dict[int, Features], soft_loss=losses.kd_loss) -> Tensor:
        """``soft_loss`` (Hinton KD, T² scaled, by default) averaged over teachers; MSE to the
        teachers' scores for regression."""
        values = [
            losses.kd_regression_loss(student.logits, t.logits)
            if self.regression
            else soft_loss(student.logits, t.logits, self.temperature)
            for t in teachers.values()
        ]
        return sum(values) / len(values)

    def diagnostics(self) -> dict:
        """Method-specific statistics gathered during evaluation (e.g. ALP attention)."""
        return {}


def build_method(config: dict, student: nn.Module, teachers: list[nn.Module], regression: bool = False) -> Method:
    """Instantiate the method named by ``config['method']``."""
    name = config.get("method")
    if name not in METHODS:
        raise ValueError(f"unknown distillation method {name!r}; available: {sorted(METHODS)}")
    return METHODS[name](config, student, teachers, regression)


def hidden_size(model: nn.Module) -> int:
    return int(model.config.hidden_size)
