"""``distill_general``: a corpus in, a general student out (TinyBERT's first stage, DistilBERT's triple loss)."""

from .pipeline import create_pipeline, two_stage_pipeline

__all__ = ["create_pipeline", "two_stage_pipeline"]
