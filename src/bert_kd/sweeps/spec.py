"""What a sweep is: methods × tasks × seeds × a grid of parameter values, parsed from the
``reproduce`` parameters block (``conf/base/parameters_reproduce.yml``).

A table entry names its methods; each method points at an existing recipe
(``distill_methods.pkd``, ``ted_methods.lwd``, ``multi_teacher_configs.okd``) plus ``set``
overrides, and says which of the table's grid parameters apply to it. Grid parameters are
dotted paths: ``method.<key>`` changes the method recipe (``method.weights.kd`` = η),
``training.<key>`` the student's training settings (``training.learning_rate``). A row may name the registered
pipeline its trials run (``pipeline``; default [`DEFAULT_PIPELINES`][]) and dotted parameter ``overrides`` of that run;
a paired table (``paired: {arms: [...]}``) gives each row its ``arm`` and ``cell``.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from bert_kd.core.data.glue import normalize_task
from bert_kd.experiment.jobs import grouped_batches_material
from bert_kd.experiment.parameters import recipe_problems
from bert_kd.sweeps.table_options import (  # noqa: F401  (re-exported: the sweep's parameter reading)
    GRID_PREFIXES,
    SWEEP_FIX,
    SweepParameterError,
    _as_int,
    _check_grid,
    _extra_seeds,
    _restrict_grid,
    paired_arms,
    parse_grid_restriction,
    parse_restriction,
    row_arm,
    row_pipeline_and_overrides,
    sweep_parameter_error,
    trial_seed_paths,
)

#: Recipe namespaces and the kind of recipe a trial of that namespace trains (recorded in its description).
RECIPE_NAMESPACES = {"distill_methods": "distill", "ted_methods": "ted", "multi_teacher_configs": "multi_teacher"}
#: The registered pipeline a row of each recipe namespace runs unless it names one (``pipeline:``):
#: ``distill_<row>`` for a ``distill_methods`` or ``ted_methods`` row, ``distill_multi_teacher`` for a configuration.
DEFAULT_PIPELINES = {
    "distill_methods": "distill_{row}",
    "ted_methods": "distill_{row}",
    "multi_teacher_configs": "distill_multi_teacher",
}
SELECTIONS = ("dev", "heldout")
#: What a table's trials select their best epoch on: ``paper`` = the paper's metric of the task
#: ([`bert_kd.core.metrics.paper_metric`][], e.g. MRPC accuracy), ``primary`` = ``primary_metric`` (MRPC (acc+F1)/2;
#: the committed CPU-protocol tables, whose keys stay as they were). Only a task where the two differ gets
#: ``select_metric`` in its trial settings (so in its key).
EPOCH_METRICS = ("paper", "primary")
#: What a table's method entry may say.
METHOD_KEYS = frozenset(
    {"recipe", "label", "set", "grid", "tasks", "baseline", "student", "pipeline", "overrides", "arm", "cell"}
)
#: Settings a table's ``teacher`` block states in full so that the table does not follow the main job's
#: ``teacher`` block, left out of the trial's description: the trial's key already holds the complete
#: teacher (``TrialIdentity.key_material()["teacher"]``), and listing them twice would change the keys of the
#: results committed while tables still inherited them.
TEACHER_SETTINGS_KEYED_IN_FULL = ("max_seq_length", "training")


@dataclass(frozen=True)
class TrialSpec:
    """One training job of a sweep: everything the job path needs to run it."""

    table: str
    method: str
    label: str
    job: str  # distill | ted | multi_teacher
    task: str
    seed: int
    params: dict  # the grid point: dotted path -> value
    recipe: dict  # the method recipe with overrides and method.* grid values applied
    training: dict  # training overrides (table-level, then training.* grid values)
    settings: dict = field(default_factory=dict)  # table-level student / teacher / data settings
    recipe_ref: str = ""  # where the recipe comes from: "distill_methods.pkd"
    pipeline: str | None = None  # the registered pipeline the row names (None: its recipe's default)
    overrides: dict = field(default_factory=dict)  # the row's dotted parameter overrides ("augment.copies": 4)

    @property
    def pipeline_name(self) -> str:
        """The registered pipeline the trial runs: the row's, else its recipe's default ([`DEFAULT_PIPELINES`][])."""
        if self.pipeline:
            return self.pipeline
        namespace, _, row = self.recipe_ref.partition(".")
        return DEFAULT_PIPELINES[namespace].format(row=row)

    @property
    def recipe_namespace(self) -> str:
        return self.recipe_ref.partition(".")[0]

    @property
    def key(self) -> str:
        """Stable, human-readable identity of the trial inside its sweep (the grid value)."""
        return trial_key(self.method, self.task, self.seed, self.params)

    def as_dict(self) -> dict:
        """Plain, JSON-able description (for the job path's content key and for MLflow params); the
        teacher's ``TEACHER_SETTINGS_KEYED_IN_FULL`` and a table's ``teachers`` are left out of ``settings``."""
        settings = copy.deepcopy(self.settings)
        if isinstance(settings.get("teacher"), Mapping):
            settings["teacher"] = {
                k: v for k, v in settings["teacher"].items() if k not in TEACHER_SETTINGS_KEYED_IN_FULL
            }
        settings.pop("teachers", None)  # a multi-teacher trial's key holds every teacher in full (key_material)
        # a named pipeline and overrides are described where a row has them (a default row's key is as before)
        named = {"pipeline": self.pipeline} if self.pipeline else {}
        named.update({"overrides": copy.deepcopy(self.overrides)} if self.overrides else {})
        return {
            "table": self.table,
            "method": self.method,
            "label": self.label,
            "job": self.job,
            "task": self.task,
            "seed": self.seed,
            "params": dict(self.params),
            "recipe": copy.deepcopy(self.recipe),
            "training": copy.deepcopy(self.training),
            "settings": settings,
            "key": self.key,
            **named,
        }

    @property
    def group(self) -> tuple[str, str, int]:
        """(method, task, seed): the grid points of one group compete in model selection."""
        return (self.method, self.task, self.seed)


@dataclass(frozen=True)
class MethodSpec:
    name: str
    label: str
    job: str
    recipe: dict
    grid: dict  # dotted path -> list of values
    tasks: tuple[str, ...] | None = None  # None = every task of the table
    baseline: str | None = None  # None = the table's baseline
    student: dict = field(default_factory=dict)  # overrides of the table's student settings for this row
    recipe_ref: str = ""
    pipeline: str | None = None
    overrides: dict = field(default_factory=dict)
    arm: str | None = None  # a paired table's arm of this row (``plain``, ``transfer``)
    cell: str | None = None  # the cell whose arms are compared (the student: ``bilstm``)


@dataclass(frozen=True)
class SweepSpec:
    """A parsed, restricted sweep table."""

    table: str
    description: str
    methods: tuple[MethodSpec, ...]
    tasks: tuple[str, ...]
    seeds: tuple[int, ...]
    selection: str
    baseline: str
    constraints: tuple[dict, ...]
    settings: dict
    notes: str = ""
    universe: tuple[str, ...] = ()  # trial keys of the unrestricted table (one Optuna study holds them all)
    extra_seeds: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # task → seeds beyond ``seeds``
    epoch_metric: str = "paper"  # :data:`EPOCH_METRICS`
    arms: tuple[str, ...] = ()  # a paired table's arms (``paired.arms``: the reference first), else ()

    def select_metric(self, task: str) -> str | None:
        """The metric ``task``'s trials select their best epoch on, where it is not the task's primary metric
        (None: the primary metric, as every table before ``epoch_metric`` existed)."""
        from bert_kd.core.metrics import paper_metric, primary_metric

        if self.epoch_metric == "paper" and paper_metric(task) != primary_metric(task):
            return paper_metric(task)
        return None

    def trials(self) -> list[TrialSpec]:
        """Every (method, task, seed, grid point), grid points violating a constraint excluded."""
        result = []
        for method in self.methods:
            for point in grid_points(method.grid, self.constraints):
                for task in self.tasks_of(method):
                    for seed in self.seeds_of(task):
                        result.append(_make_trial(self, method, task, seed, point))
        return result

    def seeds_of(self, task: str) -> tuple[int, ...]:
        """The table's seeds, then the task's ``extra_seeds`` (e.g. more seeds where a power calculation asks)."""
        return self.seeds + tuple(self.extra_seeds.get(task, ()))

    @property
    def fingerprint(self) -> str:
        """Short hash of the unrestricted table's trial keys: editing the table starts a new study."""
        return hashlib.sha256("\n".join(self.universe).encode()).hexdigest()[:8]

    def tasks_of(self, method: MethodSpec) -> tuple[str, ...]:
        return self.tasks if method.tasks is None else tuple(t for t in self.tasks if t in method.tasks)

    def baseline_of(self, method: MethodSpec) -> str:
        return method.baseline or self.baseline

    def method(self, name: str) -> MethodSpec:
        for method in self.methods:
            if method.name == name:
                return method
        raise KeyError(name)


def trial_key(method: str, task: str, seed: int, params: Mapping[str, Any]) -> str:
    point = ",".join(f"{k}={json.dumps(params[k])}" for k in sorted(params))
    return f"{method}|{task}|seed={seed}|{point}"


def _make_trial(sweep: SweepSpec, method: MethodSpec, task: str, seed: int, point: dict) -> TrialSpec:
    recipe = copy.deepcopy(method.recipe)
    training = copy.deepcopy(sweep.settings.get("training", {}))
    for path, value in point.items():
        head, _, rest = path.partition(".")
        _set_dotted(recipe if head == "method" else training, rest, value)
    settings = {k: copy.deepcopy(v) for k, v in sweep.settings.items() if k != "training"}
    if method.student:  # a row-specific student (e.g. TED's layers M(k)); other rows' keys are unchanged
        settings["student"] = {**(settings.get("student") or {}), **copy.deepcopy(method.student)}
    data = settings.pop("data", {}) or {}
    settings["data"] = copy.deepcopy(data.get(task, data.get("default", {})))
    settings["selection"] = sweep.selection  # heldout: the job path cuts a slice of the training set
    if (select := sweep.select_metric(task)) is not None:  # the paper's metric where it is not the primary one
        settings["select_metric"] = select
    return TrialSpec(
        table=sweep.table,
        method=method.name,
        label=method.label,
        job=method.job,
        task=task,
        seed=seed,
        params=dict(point),
        recipe=recipe,
        training=training,
        settings=settings,
        recipe_ref=method.recipe_ref,
        pipeline=method.pipeline,
        overrides=copy.deepcopy(method.overrides),
    )


def _set_dotted(target: dict, path: str, value: Any) -> None:
    parts = path.split(".")
    for part in parts[:-1]:
        nxt = target.setdefault(part, {})
        if not isinstance(nxt, dict):
            raise ValueError(f"grid parameter path {path!r}: {part!r} is not a mapping in the recipe")
        target = nxt
    target[parts[-1]] = value


def grid_points(grid: Mapping[str, Sequence], constraints: Iterable[dict] = ()) -> list[dict]:
    """Cartesian product of ``grid`` (sorted keys) minus points that break a constraint.

    A constraint ``{sum_at_most: 1.0, of: [method.weights.kd, method.weights.layer]}`` keeps
    points whose listed values sum to at most the bound (ALP-KD: β = 1 − η − λ ≥ 0); it is
    ignored for grids that do not contain all its parameters.
    """
    keys = sorted(grid)
    points = [dict(zip(keys, values)) for values in itertools.product(*(grid[k] for k in keys))]
    for constraint in constraints:
        names = constraint["of"]
        if all(name in grid for name in names):
            bound = float(constraint["sum_at_most"])
            points = [p for p in points if sum(float(p[n]) for n in names) <= bound + 1e-12]
    return points


def resolve_recipe(reference: str, recipes: Mapping[str, Mapping], where: str) -> tuple[str, dict]:
    """``"distill_methods.pkd"`` -> (job kind, a copy of that recipe)."""
    namespace, _, name = str(reference).partition(".")
    if namespace not in RECIPE_NAMESPACES:
        raise ValueError(f"{where}: recipe {reference!r} must start with one of {', '.join(RECIPE_NAMESPACES)}")
    available = recipes.get(namespace) or {}
    if name not in available:
        raise ValueError(
            f"{where}: recipe {reference!r} not found; {namespace} has {', '.join(available) or 'nothing'}"
        )
    return RECIPE_NAMESPACES[namespace], copy.deepcopy(dict(available[name]))


def check_method_recipe(
    entry: Mapping, recipe: Mapping, grid: Mapping[str, Sequence], constraints: Iterable[dict], where: str
) -> None:
    """A row's recipe after its ``set`` and at every ``method.*`` grid point must be a valid recipe of a
    registered method ([`bert_kd.experiment.parameters.recipe_problems`][]): ValueError naming each bad key under
    the row's ``set``, ``grid`` or the referenced recipe."""
    set_keys = {str(path).split(".")[0] for path in (entry.get("set") or {})}
    method_grid = {path: values for path, values in grid.items() if path.startswith("method.")}
    grid_keys = {path.split(".")[1] for path in method_grid}
    problems: dict[str, str] = {}
    for point in grid_points(method_grid, constraints) or [{}]:
        candidate = copy.deepcopy(dict(recipe))
        for path, value in point.items():
            _set_dotted(candidate, path.partition(".")[2], value)
        for key, message in recipe_problems(candidate, ""):
            head = key.lstrip(".").split(".")[0].split("[")[0] or "method"
            if head in grid_keys:
                source = f"{where}.grid.method"
            elif head in set_keys:
                source = f"{where}.set"
            else:
                source = str(entry["recipe"])
            problems.setdefault(
                source + (key or (".method" if source.endswith(".set") else "")), message.replace("'.", f"'{source}.")
            )
    if problems:
        raise ValueError("; ".join(f"{key}: {message}" for key, message in problems.items()))


def build_sweep(reproduce: Mapping, recipes: Mapping[str, Mapping]) -> SweepSpec:
    """Parse the ``reproduce`` block: pick ``reproduce.table`` from ``reproduce.tables`` and
    apply the ``tasks`` / ``methods`` / ``seeds`` restrictions.

    ``recipes`` maps recipe namespaces (``distill_methods``, ``ted_methods``,
    ``multi_teacher_configs``) to their parameter blocks. A bad entry, or a restriction that leaves
    no trial, is a [`SweepParameterError`][] naming the parameter.
    """
    if isinstance(reproduce, Mapping) and reproduce.get("table") in (None, ""):
        raise SweepParameterError(
            [("reproduce.table", "no table named; valid: " + " ".join(reproduce.get("tables") or {}))], fix=SWEEP_FIX
        )
    try:
        sweep = _build_sweep(reproduce, recipes)
    except SweepParameterError:
        raise
    except ValueError as error:
        raise sweep_parameter_error(error) from error
    if not sweep.trials():
        given = ", ".join(
            f"reproduce.{k}={reproduce.get(k)!r}"
            for k in ("methods", "tasks", "seeds", "grid")
            if reproduce.get(k) not in (None, "", {})
        )
        raise SweepParameterError(
            [
                (
                    "reproduce",
                    f"the restriction {given or ''} leaves no trial of table "
                    f"{sweep.table!r} (a method may run on some tasks only)",
                )
            ],
            fix=SWEEP_FIX,
        )
    return sweep


def _build_sweep(reproduce: Mapping, recipes: Mapping[str, Mapping]) -> SweepSpec:
    tables = reproduce.get("tables") or {}
    name = reproduce.get("table")
    if name not in tables:
        raise ValueError(f"reproduce.table: unknown table {name!r}; valid: {' '.join(tables)}")
    table = tables[name]
    where = f"reproduce.tables.{name}"
    table_grid = _check_grid(table.get("grid") or {}, f"{where}.grid")

    methods = []
    for method_name, entry in (table.get("methods") or {}).items():
        method_where = f"{where}.methods.{method_name}"
        if not isinstance(entry, Mapping) or "recipe" not in entry:
            raise ValueError(f"{method_where} must be a mapping with a 'recipe' (e.g. distill_methods.pkd)")
        unknown_keys = sorted(set(entry) - METHOD_KEYS)
        if unknown_keys:
            raise ValueError(
                f"{method_where}: unknown key(s) {', '.join(unknown_keys)}; valid: {', '.join(sorted(METHOD_KEYS))}"
            )
        student = entry.get("student") or {}
        if not isinstance(student, Mapping):
            raise ValueError(f"{method_where}.student must be a mapping of student settings, got {student!r}")
        job, recipe = resolve_recipe(entry["recipe"], recipes, method_where)
        for path, value in (entry.get("set") or {}).items():
            _set_dotted(recipe, str(path), copy.deepcopy(value))
        grid_entry = entry.get("grid")
        if grid_entry is None:
            grid = dict(table_grid)
        elif isinstance(grid_entry, Mapping):
            grid = _check_grid(grid_entry, f"{method_where}.grid")
        elif isinstance(grid_entry, (list, tuple)):
            unknown = [p for p in grid_entry if p not in table_grid]
            if unknown:
                raise ValueError(f"{method_where}.grid names {unknown} not in {where}.grid ({', '.join(table_grid)})")
            grid = {p: table_grid[p] for p in grid_entry}
        else:
            raise ValueError(
                f"{method_where}.grid must be a list of {where}.grid names or a mapping, got {grid_entry!r}"
            )
        method_tasks = entry.get("tasks")
        if method_tasks is not None:
            method_tasks = tuple(normalize_task(t) for t in method_tasks)
            unknown = [t for t in method_tasks if t not in [normalize_task(x) for x in table.get("tasks") or []]]
            if unknown:
                raise ValueError(f"{method_where}.tasks {unknown} are not among {where}.tasks")
        check_method_recipe(entry, recipe, grid, table.get("constraints") or (), method_where)
        methods.append(
            MethodSpec(
                method_name,
                str(entry.get("label", method_name)),
                job,
                recipe,
                grid,
                method_tasks,
                entry.get("baseline"),
                copy.deepcopy(dict(student)),
                str(entry["recipe"]),
                *row_pipeline_and_overrides(entry, method_where),
                *row_arm(entry, method_name, table.get("paired"), method_where),
            )
        )
    if not methods:
        raise ValueError(f"{where}.methods is empty")
    arms = paired_arms(table.get("paired"), methods, where)

    method_names = [m.name for m in methods]
    for m in methods:
        if m.baseline is not None and m.baseline not in method_names:
            raise ValueError(f"{where}.methods.{m.name}.baseline {m.baseline!r} is not one of {' '.join(method_names)}")
    tasks = [normalize_task(t) for t in table.get("tasks") or []]
    seeds = [_as_int(s) for s in table.get("seeds") or []]
    if not tasks or not seeds:
        raise ValueError(f"{where} needs non-empty tasks and seeds")
    extra_seeds = _extra_seeds(table.get("extra_seeds"), tasks, seeds, f"{where}.extra_seeds")
    baseline = table.get("baseline", method_names[0])
    if baseline not in method_names:
        raise ValueError(f"{where}.baseline {baseline!r} is not one of its methods ({' '.join(method_names)})")

    keep_methods = parse_restriction(reproduce.get("methods"), "reproduce.methods", method_names)
    keep_tasks = parse_restriction(reproduce.get("tasks"), "reproduce.tasks", tasks, convert=normalize_task)
    all_seeds = seeds + sorted({s for more in extra_seeds.values() for s in more})
    keep_seeds = parse_restriction(reproduce.get("seeds"), "reproduce.seeds", all_seeds, convert=_as_int)
    selection = str(table.get("selection", "dev"))
    if selection not in SELECTIONS:
        raise ValueError(f"{where}.selection must be one of {', '.join(SELECTIONS)}, got {selection!r}")
    epoch_metric = str(table.get("epoch_metric", "paper"))
    if epoch_metric not in EPOCH_METRICS:
        raise ValueError(f"{where}.epoch_metric must be one of {', '.join(EPOCH_METRICS)}, got {epoch_metric!r}")
    constraints = tuple(table.get("constraints") or ())
    for i, constraint in enumerate(constraints):
        if not isinstance(constraint, Mapping) or set(constraint) != {"sum_at_most", "of"}:
            raise ValueError(f"{where}.constraints[{i}] must be {{sum_at_most: <bound>, of: [<grid paths>]}}")
    settings = {
        k: copy.deepcopy(table[k])
        for k in ("student", "teacher", "teachers", "training", "data", "heldout")
        if k in table
    }
    if "trial_seed_at" in table:  # parameters that take each trial's seed (a teacher and data sample per seed)
        settings["trial_seed_at"] = trial_seed_paths(table["trial_seed_at"], f"{where}.trial_seed_at")
    group_by_length = table.get("group_by_length", False)
    if not isinstance(group_by_length, bool):
        raise ValueError(f"{where}.group_by_length must be true or false, got {group_by_length!r}")
    if group_by_length:  # a table's batching is part of its protocol (random batches, the default, stay out of keys)
        settings["group_by_length"] = True
        settings.update(grouped_batches_material(True))  # how grouped batches are seeded (see the constant)
    full = SweepSpec(
        table=name,
        description=str(table.get("paper", "")),
        methods=tuple(methods),
        tasks=tuple(tasks),
        seeds=tuple(seeds),
        selection=selection,
        baseline=baseline,
        constraints=constraints,
        settings=settings,
        notes=str(table.get("notes", "")).strip(),
        extra_seeds=extra_seeds,
        epoch_metric=epoch_metric,
        arms=arms,
    )
    keep_grid = parse_grid_restriction(reproduce.get("grid"))
    known_paths = {path for m in methods for path in m.grid}
    return dataclasses.replace(
        full,
        methods=tuple(
            _restrict_grid(m, keep_grid, known_paths) for m in methods if keep_methods is None or m.name in keep_methods
        ),
        tasks=tuple(keep_tasks or tasks),
        seeds=tuple(s for s in seeds if keep_seeds is None or s in keep_seeds),
        extra_seeds={
            task: kept
            for task, more in extra_seeds.items()
            if (kept := tuple(s for s in more if keep_seeds is None or s in keep_seeds))
        },
        universe=tuple(sorted(t.key for t in full.trials())),
    )
