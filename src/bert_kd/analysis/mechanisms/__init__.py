"""Each method does what its paper's mechanism does, shown on a controlled case whose answer is known in advance
(``bert-kd mechanisms``).

A check runs the method's own module through the one training loop (``bert_kd.core.training.fit``) or, where the
mechanism is a loss term, through the method's own ``terms`` on planted features: never a second implementation.
Each is small (a tiny model, a few hundred rows at most) and finishes in seconds on two CPU cores. A check
returns one [`MechanismResult`][] per quantity: what was measured, what the paper's mechanism implies, and whether
the measurement holds it.

Every module of this package registers its checks with [`mechanism`][] on import; the package imports all of
them (``pkgutil``), so a new method family is one new module here.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import asdict, dataclass
from typing import Callable


@dataclass(frozen=True)
class MechanismResult:
    """One measured quantity of a method's mechanism on its controlled case."""

    method: str
    quantity: str
    measured: dict[str, float] | float
    expected: str
    holds: bool

    def as_dict(self) -> dict:
        return asdict(self)


#: method name → its check (run on demand: each trains a tiny model).
CHECKS: dict[str, Callable[[], list[MechanismResult]]] = {}


def mechanism(name: str):
    """Register ``check`` as the mechanism check of method ``name`` (one per name)."""

    def register(check: Callable[[], list[MechanismResult]]):
        if name in CHECKS and CHECKS[name] is not check:
            raise ValueError(f"mechanism check {name!r} is registered twice")
        CHECKS[name] = check
        return check

    return register


def _import_checks() -> None:
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")


def run_checks(names: list[str] | None = None) -> list[MechanismResult]:
    """The results of the named checks (all, in name order, without names); ``KeyError`` naming the known ones
    for an unknown name."""
    names = list(names or sorted(CHECKS))
    unknown = [name for name in names if name not in CHECKS]
    if unknown:
        raise KeyError(f"no mechanism check named {unknown}; known: {', '.join(sorted(CHECKS))}")
    results: list[MechanismResult] = []
    for name in names:
        results.extend(CHECKS[name]())
    return results


_import_checks()
