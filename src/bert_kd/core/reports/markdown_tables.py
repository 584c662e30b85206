"""GitHub-flavoured Markdown tables: the one renderer of comparison, latency and sweep tables."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from typing import Mapping, Sequence

import pandas as pd

#: The rule cell under a header for each alignment (GFM: a colon on the side the text keeps to).
RULES = {None: "---", "left": ":---", "center": ":---:", "right": "---:"}


def markdown_table(
    rows: pd.DataFrame | Sequence[Mapping],
    columns: Sequence[str] | None = None,
    *,
    align: Mapping[str, str] | None = None,
) -> str:
    """``rows`` (a DataFrame, or row dicts) as a GFM table: header, rule, one line per row, a final newline.

    ``columns``: which columns, in order (default: the frame's columns, or every key of the row
    dicts in first-seen order); a row without a column shows an empty cell. ``align``: column →
    ``left`` | ``center`` | ``right`` (others get the plain ``---`` rule). Cells are ``str(value)``,
    empty for None/NaN; ``|`` is escaped and line breaks become ``<br>`` so a cell stays one cell.
    No columns → ``""``. The index of a frame is not shown (``frame.reset_index()`` shows it).
    """
    records = _records(rows)
    columns = list(columns) if columns is not None else _columns(rows, records)
    align = dict(align or {})
    unknown = {name: side for name, side in align.items() if side not in RULES}
    if unknown:
        raise ValueError(f"markdown_table: align must be left, center or right, got {unknown}")
    if not columns:
        return ""
    header = _line(str(name) for name in columns)
    rule = "|" + "|".join(RULES[align.get(name)] for name in columns) + "|"
    body = [_line(_cell(record.get(name)) for name in columns) for record in records]
    return "\n".join([header, rule, *body]) + "\n"


def rounded(value: float, decimals: int) -> str:
    """``value`` to ``decimals`` places, halves away from zero on its shortest decimal form: a table's
    4-decimal 0.7775 shows as 0.778, where binary rounding (``f"{0.7775:.3f}"``) gives 0.777."""
    step = Decimal(1).scaleb(-decimals)
    return str(Decimal(repr(float(value))).quantize(step, rounding=ROUND_HALF_UP))


def significant(value: float, digits: int = 4) -> str:
    """``value`` to ``digits`` significant digits, halves away from zero ([`rounded`][]), trailing
    zeros kept: 0.78899 → ``0.7890``, 0.04213 → ``0.04213``, 96.43 → ``96.43``, 1234.5 → ``1235``."""
    import math

    value = float(value)
    if value == 0 or not math.isfinite(value):
        return rounded(value, digits - 1) if value == 0 else str(value)
    magnitude = math.floor(math.log10(abs(value)))
    text = rounded(value, max(digits - 1 - magnitude, 0))
    if abs(float(text)) >= 10 ** (magnitude + 1) and digits - 2 - magnitude >= 0:  # 0.99996 → 1.000, not 1.0000
        text = rounded(value, digits - 2 - magnitude)
    return text


def _records(rows) -> list[Mapping]:
    if isinstance(rows, pd.DataFrame):
        return [dict(zip(rows.columns, values)) for values in rows.itertuples(index=False, name=None)]
    return [dict(row) for row in rows]


def _columns(rows, records: Sequence[Mapping]) -> list:
    if isinstance(rows, pd.DataFrame):
        return list(rows.columns)
    return list(dict.fromkeys(name for record in records for name in record))


def _line(cells) -> str:
    return "| " + " | ".join(_escape(cell) for cell in cells) + " |"


def _cell(value) -> str:
    if value is None or (pd.api.types.is_scalar(value) and pd.isna(value)):
        return ""
    return str(value)


def _escape(text: str) -> str:
    """A pipe would end the cell, a line break the row."""
    return text.replace("|", "\\|").replace("\r\n", "<br>").replace("\n", "<br>").replace("\r", "<br>")
