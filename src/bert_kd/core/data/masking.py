"""BERT's masked-LM corruption (Devlin et al. 2019, Sec. 3.1; DistilBERT's dynamic masking): each batch
drawn anew, so a passage seen twice is masked twice differently. DistilBERT's reference implementation
(``examples/research_projects/distillation`` in huggingface/transformers: ``train.py``'s ``mlm_smoothing`` 0.7,
``distiller.py``'s ``prepare_batch_mlm``) draws the positions with frequency smoothing instead:
[`smoothed_mask_tokens`][]."""

from __future__ import annotations

import math

import torch
from torch import Tensor

#: BERT's rates: 15% of the real tokens are chosen; of those 80% become [MASK], 10% a random token, 10% stay.
MASK_PROBABILITY = 0.15
MASK_SPLIT = (0.8, 0.1, 0.1)
#: DistilBERT's frequency smoothing (its ``train.py`` ``--mlm_smoothing`` default): a token is drawn for masking
#: with weight count^−0.7, so rare tokens are masked more often than frequent ones.
MASK_SMOOTHING = 0.7


def mask_tokens(
    input_ids: Tensor,
    maskable: Tensor,
    mask_token_id: int,
    vocab_size: int,
    probability: float = MASK_PROBABILITY,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """(corrupted ids, labels): ``probability`` of the ``maskable`` positions (real, non-special tokens)
    are chosen; a chosen token becomes ``mask_token_id`` (80%), a random token (10%) or stays (10%).
    ``labels`` hold the original id at chosen positions and -100 elsewhere (ignored by the loss)."""
    if not 0.0 < probability < 1.0:
        raise ValueError(f"mask probability must be in (0, 1), got {probability}")
    draw = torch.rand(input_ids.shape, generator=generator, device=input_ids.device)
    chosen = (draw < probability) & maskable.bool()
    return corrupt_chosen(input_ids, chosen, mask_token_id, vocab_size, generator)


def corrupt_chosen(
    input_ids: Tensor, chosen: Tensor, mask_token_id: int, vocab_size: int, generator: torch.Generator | None
) -> tuple[Tensor, Tensor]:
    """(corrupted ids, labels) for the ``chosen`` positions: BERT's 80/10/10 split (``MASK_SPLIT``) into the mask
    token, a random token and the token kept; ``labels`` the original id where chosen, -100 elsewhere."""
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    how = torch.rand(input_ids.shape, generator=generator, device=input_ids.device)
    to_mask = chosen & (how < MASK_SPLIT[0])
    to_random = chosen & (how >= MASK_SPLIT[0]) & (how < MASK_SPLIT[0] + MASK_SPLIT[1])
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator, device=input_ids.device)
    corrupted = torch.where(to_mask, torch.full_like(input_ids, mask_token_id), input_ids)
    corrupted = torch.where(to_random, random_ids, corrupted)
    return corrupted, labels


def smoothing_weights(token_counts: Tensor, smoothing: float = MASK_SMOOTHING) -> Tensor:
    """Per vocabulary id, the weight max(count, 1)^−``smoothing`` a position holding it is drawn with."""
    if smoothing < 0:
        raise ValueError(f"mask smoothing must be ≥ 0, got {smoothing}")
    return token_counts.double().clamp_min(1.0).pow(-smoothing).float()


def smoothed_mask_tokens(
    input_ids: Tensor,
    maskable: Tensor,
    weights: Tensor,
    mask_token_id: int,
    vocab_size: int,
    probability: float = MASK_PROBABILITY,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """(corrupted ids, labels) as DistilBERT's reference draws them: ⌈``probability`` · maskable positions⌉ of the
    batch's ``maskable`` positions, without replacement, each with the ``weights`` of its token
    ([`smoothing_weights`][]); a chosen token then becomes ``mask_token_id`` (80%), a random token (10%) or stays
    (10%), as in [`mask_tokens`][]."""
    if not 0.0 < probability < 1.0:
        raise ValueError(f"mask probability must be in (0, 1), got {probability}")
    flat = maskable.bool().flatten()
    available = int(flat.sum())
    chosen = torch.zeros_like(flat)
    if available:
        draw = weights.to(input_ids.device)[input_ids.flatten()] * flat
        wanted = min(available, math.ceil(probability * available))
        chosen[torch.multinomial(draw, wanted, replacement=False, generator=generator)] = True
    chosen = chosen.view_as(input_ids)
    return corrupt_chosen(input_ids, chosen, mask_token_id, vocab_size, generator)
