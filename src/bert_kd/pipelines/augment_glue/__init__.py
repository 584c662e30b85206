"""augment_glue pipeline: a task's training split → its transfer set (Tang et al. 2019; TinyBERT)."""

from .pipeline import create_pipeline, transfer_pipeline, transfer_pipelines

__all__ = ["create_pipeline", "transfer_pipeline", "transfer_pipelines"]
