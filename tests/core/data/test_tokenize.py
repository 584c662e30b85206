"""bert_kd.core.data.tokenize: how many rows a split's tokenization cut at the max length, kept beside the rows."""

from __future__ import annotations

import pandas as pd

from bert_kd.core.data.tokenize import input_cut, tokenize_frame
from bert_kd.core.tiny_models import wordpiece_tokenizer
from bert_kd.experiment.jobs import dataset_fingerprint

WORDS = ["the", "man", "sat", "on", "a", "mat", "and", "dog", "was", "there", "yes", "no", "true", "false"]


def _frame(second: list[str]) -> pd.DataFrame:
    first = ["the man sat on a mat", "the dog sat there " * 4, "a dog", "the man and the dog sat on the mat"]
    return pd.DataFrame({"idx": range(4), "sentence1": first, "sentence2": second, "label": [0, 1, 0, 1]})


def test_the_rows_cut_at_the_max_length_are_counted_exactly_and_leave_the_fingerprint_alone():
    from datasets import Dataset

    tokenizer = wordpiece_tokenizer([" ".join(WORDS)] * 20, vocab_size=60)
    frame = _frame(["yes", "no", "yes true", "no"])
    lengths = [len(tokenizer(a, b)["input_ids"]) for a, b in zip(frame["sentence1"], frame["sentence2"])]
    cap = sorted(lengths)[-2]  # the longest row is cut; the second longest fills the cap exactly, uncut
    dataset = tokenize_frame(frame, tokenizer, cap)
    assert input_cut(dataset) == {"max_length": cap, "rows": 4, "cut": sum(n > cap for n in lengths)} and cap >= 8
    assert input_cut(dataset)["cut"] == 1 and max(len(ids) for ids in dataset["input_ids"]) == cap
    assert input_cut(dataset.select([0, 1])) == input_cut(dataset)  # a sampled split keeps the record
    plain = Dataset.from_dict(dataset.to_dict())  # the same rows without the record
    assert input_cut(plain) is None
    assert dataset_fingerprint({"train": dataset}) == dataset_fingerprint({"train": plain})  # content keys stay
    assert input_cut(tokenize_frame(frame, tokenizer, 64))["cut"] == 0
