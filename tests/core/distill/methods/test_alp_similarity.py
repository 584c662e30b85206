"""ALP's score of α (``similarity``): the raw dot product of Eq. 5 is one-hot at MiniLM's [CLS] norms and a run
says so; the scaled, cosine and layer-normalised scores spread α over the teacher's layers, the last by default
(docs/fidelity.md)."""

from __future__ import annotations

import logging
import math

import pytest
import torch

from bert_kd.core.distill import losses
from bert_kd.core.distill.methods import build_method
from bert_kd.core.distill.methods.base import check_method_config, recipe_key_material
from bert_kd.core.distill.methods.layerwise import ONE_HOT_ENTROPY_FRACTION, AttentionLayerProjection, one_hot_layers
from bert_kd.core.distill.outputs import Features
from tests.core.distill.ted_filters.helpers import tiny_bert

#: [CLS] norms of the offline MiniLM-L6 (pre-trained, width 384), layers 1–6, mean over 10 random SST-2 dev
#: sentences (pandas ``sample(10, random_state=0)`` of GLUE's SST-2 dev.tsv), measured once: 8.19, 8.08, 9.71,
#: 10.63, 10.14, 7.26 (6.76–10.63 over the sentences); the cosine of layer 1 with layers 1–6 there: 1.00, 0.99,
#: 0.99, 0.99, 0.96, 0.77. So the raw dot product's scores differ by the norms' products (tens), not the cosines.
MINILM_CLS_NORMS = (8.19, 8.08, 9.71, 10.63, 10.14, 7.26)
#: per-layer noise around a shared direction that gives about those cosines (1 / √(1 + σ²) with layer 1's)
NOISE = (0.1, 0.1, 0.1, 0.15, 0.25, 0.85)
WIDTH = 384  # MiniLM-L6's hidden size: the scaled score divides by √384


def minilm_like(n_layers: int, seed: int) -> torch.Tensor:
    """(10, 1 + n_layers, 384) [CLS] states (the embedding row first) at MiniLM's norms and cosines."""
    g = torch.Generator().manual_seed(seed)
    shared = torch.nn.functional.normalize(
        torch.randn(10, 1, WIDTH, generator=torch.Generator().manual_seed(0)), dim=-1
    )
    noise = torch.randn(10, n_layers, WIDTH, generator=g) / WIDTH**0.5 * torch.tensor(NOISE[:n_layers]).view(1, -1, 1)
    layers = torch.nn.functional.normalize(shared + noise, dim=-1) * torch.tensor(MINILM_CLS_NORMS[:n_layers]).view(
        1, -1, 1
    )
    return torch.cat([shared, layers], dim=1)


@pytest.fixture(scope="module")
def states():
    """A tiny 6-layer teacher and 4-layer student of MiniLM's width (read for their sizes) and their states."""
    teacher = tiny_bert(layers=6, hidden=WIDTH, heads=6)
    student = tiny_bert(layers=4, hidden=WIDTH, heads=6, seed=1)
    return {"teacher": (teacher, minilm_like(6, 1)), "student": (student, minilm_like(4, 2))}


def observed_entropy(states, config: dict, caplog) -> list[float]:
    (teacher, t_cls), (student, s_cls) = states["teacher"], states["student"]
    method = build_method({"method": "alp", **config}, student, [teacher])
    mask = torch.ones(10, 12, dtype=torch.long)
    features = [Features(torch.zeros(10, 2), mask, extras={"cls": cls}) for cls in (s_cls, t_cls)]
    method.observe(features[0], {0: features[1]}, {})
    with caplog.at_level(logging.WARNING, logger="bert_kd.core.distill.methods.layerwise"):
        return method.diagnostics()["alp_alpha_entropy"]


@pytest.mark.parametrize(
    "config", [{"similarity": "scaled_dot"}, {"similarity": "cosine"}, {"similarity": "ln_scaled_dot"}, {}]
)
def test_the_spreading_scores_spread_alpha_at_minilm_norms(states, config, caplog):
    entropy = observed_entropy(states, config, caplog)
    assert entropy[3] is None  # ALP's `all` leaves the last student layer to the KD term
    assert all(h >= 0.5 * math.log(6) for h in entropy[:3]), entropy  # at least half the entropy of equal weights
    assert "near one-hot" not in caplog.text


def test_the_raw_dot_product_is_one_hot_at_minilm_norms_and_the_run_warns(states, caplog):
    entropy = observed_entropy(states, {"similarity": "dot"}, caplog)
    assert all(h < ONE_HOT_ENTROPY_FRACTION * math.log(6) for h in entropy[:3]), entropy
    assert "near one-hot (similarity dot) for student layer(s) 1, 2, 3" in caplog.text


def test_scores_as_their_equations_say():
    g = torch.Generator().manual_seed(0)
    s, t = torch.randn(3, 2, 16, generator=g), torch.randn(3, 4, 16, generator=g)
    dot = torch.einsum("bmh,bnh->bmn", s, t)
    assert torch.allclose(losses.alp_scores(s, t, "dot"), dot)
    assert torch.allclose(losses.alp_scores(s, t, "scaled_dot"), dot / 4.0)
    cos = torch.nn.functional.cosine_similarity(s[:, :, None], t[:, None], dim=-1)
    assert torch.allclose(losses.alp_scores(s, t, "cosine", 0.5), cos / 0.5, atol=1e-6)
    alpha = losses.alp_attention(s, t, None, "cosine", 0.5)
    assert torch.allclose(alpha, torch.softmax(cos / 0.5, dim=-1), atol=1e-6)
    centred_s, centred_t = s - s.mean(-1, keepdim=True), t - t.mean(-1, keepdim=True)
    pearson = torch.nn.functional.cosine_similarity(centred_s[:, :, None], centred_t[:, None], dim=-1)
    assert torch.allclose(losses.alp_scores(s, t, "ln_scaled_dot"), pearson * 4.0, atol=1e-3)
    assert torch.allclose(losses.alp_scores(s, t), losses.alp_scores(s, t, losses.ALP_DEFAULT_SIMILARITY))
    assert torch.allclose(losses.alp_entropy(torch.full((1, 1, 4), 0.25)), torch.tensor([[math.log(4)]]))


def test_an_unknown_score_is_refused_and_one_layer_buckets_are_never_called_one_hot():
    with pytest.raises(ValueError, match="similarity"):
        check_method_config({"method": "alp", "similarity": "bilinear"})
    with pytest.raises(ValueError, match="similarity_temperature"):
        check_method_config({"method": "alp", "similarity": "cosine", "similarity_temperature": 0})
    assert one_hot_layers([0.0, 0.0, None], [[1], [2, 3], []]) == [2]


def test_the_score_enters_the_key_unless_it_is_eq_5s_dot_product():
    key = AttentionLayerProjection.key_config
    assert key({"method": "alp", "mapping": "all"}) == {
        "method": "alp",
        "mapping": "all",
        "similarity": losses.ALP_DEFAULT_SIMILARITY,
    }
    assert key({"method": "alp", "similarity": "dot"}) == {"method": "alp"}  # every key before the option
    assert key({"method": "alp", "similarity": "cosine"}) == {"method": "alp", "similarity": "cosine"}
    assert recipe_key_material({"method": "pkd", "mapping": "all"}) == {"method": "pkd", "mapping": "all"}
    assert recipe_key_material({"method": "alp"})["similarity"] == losses.ALP_DEFAULT_SIMILARITY
