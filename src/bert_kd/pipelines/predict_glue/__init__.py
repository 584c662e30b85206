"""``predict_glue``: a model's GLUE test-set predictions in the GLUE server's format."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
