"""Tokenize GLUE splits with a model's own tokenizer (sentence pairs, truncation, max length).

Output: a ``datasets.DatasetDict`` (one entry per split) with columns ``idx``, ``labels``,
``input_ids``, ``attention_mask`` and ``token_type_ids`` when the tokenizer makes them.
Several tokenizations of the same rows (multi-teacher) are merged with [`merge_tokenized`][]
under per-model prefixes (``t0_input_ids`` …), so one batch carries every model's inputs.
Each split records in its ``info`` how many of its rows were cut at the max length ([`input_cut`][]:
outside the rows, so the data's fingerprint and every content key stay as they were).
Tokenized ``with_offsets``, each row also records its tokens' characters (``char_offsets``);
[`merge_tokenized`][] turns them into shared-span ids for every model whose tokens differ
from the primary's (``<prefix>span_ids``, ``<prefix>student_span_ids``; see
[`bert_kd.core.data.spans`][]) and drops them.
"""

from __future__ import annotations

import json
from typing import Mapping

import pandas as pd

from bert_kd.core.data.spans import shared_span_ids, token_character_spans

TOKEN_COLUMNS = ("input_ids", "attention_mask", "token_type_ids")
#: Per-token ``[sentence, start, end]`` (``with_offsets``); consumed by [`merge_tokenized`][].
OFFSET_COLUMN = "char_offsets"
#: The key of a split's ``info.description`` (JSON) under which [`tokenize_frame`][] records its cut rows.
INPUT_CUT = "input_cut"


def cut_rows(tokenizer, first: list[str], second: list[str] | None, lengths: list[int], max_length: int) -> int:
    """How many rows the tokenizer cut at ``max_length``: of the rows that fill it (``lengths``: the tokens
    kept), those that tokenized one token further are longer (only the full rows are tokenized again)."""
    full = [i for i, length in enumerate(lengths) if length >= max_length]
    if not full:
        return 0
    again = tokenizer(
        [first[i] for i in full],
        [second[i] for i in full] if second is not None else None,
        truncation=True,
        max_length=max_length + 1,
        padding=False,
    )
    return sum(len(ids) > max_length for ids in again["input_ids"])


def input_cut(dataset) -> dict | None:
    """``{"max_length": 64, "rows": 277, "cut": 97}``: what [`tokenize_frame`][] recorded of a split's rows cut
    at the max length (kept through ``select``, ``add_column``, concatenation), None for a split made otherwise."""
    try:
        recorded = json.loads(dataset.info.description or "{}").get(INPUT_CUT)
    except (AttributeError, ValueError):
        return None
    return dict(recorded) if isinstance(recorded, dict) else None


def tokenize_frame(frame: pd.DataFrame, tokenizer, max_length: int, batch_size: int = 1000, with_offsets: bool = False):
    """Tokenize one split (columns idx, sentence1, sentence2, label) into a ``datasets.Dataset``;
    ``with_offsets`` adds ``char_offsets`` when the tokenizer is fast (a slow one has no offsets)."""
    from datasets import Dataset, DatasetInfo

    if max_length < 8:
        raise ValueError(f"max_seq_length must be >= 8, got {max_length}")
    if frame.empty:
        raise ValueError("cannot tokenize an empty split")
    first = frame["sentence1"].fillna("").astype(str).tolist()
    has_pair = "sentence2" in frame and frame["sentence2"].notna().any()
    second = frame["sentence2"].fillna("").astype(str).tolist() if has_pair else None
    columns: dict[str, list] = {key: [] for key in TOKEN_COLUMNS}
    offsets = with_offsets and bool(getattr(tokenizer, "is_fast", False))
    char_offsets: list = []
    for start in range(0, len(first), batch_size):
        stop = start + batch_size
        encoded = tokenizer(
            first[start:stop],
            second[start:stop] if second is not None else None,
            truncation=True,
            max_length=max_length,
            padding=False,
            return_offsets_mapping=offsets,
        )
        for key in TOKEN_COLUMNS:
            if key in encoded:
                columns[key].extend(encoded[key])
        if offsets:
            for row, mapping in enumerate(encoded["offset_mapping"]):
                texts = (first[start + row],) if second is None else (first[start + row], second[start + row])
                char_offsets.append(token_character_spans(mapping, encoded.sequence_ids(row), texts))
    data = {"idx": frame["idx"].astype(int).tolist(), "labels": frame["label"].tolist()}
    data.update({key: value for key, value in columns.items() if value})
    if offsets:
        data[OFFSET_COLUMN] = char_offsets
    cut = cut_rows(tokenizer, first, second, [len(ids) for ids in columns["input_ids"]], max_length)
    record = {INPUT_CUT: {"max_length": int(max_length), "rows": len(first), "cut": int(cut)}}
    return Dataset.from_dict(data, info=DatasetInfo(description=json.dumps(record)))


def tokenize_splits(splits: Mapping[str, pd.DataFrame], tokenizer, max_length: int, with_offsets: bool = False):
    """Tokenize every split of a task into a ``datasets.DatasetDict`` (``with_offsets``: see [`tokenize_frame`][])."""
    from datasets import DatasetDict

    return DatasetDict(
        {
            name: tokenize_frame(frame, tokenizer, max_length, with_offsets=with_offsets)
            for name, frame in splits.items()
        }
    )


def merge_tokenized(primary, others: Mapping[str, object]):
    """Add other models' token columns to ``primary`` under ``<prefix>`` names (same rows).

    Where both sides carry ``char_offsets`` and the other model's tokens differ from the
    primary's on some row, also add its shared-span ids (``<prefix>span_ids`` per token of the
    other model, ``<prefix>student_span_ids`` per token of the primary); identical
    tokenizations get none (their positions already align). ``char_offsets`` are dropped."""
    from datasets import DatasetDict

    with_spans = {  # decided over all splits, so that every split has the same columns
        prefix: all(OFFSET_COLUMN in d.column_names for d in (*primary.values(), *other.values()))
        and any(other[split]["input_ids"] != dataset["input_ids"] for split, dataset in primary.items())
        for prefix, other in others.items()
    }
    merged = {}
    for split, dataset in primary.items():
        for prefix, other in others.items():
            other_split = other[split]
            if other_split["idx"] != dataset["idx"]:
                raise ValueError(f"tokenizations of split {split!r} for {prefix!r} cover different rows")
            for key in TOKEN_COLUMNS:
                if key in other_split.column_names:
                    dataset = dataset.add_column(prefix + key, other_split[key])
            if with_spans[prefix]:
                pairs = [shared_span_ids(s, t) for s, t in zip(dataset[OFFSET_COLUMN], other_split[OFFSET_COLUMN])]
                dataset = dataset.add_column(prefix + "span_ids", [t for _, t in pairs])
                dataset = dataset.add_column(prefix + "student_span_ids", [s for s, _ in pairs])
        if OFFSET_COLUMN in dataset.column_names:
            dataset = dataset.remove_columns(OFFSET_COLUMN)
        merged[split] = dataset
    return DatasetDict(merged)
