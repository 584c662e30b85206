"""Values as the MLflow UI shows them: rounded numbers, recipes, layer maps, size tags, metric keys."""

from __future__ import annotations

import json
import math
import re
from typing import Mapping, Sequence


def flatten(values: Mapping, prefix: str = "") -> dict[str, object]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}``."""
    flat: dict[str, object] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def is_number(value) -> bool:
    try:
        float(value)
        return True
    except (TypeError, ValueError):
        return False


# ---------------------------------------------------------------- values as the UI shows them
#: Metric names (last path part) that describe the model, not its training: logged as tags.
SIZE_METRICS = ("parameters", "encoder_parameters", "size_on_disk_bytes")


#: Significant digits of a score as MLflow shows it: 0.780963 → 0.781 (a dev set of 872 rows resolves 0.0011).
METRIC_DIGITS = 4


def metric_value(value: float) -> float:
    """A score as MLflow records it: [`METRIC_DIGITS`][] significant
    digits (whole numbers, such as counts, stay exact; NaN and infinities as they are)."""
    from bert_kd.core.reports.markdown_tables import significant

    value = float(value)
    if not math.isfinite(value) or value == int(value):
        return value
    return float(significant(value, METRIC_DIGITS))


def format_number(value: float, digits: int = 6) -> str:
    """``0.30000000000000004`` → ``0.3``; ``5.0`` → ``5``; ``2e-05`` stays short."""
    return f"{float(value):.{digits}g}"


def format_param(value) -> str:
    """A param value as one short string: rounded floats, layer maps via [`layer_map_string`][],
    other lists as JSON."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float):
        return format_number(value)
    if is_layer_map(value):
        return layer_map_string(value)
    if isinstance(value, (list, tuple)):
        return json.dumps([float(format_number(v)) if isinstance(v, float) else v for v in value], default=str)
    return str(value)


def is_layer_map(value) -> bool:
    return (
        isinstance(value, (list, tuple))
        and len(value) > 0
        and all(isinstance(entry, (list, tuple)) for entry in value)
        and all(isinstance(k, int) and not isinstance(k, bool) for entry in value for k in entry)
    )


def _ranges(layers: Sequence[int]) -> str:
    """``[1, 2, 3, 5]`` → ``1-3+5``."""
    parts, ordered = [], sorted(layers)
    start = prev = ordered[0]
    for k in ordered[1:] + [None]:
        if k is not None and k == prev + 1:
            prev = k
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if k is not None:
            start = prev = k
    return "+".join(parts)


def layer_map_string(mapping: Sequence[Sequence[int]]) -> str:
    """A student→teacher layer map (``mapping[j-1]`` = teacher layers of student layer ``j``) as
    ``teacher layers→student layer`` entries: ``[[1,2,3,4,5,6], []]`` → ``1-6→1; none→2``."""
    if not is_layer_map(mapping):
        raise ValueError(f"mapping must be a list of teacher-layer lists (one per student layer), got {mapping!r}")
    return "; ".join(f"{_ranges(entry) if entry else 'none'}→{j}" for j, entry in enumerate(mapping, start=1))


def recipe_string(weights, temperature: float | None = None) -> str:
    """``ce 0.3 + kd 0.5 + layer 0.2, T=5``: the non-zero loss weights of a recipe and, when a term
    beyond the task loss is on, its temperature. ``weights`` may be a method (``.weights``,
    ``.temperature``) or a mapping term → weight."""
    if hasattr(weights, "weights"):
        temperature = getattr(weights, "temperature", temperature) if temperature is None else temperature
        schedule = getattr(weights, "schedule", None)
        if schedule is not None:  # a staged recipe trains with its stages' weights, not ``.weights``
            return " → ".join(_stage_string(stage) for stage in schedule.stages) + _temperature_suffix(
                temperature, [name for stage in schedule.stages for name in _nonzero_terms(stage.weights)]
            )
        weights = weights.weights
    terms = _nonzero_terms(weights)
    if not terms:
        raise ValueError(f"recipe weights {dict(weights)} are all zero")
    return _terms_string(weights) + _temperature_suffix(temperature, terms)


def _nonzero_terms(weights: Mapping[str, float]) -> list[str]:
    return [name for name, w in weights.items() if float(w) != 0.0]


def _terms_string(weights: Mapping[str, float]) -> str:
    """``ce 0.3 + kd 0.5``: the non-zero terms of one set of weights."""
    return " + ".join(f"{name} {format_number(float(weights[name]), 3)}" for name in _nonzero_terms(weights))


def _temperature_suffix(temperature: float | None, terms: Sequence[str]) -> str:
    return f", T={format_number(temperature, 3)}" if temperature is not None and any(t != "ce" for t in terms) else ""


def _stage_string(stage) -> str:
    """``emb 1 + hidden 1 + attn 1 (60% of epochs)``; the last stage runs to the end."""
    text = _terms_string(stage.weights)
    if stage.epochs is not None:
        return f"{text} ({stage.epochs} epoch{'s' if stage.epochs != 1 else ''})"
    return f"{text} ({format_number(100 * stage.fraction, 3)}% of epochs)" if stage.fraction is not None else text


def weight_params(method) -> dict[str, float]:
    """``weights.<term>``, or ``stages.<i>.<term>`` (non-zero) for a staged recipe, whose
    ``.weights`` are not what it trains with."""
    schedule = getattr(method, "schedule", None)
    if schedule is None:
        return {f"weights.{k}": float(v) for k, v in method.weights.items()}
    return {
        f"stages.{i}.{k}": float(v) for i, stage in enumerate(schedule.stages) for k, v in stage.weights.items() if v
    }


def size_tags(values: Mapping[str, float]) -> dict[str, str]:
    """``{"parameters": 4386178, "size_on_disk_bytes": 17.6e6}`` → tags ``parameters``,
    ``parameters_M`` and ``size_MB`` (strings, as the runs table shows them)."""
    tags: dict[str, str] = {}
    for key, value in values.items():
        if key == "size_on_disk_bytes":
            tags["size_MB"] = f"{value / 1e6:.1f}"
        else:
            tags[key] = str(int(value))
            tags[f"{key}_M"] = f"{value / 1e6:.2f}"
    return tags


def metric_key(text: str) -> str:
    """A column or method name as an MLflow metric-key part: ``% of teacher`` → ``pct_of_teacher``,
    ``throughput (ex/s)`` → ``throughput_ex_s``."""
    text = str(text).replace("%", "pct")
    return re.sub(r"[^\w\-.]+", "_", text).strip("_") or "_"
