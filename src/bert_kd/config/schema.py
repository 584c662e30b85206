"""The typed parameter blocks of bert-kd (pydantic 2): the leaf every layer reads, importing no other
bert_kd module but the user errors. The whole tree and its checks against the method registry live in
[`bert_kd.experiment.parameters`][].

``validate_parameters(params)`` there checks the merged parameter tree (conf/<env> + ``--params``) and
raises [`ParameterError`][] listing every problem by dotted key: unknown keys
(with the closest valid key), wrong types and out-of-range values (with the value and what is
allowed). ``cross_check`` adds the checks that need the models' ``config.json`` (depths, layer
maps, hidden sizes) but no weights, so nothing expensive runs before a typo is found.

Weight convention: a recipe's explicit per-term ``weights`` are the truth. The papers' shorthands
are ways of writing them that [`explicit_weights`][experiment.parameters.explicit_weights] expands (rounded to 10 decimals):

* ALP-KD family (``rkd``, ``logits_mse``, ``pkd``, ``ckd``, ``alp``): without ``ce``,
  β = 1 − η − λ, i.e. ``ce = 1 − Σ other weights`` (ALP-KD Eq. 10).
* Multi-teacher (Shi & Guo, Eq. 12–13): L = β·(α·L_hidden + L_attn + L_emb + (1−α)·L_pred) +
  (1−β)·L_CE, i.e. ``{ce: 1−β, pred: β(1−α), hidden: βα, attn: β, emb: β}``; ``okd``/``rse_kd``
  ``{ce: 1−β, pred: β}``; ``multi_pkd`` ``{ce: 1−β, pred: β(1−α), layer: βα}``. Explicit
  ``weights`` override single derived terms.
"""

from __future__ import annotations

import difflib
import json
import posixpath
import re
import types
import typing
from typing import Annotated, Any, Literal, Mapping, TypeVar, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from typing_extensions import TypeAliasType

from bert_kd.config.errors import ParameterError

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
#: The run seed when none is given (``seed:`` in conf/base/parameters.yml says the same).
DEFAULT_SEED = 42


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
    def _space_separated_lists(cls, data: Any) -> Any:
        """A string where a key takes a list (and no string) is its space-separated items: ``--params`` splits on
        commas, so ``--params 'augment.rules=mask pos'`` is the form its printed fix gives for every list key."""
        if isinstance(data, Mapping):
            split = {
                key: _list_items(value, cls.model_fields[key].annotation)
                for key, value in data.items()
                if isinstance(value, str)
                and key in cls.model_fields
                and takes_list_not_str(cls.model_fields[key].annotation)
                and value not in type_options(cls.model_fields[key].annotation)  # a Literal's own word ("first")
            }
            if split:
                return {**data, **split}
        return data

    @model_validator(mode="before")
    @classmethod
    def _no_boolean_for_numbers(cls, data: Any) -> Any:
        """``true``/``false`` where a number is expected is an error, not 1/0 (pydantic's lax mode takes it)."""
        if isinstance(data, Mapping):
            wrong = [
                f"{key}: {value!r}"
                for key, value in data.items()
                if isinstance(value, bool)
                and key in cls.model_fields
                and reads_bool_as_number(cls.model_fields[key].annotation)
            ]
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


def _list_items(value: str, annotation: Any) -> list:
    """``value``'s space-separated items; for a list of lists (``figures.alignment_pairs``) each item's
    ``:``-separated parts (``"1:12 2:12"`` is ``[[1, 12], [2, 12]]``)."""
    lists = [option for option in type_options(annotation) if typing.get_origin(option) is list]
    items = value.split()
    nested = any(
        typing.get_origin(inner) is list
        for option in lists
        for arg in typing.get_args(option)
        for inner in type_options(arg)
    )
    return [item.split(":") for item in items] if nested else items


def takes_list_not_str(annotation: Any) -> bool:
    """Whether a field of this type takes a list and no string (a string given for it is a list written for
    ``--params``)."""
    options = type_options(annotation)
    return any(typing.get_origin(option) is list or option is list for option in options) and not (options & {str, Any})


def reads_bool_as_number(annotation: Any) -> bool:
    """Whether pydantic would turn ``true``/``false`` into 1/0 for this type: it takes an int or a
    float and lists neither ``bool`` nor ``Any`` (nor a boolean ``Literal`` value)."""
    options = type_options(annotation)
    takes_bool = bool(options & {bool, Any}) or any(isinstance(option, bool) for option in options)
    return bool(options & {int, float}) and not takes_bool


# --------------------------------------------------------------------------- engineering blocks


class Training(Strict):
    """A ``training:`` block (optimisation of one job) and the project's one set of training defaults:
    ``TrainingConfig`` takes its defaults from here. A key left out, or set to null, keeps its default."""

    epochs: PositiveFloat = 3.0
    batch_size: PositiveInt = 32
    eval_batch_size: PositiveInt = 64  # runtime.eval_batch_size, when set, wins
    learning_rate: PositiveFloat = 5e-5
    aux_learning_rate: PositiveFloat | None = None  # projections, ALP/TED modules; None = learning_rate
    weight_decay: NonNegativeFloat = 0.01
    warmup_ratio: UnitFloat = 0.1
    max_grad_norm: NonNegativeFloat = 1.0
    gradient_accumulation_steps: PositiveInt = 1
    max_steps: PositiveInt | None = None  # None = the epochs decide
    # "frozen": the input word-embedding matrix keeps its starting values (no gradient, no AdamW state): a 2-layer
    # student's optimizer step then skips 11.7 M of its 15.6 M parameters (benchmarks/frozen_embeddings.py)
    word_embeddings: Literal["train", "frozen"] = "train"
    # runtime.log_every_steps, when set, wins; a training job that sets neither logs adaptively
    # (experiment.run_setup.adaptive_log_every), this default serves a TrainingConfig built directly
    log_every_steps: PositiveInt = 10

    @model_validator(mode="before")
    @classmethod
    def _null_is_the_default(cls, values: Any) -> Any:
        """A key set to null (``epochs: null``) is taken as left out: it keeps its default and is not
        among the keys the block sets ([`set_values`][], the run's MLflow params)."""
        if not isinstance(values, Mapping):
            return values
        fields = cls.model_fields
        return {k: v for k, v in values.items() if v is not None or k not in fields or fields[k].default is None}


class Runtime(Strict):
    """Engineering settings shared by every training job."""

    mixed_precision: Literal["no", "fp16", "bf16", "auto"] = "auto"  # bf16 on a CUDA device with bf16, else fp32
    checkpoint_every_steps: NonNegativeInt = 0  # 0 = at the end of each epoch only
    keep_checkpoint: bool = False
    progress_bar: bool = True
    group_by_length: bool = True  # conf/base default too (benchmarks/results/grouping_check.md)
    teacher_mixed_precision: Literal["same", "no", "fp16", "bf16", "auto"] = "same"
    log_every_steps: PositiveInt | None = None
    eval_batch_size: PositiveInt | None = None
    cpu: bool = False
    recompute: bool = False  # retrain every job of the run instead of reusing the content-keyed store
    # torch threads (at most the machine's cores); None = the cores free at start (other processes' CPU use over
    # 0.3 s, core/machine.py), unless OMP_NUM_THREADS is set
    threads: PositiveInt | None = None
    # one fused AdamW kernel: "auto" = on CPU and CUDA (≈ 13× faster optimizer steps here, benchmarks/optimizer_step.py)
    fused_optimizer: bool | Literal["auto"] = "auto"
    tf32: bool = True  # TF32 matmuls for fp32 work on CUDA; off: full fp32 matmuls
    # "auto": compile (reduce-overhead) a GPU job past the recorded break-even, else off (core/training/compiled_step.py)
    compile: bool | Annotated[str, Field(min_length=1)] = (
        False  # torch.compile the trained model (opt-in): true = inductor, or a backend name
    )
    # the dev metric the best epoch is kept by; None = the task's primary metric (a sweep table sets its paper's)
    select_metric: str | None = None

    @field_validator("mixed_precision", mode="before")
    @classmethod
    def _yaml_no(cls, value: Any) -> Any:
        return "no" if value is False else value  # unquoted YAML `no` is a boolean

    @field_validator("compile", mode="before")
    @classmethod
    def _compile_given(cls, value: Any) -> Any:
        """A blank ``runtime.compile=`` (or null) as one message, not one per member of the union."""
        if value is None or (isinstance(value, str) and not value.strip()):
            raise ValueError(
                f"runtime.compile is blank ({value!r}); use true (inductor), false, auto, a mode "
                f"({', '.join(COMPILE_MODES)}) or a backend name"
            )
        return value

    @field_validator("compile")
    @classmethod
    def _known_compile(cls, value: bool | str) -> bool | str:
        """A ``torch.compile`` backend or inductor mode torch knows, checked with the other parameters
        (an unknown one failed only when the first model compiled, after the data and models loaded)."""
        if isinstance(value, bool) or value == "auto" or value in COMPILE_MODES:
            return value
        known = compile_backends()
        if value not in known:
            raise ValueError(
                f"unknown torch.compile backend or mode {value!r}; use true (inductor), false, auto, a mode "
                f"({', '.join(COMPILE_MODES)}) or a backend ({', '.join(known)})"
            )
        return value


#: ``torch.compile`` modes of the inductor backend that ``runtime.compile`` may name instead of a backend:
#: ``reduce-overhead`` replays each step as CUDA graphs (one launch instead of one per kernel), the
#: ``max-autotune`` modes also search matmul kernels.
COMPILE_MODES = ("reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def compile_backends() -> list[str]:
    """The ``torch.compile`` backends this torch registers (its debugging and test backends left out, but
    ``eager`` and ``aot_eager``, which trace the compiled code path without generating kernels)."""
    from torch._dynamo import list_backends

    return sorted({*list_backends(), "eager", "aot_eager"})


def registered_model_name_problem(name: str) -> str | None:
    """What MLflow's rule for registered model names (``mlflow.utils.validation._validate_model_name``,
    MLflow 3.17) finds wrong with ``name``, or None; kept here so config imports no MLflow
    (tests/config/test_schema_model_name.py compares both on the same names)."""
    if not name.strip():
        return "Missing value for required parameter 'name'"
    if "/" in name or ":" in name:
        return f"Invalid model name '{name}'. Names cannot contain '/' or ':'"
    normalised = posixpath.normpath(name)
    if normalised != name or normalised == "." or normalised.startswith(("..", "/")):
        return (
            f"Invalid value {json.dumps(name)} for parameter 'name' supplied: Names may be treated as files in"
            f" certain cases, and must not resolve to other names when treated as such. This name would resolve"
            f" to {normalised!r}"
        )
    return None


class Tracking(Strict):
    enabled: bool = True
    log_models: bool = True
    gradient_share_batches: NonNegativeInt = 2  # batches measuring each loss term's gradient share (0 = off)
    registered_model: str | None = None  # name the best student is registered under; None = bert_kd-<task>-student
    register_best: bool = True  # register the best student of a comparison pipeline (not when all sit at the floor)
    register_ties: bool = True  # a tie registers each tied job as tied-<row>, never champion (false: none)

    @field_validator("registered_model")
    @classmethod
    def _registrable(cls, value: str | None) -> str | None:
        """MLflow's own rule for registered model names, checked before any student trains (else it
        fails only at registration, after every student trained)."""
        if value is None:
            return value
        if not value.strip():
            raise ValueError("an empty name; null registers as bert_kd-<task>-student")
        problem = registered_model_name_problem(value)
        if problem:
            raise ValueError(f"{problem} (MLflow's rule); e.g. bert_kd-rte-student")
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


Probability = Annotated[float, Field(ge=0.0, le=1.0)]


#: The most rewrites of one training row ``augment.copies`` may ask for: both papers use 20 (Tang et al. 2019's
#: N_a, TinyBERT's N_a); 1,000 already makes a transfer set fifty times theirs (and 1,000 draws per row).
MAX_AUGMENT_COPIES = 1000


class Augment(Strict):
    """The transfer set (``augment_glue``): Tang et al. (2019)'s rules (``mask``, ``pos``, ``ngram``) or
    TinyBERT's word replacement (``tinybert``), with the papers' values as defaults
    ([`bert_kd.core.data.augment`][])."""

    rules: list[Literal["mask", "pos", "ngram", "tinybert"]] = ["mask", "pos", "ngram"]
    p_mask: Probability = 0.1
    p_pos: Probability = 0.1
    p_ng: Probability = 0.25
    max_ngram: PositiveInt = 5
    p_t: Probability = 0.4
    candidates: PositiveInt = 15
    copies: PositiveInt = 20
    seed: NonNegativeInt = 0
    pair_single: Probability = 2 / 3  # Tang's rules on a pair: rewrite one sentence with this probability, else both
    max_source_rows: PositiveInt | None = None  # augment only the first rows of the (sampled) train split
    pos_tagger: Literal["nltk"] | None = None  # null: embedding neighbours stand in for same-POS words
    glove: str | None = None  # a GloVe text file for TinyBERT's multi-piece words; null: embedding neighbours
    directory: str = "data/05_model_input/transfer_sets"
    rows_per_shard: PositiveInt = 100_000
    path: str | None = None  # a stored transfer set to use instead (checked against the run's task and tokenizer)

    @field_validator("copies")
    @classmethod
    def _bounded_copies(cls, value: int) -> int:
        if value > MAX_AUGMENT_COPIES:
            raise ValueError(
                f"{value} rewrites of every training row is more than the {MAX_AUGMENT_COPIES} allowed (each is one "
                "draw, tokenized and stored: the rows times the copies); the papers use 20"
            )
        return value

    @field_validator("rules")
    @classmethod
    def _one_scheme(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("give at least one rule: mask, pos, ngram (Tang et al.) or tinybert")
        if "tinybert" in value and len(value) > 1:
            raise ValueError("tinybert is a scheme of its own: give [tinybert] or Tang's [mask, pos, ngram]")
        return list(dict.fromkeys(value))


class BiLSTM(Strict):
    """Tang et al. (2019)'s student: one BiLSTM layer over word embeddings, a ReLU classifier."""

    hidden_size: PositiveInt = 300
    classifier_size: PositiveInt = 400
    embeddings: Literal["teacher", "random"] = "teacher"
    dropout: Annotated[float, Field(ge=0.0, lt=1.0)] = 0.0


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
    bilstm: BiLSTM | None = None  # Tang et al.'s BiLSTM student instead of a copy of the teacher
    training: Training = Training()

    @field_validator("layer_selection", mode="before")
    @classmethod
    def _space_separated_layers(cls, value: Any) -> Any:
        """``"1 9"`` (the form ``--params`` can carry: it splits on commas) is the list ``[1, 9]``."""
        if isinstance(value, str) and value.split() and all(part.isdigit() for part in value.split()):
            return [int(part) for part in value.split()]
        return value

    @model_validator(mode="after")
    def _depth_or_model(self) -> Student:
        if self.model is None and self.num_layers is None and self.bilstm is None:
            raise ValueError("give num_layers (a copy of the teacher's first layers), model or bilstm")
        return self


class GeneralCorpus(Strict):
    """The corpus of general distillation: text ``files`` (one passage a line), a Hugging Face dataset
    (``hf_dataset``, its ``hf_split`` and text ``hf_column``) or the offline stand-in, the training
    sentences of every GLUE task under ``glue_dir`` (``glue_stand_in``); exactly one of them."""

    files: list[Annotated[str, Field(min_length=1)]] | None = None
    hf_dataset: Annotated[str, Field(min_length=1)] | None = None
    hf_split: str = "train"
    hf_column: str = "text"
    glue_stand_in: bool = False
    max_passages: PositiveInt | None = None  # the first n passages only (a shortened run)

    @field_validator("files", mode="before")
    @classmethod
    def _space_separated_files(cls, value: Any) -> Any:
        """``"a.txt b.txt"`` (the form ``--params`` can carry: it splits on commas) is the list of both."""
        return value.split() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _one_source(self) -> GeneralCorpus:
        chosen = [name for name in ("files", "hf_dataset", "glue_stand_in") if getattr(self, name)]
        if len(chosen) != 1:
            raise ValueError(f"give exactly one of files, hf_dataset, glue_stand_in (given: {chosen or 'none'})")
        return self


class General(Strict):
    """General distillation (``distill_general``): a pre-trained ``teacher``, a ``num_layers`` student copied from
    its ``layer_selection`` layers, the ``loss`` (``tinybert`` or ``distilbert``) with its published weights
    unless ``weights`` says otherwise, on ``corpus`` cut to ``max_seq_length`` tokens."""

    teacher: Annotated[str, Field(min_length=1)]
    loss: Literal["tinybert", "distilbert"] = "tinybert"
    weights: dict[str, NonNegativeFloat] | None = None
    temperature: PositiveFloat | None = None  # distilbert: 2.0
    mask_probability: Annotated[float, Field(gt=0, lt=1)] = 0.15
    # distilbert, as its reference implementation: the KL term over every non-pad token (all) or the masked ones
    # (masked); positions to mask drawn with weight count^−mask_smoothing (0.7; 0: BERT's uniform draw)
    distill_positions: Literal["all", "masked"] = "all"
    mask_smoothing: NonNegativeFloat = 0.7
    num_layers: PositiveInt = 2
    layer_selection: Union[Literal["first", "distilbert"], list[PositiveInt]] = "first"
    max_seq_length: Annotated[int, Field(ge=8, le=4096)] = 128
    corpus: GeneralCorpus
    training: Training = Training()


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
    ``stages`` the weights change per epoch ([`bert_kd.core.distill.objective.WeightSchedule`][])."""

    method: str
    temperature: PositiveFloat | None = None
    weights: dict[str, NonNegativeFloat] | None = None
    stages: Annotated[list[RecipeStage], Field(min_length=1)] | None = None

    def method_config(self) -> dict:
        """The dict the method classes read (unset keys left to their defaults)."""
        return self.model_dump(exclude_unset=True, exclude={"teachers"})


#: Recipe blocks of the parameter tree (entries typed by the registered methods' recipe models,
#: told apart by ``method``; see [`bert_kd.experiment.parameters`][]).
RECIPE_BLOCKS = ("distill_methods", "ted_methods", "multi_teacher_configs")


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
    shared_store: bool = True  # a study on a server: this worker's model store must be the study's (docs/scaling.md)
    paper_noise: str | float = "ours"  # the papers' single-run noise: ours (assumed equal to ours) or points
    bootstrap: dict[str, Any] = {}
    output_dir: str | None = None
    results_only: bool = False  # tables from <results_dir>/<table> alone (in-memory study, nothing trains)
    results_dir: str | None = None  # per-trial result JSONs under <results_dir>/<table> (committed; read first)
    grids: dict[str, dict[str, Any]] = {}
    tables: dict[str, dict[str, Any]] = {}  # parsed and checked by bert_kd.sweeps.spec.build_sweep


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


# --------------------------------------------------------------------------- errors by dotted key


def dotted(loc: tuple, tags: tuple[str, ...] = ()) -> str:
    """``('multi_teachers', 0, 'model')`` → ``multi_teachers[0].model``; drops the union tags
    ``tags`` (the method names) of recipe entries."""
    parts: list[str] = []
    items = list(loc)
    if len(items) >= 3 and items[0] in RECIPE_BLOCKS and items[2] in tags:
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


def keys_at(root: type[BaseModel], loc: tuple) -> list[str]:
    """Field names of the model found at ``loc`` in ``root`` (for suggestions)."""
    node: Any = root
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
_OPTION_WORDS = (
    ("stages", "stages"),
    ("layer-mapping", "mapping"),
    ("mapping", "mapping"),
    ("loss term", "weights"),
    ("weight", "weights"),
    ("temperature", "temperature"),
    ("alpha", "alpha"),
    ("beta", "beta"),
)


def _recipe_option(loc: tuple, message: str, tags: tuple[str, ...]) -> tuple:
    """``('mapping',)`` when a recipe-level message is about its mapping, etc.; else ``()``."""
    if len(loc) == 3 and loc[0] in RECIPE_BLOCKS and loc[2] in tags:
        lowered = message.lower()
        for word, option in _OPTION_WORDS:
            if word in lowered:
                return (option,)
    return ()


def problems_of(
    error: ValidationError, root: type[BaseModel], prefix: tuple = (), tags: tuple[str, ...] = (), root_depth: int = 0
) -> list[tuple[str, str]]:
    """``error`` as ``(dotted key, message)`` pairs: keys under ``prefix``, unknown keys with the
    closest valid key of the model ``root`` (found ``root_depth`` items down the key), recipe
    entries' union ``tags`` (the method names) dropped from the keys."""
    problems = []
    for item in error.errors():
        loc, kind = prefix + tuple(item["loc"]), item["type"]
        if kind == "extra_forbidden":
            valid = keys_at(root, loc[root_depth:-1])
            key = str(loc[-1])
            close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
            hint = (
                f"did you mean {dotted(loc[:-1] + (close[0],), tags)!r}?"
                if close
                else f"valid keys here: {', '.join(valid)}"
            )
            problems.append((dotted(loc, tags), f"unknown key; {hint}"))
            continue
        message = item["msg"]
        if message.startswith("Value error, "):
            message = message[len("Value error, ") :]
            loc += _recipe_option(loc, message, tags)
        if kind not in ("value_error", "union_tag_invalid", "union_tag_not_found", "missing") and "input" in item:
            message += f"; given {item['input']!r}"
        problems.append((dotted(loc, tags), message))
    return union_problems_merged(problems)


#: The last part of a key that pydantic adds for one alternative of a union (``runtime.compile.bool``).
_UNION_MEMBER = re.compile(
    r"\.(bool|int|float|str|none|constrained-[\w-]+|(?:literal|function-[\w-]+|list|dict)\[.*\])$"
)


def union_problems_merged(problems: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """One line per key: a bad value of a union is reported once per alternative (``runtime.compile.bool``,
    ``runtime.compile.constrained-str``); these become one line under the key itself, naming every alternative
    (``Input should be a valid boolean or a valid string; given None``); other repeats keep their first message."""
    merged: dict[str, list[str]] = {}
    for key, message in problems:
        merged.setdefault(_UNION_MEMBER.sub("", key), []).append(message)
    lines = []
    for key, messages in merged.items():
        stems = list(dict.fromkeys(m.split("; given ")[0].removeprefix("Input should be ") for m in messages))
        given = next((m.partition("; given ")[2] for m in messages if "; given " in m), None)
        if len(messages) > 1 and all(m.startswith("Input should be ") for m in messages):
            lines.append((key, "Input should be " + " or ".join(stems) + (f"; given {given}" if given else "")))
        else:
            lines.append((key, messages[0]))
    return lines


#: The one precedence rule of training settings (bert_kd.kedro_project.config_loader.apply_shared_training), quoted in
#: the parameter errors of training keys.
TRAINING_PRECEDENCE = (
    "training settings: the command line wins over conf, and a job's own <job>.training.<key> "
    "over the shared training.<key>, which reaches every job (--params training.epochs=1 "
    "changes every job; --params student.training.epochs=1 the student only)"
)


def parameter_fix(problems: list[tuple[str, str]]) -> str | None:
    """The fix line of a parameter block: the default, plus the training precedence rule when a
    training key is among ``problems``."""
    if any(key == "training" or key.startswith("training.") or ".training" in key for key, _ in problems):
        return f"correct the parameter in conf/ or in --params key=value; {TRAINING_PRECEDENCE}"
    return None


def typed(model: type[BaseModel], value: Any, where: str | None = None) -> Any:
    """``value`` as an instance of the schema ``model``: returned as is when it already is one (what
    the validation hook hands nodes), else validated (a dict from a notebook, a test or a sweep
    trial) — a bad key raises [`ParameterError`][] naming ``where`` (e.g. ``student``)."""
    if isinstance(value, model):
        return value
    try:
        return model.model_validate(dict(value or {}))
    except ValidationError as error:
        prefix = (where,) if where else ()
        problems = problems_of(error, model, prefix, root_depth=len(prefix))
        raise ParameterError(problems, fix=parameter_fix(problems)) from None


_Model = TypeVar("_Model", bound=BaseModel)

#: A parameter block as a node receives it: the validation hook's schema model, or a dict (a
#: notebook's, a test's, a sweep trial's) the node reads through [`typed`][] — ``Block[Teacher]``.
#: An alias, not a bare ``Teacher | Mapping``: Kedro (1.7) validates a ``params:`` argument annotated
#: with a pydantic model itself, into the catalog and before this project's hook, and warns on every
#: run about a ``Union`` annotation; it leaves an alias alone.
Block = TypeAliasType("Block", Union[_Model, Mapping[str, Any]], type_params=(_Model,))


def set_values(block: BaseModel | Mapping | None) -> dict:
    """The keys a parameter block sets: a schema model's fields given in the configuration (not
    its defaults), a dict as is. What ``experiment.run_setup.training_config`` lays over
    ``TrainingConfig``'s own defaults, and what a training run's MLflow params record of a block."""
    if isinstance(block, BaseModel):
        return block.model_dump(exclude_unset=True)
    return dict(block or {})
