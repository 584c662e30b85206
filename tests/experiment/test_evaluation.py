"""A model's evaluation: its size on disk."""

from __future__ import annotations

from bert_kd.experiment import evaluation


def test_model_size_is_read_from_the_store_entry_and_matches_a_fresh_save(tmp_path, tiny_teacher_dir):
    from transformers import AutoModelForSequenceClassification

    from bert_kd.core.models import ModelBundle

    model = AutoModelForSequenceClassification.from_pretrained(tiny_teacher_dir)
    unsaved = ModelBundle(model, tokenizer=None, info={})
    measured = evaluation._saved_size(unsaved)  # no store entry: saved to a temporary folder
    entry = tmp_path / "entry"
    entry.mkdir()
    model.save_pretrained(entry)
    (entry / "manifest.json").write_text("{}" * 1000)  # store bookkeeping is not the model's size
    stored = ModelBundle(model, tokenizer=None, info={"store_path": str(entry)})
    assert evaluation._saved_size(stored) == measured > 0
    (entry / "model.safetensors").write_bytes(b"0" * 10)  # proves the store entry is what was read
    assert evaluation._saved_size(stored) == (entry / "config.json").stat().st_size + 10


def test_measure_throughput_feeds_the_models_device():
    import torch

    from bert_kd.experiment.evaluation import measure_throughput
    from tests.core.training.test_loop import _DeviceSpy, _Moves

    def collate(rows):
        return {"input_ids": _Moves(torch.ones(len(rows), 3, dtype=torch.long)), "labels": torch.zeros(len(rows))}

    _Moves.sent_to = []
    rate = measure_throughput(_DeviceSpy(), list(range(4)), collator=collate, batch_size=2, max_batches=2)
    assert rate > 0 and _Moves.sent_to == ["meta"] * 3  # the warm-up batch and the two timed ones
