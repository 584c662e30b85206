"""bert_kd.core.training.distributed and the job path's rank-0 decision, without launching processes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bert_kd.core.training import distributed
from bert_kd.experiment import jobs


def test_several_processes_without_cuda_use_the_cpu_backend(monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert distributed.use_cpu_backend(False) is True
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert distributed.use_cpu_backend(False) is False
    assert distributed.use_cpu_backend(True) is True


def test_processes_that_accelerate_did_not_join_are_an_error(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(RuntimeError, match="each would train alone"):
        distributed.check_process_group(SimpleNamespace(num_processes=1, distributed_type="NO"))
    distributed.check_process_group(SimpleNamespace(num_processes=2, distributed_type="MULTI_CPU"))


def test_broadcast_with_one_process_is_the_value(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert distributed.broadcast_from_rank_zero({"a": 1}) == {"a": 1}


def store_functions(trained: list):
    def train(checkpoint_dir):
        trained.append(checkpoint_dir)
        return "trained"

    def save(value, directory):
        (directory / "value.txt").write_text(value)

    def load(directory):
        return (directory / "value.txt").read_text()

    return train, save, load


def test_other_ranks_follow_rank_zeros_decision_to_reuse(tmp_path, monkeypatch):
    """Rank 0 reused a result that appeared after this rank looked (another run stored it): this
    rank must read it too, not start training and wait in collectives for ever."""
    job = jobs.Job("teacher", {"x": 1}, tmp_path)
    trained: list = []
    train, save, load = store_functions(trained)
    monkeypatch.setenv("WORLD_SIZE", "2")
    decisions = []

    def rank_zero_reused(value):  # meanwhile another run stored the result, and rank 0 found it
        decisions.append(value)
        jobs.write_atomically(job.store_dir, lambda d: save("stored", d), jobs.identity_manifest(job))
        return False

    monkeypatch.setattr(distributed, "broadcast_from_rank_zero", rank_zero_reused)
    outcome = jobs.run_job(job, train, save, load, writer=False)
    assert outcome.reused and outcome.value == "stored" and not trained
    assert decisions == [None]  # it asked rank 0 and sent nothing of its own


def test_other_ranks_train_when_rank_zero_trains(tmp_path, monkeypatch):
    job = jobs.Job("teacher", {"x": 2}, tmp_path)
    trained: list = []
    train, save, load = store_functions(trained)
    jobs.write_atomically(
        job.store_dir, lambda d: save("stored", d), jobs.identity_manifest(job)
    )  # e.g. rank 0 was told to recompute
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(distributed, "broadcast_from_rank_zero", lambda value: True)
    outcome = jobs.run_job(job, train, save, load, writer=False)
    assert not outcome.reused and outcome.value == "trained" and trained == [job.checkpoint_dir]


def test_rank_zero_tells_the_others_what_it_decided(tmp_path, monkeypatch):
    job = jobs.Job("teacher", {"x": 3}, tmp_path)
    trained: list = []
    train, save, load = store_functions(trained)
    monkeypatch.setenv("WORLD_SIZE", "2")
    sent = []
    monkeypatch.setattr(distributed, "broadcast_from_rank_zero", lambda value: sent.append(value) or value)
    assert jobs.run_job(job, train, save, load).value == "trained"
    assert jobs.run_job(job, train, save, load).reused
    assert sent == [True, False] and len(trained) == 1
