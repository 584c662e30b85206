"""DistilBERT's mechanism check: its KL term trains every non-pad token and its masking favours rare tokens; with
masked-only distillation or uniform masking planted, the matching line fails."""

from __future__ import annotations

import torch

from bert_kd.analysis.mechanisms import distilbert
from bert_kd.core.distill import general


def test_the_triple_loss_reads_every_non_pad_token_and_masks_rare_tokens_more():
    results = distilbert.check()
    assert len(results) == 2 and all(result.holds for result in results), results


def test_masked_only_distillation_fails_the_first_line(monkeypatch):
    triple = general.distilbert_triple_terms
    monkeypatch.setattr(
        general, "distilbert_triple_terms", lambda *args, **kwargs: triple(*args[:6], distill_positions="masked")
    )
    positions, masking = distilbert.check()
    assert not positions.holds and positions.measured < 0.5 and masking.holds


def test_uniform_masking_fails_the_second_line(monkeypatch):
    monkeypatch.setattr(general, "smoothing_weights", lambda counts, smoothing: torch.ones(len(counts)))
    positions, masking = distilbert.check()
    assert positions.holds and not masking.holds and masking.measured < 2.0
