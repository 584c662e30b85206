"""benchmarks/augment.py: the record reads its numbers back as a table."""

from __future__ import annotations

import importlib.util

from tests.conftest import REPO_ROOT

spec = importlib.util.spec_from_file_location("augment_benchmark", REPO_ROOT / "benchmarks" / "augment.py")
augment_benchmark = importlib.util.module_from_spec(spec)
spec.loader.exec_module(augment_benchmark)

RECORD = {
    "task": "sst2",
    "source_rows": 10,
    "copies": 20,
    "threads": 2,
    "load_average_before": (3.5, 3.0, 2.0),
    "load_average_after": (4.25, 3.0, 2.0),
    "peak_mib_loaded": 500.0,
    "augmented_rows": 7200,
    "augment_seconds": 2.0,
    "augment_rows_per_s": 3600,
    "shards_mib": 1.5,
    "peak_mib_after_augment": 600.0,
    "labelled_rows": 100,
    "label_seconds": 1.0,
    "label_rows_per_s": 100,
    "cache_mib": 1.1,
    "peak_mib_after_label": 650.0,
    "students": {
        "bilstm": {"parameters": 1234, "rows_per_s": 900},
        "bert_2_layers": {"parameters": 99, "rows_per_s": 300},
    },
    "machine": "x86_64, 2 cores",
}


def test_the_record_holds_rates_memory_load_and_the_students():
    text = augment_benchmark.markdown(RECORD, "python benchmarks/augment.py --copies 20")
    assert "load average 3.50 before, 4.25 after" in text
    assert "| 7200 | 2.0 | 3600 | 600.0 |" in text and "| 100 | 1.0 | 100 | 650.0 |" in text
    assert "about 0.0 h" in text  # 7,200 rows at 100 rows/s
    assert "| bilstm | 1,234 | 900 |" in text and "| bert_2_layers | 99 | 300 |" in text


def test_labelling_builds_the_pipelines_teacher_cache_into_files(tiny_teacher_dir, tmp_path):
    """The benchmark times the ``*_transfer`` pipelines' own path: the teacher cache of the first rows, as files."""
    from bert_kd.core.data.shards import ShardWriter
    from bert_kd.core.distill.objective import load_teacher_cache
    from bert_kd.core.models import load_classifier, load_tokenizer

    tokenizer, teacher = load_tokenizer(str(tiny_teacher_dir)), load_classifier(str(tiny_teacher_dir), 2)
    writer = ShardWriter(tmp_path / "set", rows_per_shard=4)
    ids = [tokenizer(text)["input_ids"] for text in ("a b c", "b c", "c a b a", "a", "b a c", "c c")]
    writer.add({"idx": list(range(6)), "input_ids": ids, "attention_mask": [[1] * len(i) for i in ids]})
    writer.close()
    rows = augment_benchmark.label(tmp_path / "set", teacher, tokenizer, 5, 2, tmp_path / "cache")
    cache = load_teacher_cache(tmp_path / "cache")
    assert rows == 5 and cache.logits.shape == (5, 2) and cache.cls.shape[0] == 5
    assert sorted(cache.row_of_idx.tolist()) == [0, 1, 2, 3, 4]
