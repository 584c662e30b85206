"""Nodes: ingest a GLUE task (local TSVs or the HF hub) and tokenize it with a model's tokenizer."""

from __future__ import annotations

import logging

import pandas as pd

from bert_kd.config.schema import Block, Teacher
from bert_kd.core.data.glue import get_task, load_glue_task, resolve_glue_dir, subsample
from bert_kd.core.data.tokenize import tokenize_splits
from bert_kd.core.models import load_tokenizer
from bert_kd.experiment.run_setup import teacher_block

log = logging.getLogger(__name__)


def ingest_glue(
    task: str, glue_dir: str | None, max_train_samples: int | None, max_eval_samples: int | None, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Read (or download once into ``glue_dir``) the task's train and dev splits.

    Returns the train frame, one validation frame (column ``split`` names the dev set: MNLI has
    matched and mismatched) and a report of what was read and sampled.
    """
    spec = get_task(task)
    root, user_named = resolve_glue_dir(glue_dir)
    splits = load_glue_task(spec.name, root, allow_download=not user_named)
    train = subsample(splits.pop("train"), max_train_samples, seed)
    validation = []
    for name, frame in splits.items():
        frame = subsample(frame, max_eval_samples, seed).assign(split=name)
        validation.append(frame)
    validation = pd.concat(validation, ignore_index=True)
    report = {
        "task": spec.name,
        "glue_dir": str(root),
        "train_examples": len(train),
        "validation_examples": {name: int((validation["split"] == name).sum()) for name in splits},
        "max_train_samples": max_train_samples,
        "max_eval_samples": max_eval_samples,
        "label_counts_train": {str(k): int(v) for k, v in train["label"].value_counts().sort_index().items()}
        if not spec.is_regression
        else {},
    }
    log.info("GLUE %s: %d train / %s dev examples from %s", spec.name, len(train), report["validation_examples"], root)
    return train, validation, report


def split_frames(train: pd.DataFrame, validation: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """``{"train": …, "validation": …}`` (MNLI: ``validation_matched``/``validation_mismatched``)."""
    frames = {"train": train}
    for name, frame in validation.groupby("split", sort=False):
        frames[str(name)] = frame.drop(columns="split").reset_index(drop=True)
    return frames


def tokenize_for_model(train: pd.DataFrame, validation: pd.DataFrame, model_params: Block[Teacher]):
    """Tokenize every split with the model's own tokenizer (pairs, truncation, ``max_seq_length``).

    ``model_params``: the ``teacher`` block or a ``multi_teachers`` entry (the hook's model, or a
    dict validated here, so an entry without ``max_seq_length`` gets the schema's default)."""
    teacher = teacher_block(model_params)
    tokenizer = load_tokenizer(teacher.model)
    return tokenize_splits(split_frames(train, validation), tokenizer, teacher.max_seq_length)
