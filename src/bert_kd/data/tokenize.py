"""Tokenize GLUE splits with a model's own tokenizer (sentence pairs, truncation, max length).

Output: a ``datasets.DatasetDict`` (one entry per split) with columns ``idx``, ``labels``,
``input_ids``, ``attention_mask`` and ``token_type_ids`` when the tokenizer makes them.
Several tokenizations of the same rows (multi-teacher) are merged with :func:`merge_tokenized`
under per-model prefixes (``t0_input_ids`` …), so one batch carries every model's inputs.
"""

from __future__ import annotations

from typing import Mapping

import pandas as pd

TOKEN_COLUMNS = ("input_ids", "attention_mask", "token_type_ids")


def tokenize_frame(frame: pd.DataFrame, tokenizer, max_length: int, batch_size: int = 1000):
    """Tokenize one split (columns idx, sentence1, sentence2, label) into a ``datasets.Dataset``."""
    from datasets import Dataset

    if max_length < 8:
        raise ValueError(f"max_seq_length must be >= 8, got {max_length}")
    if frame.empty:
        raise ValueError("cannot tokenize an empty split")
    first = frame["sentence1"].fillna("").astype(str).tolist()
    has_pair = "sentence2" in frame and frame["sentence2"].notna().any()
    second = frame["sentence2"].fillna("").astype(str).tolist() if has_pair else None
    columns: dict[str, list] = {key: [] for key in TOKEN_COLUMNS}
    for start in range(0, len(first), batch_size):
        stop = start + batch_size
        encoded = tokenizer(
            first[start:stop],
            second[start:stop] if second is not None else None,
            truncation=True,
            max_length=max_length,
            padding=False,
        )
        for key in TOKEN_COLUMNS:
            if key in encoded:
                columns[key].extend(encoded[key])
    data = {"idx": frame["idx"].astype(int).tolist(), "labels": frame["label"].tolist()}
    data.update({key: value for key, value in columns.items() if value})
    return Dataset.from_dict(data)


def tokenize_splits(splits: Mapping[str, pd.DataFrame], tokenizer, max_length: int):
    """Tokenize every split of a task into a ``datasets.DatasetDict``."""
    from datasets import DatasetDict

    return DatasetDict({name: tokenize_frame(frame, tokenizer, max_length) for name, frame in splits.items()})


def merge_tokenized(primary, others: Mapping[str, object]):
    """Add other models' token columns to ``primary`` under ``<prefix>`` names (same rows)."""
    from datasets import DatasetDict

    merged = {}
    for split, dataset in primary.items():
        for prefix, other in others.items():
            other_split = other[split]
            if other_split["idx"] != dataset["idx"]:
                raise ValueError(f"tokenizations of split {split!r} for {prefix!r} cover different rows")
            for key in TOKEN_COLUMNS:
                if key in other_split.column_names:
                    dataset = dataset.add_column(prefix + key, other_split[key])
        merged[split] = dataset
    return DatasetDict(merged)
