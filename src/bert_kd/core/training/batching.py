"""Batches: padding by each tokenizer's rules, length-grouped sampling, seeded loaders."""

from __future__ import annotations

import copy
import math
import os
from typing import Iterable, Iterator, Mapping, Sequence

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

#: Value that pads multi-teacher span-id columns (``*span_ids``) in a batch; not a token of the row.
SPAN_PAD = -2
#: Token-level model inputs a tokenizer pads itself (``tokenizer.pad``).
PADDED_BY_TOKENIZER = ("input_ids", "attention_mask", "token_type_ids", "special_tokens_mask")


class Collator:
    """Pads every ``[prefix]input_ids`` group of a batch by its own tokenizer's rules.

    ``tokenizers``: prefix → tokenizer (``""`` = the main inputs, ``"t0_"`` = a teacher's own
    tokenization). A group with a tokenizer is padded by ``tokenizer.pad``: its padding side (XLNet
    pads on the left, so its sequence summary reads the last real token), pad id and token-type pad
    id. A group without one is right-padded with ``pad_ids[prefix]`` (default 0), masks with 0.

    Other fields pass through: ``label``/``labels`` → ``labels``, ``idx`` → long; a field of a
    group whose rows are as long as that group's ``input_ids`` (e.g. per-token character offsets)
    is padded with zeros on the group's padding side; any other numeric field is stacked as a
    tensor (a ragged one that matches no group is an error); text fields are dropped.

    ``pad_to_multiple_of``: every group's length rounded up to a multiple of it (masked positions), so
    the batches of a run take a few lengths instead of one per longest row ([`padded_to_multiple`][]).
    """

    def __init__(
        self,
        pad_ids: Mapping[str, int] | None = None,
        tokenizers: Mapping[str, object] | None = None,
        pad_to_multiple_of: int | None = None,
    ):
        if pad_to_multiple_of is not None and pad_to_multiple_of < 1:
            raise ValueError(f"pad_to_multiple_of must be ≥ 1 or None, got {pad_to_multiple_of}")
        self.pad_ids = dict(pad_ids or {})
        self.tokenizers = dict(tokenizers or {})
        self.pad_to_multiple_of = pad_to_multiple_of
        for tokenizer in self.tokenizers.values():  # padding pre-tokenized rows is what pad() is for
            warned = getattr(tokenizer, "deprecation_warnings", None)
            if isinstance(warned, dict):
                warned["Asking-to-pad-a-fast-tokenizer"] = True

    def __call__(self, rows: Sequence[Mapping]) -> dict[str, Tensor]:
        first = rows[0]
        prefixes = sorted(
            (key[: -len("input_ids")] for key in first if key.endswith("input_ids")), key=len, reverse=True
        )
        batch: dict[str, Tensor] = {}
        for prefix in prefixes:
            batch.update(self._pad_group(rows, prefix))
        for key in first:
            if key in batch:
                continue
            values = [row[key] for row in rows]
            if key in ("labels", "label"):
                batch["labels"] = torch.tensor(values)
            elif key == "idx":
                batch["idx"] = torch.tensor(values, dtype=torch.long)
            elif key.endswith(
                "span_ids"
            ):  # multi-teacher shared spans: one id per real token; the method re-places them
                longest = max(len(v) for v in values)
                batch[key] = torch.tensor([list(v) + [SPAN_PAD] * (longest - len(v)) for v in values], dtype=torch.long)
            else:
                group = next((p for p in prefixes if key.startswith(p)), None)
                aligned = group is not None and all(
                    isinstance(row[key], (list, tuple)) and len(row[key]) == len(row[group + "input_ids"])
                    for row in rows
                )
                if aligned:
                    batch[key] = _pad_aligned(values, batch[group + "input_ids"].shape[1], self._side(group))
                elif not any(isinstance(v, str) for v in values):
                    try:
                        batch[key] = torch.tensor(values)
                    except (TypeError, ValueError):
                        if any(isinstance(v, (list, tuple)) for v in values):
                            raise ValueError(
                                f"collator: field {key!r} has rows of different lengths that match no input_ids group "
                                "(name it <prefix><field> with one entry per token of that prefix, or drop the column)"
                            ) from None
                        # other non-numeric values (None, objects) are left out, as text is
        return batch

    def padded_to_multiple(self, multiple: int) -> Collator:
        """A copy of this collator that pads every group to a multiple of ``multiple`` tokens."""
        padded = copy.copy(self)
        padded.pad_to_multiple_of = multiple
        return padded

    def _side(self, prefix: str) -> str:
        tokenizer = self.tokenizers.get(prefix)
        return getattr(tokenizer, "padding_side", "right") if tokenizer is not None else "right"

    def _pad_group(self, rows: Sequence[Mapping], prefix: str) -> dict[str, Tensor]:
        keys = [prefix + name for name in PADDED_BY_TOKENIZER if prefix + name in rows[0]]
        tokenizer = self.tokenizers.get(prefix)
        if tokenizer is not None:
            padded = tokenizer.pad(
                [{key[len(prefix) :]: row[key] for key in keys} for row in rows],
                padding=True,
                pad_to_multiple_of=self.pad_to_multiple_of,
                return_tensors="pt",
            )
            return {prefix + name: torch.as_tensor(value) for name, value in padded.items()}
        longest = max(len(row[prefix + "input_ids"]) for row in rows)
        if self.pad_to_multiple_of:
            longest = -(-longest // self.pad_to_multiple_of) * self.pad_to_multiple_of
        result = {}
        for key in keys:
            pad = self.pad_ids.get(prefix, 0) if key.endswith("input_ids") else 0
            result[key] = torch.tensor([list(row[key]) + [pad] * (longest - len(row[key])) for row in rows])
        return result


def _pad_aligned(values: Sequence[Sequence], longest: int, side: str) -> Tensor:
    """Zero-pad token-aligned per-row sequences (scalars or tuples per token) to ``longest``."""
    tensors = [torch.as_tensor(v) for v in values]
    out = torch.zeros((len(tensors), longest, *tensors[0].shape[1:]), dtype=tensors[0].dtype)
    for i, t in enumerate(tensors):
        if side == "left":
            out[i, longest - len(t) :] = t
        else:
            out[i, : len(t)] = t
    return out


def sequence_lengths(dataset: Dataset, column: str = "input_ids") -> list[int]:
    """Token count of every example (the ``column`` of a tokenized split)."""
    try:
        values = dataset[column]  # a datasets.Dataset column: no per-row dict building
    except (KeyError, TypeError, IndexError, ValueError):
        values = None
    if values is None or len(values) != len(dataset):
        values = [dataset[i][column] for i in range(len(dataset))]
    return [len(v) for v in values]


class LengthGroupedBatchSampler:
    """Batches of similar length in a random order, deterministic per ``seed``.

    A random permutation is cut into mega-batches of ``mega_batch_batches`` batches; each
    mega-batch is sorted by length (longest first) and cut into batches; then the order of all
    batches is shuffled. (transformers' ``LengthGroupedSampler`` keeps each mega-batch's sorted
    order, so on a small set an epoch runs from the longest to the shortest examples.)

    ``processes`` > 1 (several training processes, each reading every ``processes``-th batch, as
    Accelerate shards a batch sampler): the batches are formed at the global size
    ``batch_size × processes`` exactly as one process would form them, and each is yielded as
    ``processes`` consecutive parts of ``batch_size`` — so N processes step on the same global
    batches as one process with batch N·B.
    """

    def __init__(
        self, lengths: Sequence[int], batch_size: int, seed: int = 0, mega_batch_batches: int = 50, processes: int = 1
    ):
        if batch_size < 1 or mega_batch_batches < 1 or processes < 1:
            raise ValueError(
                f"batch_size, mega_batch_batches and processes must be ≥ 1, "
                f"got {batch_size}, {mega_batch_batches}, {processes}"
            )
        self.lengths, self.batch_size, self.seed = list(lengths), batch_size, seed
        self.global_batch_size = batch_size * processes
        self.mega_batch_size = self.global_batch_size * mega_batch_batches

    def __len__(self) -> int:
        return sum(math.ceil(len(part) / self.batch_size) for part in self._global_batches())

    def _global_batches(self) -> Iterator[range]:
        for chunk in self._mega_batches():
            for start in range(0, len(chunk), self.global_batch_size):
                yield range(start, min(start + self.global_batch_size, len(chunk)))

    def _mega_batches(self) -> list[range]:
        return [
            range(start, min(start + self.mega_batch_size, len(self.lengths)))
            for start in range(0, len(self.lengths), self.mega_batch_size)
        ]

    def __iter__(self) -> Iterator[list[int]]:
        generator = torch.Generator().manual_seed(self.seed)
        order = torch.randperm(len(self.lengths), generator=generator).tolist()
        batches = []
        for chunk in self._mega_batches():
            mega = sorted((order[i] for i in chunk), key=lambda i: -self.lengths[i])
            batches += [mega[i : i + self.global_batch_size] for i in range(0, len(mega), self.global_batch_size)]
        for position in torch.randperm(len(batches), generator=generator).tolist():
            batch = batches[position]
            for start in range(0, len(batch), self.batch_size):  # one part per process
                yield batch[start : start + self.batch_size]


def make_loader(
    dataset: Dataset,
    batch_size: int,
    collator: Collator,
    shuffle: bool,
    seed: int = 0,
    group_by_length: bool = False,
    lengths: Sequence[int] | None = None,
    processes: int = 1,
) -> DataLoader:
    """A DataLoader whose order depends only on ``seed``.

    ``group_by_length`` with ``shuffle``: [`LengthGroupedBatchSampler`][] (batches of similar
    length, shuffled; formed at the global batch size of ``processes`` training processes);
    without ``shuffle``: longest first, a fixed order (predictions come out in that order, with
    their labels).

    Every shuffled loader holds a generator seeded with ``seed``: a DataLoader draws its iterator's
    base seed from its generator, or from torch's global RNG when it has none. With one, starting
    an epoch leaves the global RNG (dropout) untouched, so a run resumed mid-epoch from a
    checkpoint's RNG state draws the same dropout masks as the uninterrupted run — for grouped
    batches as for random ones.
    """
    generator = torch.Generator().manual_seed(seed)
    if not group_by_length:
        return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, collate_fn=collator, generator=generator)
    lengths = list(lengths) if lengths is not None else sequence_lengths(dataset)
    if len(lengths) != len(dataset):
        raise ValueError(f"make_loader: {len(lengths)} lengths for {len(dataset)} examples")
    if shuffle:
        sampler = LengthGroupedBatchSampler(lengths, batch_size, seed, processes=processes)
        return DataLoader(dataset, batch_sampler=sampler, collate_fn=collator, generator=generator)
    sampler = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, collate_fn=collator)


def use_device_loading(loader: DataLoader, device: torch.device) -> DataLoader:
    """On a GPU: collate in worker processes (up to 4, the CPU's cores shared between this
    machine's processes) into pinned memory, so batches are ready and copied asynchronously
    while the GPU computes. On CPU nothing changes (workers would take cores from the compute)."""
    if device.type == "cuda":
        local_processes = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1))
        loader.num_workers = max(0, min(4, (os.cpu_count() or 1) // local_processes - 1))
        loader.pin_memory = True
    return loader


def padding_ratio(batches: Iterable[Mapping[str, Tensor]]) -> float:
    """Padded over real tokens of the main ``attention_mask`` (1.0 = no padding)."""
    padded = real = 0
    for batch in batches:
        mask = batch["attention_mask"]
        padded += mask.numel()
        real += int(mask.sum())
    return padded / max(real, 1)
