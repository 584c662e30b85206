"""bert_kd.experiment.model_card and .hub: a store entry's hub model card and the folder a push uploads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bert_kd.experiment import jobs
from bert_kd.experiment.hub import push_folder, push_to_hub
from bert_kd.experiment.model_card import card_facts, literal, write_model_card
from tests.conftest import make_tiny_bert


def stored_entry(root: Path, kind: str, info: dict, spec: dict) -> Path:
    """A store entry written as the job path writes one: model files, ``bert_kd.json``, manifest."""
    from bert_kd.core.files import write_atomically

    job = jobs.Job(kind, spec, root)

    def write(directory: Path) -> None:
        make_tiny_bert(directory, num_layers=2)
        (directory / "bert_kd.json").write_text(json.dumps({**info, "key": job.key}))

    manifest = jobs.entry_manifest(job, {"git_commit": "abc123", "host": "machine-7"})
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
        "[`run123`](http://mlflow/#/runs/run123)",
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


@pytest.mark.parametrize(
    "payload",
    [
        "abc123\n\n## Verified by the GLUE team [see](https://evil.example)",
        "<img src=x onerror=alert(1)>",
        "`` ` `<b>x</b>",
        "[click](javascript:alert(1)) **bold** _it_",
    ],
)
def test_free_text_from_an_entry_is_never_markdown_or_html_in_the_card(tmp_path, payload):
    """An edited commit line, method, base model, metric name, run id or key reaches the card as text: rendered
    (CommonMark), the card has the same links, headings, emphasis and no more HTML than the card of a harmless
    value, and the value is shown as it is."""
    from markdown_it import MarkdownIt

    def card_of(value: str, root: Path) -> str:
        teacher = stored_entry(
            root,
            "teacher",
            {"role": "teacher", "task": "rte", "base_model": value, "best_metrics": {}},
            {"task": "rte"},
        )
        job = jobs.Job("student", {"task": "rte", "recipe": {"method": value}, "data": value}, root)

        def write(directory: Path) -> None:
            make_tiny_bert(directory, num_layers=2)
            info = {
                "role": "student",
                "task": "rte",
                "method": value,
                "algorithm": value,
                "teacher_key": teacher.name,
                "best_metrics": {"accuracy": 0.6, value: 0.5},
                "mlflow_run_id": value,
                "layer_map": [[value]],
                "dev_split": value,
                "key": job.key,
            }
            (directory / "bert_kd.json").write_text(json.dumps(info))

        from bert_kd.core.files import write_atomically

        entry = write_atomically(job.store_dir, write, jobs.entry_manifest(job, {"git_commit": value}))
        link = "http://mlflow/#/runs/x) [y](http://evil"  # no plain address: no link
        card = write_model_card(entry, run_link=link, registered=value, license=value).read_text()
        return card.split("\n---\n", 1)[1]

    def structure(body: str) -> list:
        shape = []
        for token in MarkdownIt("commonmark").parse(body):
            for part in [token, *(token.children or [])]:
                if part.type not in ("text", "code_inline", "softbreak", "fence"):
                    shape.append((part.type, part.tag, part.attrs.get("href", "").split("/teacher/")[0]))
        return shape

    body = card_of(payload, tmp_path / "a")
    assert structure(body) == structure(card_of("plain", tmp_path / "b"))
    rendered = MarkdownIt("commonmark").render(body)
    assert "<img" not in rendered and "<b>" not in rendered
    assert f"**Commit**: {literal(payload)}\n" in body and " ".join(payload.split()) in body


def _cli(*args):
    from click.testing import CliRunner

    from bert_kd.cli import cli

    return CliRunner().invoke(cli, list(args))


def test_a_push_refuses_a_symbolic_link_in_the_folder(student_entry, tmp_path):
    """A link in a pushed folder would upload any file the user can read: refused, nothing written."""
    import shutil

    folder = tmp_path / "copy"
    shutil.copytree(student_entry, folder, ignore=shutil.ignore_patterns("manifest.json"))
    (folder / "notes.txt").symlink_to("/etc/hostname")
    done = _cli("push", str(folder), "alice/tiny", "--dry-run", "--to", str(tmp_path / "out"), "--allow-unverified")
    assert done.exit_code == 2 and "symbolic link" in done.output and not (tmp_path / "out").exists()


def test_card_and_push_run_the_store_check(student_entry, tmp_path):
    """Tampered weights or an edited bert_kd.json would be published under the old score: refused."""
    info = student_entry / "bert_kd.json"
    info.write_text(info.read_text().replace("0.625", "0.987"))
    for args in (
        ("card", str(student_entry)),
        ("push", str(student_entry), "alice/tiny", "--dry-run", "--to", str(tmp_path / "o")),
    ):
        done = _cli(*args)
        assert done.exit_code == 2 and "does not match its manifest" in done.output, done.output
    assert not (tmp_path / "o").exists()


def test_an_entry_without_its_manifest_is_refused_unless_allowed_unverified(student_entry, tmp_path):
    """Deleting manifest.json from an edited entry would turn the store check off: card and push refuse the
    folder, and --allow-unverified shares it with a warning."""
    info = student_entry / "bert_kd.json"
    info.write_text(info.read_text().replace("0.625", "0.987"))
    (student_entry / "manifest.json").unlink()
    for args in (
        ("card", str(student_entry)),
        ("push", str(student_entry), "alice/tiny", "--dry-run", "--to", str(tmp_path / "o")),
    ):
        done = _cli(*args)
        assert done.exit_code == 2 and "has no manifest.json" in done.output, done.output
        assert "--allow-unverified" in done.output and "Traceback" not in done.output
    assert not (tmp_path / "o").exists() and not (student_entry / "README.md").exists()
    done = _cli(
        "push", str(student_entry), "alice/tiny", "--dry-run", "--to", str(tmp_path / "o"), "--allow-unverified"
    )
    assert done.exit_code == 0 and "unverified" in done.output and (tmp_path / "o" / "README.md").is_file()


def test_a_repo_id_the_hub_refuses_is_refused_in_a_dry_run(student_entry, tmp_path):
    for bad in ("no-owner", "alice/has space", "a/b/c", "alice/" + "x" * 97):
        done = _cli("push", str(student_entry), bad, "--dry-run", "--to", str(tmp_path / "out"))
        assert done.exit_code == 2 and "repository id" in done.output, (bad, done.output)


def test_card_never_replaces_a_users_own_readme(student_entry, tmp_path):
    import shutil

    folder = tmp_path / "mine"
    shutil.copytree(student_entry, folder, ignore=shutil.ignore_patterns("manifest.json", "README.md"))
    (folder / "README.md").write_text("# my notes\n")
    done = _cli("card", str(folder), "--allow-unverified")
    assert done.exit_code == 2 and "not a card bert-kd wrote" in done.output
    assert (folder / "README.md").read_text() == "# my notes\n"
    assert _cli("card", str(student_entry)).exit_code == 0  # its own card is rewritten
    assert _cli("card", str(student_entry)).exit_code == 0


def test_a_card_write_killed_before_its_rename_does_not_condemn_the_entry(student_entry):
    from bert_kd.experiment.jobs import store_entry_problem

    (student_entry / ".README.md.tmp-deadbeef").write_text("half a card")
    assert store_entry_problem(student_entry) is None
    write_model_card(student_entry)
    assert not list(student_entry.glob(".README.md.tmp-*"))


def test_a_plain_hugging_face_folder_and_a_bad_to_are_one_block_each(student_entry, tmp_path):
    plain = tmp_path / "plain"
    make_tiny_bert(plain, num_layers=1)
    done = _cli("card", str(plain))
    assert done.exit_code == 2 and "not one bert-kd made" in done.output and "Traceback" not in done.output
    (tmp_path / "a-file").write_text("x")
    done = _cli("push", str(student_entry), "alice/tiny", "--dry-run", "--to", str(tmp_path / "a-file" / "out"))
    assert done.exit_code == 2 and "is a file" in done.output


def test_a_uri_whose_info_names_a_path_outside_the_store_is_refused(tmp_path, monkeypatch):
    """A downloaded model's bert_kd.json names its store entry by role and key: `..` or an absolute role would send
    the card outside the store. Refused, and the download removed."""
    import tempfile

    from bert_kd import cli as cli_module
    from bert_kd.experiment import tracker

    download = Path(tempfile.mkdtemp(prefix=tracker.DOWNLOAD_PREFIX)) / "model"
    make_tiny_bert(download, num_layers=1)
    (download / "bert_kd.json").write_text(json.dumps({"role": "../../../tmp", "key": "x", "task": "rte"}))

    class Sources:
        def local_directory(self, source, key):
            return download

    monkeypatch.setattr(tracker, "model_sources", lambda: Sources())
    monkeypatch.setattr("bert_kd.tracking.use_mlflow", lambda: None)
    from bert_kd.config.errors import UserError

    with pytest.raises(UserError, match="no store entry"):
        cli_module.model_folder("models:/m/1", "bert-kd card SOURCE")
    assert not download.exists()


def test_the_run_link_names_the_tracking_server_when_runs_are_on_one(monkeypatch):
    from bert_kd.tracking.ui import ui_base_url

    monkeypatch.delenv("MLFLOW_UI_URL", raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "https://alice:t0ken@mlflow.lab.example:8443/")
    assert ui_base_url() == "https://mlflow.lab.example:8443"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db")
    assert ui_base_url() == "http://127.0.0.1:5000"


def test_a_pushed_student_is_a_hub_page(student_entry, tmp_path):
    """The pushed folder classifies through `transformers`' pipeline with the task's label names, and its card
    round-trips through huggingface_hub with base_model, size, training rows and the method's citation; a
    localhost run link is left out (it opens nothing on a reader's machine)."""
    from huggingface_hub import ModelCard
    from transformers import pipeline

    info = json.loads((student_entry / "bert_kd.json").read_text())
    assert "train_examples" not in info  # an entry saved before rows were recorded: the card says so
    folder = push_folder(student_entry, tmp_path / "push", run_link="http://127.0.0.1:5000/#/runs/run123")
    classify = pipeline("text-classification", model=str(folder))
    answer = classify({"text": "The cat sat.", "text_pair": "A cat sat."})
    assert (answer if isinstance(answer, dict) else answer[0])["label"] in ("entailment", "not_entailment")
    card = ModelCard.load(folder / "README.md")
    again = ModelCard(str(card))
    assert again.data.base_model == card.data.base_model == "google-bert/bert-base-uncased"
    assert again.data.eval_results[0].metric_value == 0.625
    text = card.text
    assert "2 layers" in text and "M parameters" in text and "training rows not recorded" in text
    assert "@inproceedings{passban2021alpkd" in text and 'pipeline("text-classification"' in text
    assert "127.0.0.1" not in text and "`run123`" in text


def test_the_offline_minilm_is_named_by_its_hub_id(tmp_path):
    entry = stored_entry(
        tmp_path / "store",
        "teacher",
        {"role": "teacher", "task": "sst2", "base_model": "minilm-l6", "train_examples": 6000},
        {"task": "sst2"},
    )
    facts = card_facts(entry)
    assert facts["base_model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert "6,000 training rows" in write_model_card(entry).read_text()


def test_the_cards_how_to_use_snippet_runs_on_the_pushed_folder(student_entry, tmp_path, capsys):
    """The card's snippet, as a reader copies it, with ``<this repository>`` the pushed folder: it prints a label name."""
    import re

    folder = push_folder(student_entry, tmp_path / "push", run_link=None)
    text = (folder / "README.md").read_text()
    snippet = re.search(r"## How to use\n\n```python\n(.*?)```", text, re.S).group(1)
    exec(snippet.replace("<this repository>", str(folder)), {})  # noqa: S102 - the card's own code, on its folder
    printed = capsys.readouterr().out
    assert "'label': 'entailment'" in printed or "'label': 'not_entailment'" in printed


def test_a_bilstm_entry_is_named_bilstm_and_a_score_at_the_floor_is_a_warning_on_its_card(tmp_path):
    teacher = stored_entry(tmp_path, "teacher", {"role": "teacher", "task": "rte"}, {"task": "rte"})
    entry = stored_entry(
        tmp_path,
        "student",
        {
            "role": "student",
            "method": "logits_mse",  # a BiLSTM stored under its recipe's row: the card names the architecture
            "algorithm": "logits_mse",
            "task": "rte",
            "teacher_key": teacher.name,
            "best_metrics": {"accuracy": 0.5235},
            "majority_class": {"accuracy": 0.5271},
            "input_cut": {"validation": {"max_length": 64, "rows": 277, "cut": 97}},
        },
        {"task": "rte", "teacher": teacher.name, "recipe": {"method": "logits_mse"}},
    )
    config = json.loads((entry / "config.json").read_text())
    (entry / "config.json").write_text(json.dumps({**config, "model_type": "bert_kd_bilstm"}))
    text = write_model_card(entry).read_text()
    assert "# bilstm-rte-student" in text and "a BiLSTM student distilled with `logits_mse`" in text
    assert "- **Against the majority class**: **WARNING: accuracy 0.5235 is at or below the majority class" in text
    assert "- **Input cut**: at 64 tokens: 97 of 277 dev rows" in text
