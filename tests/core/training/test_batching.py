"""Tests for bert_kd.core.training.batching: padding by each tokenizer's rules, grouped sampling, loaders."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bert_kd.core.training import Collator, LengthGroupedBatchSampler, make_loader, padding_ratio, sequence_lengths


def test_collator_pads_each_prefix_with_its_own_pad_id():
    rows = [
        {
            "idx": 3,
            "label": 1,
            "input_ids": [5, 6, 7],
            "attention_mask": [1, 1, 1],
            "token_type_ids": [0, 0, 1],
            "t0_input_ids": [2, 3],
            "t0_attention_mask": [1, 1],
            "sentence": "dropped",
        },
        {
            "idx": 9,
            "label": 0,
            "input_ids": [5],
            "attention_mask": [1],
            "token_type_ids": [0],
            "t0_input_ids": [2, 3, 4, 8],
            "t0_attention_mask": [1, 1, 1, 1],
            "sentence": "dropped",
        },
    ]
    batch = Collator({"": 0, "t0_": 99})(rows)
    assert batch["input_ids"].tolist() == [[5, 6, 7], [5, 0, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert batch["token_type_ids"].tolist() == [[0, 0, 1], [0, 0, 0]]
    assert batch["t0_input_ids"].tolist() == [[2, 3, 99, 99], [2, 3, 4, 8]]
    assert batch["t0_attention_mask"].tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]
    assert batch["labels"].tolist() == [1, 0]  # "label" is renamed
    assert batch["idx"].dtype == torch.long and batch["idx"].tolist() == [3, 9]
    assert "sentence" not in batch and "label" not in batch


def test_collator_unknown_prefix_pads_with_zero():
    batch = Collator({"t0_": 5})([{"input_ids": [1, 2]}, {"input_ids": [1]}])
    assert batch["input_ids"].tolist() == [[1, 2], [1, 0]]


def test_make_loader_order_depends_only_on_seed():
    data = [{"idx": i, "labels": 0, "input_ids": [i + 1]} for i in range(20)]

    def order(seed):
        return torch.cat([b["idx"] for b in make_loader(data, 4, Collator(), shuffle=True, seed=seed)]).tolist()

    torch.manual_seed(0)
    first = order(3)
    torch.manual_seed(123)  # the global RNG must not matter
    assert order(3) == first
    assert order(4) != first
    assert sorted(first) == list(range(20))
    plain = torch.cat([b["idx"] for b in make_loader(data, 4, Collator(), shuffle=False)]).tolist()
    assert plain == list(range(20))


def varied_lengths(n: int = 400, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [
        {"idx": i, "labels": 0, "input_ids": [5] * int(k), "attention_mask": [1] * int(k)}
        for i, k in enumerate(rng.integers(2, 60, size=n))
    ]


def test_grouped_loader_is_seeded_covers_every_example_and_pads_less():
    data = varied_lengths()

    def order(seed):
        loader = make_loader(data, 8, Collator(), shuffle=True, seed=seed, group_by_length=True)
        return torch.cat([b["idx"] for b in loader]).tolist()

    torch.manual_seed(0)
    first = order(3)
    torch.manual_seed(99)
    assert order(3) == first and order(4) != first
    assert sorted(first) == list(range(len(data)))
    grouped = padding_ratio(make_loader(data, 8, Collator(), shuffle=True, seed=3, group_by_length=True))
    random_order = padding_ratio(make_loader(data, 8, Collator(), shuffle=True, seed=3))
    assert grouped < 1.1 < 1.5 < random_order


@pytest.mark.parametrize("group_by_length", [False, True])
def test_an_epoch_of_a_shuffled_loader_leaves_the_global_rng_alone(group_by_length):
    """Dropout draws from the global RNG, which a checkpoint restores mid-epoch: an epoch's start
    must not draw from it (a DataLoader without its own generator draws its base seed there)."""
    data = varied_lengths(40)
    torch.manual_seed(5)
    before = torch.get_rng_state()
    for _ in make_loader(data, 8, Collator(), shuffle=True, seed=3, group_by_length=group_by_length):
        pass
    assert torch.equal(torch.get_rng_state(), before)


def test_grouped_batches_come_in_a_shuffled_order_not_longest_to_shortest():
    data = varied_lengths()  # fewer rows than one mega-batch: everything is sorted together
    sampler = LengthGroupedBatchSampler([len(row["input_ids"]) for row in data], batch_size=8, seed=5)
    batches = list(sampler)
    assert len(batches) == len(sampler) == math.ceil(len(data) / 8)
    assert sorted(i for batch in batches for i in batch) == list(range(len(data)))
    longest = [max(len(data[i]["input_ids"]) for i in batch) for batch in batches]
    assert longest != sorted(longest, reverse=True) and longest != sorted(longest)
    assert list(sampler) == batches and list(LengthGroupedBatchSampler(sampler.lengths, 8, seed=6)) != batches


def test_grouped_batches_of_n_processes_are_the_global_batches_of_one():
    """Accelerate gives process r every N-th batch: N consecutive parts must make up exactly the
    batch one process with batch N·B would draw (else N processes train on other batches)."""
    lengths = [(7 * i) % 23 + 1 for i in range(203)]  # several mega-batches and a short last batch
    one = list(LengthGroupedBatchSampler(lengths, batch_size=6, seed=4, mega_batch_batches=5))
    parts = LengthGroupedBatchSampler(lengths, batch_size=3, seed=4, mega_batch_batches=5, processes=2)
    it, rebuilt = iter(list(parts)), []
    for batch in one:
        rebuilt.append([i for _ in range(math.ceil(len(batch) / 3)) for i in next(it)])
    assert rebuilt == one and next(it, None) is None and len(parts) == len(list(parts))
    assert list(LengthGroupedBatchSampler(lengths, 6, seed=4, mega_batch_batches=5, processes=1)) == one


def test_grouped_eval_loader_is_longest_first_and_keeps_labels_with_rows():
    data = [{"idx": i, "labels": i, "input_ids": [1] * (i % 7 + 1)} for i in range(30)]
    assert sequence_lengths(data) == [i % 7 + 1 for i in range(30)]
    batches = list(make_loader(data, 4, Collator(), shuffle=False, group_by_length=True))
    lengths = [len(data[i]["input_ids"]) for b in batches for i in b["idx"].tolist()]
    assert lengths == sorted(lengths, reverse=True)
    assert all(torch.equal(b["idx"], b["labels"]) for b in batches)


def test_sequence_lengths_reads_a_datasets_column(sst2):
    ds, _ = sst2
    assert sequence_lengths(ds["train"]) == [len(row["input_ids"]) for row in ds["train"]]


def test_padding_ratio_counts_padded_over_real_tokens():
    batches = [{"attention_mask": torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])}]
    assert padding_ratio(batches) == pytest.approx(8 / 6)


def test_loaders_use_workers_and_pinned_memory_only_on_a_gpu(tiny_teacher_dir, sst2, monkeypatch):
    from bert_kd.core.training import use_device_loading

    data, tokenizer = sst2
    ds = data["train"]
    collator = Collator({"": tokenizer.pad_token_id})
    on_cpu = use_device_loading(make_loader(ds, 4, collator, shuffle=True), torch.device("cpu"))
    assert on_cpu.num_workers == 0 and not on_cpu.pin_memory
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    on_gpu = use_device_loading(make_loader(ds, 4, collator, shuffle=True), torch.device("cuda"))
    assert on_gpu.num_workers == 4 and on_gpu.pin_memory


# --------------------------------------------------------------------------- padding by the tokenizer's rules


XLNET_WORDS = [
    "the",
    "a",
    "movie",
    "film",
    "was",
    "great",
    "good",
    "bad",
    "not",
    "very",
    "dog",
    "sat",
    "on",
    "mat",
    "and",
    "it",
    "fun",
]


def tiny_xlnet_tokenizer():
    from transformers import XLNetTokenizer

    specials = ["<unk>", "<s>", "</s>", "<cls>", "<sep>", "<pad>", "<mask>"]
    vocab = [(t, 0.0) for t in specials] + [("▁" + w, -1.0) for w in XLNET_WORDS]
    vocab += [(c, -5.0) for c in "abcdefghijklmnopqrstuvwxyz"]
    return XLNetTokenizer(vocab=vocab, unk_id=0)


def tiny_xlnet(vocab_size: int):
    from transformers import XLNetConfig, XLNetForSequenceClassification

    torch.manual_seed(0)
    config = XLNetConfig(vocab_size=vocab_size, d_model=32, n_layer=2, n_head=4, d_inner=64, num_labels=2)
    return XLNetForSequenceClassification(config).eval()


def logits_of(model, collator, rows):
    batch = collator([dict(row) for row in rows])
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in batch}
    with torch.no_grad():
        return model(**inputs).logits


def encoded_rows(tokenizer, texts):
    return [dict(tokenizer(text)) for text in texts]


@pytest.mark.parametrize("family", ["bert", "xlnet"])
def test_predictions_do_not_depend_on_batch_composition(family, tiny_teacher_dir):
    """A short row gives the same logits alone and padded next to a longer one (tiny random models)."""
    from bert_kd.core.models import load_classifier, load_tokenizer
    from bert_kd.experiment.run_setup import collator_for

    if family == "bert":
        tokenizer, model = load_tokenizer(str(tiny_teacher_dir)), load_classifier(str(tiny_teacher_dir), 2).eval()
    else:
        tokenizer = tiny_xlnet_tokenizer()
        model = tiny_xlnet(len(tokenizer))
    short, long = encoded_rows(tokenizer, ["the movie was great", "a dog sat on the mat and it was very very fun"])
    collator = collator_for(tokenizer)
    alone = logits_of(model, collator, [short])
    beside = logits_of(model, collator, [short, long])[0:1]
    torch.testing.assert_close(beside, alone, rtol=1e-4, atol=1e-5)


def test_right_padding_changes_xlnet_logits():
    """The failure the tokenizer's padding fixes: XLNet right-padded reads a pad as its last token."""
    tokenizer = tiny_xlnet_tokenizer()
    model = tiny_xlnet(len(tokenizer))
    short, long = encoded_rows(tokenizer, ["the movie was great", "a dog sat on the mat and it was very very fun"])
    right_padded = Collator({"": tokenizer.pad_token_id})
    assert not torch.allclose(
        logits_of(model, right_padded, [short, long])[0:1], logits_of(model, right_padded, [short]), atol=1e-4
    )


def test_bert_padding_is_unchanged_by_the_tokenizer_collator(tiny_teacher_dir):
    from bert_kd.core.models import load_tokenizer

    tokenizer = load_tokenizer(str(tiny_teacher_dir))
    rows = [
        {**dict(tokenizer(a, b)), "idx": i, "label": i % 2}
        for i, (a, b) in enumerate(
            [("the movie", "was great"), ("a dog sat on the mat", "and it was fun"), ("bad", "no")]
        )
    ]
    by_tokenizer = Collator(tokenizers={"": tokenizer})(rows)
    by_hand = Collator({"": tokenizer.pad_token_id})(rows)
    assert by_tokenizer.keys() == by_hand.keys()
    for key in by_hand:
        assert torch.equal(by_tokenizer[key], by_hand[key]), key
        assert by_tokenizer[key].dtype == by_hand[key].dtype


def test_collator_passes_token_aligned_extras_on_the_groups_padding_side():
    """Per-token extra fields (e.g. a teacher's character offsets) are padded with their group."""
    tokenizer = tiny_xlnet_tokenizer()
    short, long = encoded_rows(tokenizer, ["bad", "the movie was great"])
    for row in (short, long):
        row["t0_input_ids"], row["t0_attention_mask"] = row["input_ids"], row["attention_mask"]
        row["t0_offsets"] = [(i, i + 1) for i in range(len(row["input_ids"]))]
        row["weight"] = 0.5
    batch = Collator(tokenizers={"": tokenizer, "t0_": tokenizer})([short, long])
    width = len(long["input_ids"])
    assert batch["t0_offsets"].shape == (2, width, 2)
    pad = width - len(short["input_ids"])
    assert batch["t0_offsets"][0, :pad].tolist() == [[0, 0]] * pad  # left, like XLNet's input_ids
    assert batch["t0_offsets"][0, pad:].tolist() == [list(o) for o in short["t0_offsets"]]
    assert batch["t0_input_ids"][0, :pad].tolist() == [tokenizer.pad_token_id] * pad
    assert batch["weight"].tolist() == [0.5, 0.5]


@pytest.mark.parametrize("family", ["bert", "xlnet"])
def test_padding_to_a_multiple_keeps_the_logits_and_each_groups_side(family, tiny_teacher_dir):
    """Under a CUDA-graph compile the loop pads batches to a multiple of 32 tokens (a few shapes, a few
    recorded graphs); the extra masked positions leave the logits as they were, XLNet's on the left."""
    from bert_kd.core.models import load_classifier, load_tokenizer
    from bert_kd.experiment.run_setup import collator_for

    if family == "bert":
        tokenizer, model = load_tokenizer(str(tiny_teacher_dir)), load_classifier(str(tiny_teacher_dir), 2).eval()
    else:
        tokenizer = tiny_xlnet_tokenizer()
        model = tiny_xlnet(len(tokenizer))
    rows = encoded_rows(tokenizer, ["the movie was great", "a dog sat on the mat and it was very very fun"])
    for row in rows:
        row["t0_input_ids"], row["t0_attention_mask"] = row["input_ids"], row["attention_mask"]
        row["t0_offsets"] = [(i, i + 1) for i in range(len(row["input_ids"]))]
    plain = collator_for(tokenizer, {"t0_": tokenizer})
    padded = plain.padded_to_multiple(32)
    assert plain.pad_to_multiple_of is None  # a copy: the run's own collator is unchanged
    batch = padded([dict(row) for row in rows])
    assert batch["input_ids"].shape[1] == batch["t0_input_ids"].shape[1] == batch["t0_offsets"].shape[1] == 32
    real = len(rows[1]["input_ids"])
    masked = batch["attention_mask"][1, :-real] if family == "xlnet" else batch["attention_mask"][1, real:]
    assert masked.sum() == 0 and batch["attention_mask"][1].sum() == real  # pads on the tokenizer's side
    torch.testing.assert_close(logits_of(model, padded, rows), logits_of(model, plain, rows), rtol=1e-4, atol=1e-5)
    by_hand = Collator({"": 0}, pad_to_multiple_of=8)([{"input_ids": [1] * 9}, {"input_ids": [1]}])
    assert by_hand["input_ids"].shape == (2, 16)
    with pytest.raises(ValueError, match="pad_to_multiple_of must be ≥ 1"):
        Collator(pad_to_multiple_of=0)


def test_collator_refuses_a_ragged_field_that_matches_no_token_group():
    rows = [{"input_ids": [1, 2], "spans": [[0, 1]]}, {"input_ids": [1], "spans": [[0, 1], [1, 2], [2, 3]]}]
    with pytest.raises(ValueError, match="'spans'"):
        Collator()(rows)
