"""Each method's mechanism shown on a small case whose answer is known in advance (``bert-kd mechanisms``).

A check is a function registered with [`mechanism`][] under its method's name in [`CHECKS`][]; it runs the
real method modules on a constructed case in seconds on a CPU and returns one [`MechanismResult`][] per
quantity it measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

__all__ = ["CHECKS", "MechanismResult", "mechanism"]


@dataclass(frozen=True)
class MechanismResult:
    """What a check measured (``quantity``: its name; ``measured``: the value or named values), what the
    paper's mechanism implies (``expected``, in words with the threshold), and whether it ``holds``."""

    method: str
    quantity: str
    measured: dict[str, float] | float
    expected: str
    holds: bool


#: method name -> its check
CHECKS: dict[str, Callable[[], list[MechanismResult]]] = {}


def mechanism(name: str) -> Callable[[Callable[[], list[MechanismResult]]], Callable[[], list[MechanismResult]]]:
    """Register a check under ``name`` in [`CHECKS`][] (a name registered twice is an error)."""

    def register(check: Callable[[], list[MechanismResult]]) -> Callable[[], list[MechanismResult]]:
        if name in CHECKS:
            raise ValueError(f"mechanism check {name!r} is registered twice")
        CHECKS[name] = check
        return check

    return register
