"""How a sweep table's parameters are read: the command line's restrictions (``reproduce.methods``, ``tasks``,
``seeds``, ``grid``), a table's grid and extra seeds, and the one parameter error naming a bad entry
([`SweepParameterError`][]). Kedro-free; [`bert_kd.sweeps.spec`][] builds the sweep with them."""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Mapping, Sequence

from bert_kd.config.errors import ParameterError
from bert_kd.core.data.glue import normalize_task

GRID_PREFIXES = ("method.", "training.")


def parse_restriction(value: Any, name: str, valid: Sequence, convert=str) -> list | None:
    """``"nkd alp"`` / ``["nkd", "alp"]`` / ``"1 2"`` -> a list; ``None``/``""`` -> no restriction.

    Raises ``ValueError`` naming ``name`` and the valid values when an entry is unknown.
    """
    if value is None:
        return None
    if isinstance(value, str):
        items = value.replace(",", " ").split()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        items = [value]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise ValueError(f"{name} must be a space-separated string or a list, got {value!r}")
    if not items:
        return None
    result = []
    for item in items:
        try:
            converted = convert(item)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{name}: {item!r} is not valid ({error}); valid: {' '.join(map(str, valid))}") from None
        if converted not in valid:
            raise ValueError(f"{name}: unknown {item!r}; valid: {' '.join(map(str, valid))}")
        if converted not in result:
            result.append(converted)
    return result


def parse_grid_restriction(value: Any) -> dict[str, list[float | str]]:
    """``reproduce.grid``: ``"training.learning_rate=1e-4"`` (space-separated; ``|`` between several
    values of one path) or a mapping of path -> value(s) -> {path: [values]}."""
    if value in (None, "", {}):
        return {}
    if isinstance(value, Mapping):
        items = {str(k): v if isinstance(v, (list, tuple)) else [v] for k, v in value.items()}
    elif isinstance(value, str):
        items = {}
        for part in value.split():
            path, sep, values = part.partition("=")
            if not sep or not values:
                raise ValueError(f"reproduce.grid: {part!r} must look like training.learning_rate=1e-4")
            items[path] = values.split("|")
    else:
        raise ValueError(
            f"reproduce.grid must be a string like 'training.learning_rate=1e-4' or a mapping, got {value!r}"
        )
    return {path: [_grid_value(v) for v in values] for path, values in items.items()}


def _grid_value(value: Any):
    try:
        return float(value)
    except (TypeError, ValueError):
        return value


def _restrict_grid(method: Any, keep: Mapping[str, list], known: set[str]) -> Any:
    grid = dict(method.grid)
    for path, values in keep.items():
        if path not in known:
            raise ValueError(
                f"reproduce.grid: {path!r} is not a grid parameter of the table ({', '.join(sorted(known))})"
            )
        if path in grid:
            grid[path] = [v for v in grid[path] if _grid_value(v) in values]
            if not grid[path]:
                raise ValueError(
                    f"reproduce.grid: none of {values} is in the grid of {method.name} for {path} ({method.grid[path]})"
                )
    return dataclasses.replace(method, grid=grid)


def _as_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("a seed must be an integer")
    if isinstance(value, float) and not value.is_integer():
        raise ValueError("a seed must be an integer")
    return int(value)


def _check_grid(grid: Any, where: str) -> dict:
    if not isinstance(grid, Mapping):
        raise ValueError(f"{where} must be a mapping of parameter path -> list of values, got {grid!r}")
    result = {}
    for path, values in grid.items():
        if not str(path).startswith(GRID_PREFIXES):
            raise ValueError(f"{where}: parameter {path!r} must start with one of {', '.join(GRID_PREFIXES)}")
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) == 0:
            raise ValueError(f"{where}.{path} must be a non-empty list of values, got {values!r}")
        for value in values:
            if not (value is None or isinstance(value, (str, int, float, bool))):
                raise ValueError(f"{where}.{path}: grid values must be scalars, got {value!r}")
        result[str(path)] = list(values)
    return result


def _extra_seeds(value: Any, tasks: Sequence[str], seeds: Sequence[int], where: str) -> dict[str, tuple[int, ...]]:
    """``{sst2: [9, 10, 11]}``: seeds run for those tasks only, after the table's own."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{where} must map tasks to lists of seeds, e.g. {{sst2: [9, 10]}}; got {value!r}")
    result = {}
    for task, more in value.items():
        name = normalize_task(task)
        if name not in tasks:
            raise ValueError(f"{where}: task {task!r} is not among the table's tasks ({' '.join(tasks)})")
        if isinstance(more, str):
            more = more.split()
        if not isinstance(more, (list, tuple)):
            raise ValueError(f"{where}.{task} must be a list of seeds, got {more!r}")
        try:
            items = list(dict.fromkeys(_as_int(s) for s in more))
        except (TypeError, ValueError) as error:
            raise ValueError(f"{where}.{task}: {more!r} — {error}") from None
        repeated = [s for s in items if s in seeds]
        if not items or repeated:
            raise ValueError(
                f"{where}.{task}: a non-empty list of seeds not in the table's seeds ({' '.join(map(str, seeds))})"
                + (f"; {repeated} are" if repeated else "")
            )
        result[name] = tuple(items)
    return result


class SweepParameterError(ParameterError, ValueError):
    """A ``reproduce`` parameter that names no table, method, task, seed or grid value of the
    table, or a restriction that leaves no trial: the project's parameter block (a ``ValueError``
    too, for callers that catch that)."""


#: How the sweep's list parameters are written on the command line (Kedro splits ``--params`` on commas).
SWEEP_FIX = (
    "correct the parameter in conf/ or in --params; lists are space-separated: "
    "--params 'reproduce.table=cpu_protocol,reproduce.methods=nkd alp,reproduce.seeds=1 2'"
)


def sweep_parameter_error(error: ValueError) -> SweepParameterError:
    """``error`` (``"reproduce.methods: unknown 'x'; valid: …"``) as one parameter problem naming its key."""
    text = str(error)
    match = re.match(r"(reproduce(?:\.[\w\[\]-]+)*)(:\s*|\s+)(.*)", text, re.S)
    if match is None:
        key, message = "reproduce", text
    else:  # "key: message" loses its key prefix; "key must be …" stays a sentence
        key, message = match.group(1), match.group(3) if match.group(2).startswith(":") else text
    return SweepParameterError([(key, message)], fix=SWEEP_FIX)


def row_pipeline_and_overrides(entry: Mapping, where: str) -> tuple[str | None, dict]:
    """A row's ``pipeline`` (a registered pipeline's name, None: its recipe's default) and ``overrides`` (dotted
    parameter paths of the tree that pipeline reads → values, e.g. ``augment.copies: 4``)."""
    pipeline = entry.get("pipeline")
    if pipeline is not None and (not isinstance(pipeline, str) or not pipeline.strip()):
        raise ValueError(f"{where}.pipeline must name a registered pipeline (e.g. distill_bilstm), got {pipeline!r}")
    overrides = entry.get("overrides") or {}
    if not isinstance(overrides, Mapping) or not all(isinstance(k, str) and k for k in overrides):
        raise ValueError(
            f"{where}.overrides must map dotted parameter paths to values (e.g. augment.copies: 4), got {overrides!r}"
        )
    return pipeline, {str(k): v for k, v in overrides.items()}


def row_arm(entry: Mapping, name: str, paired: Any, where: str) -> tuple[str | None, str | None]:
    """A paired table's row: its ``arm`` (one of ``paired.arms``) and ``cell`` (the rows of one cell are its arms;
    default: the row's name); (None, None) in a table that is not paired."""
    if paired is None:
        if "arm" in entry or "cell" in entry:
            raise ValueError(f"{where}: arm and cell belong to a paired table (give the table paired: {{arms: [...]}})")
        return None, None
    arm, cell = entry.get("arm"), entry.get("cell", name)
    if not isinstance(arm, str) or not isinstance(cell, str):
        raise ValueError(f"{where}: a paired table's row names its arm (one of paired.arms) and its cell")
    return arm, cell


def paired_arms(paired: Any, methods: Sequence[Any], where: str) -> tuple[str, ...]:
    """``paired: {arms: [reference, compared]}``: two arms; every row one of them, every cell one row per arm."""
    if paired is None:
        return ()
    arms = paired.get("arms") if isinstance(paired, Mapping) else None
    if not isinstance(arms, (list, tuple)) or len(arms) != 2 or len(set(map(str, arms))) != 2:
        raise ValueError(f"{where}.paired must be {{arms: [<reference arm>, <compared arm>]}}, got {paired!r}")
    arms = tuple(map(str, arms))
    cells: dict[str, list[str]] = {}
    for method in methods:
        if method.arm not in arms:
            raise ValueError(f"{where}.methods.{method.name}.arm {method.arm!r} is not one of {', '.join(arms)}")
        cells.setdefault(method.cell, []).append(method.arm)
    for cell, have in cells.items():
        if sorted(have) != sorted(arms):
            raise ValueError(f"{where}: cell {cell!r} has arms {have}; each cell has one row per arm {list(arms)}")
    return arms


def trial_seed_paths(value: Any, where: str) -> list[str]:
    """``trial_seed_at: [seed, teacher.seed, augment.seed]``: dotted parameter paths set to each trial's seed (a
    table whose teacher, data sample or transfer set is drawn per seed, as ``kedro run --params seed=<s>`` does)."""
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"{where} must be a non-empty list of dotted parameter paths (e.g. [seed, teacher.seed])")
    return list(value)
