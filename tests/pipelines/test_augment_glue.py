"""End to end: the transfer set (augment_glue) and the students distilled on it, on a tiny teacher."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bert_kd.config.errors import ParameterError
from tests.pipelines.conftest import TINY_TRAINING, latest_version

SMALL = {"copies": 3, "max_source_rows": 16, "rows_per_shard": 20}


def _store(root):
    return sorted((root / "data/05_model_input/transfer_sets/transfer_set").iterdir())


def test_augment_glue_writes_a_keyed_set_and_reuses_it(run_pipeline):
    outputs, root, _ = run_pipeline("augment_glue", augment=SMALL)
    (entry,) = _store(root)
    report = json.loads((root / "data/08_reporting/transfer_set.json").read_text())
    assert report["key"] == entry.name and report["task"] == "rte" and report["source_rows"] == 16
    assert 16 < report["rows"] <= 48 and len(list(entry.glob("shard-*.arrow"))) >= 2  # shards of 20 rows
    assert (entry / "manifest.json").exists()
    mtime = (entry / "manifest.json").stat().st_mtime
    run_pipeline("augment_glue", augment=SMALL)  # same key: read back, not rebuilt
    assert _store(root) == [entry] and (entry / "manifest.json").stat().st_mtime == mtime
    run_pipeline("augment_glue", augment={**SMALL, "p_mask": 0.3})  # a changed rule: a new set
    assert len(_store(root)) == 2


@pytest.mark.parametrize(
    ("augment", "key"),
    [
        ({"rules": ["mask", "shuffle"]}, "augment.rules"),
        ({"p_ng": 1.5}, "augment.p_ng"),
        ({"p_t": -0.1}, "augment.p_t"),
    ],
)
def test_bad_augment_parameters_name_the_key(run_pipeline, augment, key):
    with pytest.raises(ParameterError) as error:
        run_pipeline("augment_glue", augment={**SMALL, **augment})
    assert key in error.value.block()
    assert not list(Path.cwd().glob("data/05_model_input/transfer_sets/*/*"))  # nothing written


def _cached_rows(root) -> int:
    from bert_kd.core.distill.objective import load_teacher_cache

    caches = sorted((root / "data/07_model_output/teacher_cache/teacher_cache").glob("*/logits.npy"))
    return max(len(load_teacher_cache(path.parent).logits) for path in caches)


TANG_STUDENT = {
    "bilstm": {"hidden_size": 8, "classifier_size": 8},
    "training": {"epochs": 1, "batch_size": 8, "learning_rate": 1e-3},
}


@pytest.mark.slow
def test_bilstm_distils_on_the_transfer_set(run_pipeline, tiny_glue_dir):
    _, root, _ = run_pipeline("distill_bilstm_transfer", augment=SMALL, tang_student=TANG_STUDENT)
    metrics = json.loads(latest_version(root / "data/08_reporting/students/logits_mse_metrics.json").read_text())
    student = root / metrics["info"]["store_path"]
    config = json.loads((student / "config.json").read_text())
    assert config["model_type"] == "bert_kd_bilstm" and config["siamese"] is True  # RTE: sentence pairs
    assert metrics["parameters"] < 10_000 and 0 <= metrics["score"] <= 1
    assert _cached_rows(root) > 48  # the teacher labelled the 48 training rows and the augmented ones


@pytest.mark.slow
def test_tinybert_distils_on_the_transfer_set(run_pipeline):
    student = {"num_layers": 2, "training": {**TINY_TRAINING, "epochs": 2, "aux_learning_rate": 1e-3}}
    _, root, _ = run_pipeline("distill_tinybert_transfer", augment={**SMALL, "rules": ["tinybert"]}, student=student)
    metrics = json.loads(latest_version(root / "data/08_reporting/students/tinybert_metrics.json").read_text())
    assert metrics["info"]["method"] == "tinybert" and 0 <= metrics["score"] <= 1
