"""The whole parameter tree, typed by the method registry, and its cross-checks (Kedro-free).

``validate_parameters(params)`` checks the merged parameter tree (conf/<env> + ``--params``) and
raises [`ParameterError`][] listing every problem by dotted key: unknown keys
(with the closest valid key), wrong types and out-of-range values (with the value and what is
allowed). Recipe entries are typed by the registered methods ([`bert_kd.core.distill.methods`][]),
which is why this module sits above the core while the parameter blocks it assembles
([`bert_kd.config.schema`][]) sit below it. ``cross_check`` adds the checks that need the models'
``config.json`` (depths, layer maps, hidden sizes) but no weights, so nothing expensive runs before
a typo is found. The weight convention is [`bert_kd.config.schema`][]'s.
"""

from __future__ import annotations

import json
import os
import typing
from pathlib import Path
from typing import Annotated, Any, Mapping, Union

from pydantic import Field, TypeAdapter, ValidationError, field_validator, model_validator

import bert_kd.core.distill.methods  # noqa: F401  (registers every method)
from bert_kd.config.errors import ModelNotFoundError, ParameterError
from bert_kd.config.schema import (
    DEFAULT_SEED,
    RECIPE_BLOCKS,
    WEIGHT_DECIMALS,
    Augment,
    Evaluate,
    ExportStudent,
    Figures,
    General,
    MultiStudent,
    MultiTeacher,
    NonNegativeInt,
    PositiveInt,
    PredictGlue,
    Recipe,
    Reproduce,
    Runtime,
    Strict,
    Student,
    Teacher,
    TeacherCache,
    Ted,
    Tracking,
    Training,
    keys_at,
    parameter_fix,
    problems_of,
)
from bert_kd.core.data.glue import normalize_task
from bert_kd.core.distill.methods.base import check_method_config, method_class, recipe_models
from bert_kd.core.distill.objective import WeightSchedule
from bert_kd.core.distill.ted_filters import ted_layer_map
from bert_kd.core.models import resolve_model_name, select_student_layers


def _registered_recipes() -> tuple[type[Recipe], ...]:

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


# --------------------------------------------------------------------------- the whole tree


class Parameters(Strict):
    """Every parameter of every pipeline (conf/base/parameters*.yml)."""

    task: str
    glue_dir: str | None = None
    max_train_samples: PositiveInt | None = None
    max_eval_samples: PositiveInt | None = None
    seed: NonNegativeInt = DEFAULT_SEED
    training: Training | None = None  # shared defaults, reused by `${training}` in conf
    tracking: Tracking = Tracking()
    runtime: Runtime = Runtime()
    teacher: Teacher | None = None
    student: Student | None = None
    teacher_cache: TeacherCache = TeacherCache()
    distill_methods: dict[str, AnyRecipe] = {}  # noqa: F821 (the registry's union, resolved by parameters_model)
    ted: Ted | None = None
    ted_student: Student | None = None
    ted_methods: dict[str, AnyRecipe] = {}  # noqa: F821 (the registry's union, resolved by parameters_model)
    multi_teachers: list[MultiTeacher] | None = None
    multi_student: MultiStudent | None = None
    multi_teacher_configs: dict[str, AnyRecipe] = {}  # noqa: F821 (the registry's union, resolved by parameters_model)
    reproduce: Reproduce | None = None
    export_student: ExportStudent | None = None
    evaluate: Evaluate | None = None
    predict_glue: PredictGlue | None = None
    figures: Figures = Figures()
    general: General | None = None
    augment: Augment | None = None
    tang_student: Student | None = None

    @field_validator("task")
    @classmethod
    def _known_task(cls, value: str) -> str:

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
    def _teacher_indices(self) -> Parameters:
        n = len(self.multi_teachers or [])
        problems = []
        if self.multi_student is not None and self.multi_teachers and self.multi_student.init_from_teacher >= n:
            problems.append(
                f"multi_student.init_from_teacher={self.multi_student.init_from_teacher} but only {n} teacher(s)"
            )
        for name, recipe in self.multi_teacher_configs.items():
            for index in getattr(recipe, "teachers", None) or []:
                if index >= n:
                    problems.append(f"multi_teacher_configs.{name}.teachers: index {index} >= {n} teacher(s)")
        if problems:
            raise ValueError("; ".join(problems))
        return self


_RECIPES_BUILT: tuple = ()


def parameters_model() -> type[Parameters]:
    """[`Parameters`][] with its recipe entries typed by the registered methods (rebuilt when
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


def valid_keys(loc: tuple) -> list[str]:
    """Field names of the model found at ``loc`` in [`Parameters`][] (for suggestions)."""
    return keys_at(parameters_model(), loc)


def validate_parameters(params: Mapping) -> Parameters:
    """The typed parameter tree; [`ParameterError`][] naming every bad key otherwise."""
    try:
        return parameters_model().model_validate(dict(params))
    except ValidationError as error:
        problems = problems_of(error, parameters_model(), tags=method_names())
        raise ParameterError(problems, fix=parameter_fix(problems)) from None


def recipe_problems(recipe: Mapping, where: str) -> list[tuple[str, str]]:
    """Problems of one recipe outside the parameter tree (a sweep row's), as ``(dotted key, message)``
    under ``where``, worded like [`validate_parameters`][]' (unknown keys with the closest one)."""
    try:
        TypeAdapter(recipe_union()).validate_python(dict(recipe))
        return []
    except ValidationError as error:
        slot = (RECIPE_BLOCKS[0], "_")  # where a recipe sits in the tree, for valid keys and wording
        placeholder = ".".join(slot)
        return [
            (where + key[len(placeholder) :], message.replace(f"'{placeholder}", f"'{where}"))
            for key, message in problems_of(error, parameters_model(), prefix=slot, tags=method_names())
        ]


def explicit_weights(recipe: Mapping) -> dict[str, float]:
    """The recipe's loss weights with shorthands (β = 1 − η − λ; α/β) expanded and rounded."""

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
    hub cache) without loading weights; [`ModelNotFoundError`][] naming ``key`` otherwise."""

    try:
        resolved = resolve_model_name(name)
    except FileNotFoundError:
        raise ModelNotFoundError(
            f"directory {name!r} does not exist", key, "give an existing model directory or a Hugging Face hub id"
        ) from None
    except (ValueError, ImportError) as exc:
        raise ModelNotFoundError(str(exc), key, "install the package or name another model") from None
    path = Path(resolved).expanduser()
    if path.is_dir():
        config = path / "config.json"
        if not config.is_file():
            raise ModelNotFoundError(
                f"{str(path)!r} has no config.json (not a Hugging Face model directory)",
                key,
                "point it at a directory written by save_pretrained",
            )
        return json.loads(config.read_text(encoding="utf-8"))
    if path.exists():
        raise ModelNotFoundError(
            f"{resolved!r} is a file, not a model directory", key, "give a model directory or a Hugging Face hub id"
        )
    looks_local = resolved.startswith((".", "/", "~")) or resolved.count("/") > 1 or os.sep + os.sep in resolved
    if looks_local:
        raise ModelNotFoundError(
            f"directory {resolved!r} does not exist", key, "give an existing model directory or a Hugging Face hub id"
        )
    from huggingface_hub import hf_hub_download, try_to_load_from_cache

    cached = try_to_load_from_cache(resolved, "config.json")
    if isinstance(cached, str):
        return json.loads(Path(cached).read_text(encoding="utf-8"))
    if _offline():
        raise ModelNotFoundError(
            f"{resolved!r} is neither a local directory nor in the Hugging Face cache, and the machine is offline "
            f"(HF_HUB_OFFLINE=1)",
            key,
            "give a local model directory (or minilm-l6), or go online once (unset HF_HUB_OFFLINE) to download it",
        )
    try:
        return json.loads(Path(hf_hub_download(resolved, "config.json")).read_text(encoding="utf-8"))
    except Exception as exc:  # noqa: BLE001 - any hub failure means "not reachable"
        raise ModelNotFoundError(
            f"{resolved!r} could not be fetched from the Hugging Face hub ({type(exc).__name__})",
            key,
            "check the model id and the network, or give a local directory",
        ) from None


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


def _length_problems(
    max_seq_length: int, config: dict, block: str, model_key: str | None = None
) -> list[tuple[str, str]]:
    """``<block>.max_seq_length`` longer than the model's position embeddings: it would crash at
    the first long batch (``The size of tensor a (…) must match … (512)``), possibly hours in."""
    positions = max_positions(config)
    if positions is None or max_seq_length <= positions:
        return []
    model = f" of {model_key}" if model_key else ""
    return [
        (
            f"{block}.max_seq_length",
            f"{max_seq_length} exceeds the {positions} positions{model} ({config.get('model_type', 'model')} "
            f"config.json max_position_embeddings); use at most {positions}",
        )
    ]


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
    return _length_problems(
        settings.max_seq_length, loaded if isinstance(loaded, dict) else {}, block, f"{block}.model"
    )


# --------------------------------------------------------------------------- cross-checks


def cross_check(params: Parameters, used: set[str]) -> None:
    """Checks needing the models' ``config.json`` for the parameter blocks in ``used`` (names
    like ``student``, ``distill_methods.alp``); [`ParameterError`][] listing the problems."""

    problems: list[tuple[str, str]] = list(_stage_problems(params, used))
    teacher_conf = model_config(params.teacher.model, "teacher.model") if params.teacher and "teacher" in used else None
    if teacher_conf is not None:
        problems += _length_problems(params.teacher.max_seq_length, teacher_conf, "teacher")
        for key in ("student", "ted_student"):
            student = getattr(params, key)
            if student is not None and key in used and student.model:  # reads the teacher's max_seq_length
                problems += _length_problems(
                    params.teacher.max_seq_length,
                    model_config(student.model, f"{key}.model"),
                    "teacher",
                    f"{key}.model",
                )
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
                problems.append(
                    (
                        f"{key}.num_layers" if n_student > n_teacher else f"{key}.layer_selection",
                        f"{exc} (teacher.model={params.teacher.model!r})",
                    )
                )
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
                        problems.append(
                            (f"{block}.{name}.mapping", f"{exc} (teacher {n_teacher} layers, student {n_student})")
                        )
                projection = getattr(recipe, "projection", None)
                widths = (_width(teacher_conf), _width(student_conf) if student_conf else _width(teacher_conf))
                if projection is False and None not in widths and widths[0] != widths[1]:
                    problems.append(
                        (
                            f"{block}.{name}.projection",
                            f"teacher width {widths[0]} != student width {widths[1]}; use projection: auto",
                        )
                    )
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
        if (
            student is not None
            and "multi_student" in used
            and student.model
            and student.init_from_teacher < len(configs)
        ):
            init = student.init_from_teacher  # the student reads its initialising teacher's max_seq_length
            problems += _length_problems(
                params.multi_teachers[init].max_seq_length,
                model_config(student.model, "multi_student.model"),
                f"multi_teachers[{init}]",
                "multi_student.model",
            )
        depths = [_depth(config) for config in configs]
        student = params.multi_student
        if student is not None and "multi_student" in used and student.model is None and student.num_layers:
            depth = depths[student.init_from_teacher]
            if depth is not None and student.num_layers > depth:
                problems.append(
                    (
                        "multi_student.num_layers",
                        f"{student.num_layers} exceeds the {depth} layers of multi_teachers[{student.init_from_teacher}]",
                    )
                )
    if problems:
        raise ParameterError(problems)


#: The student block whose ``training.epochs`` a recipe block's stages are laid out over.
_STUDENT_OF_BLOCK = {
    "distill_methods": "student",
    "ted_methods": "ted_student",
    "multi_teacher_configs": "multi_student",
}


def _stage_problems(params: Parameters, used: set[str]) -> list[tuple[str, str]]:
    """Staged recipes of the used blocks whose stages do not fit their student's training epochs."""
    import math

    problems = []
    for block, student_key in _STUDENT_OF_BLOCK.items():
        student = getattr(params, student_key)
        for name, recipe in getattr(params, block).items():
            if recipe.stages is None or f"{block}.{name}" not in used or student is None:
                continue
            training = student.training
            if training.max_steps is not None:
                continue  # a step budget: the epoch count is known only to the loop (checked there)
            epochs = training.epochs
            n_epochs = math.ceil(epochs)
            config = recipe.method_config()
            schedule = WeightSchedule.parse(config["stages"], method_class(config).term_names)
            try:
                schedule.stage_lengths(n_epochs)
            except ValueError as exc:
                problems.append((f"{block}.{name}.stages", f"{exc} ({student_key}.training.epochs={epochs:g})"))
    return problems
