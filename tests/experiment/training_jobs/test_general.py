"""The general-distillation job: stored with its card, a masked-LM-less teacher refused for the triple loss,
and a run interrupted mid-epoch resumes at the same batch with the same final weights."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from bert_kd.config.errors import ParameterError
from bert_kd.core.distill.general import GeneralDistillation
from bert_kd.experiment import jobs
from bert_kd.experiment.training_jobs.general import prepare_corpus, train_general_student
from tests.conftest import WORDS, make_wordpiece_tokenizer

RUNTIME = {"progress_bar": False, "checkpoint_every_steps": 2, "log_every_steps": 1, "group_by_length": False}


def save_tiny(directory: Path, masked_lm: bool = True) -> str:
    from transformers import BertConfig, BertForMaskedLM, BertModel

    tokenizer = make_wordpiece_tokenizer(directory)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        num_hidden_layers=4,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    torch.manual_seed(0)
    (BertForMaskedLM if masked_lm else BertModel)(config).save_pretrained(directory)
    return str(directory)


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(" ".join(WORDS[i : i + 5 + i % 7]) for i in range(0, 40)) + "\n")
    return tmp_path


def general_block(teacher: str, corpus: Path, loss: str = "distilbert", steps: int = 6) -> dict:
    return {
        "teacher": teacher,
        "loss": loss,
        "num_layers": 2,
        "max_seq_length": 16,
        "corpus": {"files": [str(corpus)]},
        "training": {"batch_size": 4, "max_steps": steps, "learning_rate": 1e-3, "warmup_ratio": 0.0},
    }


def run_settings(recompute: bool = False) -> dict:
    return {"task": "sst2", "seed": 3, "tracking": {"enabled": False}, "runtime": {**RUNTIME, "recompute": recompute}}


def test_the_general_student_is_a_store_entry_with_a_card(workdir):
    block = general_block(save_tiny(workdir / "teacher"), workdir / "corpus.txt", loss="tinybert", steps=2)
    shards = prepare_corpus(block)
    assert prepare_corpus(block) == shards  # the same corpus and tokenizer: the same shards
    bundle = train_general_student(shards, block, run_settings())
    entry = Path(bundle.info["store_path"])
    assert entry.parent.name == "general_student" and bundle.info["global_step"] == 2
    assert "stand-in" not in (entry / "README.md").read_text() and "tinybert" in (entry / "README.md").read_text()
    assert json.loads((entry / "bert_kd.json").read_text())["layer_map"] == [[2], [4]]
    again = train_general_student(shards, block, run_settings())
    assert again.info["reused"] and again.info["key"] == bundle.info["key"]


def test_a_teacher_without_a_masked_lm_head_is_refused_for_the_triple_loss(workdir):
    block = general_block(save_tiny(workdir / "encoder", masked_lm=False), workdir / "corpus.txt")
    shards = prepare_corpus(block)
    with pytest.raises(ParameterError, match="masked-LM head"):
        train_general_student(shards, block, run_settings())


@pytest.mark.slow  # three fits with checkpoints: ~30 s on 2 shared cores
def test_an_interrupted_run_resumes_at_the_same_batch_with_the_same_weights(workdir, monkeypatch):
    from safetensors.torch import load_file

    block = general_block(save_tiny(workdir / "teacher"), workdir / "corpus.txt")  # 40 rows, 10 batches an epoch
    seen: list[torch.Tensor] = []
    step = GeneralDistillation.training_step

    def recorded(self, batch):
        seen.append(batch["input_ids"].clone())
        return step(self, batch)

    monkeypatch.setattr(GeneralDistillation, "training_step", recorded)
    (workdir / "straight").mkdir()
    monkeypatch.chdir(workdir / "straight")
    whole = train_general_student(prepare_corpus(block), block, run_settings())
    straight, seen[:] = list(seen), []

    calls = {"n": 0}

    def interrupt(name):  # the process dies after step 3, its checkpoint from step 2 left behind
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt("killed")

    (workdir / "killed").mkdir()
    monkeypatch.chdir(workdir / "killed")
    monkeypatch.setattr(jobs, "fault_point", interrupt)
    shards = prepare_corpus(block)
    with pytest.raises(KeyboardInterrupt):
        train_general_student(shards, block, run_settings())
    monkeypatch.setattr(jobs, "fault_point", lambda name: None)
    seen[:] = []
    resumed = train_general_student(shards, block, run_settings())
    assert resumed.info["resumed_from_step"] == 2 and resumed.info["global_step"] == 6
    assert resumed.info["key"] == whole.info["key"]
    assert len(seen) == 4 and all(torch.equal(a, b) for a, b in zip(seen, straight[2:]))  # batches 3-6 again
    a = load_file(Path(whole.info["store_path"]) / "model.safetensors")
    b = load_file(Path(resumed.info["store_path"]) / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


def test_a_damaged_corpus_cache_is_set_aside_and_rebuilt_and_cut_shards_train_nothing(workdir, caplog):
    """Shards cut after they were written trained a general student on 40 of 400 passages under the full
    corpus's key; the cache is now checked: set aside with a warning naming it, tokenized again."""
    from bert_kd.config.errors import DataFileError
    from bert_kd.core.data.shards import shards_manifest

    teacher = save_tiny(workdir / "teacher")
    block = general_block(teacher, workdir / "corpus.txt")
    shards = prepare_corpus(block)
    shard = sorted((shards / "data").glob("shard-*.arrow"))[0]
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    with pytest.raises(DataFileError, match="damaged"):
        train_general_student(shards, block, run_settings())
    assert not list((workdir / "data/06_models/store/general_student").glob("*"))
    with caplog.at_level("WARNING"):
        again = prepare_corpus(block)
    assert again == shards and shards_manifest(again)["rows"] == 40
    aside = list(shards.parent.glob(f"{shards.name}.corrupt-*"))
    assert len(aside) == 1 and str(shards) in caplog.text and str(aside[0]) in caplog.text


def test_token_counts_count_every_id_of_the_corpus():
    """DistilBERT's smoothing weights come from how often each id occurs in the corpus's input_ids."""
    from datasets import Dataset

    from bert_kd.experiment.training_jobs.general import token_counts

    corpus = Dataset.from_dict({"input_ids": [[2, 5, 5, 3], [2, 7, 3]]})
    counts = token_counts(corpus, vocab_size=9)
    assert counts.tolist() == [0, 0, 2, 2, 0, 2, 0, 1, 0]
