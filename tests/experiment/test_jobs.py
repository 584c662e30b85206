"""The job path: keys, manifests, atomic writes, healing, locking and crash safety."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from bert_kd.core.files import write_atomically, write_file_atomically
from bert_kd.experiment import jobs
from bert_kd.experiment.jobs import Job, content_key, run_job
from tests import fresh_interpreter
from tests.conftest import REPO_ROOT

BASE_SPEC = {
    "task": "rte",
    "model": {"files": {"config.json": "aa", "model.safetensors": "bb"}},
    "max_seq_length": 32,
    "training": {"epochs": 1, "batch_size": 8, "learning_rate": 5e-5},
    "seed": 42,
    "recipe": {"method": "alp", "weights": {"kd": 0.5, "layer": 0.2}},
    "teacher": "t" * 64,
    "data": "d" * 64,
}


# --------------------------------------------------------------------------- keys


@pytest.mark.parametrize(
    "path, value",
    [
        (("task",), "mrpc"),
        (("model", "files", "model.safetensors"), "cc"),
        (("max_seq_length",), 64),
        (("training", "learning_rate"), 2e-5),
        (("training", "batch_size"), 16),
        (("seed",), 7),
        (("recipe", "weights", "kd"), 0.7),
        (("teacher",), "u" * 64),
        (("data",), "e" * 64),
    ],
)
def test_changing_any_one_ingredient_changes_the_key(path, value):
    spec = json.loads(json.dumps(BASE_SPEC))
    target = spec
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    assert content_key("student", spec) != content_key("student", BASE_SPEC)


def test_key_ignores_dict_order_and_int_float_spelling():
    reordered = dict(reversed(list(BASE_SPEC.items())))
    reordered["training"] = {"learning_rate": 5e-5, "batch_size": 8, "epochs": 1.0}
    assert content_key("student", reordered) == content_key("student", BASE_SPEC)


def test_key_depends_on_kind_and_schema_version(monkeypatch):
    key = content_key("student", BASE_SPEC)
    assert content_key("teacher", BASE_SPEC) != key
    monkeypatch.setitem(jobs.SCHEMA_VERSIONS, "student", jobs.SCHEMA_VERSIONS["student"] + 1)
    assert content_key("student", BASE_SPEC) != key


def test_volatile_training_settings_do_not_reach_the_key():
    settings = {"epochs": 1, "learning_rate": 5e-5, "seed": 3}
    noisy = {
        **settings,
        "progress_bar": False,
        "checkpoint_dir": "/elsewhere",
        "checkpoint_every_steps": 5,
        "keep_checkpoint": True,
        "log_every_steps": 1,
    }
    assert jobs.training_spec(noisy) == settings


def test_grouped_batches_changed_their_training_key_and_random_batches_kept_theirs():
    """Grouped loaders seed their own generator (a resume is bit-exact; other weights than before),
    so a grouped config's key moved; a random-batch config's key is the one it always had."""
    random = {"epochs": 1, "learning_rate": 5e-5, "seed": 3, "group_by_length": False}
    grouped = {**random, "group_by_length": True}
    assert jobs.training_spec(random) == random
    assert content_key("student", {**BASE_SPEC, "training": jobs.training_spec(random)}) == content_key(
        "student", {**BASE_SPEC, "training": random}
    )  # as training_spec kept it before
    assert jobs.training_spec(grouped) == {**grouped, "grouped_sampler": 2}
    assert content_key("student", {**BASE_SPEC, "training": jobs.training_spec(grouped)}) != content_key(
        "student", {**BASE_SPEC, "training": grouped}
    )  # the key grouped runs had before


def test_unknown_kind_and_non_json_values_are_refused():
    with pytest.raises(ValueError, match="unknown job kind 'cake'"):
        content_key("cake", {})
    with pytest.raises(TypeError, match="not JSON-serialisable"):
        content_key("student", {"x": object()})


def _splits(labels=(0, 1, 1), ids=((2, 5, 3), (2, 7, 3), (2, 9, 3))):
    from datasets import Dataset, DatasetDict

    train = Dataset.from_dict({"idx": [0, 1, 2], "labels": list(labels), "input_ids": [list(i) for i in ids]})
    return DatasetDict({"train": train, "validation": train.select([0])})


def test_dataset_fingerprint_covers_labels_tokens_rows_and_sampling():
    base = jobs.dataset_fingerprint(_splits())
    assert jobs.dataset_fingerprint(_splits()) == base
    assert jobs.dataset_fingerprint(_splits(labels=(1, 0, 0))) != base  # flipped labels
    assert jobs.dataset_fingerprint(_splits(ids=((2, 5, 3), (2, 7, 3), (2, 8, 3)))) != base  # edited text
    subset = _splits()
    subset["train"] = subset["train"].select([0, 2])  # another sample of rows (indices mapping)
    assert jobs.dataset_fingerprint(subset) != base
    reordered = _splits()
    reordered["train"] = reordered["train"].select([2, 1, 0])
    assert jobs.dataset_fingerprint(reordered) != base


def test_frame_fingerprint_sees_text_and_labels():
    frame = pd.DataFrame({"idx": [0, 1], "sentence1": ["a b", "c d"], "sentence2": ["x", "y"], "label": [0, 1]})
    base = jobs.frame_fingerprint(frame)
    assert jobs.frame_fingerprint(frame.assign(label=[1, 0])) != base
    assert jobs.frame_fingerprint(frame.assign(sentence1=["a b", "c e"])) != base
    assert jobs.frame_fingerprint(frame.copy()) == base


def test_model_identity_hashes_local_files(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"123")
    first = jobs.model_identity(str(model), model)
    assert set(first["files"]) == {"config.json", "model.safetensors"}
    (model / "model.safetensors").write_bytes(b"124")
    assert jobs.model_identity(str(model), model) != first
    assert jobs.model_identity("bert-base-uncased", "bert-base-uncased")["hub_id"] == "bert-base-uncased"


# --------------------------------------------------------------------------- store


def _write_text(value):
    return lambda directory: (directory / "value.txt").write_text(value)


def test_write_atomically_lists_every_file_and_replaces_an_old_result(tmp_path):
    target = tmp_path / "store" / "x"
    write_atomically(target, _write_text("one"), {"kind": "test"})
    manifest = json.loads((target / jobs.MANIFEST).read_text())
    assert manifest["kind"] == "test"
    assert manifest["files"]["value.txt"] == {"size": 3, "sha256": jobs.file_sha256(target / "value.txt")}
    write_atomically(target, _write_text("two"))
    assert (target / "value.txt").read_text() == "two"
    assert sorted(p.name for p in target.parent.iterdir()) == ["x"]  # no temp or old directories left


def test_a_failed_write_leaves_nothing_behind(tmp_path):
    def broken(directory):
        (directory / "half").write_text("x")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        write_atomically(tmp_path / "x", broken)
    assert list(tmp_path.iterdir()) == []


def test_write_file_atomically_replaces_the_file_or_leaves_it_as_it_was(tmp_path):
    target = tmp_path / "out" / "table.csv"
    write_file_atomically(target, lambda tmp: tmp.write_text("one"))
    write_file_atomically(target, lambda tmp: tmp.write_text("two"))
    assert target.read_text() == "two"

    def broken(tmp):
        tmp.write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        write_file_atomically(target, broken)
    assert target.read_text() == "two"
    assert [p.name for p in target.parent.iterdir()] == ["table.csv"]


def _text_job(tmp_path, spec=None):
    return Job("student", spec or {"a": 1}, tmp_path)


def _run_text_job(job, calls, value="trained", **kwargs):
    def train(checkpoint_dir):
        calls.append(checkpoint_dir)
        return value

    return run_job(
        job, train, lambda v, d: (d / "value.txt").write_text(v), lambda d: (d / "value.txt").read_text(), **kwargs
    )


def test_run_job_trains_once_then_reuses_and_records_provenance(tmp_path):
    calls = []
    job = _text_job(tmp_path)
    first = _run_text_job(job, calls)
    second = _run_text_job(job, calls)
    assert (first.reused, second.reused, second.value, len(calls)) == (False, True, "trained", 1)
    assert calls[0] == tmp_path / "checkpoints" / "student" / job.key
    manifest = jobs.read_manifest(job.store_dir)
    assert manifest["spec"] == {"a": 1} and manifest["key"] == job.key
    assert manifest["provenance"]["key"] == job.key and manifest["provenance"]["train_seconds"] >= 0
    assert _run_text_job(job, calls, value="again", recompute=True).value == "again" and len(calls) == 2


def test_the_provenance_is_inside_what_the_store_check_verifies(tmp_path):
    """An edited commit line in a manifest's provenance (what a card quotes) makes the entry damaged, as an edited
    file does: it is moved aside and trained again."""
    calls = []
    job = _text_job(tmp_path)
    _run_text_job(job, calls, provenance_fn=lambda value: {"git_commit": "abc123"})
    manifest = jobs.read_manifest(job.store_dir)
    assert manifest["provenance_sha256"] == jobs.provenance_sha256(manifest["provenance"])
    assert jobs.store_entry_problem(job.store_dir) is None
    manifest["provenance"]["git_commit"] = "[fixed](https://example.com) <img src=x onerror=alert(1)>"
    (job.store_dir / "manifest.json").write_text(json.dumps(manifest))
    assert "provenance does not match" in jobs.store_entry_problem(job.store_dir)
    again = _run_text_job(job, calls)
    assert not again.reused and len(calls) == 2 and list(tmp_path.glob("student/*.corrupt-*"))


def test_checkpoint_is_removed_only_after_the_result_is_stored(tmp_path):
    job = _text_job(tmp_path)
    seen = {}

    def train(checkpoint_dir):
        checkpoint_dir.mkdir(parents=True)
        (checkpoint_dir / "last").write_text("state")
        return "v"

    def save(value, directory):
        seen["checkpoint_during_save"] = (job.checkpoint_dir / "last").exists()
        (directory / "value.txt").write_text(value)

    run_job(job, train, save, lambda d: (d / "value.txt").read_text())
    assert seen["checkpoint_during_save"] and not job.checkpoint_dir.exists()


def test_damaged_store_is_named_moved_aside_and_recomputed(tmp_path, caplog):
    calls = []
    job = _text_job(tmp_path)
    _run_text_job(job, calls)
    with open(job.store_dir / "value.txt", "r+b") as handle:
        handle.truncate(3)
    with caplog.at_level("WARNING", logger="bert_kd.experiment.jobs"):
        outcome = _run_text_job(job, calls)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and str(job.store_dir / "value.txt") in warnings[0] and "3 bytes" in warnings[0]
    assert (outcome.reused, outcome.value, len(calls)) == (False, "trained", 2)
    aside = [p.name for p in job.store_dir.parent.iterdir() if ".corrupt-" in p.name]
    assert len(aside) == 1 and aside[0].startswith(job.key)


def _rewrite_manifest(directory, change):
    manifest = json.loads((directory / jobs.MANIFEST).read_text())
    (directory / jobs.MANIFEST).write_text(json.dumps(change(manifest)))


def _recomputed_once(job, calls, caplog, expected_reason):
    """Run ``job`` again: it must be recomputed after exactly one warning naming the reason."""
    caplog.clear()
    with caplog.at_level("WARNING", logger="bert_kd.experiment.jobs"):
        outcome = _run_text_job(job, calls, value="fresh")
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and expected_reason in warnings[0], warnings
    assert (outcome.reused, outcome.value) == (False, "fresh")
    assert jobs.manifest_problem(job.store_dir, job.kind, job.key) is None  # healed


def test_a_store_entry_copied_under_another_key_is_not_reused(tmp_path, caplog):
    calls = []
    seed_7, seed_42 = _text_job(tmp_path, {"seed": 7}), _text_job(tmp_path, {"seed": 42})
    _run_text_job(seed_7, calls, value="seed 7")
    shutil.copytree(seed_7.store_dir, seed_42.store_dir)
    _recomputed_once(seed_42, calls, caplog, "a copied entry")


def test_a_copied_entry_with_its_key_edited_is_caught_by_its_spec(tmp_path, caplog):
    calls = []
    seed_7, seed_42 = _text_job(tmp_path, {"seed": 7}), _text_job(tmp_path, {"seed": 42})
    _run_text_job(seed_7, calls, value="seed 7")
    shutil.copytree(seed_7.store_dir, seed_42.store_dir)
    _rewrite_manifest(seed_42.store_dir, lambda m: {**m, "key": seed_42.key, "spec_sha256": None})
    _recomputed_once(seed_42, calls, caplog, "spec hashes to key")


def test_an_entry_of_another_kind_is_not_reused(tmp_path, caplog):
    calls = []
    student, teacher = _text_job(tmp_path), Job("teacher", {"a": 1}, tmp_path)
    _run_text_job(student, calls)
    teacher.store_dir.parent.mkdir(parents=True)
    shutil.copytree(student.store_dir, teacher.store_dir)
    _rewrite_manifest(teacher.store_dir, lambda m: {**m, "key": teacher.key})
    _recomputed_once(teacher, calls, caplog, "says kind 'student'")


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda m: {**m, "files": {}}, "lists no files"),
        (lambda m: {**m, "files": list(m["files"])}, "lists no files ('files' is list"),
        (lambda m: {k: v for k, v in m.items() if k != "files"}, "has no 'files'"),
        (lambda m: [m], "not an object"),
        (lambda m: {**m, "files": {"../elsewhere.txt": {"size": 1, "sha256": "0" * 64}}}, "outside"),
        (lambda m: {**m, "files": {"value.txt": "abc"}}, "has no size and sha256"),
        (lambda m: {k: v for k, v in m.items() if k not in ("kind", "key")}, "written before identity checks"),
    ],
)
def test_a_malformed_manifest_is_damage_not_a_crash(tmp_path, caplog, damage, reason):
    calls = []
    job = _text_job(tmp_path)
    _run_text_job(job, calls)
    (job.store_dir / "value.txt").write_text("xx")  # damaged weights an empty file list would hide
    _rewrite_manifest(job.store_dir, damage)
    _recomputed_once(job, calls, caplog, reason)


@pytest.mark.parametrize(
    "extra, reason",
    [
        (lambda d: (d / "notes.txt").write_text("stray"), "notes.txt is not listed"),
        (lambda d: (d / "hosts").symlink_to("/etc/hosts"), "hosts is a symbolic link"),
        (lambda d: (d / "value.link").symlink_to(d / "value.txt"), "value.link is a symbolic link"),
        (lambda d: ((d / "sub").mkdir(), (d / "sub" / "x.bin").write_bytes(b"x")), "x.bin is not listed"),
    ],
)
def test_an_unlisted_file_or_link_in_an_entry_is_damage(tmp_path, caplog, extra, reason):
    """Every file of a stored result is checked: one the manifest does not list (a stray file, a
    link to a system file) makes the entry damaged, never part of what is reused."""
    calls = []
    job = _text_job(tmp_path)
    _run_text_job(job, calls)
    extra(job.store_dir)
    assert reason in (jobs.store_entry_problem(job.store_dir) or "")
    _recomputed_once(job, calls, caplog, reason)
    assert sorted(p.name for p in job.store_dir.iterdir()) == [jobs.MANIFEST, "value.txt"]


def test_a_sub_result_written_atomically_inside_an_entry_is_reused(tmp_path):
    """A result saved with write_atomically inside the entry (TED's ``stage1/``) carries its own
    manifest.json; the entry's list leaves it out like its own, and the entry stays whole."""
    calls = []
    job = Job("ted_filters", {"a": 1}, tmp_path)

    def save(value, directory):
        write_atomically(directory / "stage1", lambda d: (d / "value.txt").write_text(value))

    def load(directory):
        return (directory / "stage1" / "value.txt").read_text()

    run_job(job, lambda checkpoint_dir: calls.append(checkpoint_dir) or "trained", save, load)
    assert (job.store_dir / "stage1" / jobs.MANIFEST).is_file()
    assert jobs.store_entry_problem(job.store_dir) is None
    assert run_job(job, lambda checkpoint_dir: calls.append(checkpoint_dir) or "again", save, load).value == "trained"
    assert len(calls) == 1


def test_write_atomically_gives_every_file_the_umask_mode(tmp_path):
    """A writer that makes its files 0600 (safetensors' temporary file) still leaves a store entry
    as readable as any file the user writes: 0644 under umask 022, 0640 under 027."""
    import stat

    def private_files(directory):
        for name in ("weights.bin", "config.json"):
            fd = os.open(directory / name, os.O_WRONLY | os.O_CREAT, 0o600)
            os.close(fd)

    for umask, mode in ((0o022, 0o644), (0o027, 0o640)):
        previous = os.umask(umask)
        try:
            target = write_atomically(tmp_path / f"entry-{umask:o}", private_files)
        finally:
            os.umask(previous)
        assert {f.name: stat.S_IMODE(f.stat().st_mode) for f in target.iterdir()} == {
            "weights.bin": mode,
            "config.json": mode,
            jobs.MANIFEST: mode,
        }


def test_a_manifest_that_is_not_json_is_damage(tmp_path, caplog):
    calls = []
    job = _text_job(tmp_path)
    _run_text_job(job, calls)
    (job.store_dir / jobs.MANIFEST).write_text('{"files": {')
    _recomputed_once(job, calls, caplog, "unreadable manifest.json")


def test_manifest_records_kind_key_and_spec_hash(tmp_path):
    job = _text_job(tmp_path, {"b": [1, 2.0]})
    _run_text_job(job, [])
    manifest = jobs.read_manifest(job.store_dir)
    assert (manifest["kind"], manifest["key"]) == ("student", job.key)
    assert manifest["spec_sha256"] == jobs.spec_sha256({"b": [1, 2]})
    assert jobs.store_entry_problem(job.store_dir) is None


def test_a_manifest_written_before_spec_sha256_is_still_reused(tmp_path):
    """Manifests of the job path have always recorded kind, key, spec and schema version: without
    the newer ``spec_sha256`` their identity is checked from the spec itself."""
    calls = []
    job = _text_job(tmp_path)
    _run_text_job(job, calls)
    _rewrite_manifest(job.store_dir, lambda m: {k: v for k, v in m.items() if k != "spec_sha256"})
    assert _run_text_job(job, calls).reused and len(calls) == 1


def test_a_full_disk_while_storing_names_the_folder_and_the_fix(tmp_path):
    from bert_kd.config.errors import StorageError

    def save_on_full_disk(value, directory):
        raise OSError(errno.ENOSPC, "No space left on device")

    def save_safetensors_on_full_disk(value, directory):
        raise RuntimeError("Error while serializing: IoError(Os { code: 28, kind: StorageFull }) (os error 28)")

    for save in (save_on_full_disk, save_safetensors_on_full_disk):
        job = _text_job(tmp_path, {"save": save.__name__})
        with pytest.raises(StorageError) as caught:
            run_job(job, lambda checkpoint: "v", save, lambda d: None)
        block = caught.value.block()
        assert str(job.store_dir) in block and "disk is full" in block and "free space" in block
        assert not job.store_dir.exists() and not list(job.store_dir.parent.glob(".*tmp-*"))


@pytest.mark.parametrize("code, words", [(errno.EACCES, "permission denied"), (errno.EROFS, "read-only")])
def test_a_read_only_store_names_the_folder_and_the_fix(tmp_path, monkeypatch, code, words):
    from bert_kd.config.errors import StorageError

    real_mkdir = Path.mkdir

    def refuse_in_store(self, *args, **kwargs):  # chmod 555 does not stop root: refuse like a read-only mount
        if tmp_path / "store" in self.parents:
            raise OSError(code, os.strerror(code), str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", refuse_in_store)
    with pytest.raises(StorageError) as caught:
        _run_text_job(Job("student", {"a": 1}, tmp_path / "store"), [])
    block = caught.value.block()
    assert words in block and str(tmp_path / "store") in block and "writable" in block


def test_a_second_process_waits_for_the_lock_then_reuses(tmp_path):
    job = _text_job(tmp_path)
    calls, results = [], []
    started = threading.Event()

    def slow_train(checkpoint_dir):
        started.set()
        time.sleep(0.5)
        calls.append(1)
        return "v"

    def run(train):
        results.append(
            run_job(job, train, lambda v, d: (d / "value.txt").write_text(v), lambda d: (d / "value.txt").read_text())
        )

    first = threading.Thread(target=run, args=(slow_train,))
    first.start()
    started.wait()
    run(lambda _: calls.append(2) or "other")  # must wait, then find the stored result
    first.join()
    assert calls == [1]
    assert sorted(r.reused for r in results) == [False, True] and {r.value for r in results} == {"v"}


# --------------------------------------------------------------------------- crash safety (SIGKILL)

WORKER = r"""
import json, os, sys
sys.path[:0] = [{src!r}, {repo!r}]
import torch
torch.set_num_threads(1)  # one thread in every run: the reference and each rerun reduce alike
os.chdir(sys.argv[1])
from bert_kd.core.data.glue import load_glue_task
from bert_kd.core.data.tokenize import tokenize_splits
from bert_kd.core.models import load_tokenizer
from bert_kd.pipelines.distill.nodes import cache_teacher_outputs
from bert_kd.pipelines.train_teacher.nodes import train_teacher

splits = load_glue_task("rte", {glue!r}, allow_download=False)
tokenized = tokenize_splits({{"train": splits["train"], "validation": splits["validation"]}}, load_tokenizer({model!r}), 32)
teacher = {{"model": {model!r}, "max_seq_length": 32, "training": {{"epochs": 1, "batch_size": 8}}}}
runtime = {{"progress_bar": False, "checkpoint_every_steps": 1, "log_every_steps": 1}}
bundle = train_teacher(tokenized, teacher, {{"task": "rte", "seed": 0, "tracking": {{"enabled": False}}, "runtime": runtime}})
cache = cache_teacher_outputs(bundle, tokenized, {{"directory": "cache"}}, runtime)
print(json.dumps({{"store": bundle.info["store_path"], "reused": bundle.info["reused"], "cache_key": cache.key}}))
"""


@pytest.fixture(scope="module")
def worker(tiny_teacher_dir, tiny_glue_dir):
    """``worker(workdir, fault)``: the teacher job and its cache in a fresh interpreter (a fork of the
    session's server, which has torch and transformers loaded), killed at ``fault`` if given."""
    code = WORKER.format(
        src=str(REPO_ROOT / "src"), repo=str(REPO_ROOT), glue=str(tiny_glue_dir), model=str(tiny_teacher_dir)
    )

    def run(workdir: Path, fault: str | None = None) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k != jobs.FAULT_ENV}
        if fault:
            env[jobs.FAULT_ENV] = fault
        workdir.mkdir(exist_ok=True)
        return fresh_interpreter.run(code, str(workdir), env=env, timeout=300)

    return run


@pytest.fixture(scope="module")
def reference(worker, tmp_path_factory):
    """An uninterrupted run: its teacher weights and cache."""
    workdir = tmp_path_factory.mktemp("reference")
    done = worker(workdir)
    assert done.returncode == 0, done.stderr[-3000:]
    return workdir, json.loads(done.stdout.strip().splitlines()[-1])


def _weights(store: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(store / "model.safetensors"))


def _assert_same_teacher_and_cache(workdir: Path, result: dict, reference) -> None:
    import torch

    ref_dir, ref = reference
    assert Path(result["store"]).name == Path(ref["store"]).name  # same content key
    mine, theirs = _weights(workdir / result["store"]), _weights(ref_dir / ref["store"])
    assert mine.keys() == theirs.keys()
    for name in mine:
        torch.testing.assert_close(mine[name], theirs[name], atol=1e-6, rtol=0)
    from bert_kd.core.distill.objective import load_teacher_cache

    cache_dir = "cache/teacher_cache/" + result["cache_key"]
    ours, theirs = load_teacher_cache(workdir / cache_dir), load_teacher_cache(ref_dir / cache_dir)
    torch.testing.assert_close(ours.logits, theirs.logits, atol=1e-6, rtol=0)


@pytest.mark.parametrize(
    "fault, leftover",
    [
        ("step:3", "checkpoint"),  # (a) mid-training: resumes from the step-2 checkpoint
        # (b) teacher files written, manifest not yet: the final checkpoint is kept (slow tier, ~13 s)
        pytest.param("store_write:1", "checkpoint", marks=pytest.mark.slow),
        # (c) during the teacher-cache write: the teacher is stored (slow tier, ~13 s)
        pytest.param("store_write:2", "teacher", marks=pytest.mark.slow),
    ],
)
def test_sigkill_then_rerun_matches_an_uninterrupted_run(worker, reference, tmp_path, fault, leftover):
    killed = worker(tmp_path / "run", fault)
    assert killed.returncode == -9, killed.stderr[-3000:]
    store = tmp_path / "run" / "data/06_models/store"
    teacher_stores = [p for p in (store / "teacher").glob("*")] if (store / "teacher").exists() else []
    complete = [p for p in teacher_stores if not p.name.startswith(".")]
    if leftover == "checkpoint":
        assert complete == [] and list((store / "checkpoints" / "teacher").iterdir())
    else:
        assert len(complete) == 1 and jobs.manifest_problem(complete[0]) is None
        assert not list((tmp_path / "run" / "cache/teacher_cache").glob("[!.]*"))  # no half-written cache visible
    rerun = worker(tmp_path / "run")
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    result = json.loads(rerun.stdout.strip().splitlines()[-1])
    assert result["reused"] == (leftover == "teacher")
    manifest = jobs.read_manifest(tmp_path / "run" / result["store"])
    assert manifest["provenance"]["resumed_from_checkpoint"] is (leftover == "checkpoint")
    assert not (store / "checkpoints" / "teacher" / Path(result["store"]).name).exists()
    assert not [p for p in (store / "teacher").iterdir() if p.name.startswith(".")]  # stale temp dirs removed
    _assert_same_teacher_and_cache(tmp_path / "run", result, reference)


def test_truncated_teacher_cache_is_named_and_rebuilt(worker, reference, tmp_path):
    import shutil

    ref_dir, ref = reference
    shutil.copytree(ref_dir, tmp_path / "run")
    cache_file = tmp_path / "run" / "cache/teacher_cache" / ref["cache_key"] / "logits.npy"
    with open(cache_file, "r+b") as handle:
        handle.truncate(100)
    rerun = worker(tmp_path / "run")
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"stored result {cache_file.parent} is damaged ({cache_file} has 100 bytes" in rerun.stderr
    result = json.loads(rerun.stdout.strip().splitlines()[-1])
    assert result["reused"] is True  # the teacher was fine; only the cache was rebuilt
    _assert_same_teacher_and_cache(tmp_path / "run", result, reference)


def test_write_file_atomically_gives_the_umask_mode(tmp_path):
    import os
    import stat

    from bert_kd.core.files import write_file_atomically

    umask = os.umask(0o022)
    try:
        path = write_file_atomically(tmp_path / "result.json", lambda tmp: tmp.write_text("{}"))
    finally:
        os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert path.read_text() == "{}"


def test_a_job_with_a_seed_trains_with_seeded_generators_and_one_without_leaves_them(tmp_path):
    """What ``train_fn`` draws before its own loop seeds (a fresh head, a projection) follows the job's seed,
    whatever the process's generators held before; a spec without a seed leaves them alone."""
    import random

    import numpy as np
    import torch

    def draws(_checkpoint_dir):
        return random.random(), float(np.random.rand()), float(torch.rand(1))

    job = jobs.Job("student", {"a": 1, "seed": 7}, root=tmp_path)
    torch.manual_seed(1), random.seed(1), np.random.seed(1)
    first = jobs.train_seeded(job, draws)
    torch.manual_seed(2), random.seed(2), np.random.seed(2)
    assert jobs.train_seeded(job, draws) == first
    unseeded = jobs.Job("student", {"a": 1}, root=tmp_path)
    torch.manual_seed(3), random.seed(3), np.random.seed(3)
    expected = draws(None)
    torch.manual_seed(3), random.seed(3), np.random.seed(3)
    assert jobs.train_seeded(unseeded, draws) == expected != first


def test_trained_word_embeddings_keep_every_key_and_frozen_ones_key_their_own():
    """``word_embeddings: train`` (the default) is what every job did before the option: left out of the key."""
    settings = {"epochs": 1, "learning_rate": 5e-5, "seed": 3}
    assert jobs.training_spec({**settings, "word_embeddings": "train"}) == settings
    frozen = jobs.training_spec({**settings, "word_embeddings": "frozen"})
    assert frozen == {**settings, "word_embeddings": "frozen"}
    assert content_key("student", {**BASE_SPEC, "training": frozen}) != content_key(
        "student", {**BASE_SPEC, "training": settings}
    )
