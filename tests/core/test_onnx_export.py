"""Tests for bert_kd.core.onnx_export: ONNX export, int8 quantization, verification, latency table."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bert_kd.core.data.glue import load_glue_task
from bert_kd.core.data.tokenize import tokenize_splits
from bert_kd.core.models import load_classifier, load_tokenizer
from bert_kd.core.onnx_export import (
    OnnxClassifier,
    export_and_verify,
    latency_table,
    model_input_names,
    torch_logits_fn,
    verify,
)
from bert_kd.core.reports.markdown_tables import markdown_table
from bert_kd.core.training import Collator


@pytest.fixture(scope="module")
def tiny(tiny_teacher_dir, tiny_glue_dir):
    tokenizer = load_tokenizer(str(tiny_teacher_dir))
    data = tokenize_splits(load_glue_task("sst2", tiny_glue_dir, allow_download=False), tokenizer, 32)
    torch.manual_seed(1)
    model = load_classifier(str(tiny_teacher_dir), 2).eval()
    return model, data["validation"], Collator({"": tokenizer.pad_token_id})


def test_export_and_verify_writes_onnx_files_that_predict_like_pytorch(tiny, tmp_path):
    model, dev, collator = tiny
    paths, checks = export_and_verify(model, dev, collator, "sst2", tmp_path / "export", quantize=True)
    assert set(paths) == {"onnx_fp32", "onnx_int8"} and all(p.exists() for p in paths.values())
    assert not list((tmp_path / "export").glob("*.partial"))
    fp32 = next(c for c in checks if c.name == "onnx_fp32")
    assert fp32.max_abs_logit_diff < 1e-4 and fp32.agreement == 1.0 and fp32.delta_points == 0.0
    int8 = next(c for c in checks if c.name == "onnx_int8")  # a random model: near-zero logits may flip
    assert int8.within_tolerance == (abs(int8.delta_points) <= 0.5) and 0.0 <= int8.agreement <= 1.0
    session = OnnxClassifier(paths["onnx_fp32"])
    assert session.input_names == model_input_names(model)
    # dynamic axes: another batch size and sequence length than the export example
    batch = {
        "input_ids": torch.randint(5, 20, (3, 11)),
        "attention_mask": torch.ones(3, 11, dtype=torch.long),
        "token_type_ids": torch.zeros(3, 11, dtype=torch.long),
    }
    np.testing.assert_allclose(session.logits(batch), torch_logits_fn(model)(batch), atol=1e-4)


def test_verify_rejects_a_metric_drop_naming_the_model():
    labels = np.array([0, 1, 0, 1])
    good = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    bad = good.copy()
    bad[0] = [0.0, 1.0]
    assert verify("x", "sst2", good, good, labels).agreement == 1.0
    with pytest.raises(ValueError, match="'onnx_int8'.*-25.00 points"):
        verify("onnx_int8", "sst2", good, bad, labels)
    lenient = verify("onnx_int8", "sst2", good, bad, labels, strict=False)
    assert not lenient.within_tolerance and lenient.as_dict()["delta_points"] == pytest.approx(-25.0)


def test_latency_table_rows_and_markdown(tiny):
    model, dev, collator = tiny
    fn = torch_logits_fn(model)
    rows = latency_table(
        {"a": (fn, dev, collator), "b": (torch_logits_fn(model, torch.bfloat16), dev, collator)},
        batch_sizes=(1, 4),
        max_batches=2,
        repeats=1,
        scores={"a": 0.5},
    )
    assert [(r["model"], r["batch_size"]) for r in rows] == [("a", 1), ("b", 1), ("a", 4), ("b", 4)]
    assert all(r["ms_per_batch"] > 0 and r["examples_per_s"] > 0 for r in rows)
    assert rows[0]["speedup_vs_first"] == 1.0 and rows[0]["dev_score"] == 0.5 and rows[1]["dev_score"] is None
    text = markdown_table(rows)
    assert text.count("\n") == 2 + len(rows) and "| a | 1 |" in text
