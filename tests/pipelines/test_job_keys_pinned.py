"""Job keys users hold stay what they were: the content keys of a teacher, a student, TED filters and
a multi-teacher student, trained by the pipelines from ``conf/base`` on the tiny GLUE data.

The teacher is a tiny BERT whose files are the same bytes on every run (a fixed vocabulary, seeded
weights), so its key is too. The expected keys were computed by the code of 2026-11-26, before the
package was laid out in folders; a change here means every stored model of that kind is recomputed,
so it must come with a reason (a change in what is computed) and a bumped ``SCHEMA_VERSIONS`` entry, unless the
key material itself names the change (ALP's default score, 2026-12-07).
"""

from __future__ import annotations

import pytest

from bert_kd.experiment.jobs import SCHEMA_VERSIONS
from tests.conftest import WORDS
from tests.pipelines.conftest import TINY_TRAINING

TED_STUDENT = {
    "num_layers": 2,
    "layer_selection": "distilbert",
    "training": {**TINY_TRAINING, "aux_learning_rate": 1e-3},
}
MULTI_STUDENT = {"num_layers": 2, "init_from_teacher": 0, "training": {**TINY_TRAINING, "aux_learning_rate": 1e-3}}

PINNED = {
    "distill_alp": {
        "teacher": ["623f312283c45abeeb2c79a759caa855b1c0fe3ebc0f50fd0691dc08e6c15eed"],
        # since 2026-12-07 the ALP recipe's key names α's default score (ln_scaled_dot), which replaced Eq. 5's
        # raw dot product as the default (docs/fidelity.md); before: 0a45b53e8a082a07c6fc9ea848fa2b0f3293b4b6420d88716c81d18e48d7d3a5
        "student": ["308d68a2d983aeef6d18ce967d6070b1217b2aa4fb38a980c39ebe3127242fac"],
    },
    "distill_ted": {
        "teacher": ["623f312283c45abeeb2c79a759caa855b1c0fe3ebc0f50fd0691dc08e6c15eed"],
        "ted_filters": ["7c5a2a642deaec4f1c7d66a63105217bc79668d7694cdad6d9d61d351ca36a4d"],
        "student": ["06024c0ce6fe00d12ae0668a01bdd5f27125b5ba397433df03c191ad8405113f"],
    },
    "distill_multi_teacher": {
        "teacher": [
            "64035e20e03d4cd8d4db205d698d250d2fa4402a5605f51328aa97d35aadcc44",
            "702594029fe8b0c2f429f108c02d13a9db13a629f9ee4a26847d563c0a9c04f6",
        ],
        "multi_teacher_student": ["5703c81e780a17dbba51944c61dbd03d9eecca1589ab2e1facb0d1f8d7810e41"],
    },
}


@pytest.fixture(scope="module")
def fixed_teacher_dir(tmp_path_factory):
    """A 4-layer BERT classifier with a fixed vocabulary (no trained tokenizer: its order varies)."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    directory = tmp_path_factory.mktemp("fixed_teacher")
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = {token: index for index, token in enumerate(specials + sorted(set(" ".join(WORDS).split())))}
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_input_names=["input_ids", "token_type_ids", "attention_mask"],
    ).save_pretrained(directory)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=128,
        num_labels=2,
    )
    BertForSequenceClassification(config).save_pretrained(directory)
    return directory


def stored_keys(root) -> dict[str, list[str]]:
    store = root / "data" / "06_models" / "store"
    return {
        kind.name: sorted(p.name for p in kind.iterdir() if p.is_dir() and not p.name.startswith("."))
        for kind in sorted(store.iterdir())
        if kind.name in SCHEMA_VERSIONS
    }


@pytest.mark.parametrize("pipeline", sorted(PINNED))
def test_job_keys_are_unchanged(run_pipeline_training_the_teacher, fixed_teacher_dir, pipeline):
    # the teacher's warm-up as conf/base had it when the keys were pinned (the main job's teacher has none
    # since 2026-11-28): a run's teacher block is merged over conf/base's, so it is stated here
    teacher = {
        "model": str(fixed_teacher_dir),
        "max_seq_length": 32,
        "training": {**TINY_TRAINING, "warmup_ratio": 0.1},
    }
    teachers = [
        {**teacher, "name": "a", "seed": 1},
        {**teacher, "name": "b", "seed": 2, "training": {**TINY_TRAINING, "learning_rate": 1e-4}},
    ]
    extra = {
        "distill_alp": {},
        "distill_ted": {"ted_student": TED_STUDENT},
        "distill_multi_teacher": {"multi_teachers": teachers, "multi_student": MULTI_STUDENT},
    }
    _, root, _ = run_pipeline_training_the_teacher(pipeline, teacher=teacher, **extra[pipeline])
    keys = stored_keys(root)
    assert keys == PINNED[pipeline]
