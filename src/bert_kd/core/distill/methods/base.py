"""A distillation method is a recipe: named loss terms, what they read, and their modules.

Subclass [`Method`][], list ``term_names`` and ``default_weights``, declare its recipe options
as a pydantic model (``Options``, a subclass of [`Recipe`][]), say what the
terms need from the student and the teachers (``cls``, ``hidden``, ``attention``), create
trainable auxiliary modules (projections, attention, filters) in ``__init__``, and return the
unweighted terms from `Method.terms`. Register it with [`register_method`][].

The registry is the single source of truth: every module under ``bert_kd.core.distill.methods`` is
imported by [`bert_kd.core.distill.methods.discover_methods`][], and the parameter schema's recipe
union ([`recipe_models`][]) and method names are built from `METHODS`.
"""

from __future__ import annotations

from typing import Callable, ClassVar, Literal, Mapping

from pydantic import create_model, model_validator
from torch import Tensor, nn

from bert_kd.config.schema import Recipe
from bert_kd.core.distill import losses
from bert_kd.core.distill.objective import WeightSchedule, validate_weights
from bert_kd.core.distill.outputs import Features
from bert_kd.core.training import task_loss

METHODS: dict[str, type[Method]] = {}
#: Recipe keys every method has ([`Recipe`][]); the others are the method's options.
SHARED_RECIPE_KEYS = frozenset(Recipe.model_fields)


@model_validator(mode="after")
def _check_with_method(recipe: Recipe) -> Recipe:
    """A recipe model's last check: its method's [`Method.check_config`][] (a ValueError becomes a
    validation error at this recipe, named by its dotted key)."""
    check_method_config(recipe.method_config())
    return recipe


def register_method(name: str) -> Callable[[type[Method]], type[Method]]:
    """Class decorator: make a method available by ``name`` (torchdistill-style registry) and
    build its recipe model: the class's ``Options`` with ``method: Literal[name]`` (the tag of
    the schema's recipe union)."""

    def decorate(cls: type[Method]) -> type[Method]:
        if name in METHODS:
            raise ValueError(f"method {name!r} is registered twice ({METHODS[name].__module__}, {cls.__module__})")
        if not (isinstance(cls.Options, type) and issubclass(cls.Options, Recipe)):
            raise TypeError(f"{cls.__name__}.Options must subclass bert_kd.config.schema.Recipe")
        cls.name = name
        cls.recipe_model = create_model(
            f"{cls.__name__}Recipe",
            __base__=cls.Options,
            __module__=cls.__module__,
            __validators__={"_check_with_method": _check_with_method},
            method=(Literal[name], ...),
        )
        METHODS[name] = cls
        return cls

    return decorate


def method_key_material(recipe) -> dict:
    """``{"method_computation": …}`` of the recipe's method when it declares [`Method.key_material`][], else ``{}``
    (an unknown method adds nothing: its recipe is refused elsewhere)."""
    cls = METHODS.get(str(dict(recipe).get("method", "")))
    return {"method_computation": dict(cls.key_material)} if cls is not None and cls.key_material else {}


def recipe_models() -> tuple[type[Recipe], ...]:
    """The recipe model of every registered method (registration order)."""
    return tuple(cls.recipe_model for cls in METHODS.values())


class Method(nn.Module):
    """Base recipe: task loss ``ce`` and Hinton/Tang prediction terms, shared by every method.

    ``config`` holds the method's parameters (``temperature``, ``mapping``, ``weights`` …);
    ``student``/``teachers`` are the HF models (read for sizes only, never stored).
    """

    name = "base"
    term_names: tuple[str, ...] = ("ce",)
    default_weights: dict[str, float] = {"ce": 1.0}
    #: The temperature of a recipe that sets none (checked and trained with; TED's family: 2).
    default_temperature: ClassVar[float] = 1.0
    #: β = 1 − Σ other weights when ``ce`` is not given (ALP-KD's convention).
    ce_is_complement = False
    student_needs: dict[str, bool] = {}
    teacher_needs: dict[str, bool] = {}
    uses_teachers = True
    #: The recipe's options (pydantic; unknown keys are errors); ``method``, ``temperature``,
    #: ``weights`` and ``stages`` come from [`Recipe`][].
    Options: ClassVar[type[Recipe]] = Recipe
    #: ``Options`` with ``method: Literal[<name>]``, made by [`register_method`][].
    recipe_model: ClassVar[type[Recipe]]
    #: The method reads each teacher's own tokenization (batch columns ``{prefix}input_ids`` …),
    #: told by [`bind_teachers`][]; single-teacher token-level methods cannot.
    reads_teacher_prefixes = False
    #: [`observe`][] gathers evaluation statistics, so diagnostics run a pass over dev data.
    observes = False
    #: What of the method's computation its recipe does not say, as content-key material (a changed reward, a
    #: changed loss): a student trained by it gets a new key; ``{}`` (most methods) adds nothing to the key.
    key_material: ClassVar[dict] = {}

    def __init__(self, config: dict, student: nn.Module, teachers: list[nn.Module], regression: bool = False):
        super().__init__()
        self.weights = self.check_config(config)
        #: per-epoch weights of a staged recipe (``stages``), applied by ``DistillationObjective.set_epoch``
        self.schedule = WeightSchedule.parse(config["stages"], self.term_names) if config.get("stages") else None
        self.config = config
        self.regression = regression
        self.temperature = float(config.get("temperature", self.default_temperature))

    @classmethod
    def key_config(cls, config: Mapping) -> dict:
        """``config`` as the key material of a student distilled with it ([`recipe_key_material`][]): as given,
        unless a method changed an option's default after keys were computed."""
        return dict(config)

    @classmethod
    def check_config(cls, config: dict) -> dict[str, float]:
        """Validate a recipe without any model (options, temperature, weights, ``stages``); return the
        recipe's weights (a staged recipe trains with its stages' weights instead, see
        [`WeightSchedule`][]).

        Called before anything trains (see ``bert_kd.kedro_project.hooks``) and again by ``__init__``.
        """
        unknown = sorted(set(config) - set(cls.Options.model_fields))
        if unknown:
            raise ValueError(
                f"unknown option(s) {unknown} for method {cls.name!r}; valid: {sorted(cls.option_names() | {'temperature'})}"
            )
        temperature = config.get("temperature", cls.default_temperature)
        if not isinstance(temperature, (int, float)) or temperature <= 0:
            raise ValueError(f"temperature of method {cls.name!r} must be a number > 0, got {temperature!r}")
        weights = validate_weights(cls.resolve_weights(config), cls.term_names)
        if config.get("stages") is not None:
            WeightSchedule.parse(config["stages"], cls.term_names)
            unstated = validate_weights(
                cls.resolve_weights({k: v for k, v in config.items() if k != "weights"}), cls.term_names
            )
            if any(abs(weights.get(t, 0.0) - unstated.get(t, 0.0)) > 1e-9 for t in set(weights) | set(unstated)):
                raise ValueError(
                    f"stages: the recipe's weights {config.get('weights')} would not train, each stage's "
                    f"weights replace them; put them into the stages"
                )
        return {term: round(value, 10) for term, value in weights.items()}  # 0.3, not 0.30000000000000004

    @classmethod
    def option_names(cls) -> set[str]:
        """The method's own recipe options (those of ``Options`` beyond the shared recipe keys)."""
        return set(cls.Options.model_fields) - SHARED_RECIPE_KEYS

    @classmethod
    def check_layer_map(cls, mapping, n_teacher: int, n_student: int) -> None:
        """Check a recipe's ``mapping`` against the models' depths (ValueError); nothing by default."""

    @classmethod
    def resolve_weights(cls, config: dict) -> dict[str, float]:
        """Default weights updated with ``config['weights']``."""
        weights = dict(cls.default_weights)
        given = config.get("weights")
        if given:
            if not isinstance(given, dict):
                raise ValueError(f"weights of method {cls.name!r} must be a mapping term → weight, got {given!r}")
            weights.update({k: float(v) for k, v in given.items()})
            if cls.ce_is_complement and "ce" not in given:
                rest = sum(v for k, v in weights.items() if k != "ce")
                if rest > 1:
                    raise ValueError(
                        f"weights {given} sum to {rest} > 1 so β = 1 − η − λ would be negative; give 'ce' explicitly"
                    )
                weights["ce"] = 1.0 - rest
        return weights

    @property
    def student_attention(self) -> str:
        """Attention kernel of the student's forwards in training: ``eager`` when a term reads its
        attention maps (`student_needs`), else PyTorch's fused ``sdpa``."""
        return "eager" if self.student_needs.get("attention") else "sdpa"

    @property
    def teacher_attention(self) -> str:
        """Attention kernel of the teachers' forwards: ``eager`` when a term reads their attention
        maps (`teacher_needs`), else ``sdpa``."""
        return "eager" if self.teacher_needs.get("attention") else "sdpa"

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

    # ------------------------------------------------------------------ hooks (no-ops by default)
    def bind_teachers(self, specs) -> Method:
        """Learn each teacher's batch-column prefix and name from
        [`Teacher`][objective.Teacher] specs; nothing to learn by default."""
        return self

    def observe(self, student: Features, teachers: dict[int, Features], batch: dict[str, Tensor]) -> None:
        """Accumulate statistics over an evaluation batch (see [`observes`][]); nothing by default."""

    def diagnostics(self) -> dict:
        """Method-specific statistics gathered during evaluation (e.g. ALP attention)."""
        return {}

    def epoch_report(self) -> dict[str, float]:
        """Statistics of the training epoch just ended, reset for the next (RL-KD's selection shares); ``{}``
        by default."""
        return {}

    def alignment_report(self) -> dict:
        """Per-teacher description of what the method compared (multi-teacher methods); ``{}`` by default."""
        return {}

    def dev_contributions(self, objective, loader) -> dict | None:
        """Each teacher's and layer group's share of the loss over ``loader``, for a method whose
        loss splits by teacher and layer group (the MT method); None for the others."""
        return None

    def alignment_metrics(self) -> dict[str, float]:
        """Numeric view of [`alignment_report`][] for MLflow; ``{}`` by default."""
        return {}


def method_class(config: dict) -> type[Method]:
    """The registered class named by ``config['method']`` (ValueError listing the choices)."""
    name = config.get("method") if isinstance(config, dict) else None
    if name not in METHODS:
        raise ValueError(f"unknown distillation method {name!r}; available: {sorted(METHODS)}")
    return METHODS[name]


def recipe_key_material(config: Mapping) -> dict:
    """A recipe as key material: its method's [`Method.key_config`][] (as given for an unknown method)."""
    cls = METHODS.get(config.get("method")) if isinstance(config, Mapping) else None
    return cls.key_config(config) if cls is not None else dict(config)


def check_method_config(config: dict) -> dict[str, float]:
    """Validate a recipe before any model exists; returns its resolved weights."""
    return method_class(config).check_config(config)


def build_method(config: dict, student: nn.Module, teachers: list[nn.Module], regression: bool = False) -> Method:
    """Instantiate the method named by ``config['method']``."""
    return method_class(config)(config, student, teachers, regression)


def hidden_size(model: nn.Module) -> int:
    return int(model.config.hidden_size)
