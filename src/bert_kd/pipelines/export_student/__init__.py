"""export_student pipeline block: ONNX (+ int8) student, verified, with a latency table."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
