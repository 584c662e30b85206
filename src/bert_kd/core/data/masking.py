"""BERT's masked-LM corruption (Devlin et al. 2019, Sec. 3.1; DistilBERT's dynamic masking): each batch
drawn anew, so a passage seen twice is masked twice differently."""

from __future__ import annotations

import torch
from torch import Tensor

#: BERT's rates: 15% of the real tokens are chosen; of those 80% become [MASK], 10% a random token, 10% stay.
MASK_PROBABILITY = 0.15
MASK_SPLIT = (0.8, 0.1, 0.1)


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
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    how = torch.rand(input_ids.shape, generator=generator, device=input_ids.device)
    to_mask = chosen & (how < MASK_SPLIT[0])
    to_random = chosen & (how >= MASK_SPLIT[0]) & (how < MASK_SPLIT[0] + MASK_SPLIT[1])
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator, device=input_ids.device)
    corrupted = torch.where(to_mask, torch.full_like(input_ids, mask_token_id), input_ids)
    corrupted = torch.where(to_random, random_ids, corrupted)
    return corrupted, labels
