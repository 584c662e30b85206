"""One typed schema for every bert-kd parameter (pydantic 2), Kedro-free.

``validate_parameters(params)`` checks the merged parameter tree (conf/<env> + ``--params``) and
raises :class:`~bert_kd.errors.ParameterError` listing every problem by dotted key: unknown keys
(with the closest valid key), wrong types and out-of-range values (with the value and what is
allowed). ``cross_check`` adds the checks that need the models' ``config.json`` (depths, layer
maps, hidden sizes) but no weights, so nothing expensive runs before a typo is found.

Weight convention: a recipe's explicit per-term ``weights`` are the truth. The papers' shorthands
are ways of writing them that :func:`explicit_weights` expands (rounded to 10 decimals):

* ALP-KD family (``rkd``, ``logits_mse``, ``pkd``, ``ckd``, ``alp``): without ``ce``,
  β = 1 − η − λ, i.e. ``ce = 1 − Σ other weights`` (ALP-KD Eq. 10).
* Multi-teacher (Shi & Guo, Eq. 12–13): L = β·(α·L_hidden + L_attn + L_emb + (1−α)·L_pred) +
  (1−β)·L_CE, i.e. ``{ce: 1−β, pred: β(1−α), hidden: βα, attn: β, emb: β}``; ``okd``/``rse_kd``
  ``{ce: 1−β, pred: β}``; ``multi_pkd`` ``{ce: 1−β, pred: β(1−α), layer: βα}``. Explicit
  ``weights`` override single derived terms.
"""

from __future__ import annotations

import difflib
import types
import typing
import json
import os
from pathlib import Path
from typing import Annotated, Any, Literal, Mapping, TypeVar, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from typing_extensions import TypeAliasType

from bert_kd.errors import ModelNotFoundError, ParameterError

WEIGHT_DECIMALS = 10

PositiveInt = Annotated[int, Field(ge=1)]
NonNegativeInt = Annotated[int, Field(ge=0)]
PositiveFloat = Annotated[float, Field(gt=0)]
NonNegativeFloat = Annotated[float, Field(ge=0)]
UnitFloat = Annotated[float, Field(ge=0, le=1)]
#: A layer map: a strategy name (``all``, ``pkd_skip``, ``bucket_first`` …) or explicit lists of
#: teacher layers per student layer; values are checked by ``check_method_config``/``layer_map``.
LayerMapping = Union[str, list[list[int]], list[int]]


#: Largest seed every RNG the runs seed accepts (numpy's ``np.random.seed``: 2³² − 1).
MAX_SEED = 2**32 - 1


class Strict(BaseModel):
    """Base model: unknown keys are errors (reported with the closest valid key)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @field_validator("seed", mode="after", check_fields=False)
    @classmethod
    def _seed_in_range(cls, value: Any) -> Any:
        """Every ``seed`` key of any block: numpy accepts 0 … 2³² − 1, torch and Python more."""
        if isinstance(value, int) and not 0 <= value <= MAX_SEED:
            raise ValueError(f"{value} is outside 0 … {MAX_SEED} (2**32 - 1), the seeds numpy accepts")
        return value

    @model_validator(mode="before")
    @classmethod
    def _no_boolean_for_numbers(cls, data: Any) -> Any:
        """``true``/``false`` where a number is expected is an error, not 1/0 (pydantic's lax mode takes it)."""
        if isinstance(data, Mapping):
            wrong = [f"{key}: {value!r}" for key, value in data.items() if isinstance(value, bool)
                     and key in cls.model_fields and reads_bool_as_number(cls.model_fields[key].annotation)]
            if wrong:
                raise ValueError(f"{', '.join(wrong)} — a boolean where this key takes a number")
        return data


def type_options(annotation: Any) -> set:
    """The leaf types of a field's annotation (unions, ``Annotated`` and type aliases unwrapped;
    a ``Literal``'s values as they are)."""
    if isinstance(annotation, TypeAliasType):
        return type_options(annotation.__value__)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        return type_options(args[0])
    if origin is Literal:
        return set(args)
    if origin is Union or origin is types.UnionType:
        return set().union(*(type_options(arg) for arg in args))
    return {annotation}


def reads_bool_as_number(annotation: Any) -> bool:
    """Whether pydantic would turn ``true``/``false`` into 1/0 for this type: it takes an int or a
    float and lists neither ``bool`` nor ``Any`` (nor a boolean ``Literal`` value)."""
    options = type_options(annotation)
    takes_bool = bool(options & {bool, Any}) or any(isinstance(option, bool) for option in options)
    return bool(options & {int, float}) and not takes_bool


# --------------------------------------------------------------------------- engineering blocks


class Training(Strict):
    """A ``training:`` block (optimisation of one job); keys map onto ``TrainingConfig``."""

    epochs: PositiveFloat | None = None
    batch_size: PositiveInt | None = None
    eval_batch_size: PositiveInt | None = None
    learning_rate: PositiveFloat | None = None
    aux_learning_rate: PositiveFloat | None = None
    weight_decay: NonNegativeFloat | None = None
    warmup_ratio: UnitFloat | None = None
    max_grad_norm: NonNegativeFloat | None = None
    gradient_accumulation_steps: PositiveInt | None = None
    max_steps: PositiveInt | None = None
    log_every_steps: PositiveInt | None = None


class Runtime(Strict):
    """Engineering settings shared by every training job."""

    mixed_precision: Literal["no", "fp16", "bf16", "auto"] = "no"
    checkpoint_every_steps: NonNegativeInt = 0  # 0 = at the end of each epoch only
    keep_checkpoint: bool = False
    progress_bar: bool = True
    group_by_length: bool = True  # conf/base default too (benchmarks/results/grouping_check.md)
    teacher_mixed_precision: Literal["same", "no", "fp16", "bf16", "auto"] = "same"
    log_every_steps: PositiveInt | None = None
    eval_batch_size: PositiveInt | None = None
    cpu: bool = False
    recompute: bool = False  # retrain every job of the run instead of reusing the content-keyed store
    fused_optimizer: bool | Literal["auto"] = "auto"  # fused AdamW kernel ("auto": on CPU)
    # the dev metric the best epoch is kept by; None = the task's primary metric (a sweep table sets its paper's)
    select_metric: str | None = None

    @field_validator("mixed_precision", mode="before")
    @classmethod
    def _yaml_no(cls, value: Any) -> Any:
        return "no" if value is False else value  # unquoted YAML `no` is a boolean


class Tracking(Strict):
    enabled: bool = True
    log_models: bool = True
    gradient_share_batches: NonNegativeInt = 2  # batches measuring each loss term's gradient share (0 = off)
    registered_model: str | None = None  # name the best student is registered under; None = bert_kd-<task>-student
    register_best: bool = True  # register the best student of a comparison pipeline (not when all tie)

    @field_validator("registered_model")
    @classmethod
    def _registrable(cls, value: str | None) -> str | None:
        """MLflow's own rule for registered model names, checked before any student trains (else it
        fails only at registration, after every student trained)."""
        if value is None:
            return value
        if not value.strip():
            raise ValueError("an empty name; null registers as bert_kd-<task>-student")
        from mlflow.exceptions import MlflowException
        from mlflow.utils.validation import _validate_model_name

        try:
            _validate_model_name(value)
        except MlflowException as exc:
            raise ValueError(f"{exc.message.rstrip('.')} (MLflow's rule); e.g. bert_kd-rte-student") from None
        return value


class TeacherCache(Strict):
    enabled: bool = True
    batch_size: PositiveInt = 64
    directory: str = "data/07_model_output/teacher_cache"
    mixed_precision: Literal["no", "fp16", "bf16", "auto"] = "no"

    @field_validator("mixed_precision", mode="before")
    @classmethod
    def _yaml_no(cls, value: Any) -> Any:
        return "no" if value is False else value


class ExportStudent(Strict):
    """export_student pipeline: ONNX (+ int8) student, verification, latency table."""

    #: the model to export: a ``models:/``/``runs:/`` URI or a model directory; None = the registered
    #: best (``models:/<tracking.registered_model>@champion``) when the tracking store has one, else
    #: the pipeline's ALP student
    model: str | None = None
    quantize_int8: bool = True
    tolerance_points: NonNegativeFloat = 0.5
    batch_sizes: list[PositiveInt] = [1, 32]
    max_batches: PositiveInt = 8
    repeats: PositiveInt = 3


class Figures(Strict):
    """Dev subsets of the qualitative figures (ALP-KD Figures 3 and 4)."""

    alp_attention_examples: PositiveInt = 10
    alignment_examples: PositiveInt = 100
    alignment_pairs: list[Annotated[list[PositiveInt], Field(min_length=2, max_length=2)]] | None = None
    seed: NonNegativeInt = 0


class Teacher(Strict):
    model: Annotated[str, Field(min_length=1)]
    max_seq_length: Annotated[int, Field(ge=8, le=4096)] = 128
    retrain: bool = False
    training: Training = Training()


class MultiTeacher(Teacher):
    """One entry of ``multi_teachers``."""

    name: Annotated[str, Field(min_length=1)]
    seed: NonNegativeInt | None = None  # None: the run's ``seed``


class Student(Strict):
    num_layers: PositiveInt | None = None
    layer_selection: Union[Literal["first", "distilbert"], list[PositiveInt]] = "first"
    #: pretrained: layers of the checkpoint the teacher was fine-tuned from + a fresh classifier
    #: (PKD, ALP-KD); teacher: layers of the fine-tuned teacher, head included (TED). Absent = teacher.
    init: Literal["pretrained", "teacher"] = "teacher"
    model: str | None = None
    training: Training = Training()

    @field_validator("layer_selection", mode="before")
    @classmethod
    def _space_separated_layers(cls, value: Any) -> Any:
        """``"1 9"`` (the form ``--params`` can carry: it splits on commas) is the list ``[1, 9]``."""
        if isinstance(value, str) and value.split() and all(part.isdigit() for part in value.split()):
            return [int(part) for part in value.split()]
        return value

    @model_validator(mode="after")
    def _depth_or_model(self) -> "Student":
        if self.model is None and self.num_layers is None:
            raise ValueError("give num_layers (a copy of the teacher's first layers) or model")
        return self


class MultiStudent(Student):
    init_from_teacher: NonNegativeInt = 0


class TedFilters(Strict):
    arch: Literal["linear", "mlp", "subsequent_layer"] = "linear"
    student_filters: Literal["copy", "train"] = "copy"
    training: Training = Training()


class Ted(Strict):
    """TED Stage I (filters on the frozen teacher at layers M(k))."""

    mapping: LayerMapping = "distilbert"
    filters: TedFilters = TedFilters()


# --------------------------------------------------------------------------- method recipes


class RecipeStage(Strict):
    """One stage of a staged recipe: its weights (absent terms 0) for ``epochs`` epochs or a
    ``fraction`` of the run's epochs (rounded to the nearest epoch); the last stage runs to the end."""

    epochs: PositiveInt | None = None
    fraction: Annotated[float, Field(gt=0, lt=1)] | None = None
    weights: dict[str, NonNegativeFloat]


class Recipe(Strict):
    """Shared recipe fields: L = Σ weights[term] · term (see the module docstring); with
    ``stages`` the weights change per epoch (:class:`bert_kd.distill.objective.WeightSchedule`)."""

    method: str
    temperature: PositiveFloat | None = None
    weights: dict[str, NonNegativeFloat] | None = None
    stages: Annotated[list[RecipeStage], Field(min_length=1)] | None = None

    def method_config(self) -> dict:
        """The dict the method classes read (unset keys left to their defaults)."""
        return self.model_dump(exclude_unset=True, exclude={"teachers"})

    @model_validator(mode="after")
    def _check_with_method(self) -> "Recipe":
        import bert_kd.distill.methods  # noqa: F401  (registers every method)
        from bert_kd.distill.methods.base import check_method_config

        check_method_config(self.method_config())  # ValueError → validation error at this recipe
        return self


# The per-method recipe models (the options each method declares as ``Options``) live with the
# methods; the union of ``distill_methods`` / ``ted_methods`` / ``multi_teacher_configs`` entries
# and the method names are derived from the registry (bert_kd.distill.methods.METHODS).

RECIPE_BLOCKS = ("distill_methods", "ted_methods", "multi_teacher_configs")


def _registered_recipes() -> tuple[type[Recipe], ...]:
    import bert_kd.distill.methods  # noqa: F401  (discovers and registers every method)
    from bert_kd.distill.methods.base import recipe_models

    return recipe_models()


def method_names() -> tuple[str, ...]:
    """Names of the registered distillation methods (the tags of the recipe union)."""
    return tuple(typing.get_args(model.model_fields["method"].annotation)[0] for model in _registered_recipes())


def recipe_union() -> Any:
    """A recipe entry: the registered methods' recipe models, told apart by ``method``."""
    models = _registered_recipes()
    return Annotated[Union[models], Field(discriminator="method")] if len(models) > 1 else models[0]


def __getattr__(name: str) -> Any:
    """``AnyRecipe`` and ``METHOD_NAMES``, computed from the method registry when first asked."""
    if name == "AnyRecipe":
        return recipe_union()
    if name == "METHOD_NAMES":
        return method_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --------------------------------------------------------------------------- sweeps

SpaceSeparated = Union[str, int, float, list[Union[str, int, float]]]


class Reproduce(Strict):
    """A sweep over methods × tasks × seeds × grids; lists may be space-separated strings."""

    table: str | None = None
    tasks: SpaceSeparated | None = None
    methods: SpaceSeparated | None = None
    seeds: SpaceSeparated | None = None
    grid: str | dict[str, Any] | None = None  # e.g. "training.learning_rate=1e-4": only those grid values
    selection: str | None = None
    storage: str | None = None
    workers: PositiveInt | None = None
    study_name: str | None = None
    heartbeat_interval: PositiveInt | None = None
    grace_period: PositiveInt | None = None
    bootstrap: dict[str, Any] = {}
    output_dir: str | None = None
    results_only: bool = False  # tables from <results_dir>/<table> alone (in-memory study, nothing trains)
    results_dir: str | None = None  # per-trial result JSONs under <results_dir>/<table> (committed; read first)
    grids: dict[str, dict[str, Any]] = {}
    tables: dict[str, dict[str, Any]] = {}  # parsed and checked by bert_kd.sweep.spec.build_sweep


class Evaluate(Strict):
    """``evaluate`` pipeline: a model directory or MLflow model URI on ``task``'s dev set(s)."""

    model: str | None = None
    max_seq_length: Annotated[int, Field(ge=8, le=4096)] = 128
    batch_size: PositiveInt = 64
    allow_task_mismatch: bool = False  # true: evaluate a model whose recorded task is not `task`


class PredictGlue(Strict):
    """``predict_glue`` pipeline: a model's GLUE test-set predictions in the server's format."""

    model: str | None = None
    output_dir: str = "data/08_reporting/glue_submission"
    ax_file: str | None = None  # the diagnostic set; None = <glue_dir>/diagnostic/diagnostic.tsv
    max_seq_length: Annotated[int, Field(ge=8, le=4096)] = 128
    batch_size: PositiveInt = 64
    allow_task_mismatch: bool = False  # true: predict with a model whose recorded task is not `task`


# --------------------------------------------------------------------------- the whole tree


class Parameters(Strict):
    """Every parameter of every pipeline (conf/base/parameters*.yml)."""

    task: str
    glue_dir: str | None = None
    max_train_samples: PositiveInt | None = None
    max_eval_samples: PositiveInt | None = None
    seed: NonNegativeInt = 42
    training: Training | None = None  # shared defaults, reused by `${training}` in conf
    tracking: Tracking = Tracking()
    runtime: Runtime = Runtime()
    teacher: Teacher | None = None
    student: Student | None = None
    teacher_cache: TeacherCache = TeacherCache()
    distill_methods: dict[str, AnyRecipe] = {}
    ted: Ted | None = None
    ted_student: Student | None = None
    ted_methods: dict[str, AnyRecipe] = {}
    multi_teachers: list[MultiTeacher] | None = None
    multi_student: MultiStudent | None = None
    multi_teacher_configs: dict[str, AnyRecipe] = {}
    reproduce: Reproduce | None = None
    export_student: ExportStudent | None = None
    evaluate: Evaluate | None = None
    predict_glue: PredictGlue | None = None
    figures: Figures = Figures()

    @field_validator("task")
    @classmethod
    def _known_task(cls, value: str) -> str:
        from bert_kd.data.glue import normalize_task

        normalize_task(value)
        return value

    @field_validator("glue_dir")
    @classmethod
    def _glue_dir_not_a_file(cls, value: str | None) -> str | None:
        if value and Path(value).is_file():
            raise ValueError(f"{value!r} is a file; give the directory that holds the GLUE task folders (e.g. SST-2/)")
        return value

    @field_validator("multi_teachers")
    @classmethod
    def _teachers_named_once(cls, value: list[MultiTeacher] | None) -> list[MultiTeacher] | None:
        if value is not None:
            if not value:
                raise ValueError("list at least one teacher")
            names = [t.name for t in value]
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise ValueError(f"teacher names must be unique, repeated: {twice}")
        return value

    @model_validator(mode="after")
    def _teacher_indices(self) -> "Parameters":
        n = len(self.multi_teachers or [])
        problems = []
        if self.multi_student is not None and self.multi_teachers and self.multi_student.init_from_teacher >= n:
            problems.append(f"multi_student.init_from_teacher={self.multi_student.init_from_teacher} but only {n} teacher(s)")
        for name, recipe in self.multi_teacher_configs.items():
            for index in getattr(recipe, "teachers", None) or []:
                if index >= n:
                    problems.append(f"multi_teacher_configs.{name}.teachers: index {index} >= {n} teacher(s)")
        if problems:
            raise ValueError("; ".join(problems))
        return self


_RECIPES_BUILT: tuple = ()


def parameters_model() -> type[Parameters]:
    """:class:`Parameters` with its recipe entries typed by the registered methods (rebuilt when
    the registry has changed since, e.g. after a method module was added)."""
    global _RECIPES_BUILT
    models = _registered_recipes()
    if models != _RECIPES_BUILT:
        entry = recipe_union()
        for block in RECIPE_BLOCKS:  # once resolved, a forward reference is not looked up again
            Parameters.model_fields[block].annotation = dict[str, entry]
        Parameters.model_rebuild(force=True, _types_namespace={"AnyRecipe": entry})
        _RECIPES_BUILT = models
    return Parameters


# --------------------------------------------------------------------------- errors by dotted key


def dotted(loc: tuple) -> str:
    """``('multi_teachers', 0, 'model')`` → ``multi_teachers[0].model``; drops union tags."""
    parts: list[str] = []
    items = list(loc)
    if len(items) >= 3 and items[0] in RECIPE_BLOCKS and items[2] in method_names():
        del items[2]
    for item in items:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts)


def _model_in(annotation: Any) -> Any:
    """Strip ``Annotated``/``Optional`` from a field annotation."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
            if len(models) > 1:
                return models
            annotation = models[0] if models else args[0]
        else:
            return annotation


def valid_keys(loc: tuple) -> list[str]:
    """Field names of the model found at ``loc`` in :class:`Parameters` (for suggestions)."""
    node: Any = parameters_model()
    for item in loc:
        node = _model_in(node)
        if isinstance(node, list):  # a discriminated union: ``item`` is the method tag
            node = next((m for m in node if item in typing.get_args(m.model_fields["method"].annotation)), None)
            continue
        if isinstance(node, type) and issubclass(node, BaseModel):
            field = node.model_fields.get(str(item))
            node = field.annotation if field is not None else None
        elif typing.get_origin(node) in (dict, list):
            node = typing.get_args(node)[-1]
        else:
            return []
    node = _model_in(node)
    return sorted(node.model_fields) if isinstance(node, type) and issubclass(node, BaseModel) else []


#: A method-level message (``check_method_config``) → the recipe option it is about.
_OPTION_WORDS = (("stages", "stages"), ("layer-mapping", "mapping"), ("mapping", "mapping"), ("loss term", "weights"),
                 ("weight", "weights"), ("temperature", "temperature"), ("alpha", "alpha"), ("beta", "beta"))


def _recipe_option(loc: tuple, message: str) -> tuple:
    """``('mapping',)`` when a recipe-level message is about its mapping, etc.; else ``()``."""
    if len(loc) == 3 and loc[0] in RECIPE_BLOCKS and loc[2] in method_names():
        lowered = message.lower()
        for word, option in _OPTION_WORDS:
            if word in lowered:
                return (option,)
    return ()


def _problems(error: ValidationError, prefix: tuple = ()) -> list[tuple[str, str]]:
    problems = []
    for item in error.errors():
        loc, kind = prefix + tuple(item["loc"]), item["type"]
        if kind == "extra_forbidden":
            valid = valid_keys(loc[:-1])
            key = str(loc[-1])
            close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
            hint = f"did you mean {dotted(loc[:-1] + (close[0],))!r}?" if close else f"valid keys here: {', '.join(valid)}"
            problems.append((dotted(loc), f"unknown key; {hint}"))
            continue
        message = item["msg"]
        if message.startswith("Value error, "):
            message = message[len("Value error, "):]
            loc += _recipe_option(loc, message)
        if kind not in ("value_error", "union_tag_invalid", "union_tag_not_found", "missing") and "input" in item:
            message += f"; given {item['input']!r}"
        problems.append((dotted(loc), message))
    # a bad member of a union reports once per alternative; keep the first message per key
    seen: dict[str, str] = {}
    for key, message in problems:
        seen.setdefault(key, message)
    return list(seen.items())


#: The one precedence rule of training settings (bert_kd.config_loader.apply_shared_training), quoted in
#: the parameter errors of training keys.
TRAINING_PRECEDENCE = ("training settings: the command line wins over conf, and a job's own <job>.training.<key> "
                       "over the shared training.<key>, which reaches every job (--params training.epochs=1 "
                       "changes every job; --params student.training.epochs=1 the student only)")


def parameter_fix(problems: list[tuple[str, str]]) -> str | None:
    """The fix line of a parameter block: the default, plus the training precedence rule when a
    training key is among ``problems``."""
    if any(key == "training" or key.startswith("training.") or ".training" in key for key, _ in problems):
        return f"correct the parameter in conf/ or in --params key=value; {TRAINING_PRECEDENCE}"
    return None


def validate_parameters(params: Mapping) -> Parameters:
    """The typed parameter tree; :class:`ParameterError` naming every bad key otherwise."""
    try:
        return parameters_model().model_validate(dict(params))
    except ValidationError as error:
        problems = _problems(error)
        raise ParameterError(problems, fix=parameter_fix(problems)) from None


def typed(model: type[BaseModel], value: Any, where: str | None = None) -> Any:
    """``value`` as an instance of the schema ``model``: returned as is when it already is one (what
    the validation hook hands nodes), else validated (a dict from a notebook, a test or a sweep
    trial) — a bad key raises :class:`ParameterError` naming ``where`` (e.g. ``student``)."""
    if isinstance(value, model):
        return value
    try:
        return model.model_validate(dict(value or {}))
    except ValidationError as error:
        problems = _problems(error, (where,) if where else ())
        raise ParameterError(problems, fix=parameter_fix(problems)) from None


_Model = TypeVar("_Model", bound=BaseModel)

#: A parameter block as a node receives it: the validation hook's schema model, or a dict (a
#: notebook's, a test's, a sweep trial's) the node reads through :func:`typed` — ``Block[Teacher]``.
#: An alias, not a bare ``Teacher | Mapping``: Kedro (1.7) validates a ``params:`` argument annotated
#: with a pydantic model itself, into the catalog and before this project's hook, and warns on every
#: run about a ``Union`` annotation; it leaves an alias alone.
Block = TypeAliasType("Block", Union[_Model, Mapping[str, Any]], type_params=(_Model,))


def set_values(block: BaseModel | Mapping | None) -> dict:
    """The keys a parameter block sets: a schema model's fields given in the configuration (not
    its defaults), a dict as is. What ``pipelines.common.training_config`` lays over
    ``TrainingConfig``'s own defaults, and what a training run's MLflow params record of a block."""
    if isinstance(block, BaseModel):
        return block.model_dump(exclude_unset=True)
    return dict(block or {})


def recipe_problems(recipe: Mapping, where: str) -> list[tuple[str, str]]:
    """Problems of one recipe outside the parameter tree (a sweep row's), as ``(dotted key, message)``
    under ``where``, worded like :func:`validate_parameters`' (unknown keys with the closest one)."""
    try:
        TypeAdapter(recipe_union()).validate_python(dict(recipe))
        return []
    except ValidationError as error:
        slot = (RECIPE_BLOCKS[0], "_")  # where a recipe sits in the tree, for valid keys and wording
        placeholder = ".".join(slot)
        return [(where + key[len(placeholder):], message.replace(f"'{placeholder}", f"'{where}"))
                for key, message in _problems(error, prefix=slot)]


def explicit_weights(recipe: Mapping) -> dict[str, float]:
    """The recipe's loss weights with shorthands (β = 1 − η − λ; α/β) expanded and rounded."""
    import bert_kd.distill.methods  # noqa: F401  (registers every method)
    from bert_kd.distill.methods.base import check_method_config

    config = {k: v for k, v in recipe.items() if k != "teachers"}
    return {term: round(float(w), WEIGHT_DECIMALS) for term, w in check_method_config(config).items()}


# --------------------------------------------------------------------------- model config.json


def _offline() -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}:
        return True
    try:
        from huggingface_hub import constants

        return bool(constants.HF_HUB_OFFLINE)
    except Exception:  # noqa: BLE001
        return False


def model_config(name: str, key: str) -> dict:
    """``config.json`` of the model named by parameter ``key`` (local dir, ``minilm-l6`` or the
    hub cache) without loading weights; :class:`ModelNotFoundError` naming ``key`` otherwise."""
    from bert_kd.models import resolve_model_name

    try:
        resolved = resolve_model_name(name)
    except FileNotFoundError:
        raise ModelNotFoundError(f"directory {name!r} does not exist", key,
                                 "give an existing model directory or a Hugging Face hub id") from None
    except (ValueError, ImportError) as exc:
        raise ModelNotFoundError(str(exc), key, "install the package or name another model") from None
    path = Path(resolved).expanduser()
    if path.is_dir():
        config = path / "config.json"
        if not config.is_file():
            raise ModelNotFoundError(f"{str(path)!r} has no config.json (not a Hugging Face model directory)", key,
                                     "point it at a directory written by save_pretrained")
        return json.loads(config.read_text(encoding="utf-8"))
    if path.exists():
        raise ModelNotFoundError(f"{resolved!r} is a file, not a model directory", key,
                                 "give a model directory or a Hugging Face hub id")
    looks_local = resolved.startswith((".", "/", "~")) or resolved.count("/") > 1 or os.sep + os.sep in resolved
    if looks_local:
        raise ModelNotFoundError(f"directory {resolved!r} does not exist", key,
                                 "give an existing model directory or a Hugging Face hub id")
    from huggingface_hub import hf_hub_download, try_to_load_from_cache

    cached = try_to_load_from_cache(resolved, "config.json")
    if isinstance(cached, str):
        return json.loads(Path(cached).read_text(encoding="utf-8"))
    if _offline():
        raise ModelNotFoundError(
            f"{resolved!r} is neither a local directory nor in the Hugging Face cache, and the machine is offline "
            f"(HF_HUB_OFFLINE=1)", key,
            "give a local model directory (or minilm-l6), or go online once (unset HF_HUB_OFFLINE) to download it")
    try:
        return json.loads(Path(hf_hub_download(resolved, "config.json")).read_text(encoding="utf-8"))
    except Exception as exc:  # noqa: BLE001 - any hub failure means "not reachable"
        raise ModelNotFoundError(f"{resolved!r} could not be fetched from the Hugging Face hub ({type(exc).__name__})",
                                 key, "check the model id and the network, or give a local directory") from None


def _depth(config: dict) -> int | None:
    for attr in ("num_hidden_layers", "n_layer", "n_layers", "num_layers"):
        if isinstance(config.get(attr), int):
            return config[attr]
    return None


def _width(config: dict) -> int | None:
    for attr in ("hidden_size", "d_model", "n_embd", "dim"):
        if isinstance(config.get(attr), int):
            return config[attr]
    return None


#: Model types whose position ids start after the padding index (``pad_token_id + 1``), so
#: ``max_position_embeddings`` − (``pad_token_id`` + 1) tokens fit (RoBERTa: 514 − 2 = 512).
_PADDING_OFFSET_TYPES = ("roberta", "xlm-roberta", "camembert", "longformer", "data2vec-text", "xmod", "ernie_m")


def max_positions(config: dict) -> int | None:
    """How many tokens a model's position embeddings cover (None when its config does not say)."""
    for attr in ("max_position_embeddings", "n_positions", "max_seq_len"):
        if isinstance(config.get(attr), int):
            positions = config[attr]
            if config.get("model_type") in _PADDING_OFFSET_TYPES:
                positions -= int(config.get("pad_token_id") or 0) + 1
            return positions
    return None


def _length_problems(max_seq_length: int, config: dict, block: str, model_key: str | None = None) -> list[tuple[str, str]]:
    """``<block>.max_seq_length`` longer than the model's position embeddings: it would crash at
    the first long batch (``The size of tensor a (…) must match … (512)``), possibly hours in."""
    positions = max_positions(config)
    if positions is None or max_seq_length <= positions:
        return []
    model = f" of {model_key}" if model_key else ""
    return [(f"{block}.max_seq_length",
             f"{max_seq_length} exceeds the {positions} positions{model} ({config.get('model_type', 'model')} "
             f"config.json max_position_embeddings); use at most {positions}")]


def _model_length_problems(settings, block: str, used: set[str]) -> list[tuple[str, str]]:
    """``evaluate``/``predict_glue``: ``max_seq_length`` against the positions of the model they
    name, when it is a local model directory (an MLflow URI is checked once downloaded)."""
    if settings is None or block not in used or not settings.model or ":/" in settings.model:
        return []
    config = Path(settings.model).expanduser() / "config.json"
    if not config.is_file():
        return []  # the node names the missing model or config.json
    try:
        loaded = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []  # the node's loader names the damage
    return _length_problems(settings.max_seq_length, loaded if isinstance(loaded, dict) else {}, block,
                            f"{block}.model")


# --------------------------------------------------------------------------- cross-checks


def cross_check(params: Parameters, used: set[str]) -> None:
    """Checks needing the models' ``config.json`` for the parameter blocks in ``used`` (names
    like ``student``, ``distill_methods.alp``); :class:`ParameterError` listing the problems."""
    import bert_kd.distill.methods  # noqa: F401  (registers every method)
    from bert_kd.distill.methods.base import method_class
    from bert_kd.distill.ted import ted_layer_map
    from bert_kd.models import select_student_layers

    problems: list[tuple[str, str]] = list(_stage_problems(params, used))
    teacher_conf = model_config(params.teacher.model, "teacher.model") if params.teacher and "teacher" in used else None
    if teacher_conf is not None:
        problems += _length_problems(params.teacher.max_seq_length, teacher_conf, "teacher")
        for key in ("student", "ted_student"):
            student = getattr(params, key)
            if student is not None and key in used and student.model:  # reads the teacher's max_seq_length
                problems += _length_problems(params.teacher.max_seq_length, model_config(student.model, f"{key}.model"),
                                             "teacher", f"{key}.model")
    students = {"student": params.student, "ted_student": params.ted_student}
    for key, student in students.items():
        if student is None or key not in used or teacher_conf is None:
            continue
        n_teacher, n_student = _depth(teacher_conf), student.num_layers
        student_conf = model_config(student.model, f"{key}.model") if student.model else None
        if student_conf is not None:
            n_student = _depth(student_conf)
        elif n_teacher is not None and n_student is not None:
            try:
                select_student_layers(student.layer_selection, n_teacher, n_student)
            except ValueError as exc:
                problems.append((f"{key}.num_layers" if n_student > n_teacher else f"{key}.layer_selection",
                                 f"{exc} (teacher.model={params.teacher.model!r})"))
                continue
        blocks = ("distill_methods",) if key == "student" else ("ted_methods",)
        for block in blocks:
            for name, recipe in getattr(params, block).items():
                if f"{block}.{name}" not in used:
                    continue
                mapping = getattr(recipe, "mapping", None)
                if mapping is not None and n_teacher and n_student:
                    try:  # each method checks its own maps (TinyBERT's uniform, last … are its own)
                        method_class({"method": recipe.method}).check_layer_map(mapping, n_teacher, n_student)
                    except ValueError as exc:
                        problems.append((f"{block}.{name}.mapping", f"{exc} (teacher {n_teacher} layers, student {n_student})"))
                projection = getattr(recipe, "projection", None)
                widths = (_width(teacher_conf), _width(student_conf) if student_conf else _width(teacher_conf))
                if projection is False and None not in widths and widths[0] != widths[1]:
                    problems.append((f"{block}.{name}.projection",
                                     f"teacher width {widths[0]} != student width {widths[1]}; use projection: auto"))
        if key == "ted_student" and params.ted is not None and "ted" in used and n_teacher and n_student:
            try:
                ted_layer_map(params.ted.mapping, n_teacher, n_student)
            except ValueError as exc:
                problems.append(("ted.mapping", str(exc)))
    for block in ("evaluate", "predict_glue"):
        problems += _model_length_problems(getattr(params, block, None), block, used)
    if params.multi_teachers and "multi_teachers" in used:
        configs = [model_config(t.model, f"multi_teachers[{i}].model") for i, t in enumerate(params.multi_teachers)]
        for i, (entry, config) in enumerate(zip(params.multi_teachers, configs)):
            problems += _length_problems(entry.max_seq_length, config, f"multi_teachers[{i}]")
        student = params.multi_student
        if student is not None and "multi_student" in used and student.model and student.init_from_teacher < len(configs):
            init = student.init_from_teacher  # the student reads its initialising teacher's max_seq_length
            problems += _length_problems(params.multi_teachers[init].max_seq_length,
                                         model_config(student.model, "multi_student.model"),
                                         f"multi_teachers[{init}]", "multi_student.model")
        depths = [_depth(config) for config in configs]
        student = params.multi_student
        if student is not None and "multi_student" in used and student.model is None and student.num_layers:
            depth = depths[student.init_from_teacher]
            if depth is not None and student.num_layers > depth:
                problems.append(("multi_student.num_layers",
                                 f"{student.num_layers} exceeds the {depth} layers of multi_teachers[{student.init_from_teacher}]"))
    if problems:
        raise ParameterError(problems)


#: The student block whose ``training.epochs`` a recipe block's stages are laid out over.
_STUDENT_OF_BLOCK = {"distill_methods": "student", "ted_methods": "ted_student", "multi_teacher_configs": "multi_student"}


def _stage_problems(params: Parameters, used: set[str]) -> list[tuple[str, str]]:
    """Staged recipes of the used blocks whose stages do not fit their student's training epochs."""
    import math

    import bert_kd.distill.methods  # noqa: F401  (registers every method)
    from bert_kd.distill.methods.base import method_class
    from bert_kd.distill.objective import WeightSchedule

    problems = []
    for block, student_key in _STUDENT_OF_BLOCK.items():
        student = getattr(params, student_key)
        for name, recipe in getattr(params, block).items():
            if recipe.stages is None or f"{block}.{name}" not in used or student is None:
                continue
            training = student.training
            if training.max_steps is not None:
                continue  # a step budget: the epoch count is known only to the loop (checked there)
            epochs = training.epochs if training.epochs is not None else 3.0  # TrainingConfig's default
            n_epochs = math.ceil(epochs)
            config = recipe.method_config()
            schedule = WeightSchedule.parse(config["stages"], method_class(config).term_names)
            try:
                schedule.stage_lengths(n_epochs)
            except ValueError as exc:
                problems.append((f"{block}.{name}.stages", f"{exc} ({student_key}.training.epochs={epochs:g})"))
    return problems
