"""``distill_general`` on two CPU processes through ``torchrun … -m kedro run`` (gloo), as a user launches it:
one store entry, the same weights as one process with the global batch (passages of one length), and a kill
mid-epoch that resumes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import WORDS
from tests.pipelines.test_multiprocess import assert_weights_close, kedro_run, new_project, stored, weights

pytestmark = pytest.mark.slow  # kedro on two processes (torchrun): the slow tier


@pytest.fixture(scope="module")
def teacher(tmp_path_factory) -> Path:
    from bert_kd.core.tiny_models import tiny_bert
    from tests.conftest import make_wordpiece_tokenizer

    directory = tmp_path_factory.mktemp("general_teacher")
    tokenizer = make_wordpiece_tokenizer(directory)
    return tiny_bert(directory, tokenizer, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    # passages of one length: the token-level losses pool over each process's tokens, so two processes average
    # two means, which equal the one process's pooled mean only when both hold as many tokens
    path.write_text("\n".join(" ".join(WORDS[(i + k) % len(WORDS)] for k in range(6)) for i in range(64)) + "\n")
    return path


def general_params(teacher: Path, corpus: Path, batch_size: int, **more) -> dict:
    return {
        "general.teacher": teacher,
        "general.max_seq_length": 16,
        "general.corpus.glue_stand_in": "false",
        "general.corpus.files": str(corpus),
        "general.training.batch_size": batch_size,
        "general.training.max_steps": 6,
        "general.training.learning_rate": 1e-3,
        "general.training.warmup_ratio": 0.0,
        "runtime.progress_bar": "false",
        "tracking.log_models": "false",
        **more,
    }


def test_two_processes_distil_like_one_with_the_same_global_batch_and_resume_after_a_kill(tmp_path, teacher, corpus):
    two = new_project(tmp_path / "two")
    kedro_run(two, "distill_general", general_params(teacher, corpus, 4), processes=2)
    one = new_project(tmp_path / "one")
    kedro_run(one, "distill_general", general_params(teacher, corpus, 8), processes=1)
    (entry_two,), (entry_one,) = stored(two, "general_student"), stored(one, "general_student")
    assert_weights_close(weights(entry_two), weights(entry_one), atol=1e-4)
    assert json.loads((entry_two / "bert_kd.json").read_text())["global_step"] == 6

    killed_project = new_project(tmp_path / "killed")
    params = general_params(teacher, corpus, 4, **{"runtime.checkpoint_every_steps": 2, "runtime.log_every_steps": 1})
    killed = kedro_run(
        killed_project, "distill_general", params, processes=2, extra_env={"BERT_KD_FAULT": "step:3"}, expect_ok=False
    )
    assert killed.returncode != 0
    kedro_run(killed_project, "distill_general", params, processes=2)
    (entry,) = stored(killed_project, "general_student")
    assert json.loads((entry / "bert_kd.json").read_text())["resumed_from_step"] == 2
    assert_weights_close(weights(entry), weights(entry_two), atol=1e-5)
