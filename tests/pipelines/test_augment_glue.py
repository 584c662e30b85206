"""End to end: the transfer set (augment_glue) and the students distilled on it, on a tiny teacher."""

from __future__ import annotations

import inspect
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
    metrics = json.loads(latest_version(root / "data/08_reporting/students/bilstm_metrics.json").read_text())
    assert metrics["info"]["method"] == "bilstm"
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


def test_the_bilstm_block_is_named_bilstm_and_reads_the_logits_mse_recipe():
    from bert_kd.pipelines.augment_glue.pipeline import bilstm_block

    block = bilstm_block()
    (build,) = [n for n in block.nodes if n.name == "tang.bilstm.build_student"]
    fixed = inspect.getclosurevars(build.func).nonlocals["fixed"]
    assert fixed == {"row": "bilstm"}  # the student's name: its bar, run, LoggedModel and card
    assert "params:distill_methods.logits_mse" in block.inputs() and "tang.bilstm.student_metrics" in block.outputs()


def _one_label_dev_glue(root: Path) -> Path:
    """An RTE folder whose dev rows all entail (the majority class scores 1.0, so every model sits at the
    floor) and whose first sentences run past 32 tokens on every fourth row (cut at the max length)."""
    folder = root / "RTE"
    folder.mkdir(parents=True)
    long = " and ".join(["the man sat on the mat"] * 6)
    for split, n in (("train", 32), ("dev", 12)):
        lines = ["index\tsentence1\tsentence2\tlabel"]
        for i in range(n):
            label = "entailment" if split == "dev" or i % 2 else "not_entailment"
            lines.append(f"{i}\t{long if i % 4 == 0 else 'the dog sat on the mat'}\tyes true\t{label}")
        (folder / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    return root


@pytest.mark.slow
def test_the_bilstm_is_named_bilstm_from_its_run_to_its_card_and_warns_at_the_floor(
    run_pipeline, tmp_path_factory, capsys
):
    import mlflow

    glue = _one_label_dev_glue(tmp_path_factory.mktemp("one_label_glue"))
    _, root, uri = run_pipeline("distill_bilstm", glue_dir=str(glue), tang_student=TANG_STUDENT)
    summary = capsys.readouterr().out.split("── distill_bilstm finished ──")[-1]
    bilstm = next(line for line in summary.splitlines() if line.startswith("bilstm: dev accuracy"))
    assert bilstm and "WARNING: accuracy" in summary and "at or below the majority class (1.0000)" in summary
    assert "input cut at 32 tokens: 3 of 12 dev rows, 8 of 32 training rows" in summary
    metrics = json.loads(latest_version(root / "data/08_reporting/students/bilstm_metrics.json").read_text())
    assert metrics["info"]["method"] == "bilstm" and metrics["input_cut"]["validation"]["cut"] == 3
    client = mlflow.MlflowClient(uri)
    (run,) = [
        r
        for r in client.search_runs(client.get_experiment_by_name("bert_kd").experiment_id)
        if r.data.tags.get("mlflow.runName") == "distill_bilstm:rte"
    ]
    assert run.data.tags["method"] == "bilstm" and run.data.tags["floor"].startswith("WARNING")
    assert run.data.metrics["final/majority_class"] == 1.0 and run.data.metrics["final/over_majority_class"] <= 0
    assert run.data.metrics["final/input_cut_rows"] == 3
    logged = client.search_logged_models(experiment_ids=[run.info.experiment_id])
    assert "bilstm-rte-student" in {m.name for m in logged}
    card = (root / metrics["info"]["store_path"] / "README.md").read_text()
    assert "# bilstm-rte-student" in card and "a BiLSTM student distilled with `logits_mse`" in card
    assert "**Against the majority class**: **WARNING" in card and "**Input cut**: at 32 tokens: 3 of 12" in card
