"""benchmarks/share_of_peak.py: the FLOPs counted from a model's shapes match PyTorch's own count of the
products it runs, padding is told apart, and the record's table shows each loop's shares."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode
from transformers import BertConfig, BertForSequenceClassification

from bert_kd.config.schema import BiLSTM
from bert_kd.core.bilstm import bilstm_student
from tests.conftest import REPO_ROOT

spec = importlib.util.spec_from_file_location("share_of_peak_benchmark", REPO_ROOT / "benchmarks" / "share_of_peak.py")
share_of_peak = importlib.util.module_from_spec(spec)
spec.loader.exec_module(share_of_peak)


def tiny():
    config = BertConfig(
        vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64
    )
    config._attn_implementation = "eager"  # attention's two products as matmuls PyTorch's counter sees
    return BertForSequenceClassification(config).eval()


def test_counted_forward_flops_match_pytorchs_count_and_padding_is_apart():
    model = tiny()
    ids, mask = torch.randint(5, 100, (3, 16)), torch.ones(3, 16, dtype=torch.long)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(input_ids=ids, attention_mask=mask)
    real, padded = share_of_peak.transformer_flops(model.config, [16, 16, 16], 16)
    assert real == padded == pytest.approx(counter.get_total_flops(), rel=0.02)
    real, padded = share_of_peak.transformer_flops(model.config, [4, 16, 8], 16)
    assert real < padded and padded == pytest.approx(counter.get_total_flops(), rel=0.02)


def test_the_counter_weights_trained_models_three_times_and_records_real_tokens():
    model = tiny()
    counter = share_of_peak.Counter({model: share_of_peak.TRAIN})
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
    with torch.no_grad():
        model(input_ids=torch.randint(5, 100, (2, 4)), attention_mask=mask)
    counter.close()
    real, padded = share_of_peak.transformer_flops(model.config, [3, 4], 4)
    assert (counter.real, counter.padded) == (3 * real, 3 * padded)
    assert (counter.tokens, counter.padded_tokens) == (7, 8) and counter.first is not None
    with torch.no_grad():
        model(input_ids=torch.randint(5, 100, (2, 4)), attention_mask=mask)
    assert counter.real == 3 * real  # closed: no longer counted


def test_bilstm_flops_grow_with_each_token():
    model = bilstm_student(tiny(), BiLSTM(hidden_size=8, classifier_size=6), 2, siamese=False)
    one, _ = share_of_peak.bilstm_flops(model.config, [1], 1)
    two, padded = share_of_peak.bilstm_flops(model.config, [2], 3)
    assert two - one == 2 * 8 * 8 * (32 + 8) and padded - two == two - one
    assert share_of_peak.model_flops(model, [2], 3) == (two, padded)


def test_the_table_reads_each_loops_shares():
    loop = {
        "loop": "teacher fine-tuning",
        "batches_s": 10.0,
        "setup_s": 0.5,
        "real_gflop": 50.0,
        "padding_share": 0.05,
        "real_gflops_per_s": 5.0,
        "share_of_square_peak": 0.25,
        "share_of_loop_shape_peak": 0.5,
    }
    record = {
        "command": "python benchmarks/share_of_peak.py",
        "date": "2026-12-07",
        "commit": "abc1234",
        "machine": {"processor": "cpu", "threads": 2, "other_cores_before": 0.0, "load_before": 0.1},
        "peak": {"square": 2048, "square_gflops": 20.0, "loop_tokens": 800, "loop_shapes_gflops": 10.0},
        "steps": 40,
        "batch_size": 32,
        "eval_rows": 872,
        "loops": [loop],
    }
    text = share_of_peak.markdown(record)
    assert "| teacher fine-tuning | 10.0 (0.5) | 50.0 | 5.0% | 5.0 | 25.0% | 50.0% |" in text
    assert "**20.0 GFLOP/s** on 2048 × 2048 squares" in text and "not idle" not in text
