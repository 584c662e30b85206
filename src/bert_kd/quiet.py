"""Silence third-party warnings every ``kedro`` command would otherwise print.

Each entry names one known message from a library we do not control; anything else still shows.
"""

from __future__ import annotations

import logging
import re
import warnings

#: (message regex, category) of warnings that tell the user nothing actionable.
KNOWN_NOISE: tuple[tuple[str, type[Warning]], ...] = (
    # MLflow inspects every PythonModel subclass on import (kedro-mlflow's KedroPipelineModel).
    (r"Add type hints to the `predict` method", UserWarning),
    # Kedro 1.7's config loader and kedro-mlflow 2.0 still call OmegaConf's deprecated API.
    (r"register_new_resolver\(\) is deprecated", UserWarning),
    # Namespaced datasets (``alp_kd.alp.student_metrics``) read by the un-namespaced comparison nodes:
    # the dot *is* the namespace, which is how Kedro modular pipelines expose their outputs.
    (r"One or more dataset names contain '\.' characters", UserWarning),
)


class KnownNoiseFilter(logging.Filter):
    """Drop ``py.warnings`` records of :data:`KNOWN_NOISE` (Kedro routes warnings into logging;
    MLflow re-enables its own with ``simplefilter("once")``, so ``filterwarnings`` alone misses it)."""

    pattern = re.compile("|".join(message for message, _ in KNOWN_NOISE))

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.pattern.search(record.getMessage())


def silence_known_warnings() -> None:
    """Install the :data:`KNOWN_NOISE` filters (idempotent)."""
    for message, category in KNOWN_NOISE:
        warnings.filterwarnings("ignore", message=f".*{message}", category=category)
    logger = logging.getLogger("py.warnings")
    if not any(isinstance(f, KnownNoiseFilter) for f in logger.filters):
        logger.addFilter(KnownNoiseFilter())
