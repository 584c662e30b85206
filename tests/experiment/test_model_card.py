"""bert_kd.experiment.model_card and .hub: a store entry's hub model card and the folder a push uploads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bert_kd.experiment import jobs
from bert_kd.experiment.hub import push_folder, push_to_hub
from bert_kd.experiment.model_card import card_facts, write_model_card
from tests.conftest import make_tiny_bert


def stored_entry(root: Path, kind: str, info: dict, spec: dict) -> Path:
    """A store entry written as the job path writes one: model files, ``bert_kd.json``, manifest."""
    from bert_kd.core.files import write_atomically

    job = jobs.Job(kind, spec, root)

    def write(directory: Path) -> None:
        make_tiny_bert(directory, num_layers=2)
        (directory / "bert_kd.json").write_text(json.dumps({**info, "key": job.key}))

    manifest = {**jobs.identity_manifest(job), "provenance": {"git_commit": "abc123", "host": "machine-7"}}
    return write_atomically(job.store_dir, write, manifest)


@pytest.fixture
def student_entry(tmp_path) -> Path:
    store = tmp_path / "store"
    teacher = stored_entry(
        store,
        "teacher",
        {
            "role": "teacher",
            "task": "rte",
            "base_model": "google-bert/bert-base-uncased",
            "best_metrics": {"accuracy": 0.7},
        },
        {"task": "rte"},
    )
    return stored_entry(
        store,
        "student",
        {
            "role": "student",
            "method": "alp_no",
            "algorithm": "alp",
            "task": "rte",
            "teacher_key": teacher.name,
            "best_metrics": {"epoch": 2, "global_step": 12, "accuracy": 0.625},
            "dev_split": "validation",
            "dev_examples": 277,
            "layer_map": [[1, 2], []],
            "mlflow_run_id": "run123",
        },
        {
            "task": "rte",
            "teacher": teacher.name,
            "seed": 42,
            "recipe": {"method": "alp", "mapping": "buckets_no"},
            "data": "d" * 64,
        },
    )


def test_the_card_parses_with_every_dev_metric_and_names_how_the_model_was_made(student_entry):
    from huggingface_hub import ModelCard

    path = write_model_card(student_entry, run_link="http://mlflow/#/runs/run123")
    card = ModelCard.load(path)
    assert [
        (r.dataset_type, r.dataset_config, r.dataset_split, r.metric_type, r.metric_value)
        for r in card.data.eval_results
    ] == [("nyu-mll/glue", "rte", "validation", "accuracy", 0.625)]
    assert card.data.base_model == "google-bert/bert-base-uncased" and card.data.license == "apache-2.0"
    assert {"knowledge-distillation", "alp", "rte"} <= set(card.data.tags)
    body = card.text
    for fact in (
        "alp_no",
        "accuracy 0.7",
        "1←1+2, 2←—",
        "Seed**: 42",
        "abc123",
        "[run123](http://mlflow/#/runs/run123)",
    ):
        assert fact in body, fact
    assert "±0.0300 (277 dev examples" in body  # 0.5 / √277
    assert "machine-7" not in body  # the training host stays home


def test_a_card_in_a_store_entry_keeps_the_entry_valid_and_other_stray_files_do_not(student_entry):
    write_model_card(student_entry)
    assert jobs.store_entry_problem(student_entry) is None
    (student_entry / "notes.txt").write_text("x")
    assert "not listed" in jobs.store_entry_problem(student_entry)


def test_an_entry_without_metrics_or_teacher_still_gets_a_card_that_says_what_is_missing(tmp_path):
    entry = stored_entry(tmp_path / "store", "student", {"role": "student", "task": "sst2"}, {})
    facts = card_facts(entry)
    assert facts["metrics"] == {} and facts["base_model"] is None
    text = write_model_card(entry).read_text()
    assert "not recorded" in text and "its dev score is not in this store" in text


def test_the_dry_run_folder_loads_with_transformers_and_leaves_the_manifest_home(student_entry, tmp_path):
    from huggingface_hub import ModelCard
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    folder = push_folder(student_entry, tmp_path / "push")
    assert not (folder / "manifest.json").exists() and (folder / "bert_kd.json").exists()
    model = AutoModelForSequenceClassification.from_pretrained(folder)
    assert model.config.num_hidden_layers == 2 and AutoTokenizer.from_pretrained(folder) is not None
    assert ModelCard.load(folder / "README.md").data.eval_results
    with pytest.raises(FileExistsError):
        push_folder(student_entry, folder)


def test_a_push_creates_the_repository_and_uploads_the_dry_run_folder(student_entry):
    uploaded = {}

    class FakeApi:
        def create_repo(self, repo_id, **options):
            uploaded["created"] = (repo_id, options)

        def upload_folder(self, *, repo_id, folder_path, **options):
            uploaded["files"] = sorted(p.name for p in Path(folder_path).iterdir())
            uploaded["card"] = (Path(folder_path) / "README.md").read_text()
            return type("Commit", (), {"commit_url": f"https://huggingface.co/{repo_id}/commit/1"})()

    url = push_to_hub(student_entry, "someone/alp-rte", api=FakeApi())
    assert url == "https://huggingface.co/someone/alp-rte/commit/1"
    assert uploaded["created"] == ("someone/alp-rte", {"repo_type": "model", "private": False, "exist_ok": True})
    assert "README.md" in uploaded["files"] and "manifest.json" not in uploaded["files"]
    assert "model.safetensors" in uploaded["files"] and "model-index" in uploaded["card"]


@pytest.mark.parametrize("payload", ["{{ 7*7 }}", "{% for x in range(3) %}x{% endfor %}", "{{ ''.__class__ }}"])
def test_template_syntax_in_an_entry_reaches_the_card_as_text_never_runs(tmp_path, payload):
    """The card is no template over artifact text: `{{ … }}` in an entry's algorithm, method, base model or run
    id, or in the registered name and the license given, is written literally (it ran as Jinja2 before)."""
    store = tmp_path / "store"
    teacher = stored_entry(
        store,
        "teacher",
        {"role": "teacher", "task": "rte", "base_model": payload, "best_metrics": {"accuracy": 0.7}},
        {"task": "rte"},
    )
    entry = stored_entry(
        store,
        "student",
        {
            "role": "student",
            "method": payload,
            "algorithm": payload,
            "task": "rte",
            "teacher_key": teacher.name,
            "best_metrics": {"accuracy": 0.6},
            "mlflow_run_id": payload,
        },
        {"task": "rte", "recipe": {"method": payload}},
    )
    text = write_model_card(entry, registered=f"models:/{payload}/1", license=payload).read_text()
    assert text.count(payload) >= 4
    assert "xxx" not in text and "<class" not in text
    from huggingface_hub import ModelCard

    assert ModelCard(text).data.license == payload
