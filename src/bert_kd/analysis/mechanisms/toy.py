"""The controlled cases the mechanism checks share: a keyword task whose answer is one token, tiny BERT
classifiers without dropout, teachers served from planted logits, and a CPU training configuration."""

from __future__ import annotations

import torch

#: Token ids of the keyword task: padding, [CLS], [SEP], then one keyword per label, then filler words.
PAD, CLS, SEP = 0, 1, 2
KEYWORDS = (3, 4)
VOCAB = 32


def keyword_rows(rows: int, seed: int = 0, length: int = 8) -> dict[str, list]:
    """``rows`` examples of the keyword task: [CLS], ``length`` − 1 filler words with the label's keyword at a
    random position, [SEP]. Label y's keyword appears in every example of class y and in no other."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, len(KEYWORDS), (rows,), generator=generator)
    filler = torch.randint(KEYWORDS[-1] + 1, VOCAB, (rows, length - 1), generator=generator)
    at = torch.randint(0, length - 1, (rows,), generator=generator)
    input_ids = []
    for r in range(rows):
        words = filler[r].tolist()
        words[int(at[r])] = KEYWORDS[int(labels[r])]
        input_ids.append([CLS, *words, SEP])
    return {
        "input_ids": input_ids,
        "attention_mask": [[1] * len(ids) for ids in input_ids],
        "label": labels.tolist(),
        "idx": list(range(rows)),
    }


def keyword_dataset(rows: int, seed: int = 0, length: int = 8):
    """The keyword task as a ``datasets.Dataset`` (what ``fit`` trains on)."""
    from datasets import Dataset

    return Dataset.from_dict(keyword_rows(rows, seed, length))


def tiny_classifier(layers: int = 2, hidden: int = 16, heads: int = 2, seed: int = 0, num_labels: int = 2):
    """A randomly initialised BERT classifier for the keyword vocabulary, dropout off (the checks measure the
    mechanism, not the noise)."""
    from transformers import BertConfig, BertForSequenceClassification
    from transformers.utils import logging as hf_logging

    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=VOCAB,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=2 * hidden,
        max_position_embeddings=32,
        num_labels=num_labels,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        return BertForSequenceClassification(config)
    finally:
        hf_logging.set_verbosity(verbosity)


def planted_teacher_cache(logits: torch.Tensor, layers: int, hidden: int):
    """A teacher served from its cache with the given logits per example (rows in ``idx`` order) and zero [CLS]
    states: the method reads what the case plants, not what a random teacher would say."""
    from bert_kd.core.distill.objective import TeacherCache

    rows = logits.shape[0]
    return TeacherCache(
        logits=logits.float(), cls=torch.zeros(rows, layers + 1, hidden), row_of_idx=torch.arange(rows), key="planted"
    )


def cpu_config(**overrides):
    """A quiet CPU run: no progress bar, no checkpoint, no warm-up, the given fields set."""
    from bert_kd.core.training.config import TrainingConfig

    values = dict(
        epochs=4, batch_size=16, eval_batch_size=64, learning_rate=1e-3, warmup_ratio=0.0, weight_decay=0.0,
        log_every_steps=1000, progress_bar=False, cpu=True, seed=0,
    )  # fmt: skip
    values.update(overrides)
    return TrainingConfig(**values)
