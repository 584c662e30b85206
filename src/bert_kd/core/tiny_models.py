"""Tiny random encoders and locally trained tokenizers, for smoke runs that download nothing (the tests,
``benchmarks/gpu/gpu_run.sh --dry-run``): the hub's tiny-random checkpoints, made on the spot."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

#: BERT's special tokens, in the order that gives them ids 0–4.
BERT_SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def wordpiece_tokenizer(
    corpus: Iterable[str],
    *,
    vocab_size: int = 200,
    special_tokens: Iterable[str] = BERT_SPECIAL_TOKENS,
    lowercase: bool = True,
):
    """A BERT-style fast tokenizer (WordPiece; ``[CLS] A [SEP]`` and ``[CLS] A [SEP] B [SEP]``) trained on ``corpus``."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(
        corpus, trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=list(special_tokens))
    )
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_input_names=["input_ids", "token_type_ids", "attention_mask"],
    )


def tiny_bert(
    directory: Path,
    tokenizer,
    *,
    num_layers: int = 4,
    hidden: int = 32,
    heads: int = 4,
    num_labels: int = 2,
    seed: int = 0,
    **config,
) -> Path:
    """A randomly initialised BERT classifier sized for ``tokenizer`` (intermediate width 2 × ``hidden``,
    128 positions, any other ``BertConfig`` field in ``config``), saved with the tokenizer in ``directory``."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(directory)
    torch.manual_seed(seed)
    bert = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        num_hidden_layers=num_layers,
        num_attention_heads=heads,
        intermediate_size=hidden * 2,
        max_position_embeddings=128,
        num_labels=num_labels,
        **config,
    )
    BertForSequenceClassification(bert).save_pretrained(directory)
    return directory
