"""Data loading for GLUE tasks (Kedro-free)."""

from bert_kd.core.data.glue import (
    TASKS,
    GlueDownloadError,
    GlueFileNotFoundError,
    GlueFormatError,
    TaskSpec,
    download_glue_task,
    get_task,
    load_glue_task,
    normalize_task,
    read_glue_tsv,
    resolve_glue_dir,
    subsample,
)

__all__ = [
    "TASKS",
    "GlueDownloadError",
    "GlueFileNotFoundError",
    "GlueFormatError",
    "TaskSpec",
    "download_glue_task",
    "get_task",
    "load_glue_task",
    "normalize_task",
    "read_glue_tsv",
    "resolve_glue_dir",
    "subsample",
]
