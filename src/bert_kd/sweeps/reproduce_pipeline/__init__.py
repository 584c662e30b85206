"""``reproduce``: a sweep table of ``parameters_reproduce.yml`` → trials on the job path → tables."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
