"""``evaluate``: any model directory or MLflow model URI on any task's dev set."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
