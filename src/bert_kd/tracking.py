"""MLflow tracking: one run per training job, nested under the ``kedro run`` when kedro-mlflow
opened one, so every method of a comparison pipeline gets its own comparable run."""

from __future__ import annotations

import contextlib
import json
import logging
import platform
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator, Mapping

log = logging.getLogger(__name__)


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


def is_main_process() -> bool:
    """Rank 0 of a torchrun / ``accelerate launch`` job (or a plain single process): the only
    process that talks to MLflow, so N processes make one run and one store."""
    import os

    return int(os.environ.get("RANK", "0") or 0) == 0


def num_processes() -> int:
    """Processes of this job (``WORLD_SIZE`` set by torchrun / ``accelerate launch``; 1 otherwise)."""
    import os

    return int(os.environ.get("WORLD_SIZE", "1") or 1)


def environment_info() -> dict[str, str]:
    """Device, GPU name, library versions and git commit of this run."""
    import torch
    import transformers

    info = {
        "env.device": "cuda" if torch.cuda.is_available() else "cpu",
        "env.gpu_name": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
        "env.torch": torch.__version__,
        "env.transformers": transformers.__version__,
        "env.python": platform.python_version(),
        "env.cpu_threads": str(torch.get_num_threads()),
    }
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False
        ).stdout.strip()
        info["env.git_commit"] = commit or "unknown"
    except (OSError, subprocess.SubprocessError):
        info["env.git_commit"] = "unknown"
    return info


class RunLogger:
    """Thin wrapper over the active MLflow run; every call is a no-op when tracking is off."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.run_id: str | None = None

    def log_params(self, params: Mapping) -> None:
        if not self.enabled:
            return
        import mlflow

        for key, value in flatten(params).items():
            text = json.dumps(value) if isinstance(value, (list, tuple)) else str(value)
            mlflow.log_param(key, text[:6000])

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        if not self.enabled:
            return
        import mlflow

        clean = {k.replace("@", "_"): float(v) for k, v in metrics.items() if _is_number(v)}
        if clean:
            mlflow.log_metrics(clean, step=step)

    def set_tags(self, tags: Mapping[str, str]) -> None:
        if self.enabled:
            import mlflow

            mlflow.set_tags({k: str(v) for k, v in tags.items()})

    def log_dict(self, data: Mapping, name: str) -> None:
        if self.enabled:
            import mlflow

            mlflow.log_dict(dict(data), name)

    def log_figure(self, figure, name: str) -> None:
        if self.enabled:
            import mlflow

            mlflow.log_figure(figure, name)

    def log_artifacts(self, directory: str | Path, artifact_path: str) -> None:
        if self.enabled:
            import mlflow

            mlflow.log_artifacts(str(directory), artifact_path)


def _is_number(value) -> bool:
    try:
        float(value)
        return True
    except (TypeError, ValueError):
        return False


@contextlib.contextmanager
def tracked_run(name: str, enabled: bool = True, tags: Mapping[str, str] | None = None) -> Iterator[RunLogger]:
    """Open an MLflow run called ``name`` (nested when a run is already active).

    With ``enabled=False``, or on a process other than rank 0, yields a logger that does nothing.
    """
    if not enabled or not is_main_process():
        yield RunLogger(False)
        return
    import mlflow

    nested = mlflow.active_run() is not None
    with mlflow.start_run(run_name=name, nested=nested) as run:
        logger = RunLogger(True)
        logger.run_id = run.info.run_id
        logger.set_tags({**environment_info(), **(tags or {})})
        logger.log_params({"num_processes": num_processes()})
        yield logger


def save_figure_to_temp(figure, name: str) -> Path:
    """Write a matplotlib figure to a temporary PNG (for callers that need a file)."""
    path = Path(tempfile.mkdtemp()) / name
    figure.savefig(path, dpi=120, bbox_inches="tight")
    return path
