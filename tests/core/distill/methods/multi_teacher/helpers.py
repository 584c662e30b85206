"""Tiny models, tokenizers and hand-computed formulas shared by the multi-teacher tests.

Everything is local and tiny: in-memory BERT/RoBERTa models, tokenizers trained in
milliseconds with ``tokenizers``, hand-made :class:`Features` for the loss formulas.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bert_kd.core.distill.outputs import Features
from bert_kd.core.training import TrainingConfig, fit
from tests.conftest import WORDS


def tiny_bert(layers: int, hidden: int, heads: int, num_labels: int = 2, vocab: int = 40, seed: int = 0):
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=2 * hidden,
        max_position_embeddings=64,
        num_labels=num_labels,
    )
    return BertForSequenceClassification(config).eval()


def make_bpe_tokenizer():
    """A byte-level BPE (RoBERTa-style) tokenizer trained locally."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator([" ".join(WORDS)] * 20, trainer)
    tok.post_processor = processors.RobertaProcessing(
        ("</s>", tok.token_to_id("</s>")), ("<s>", tok.token_to_id("<s>"))
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        sep_token="</s>",
        cls_token="<s>",
        unk_token="<unk>",
        pad_token="<pad>",
        mask_token="<mask>",
        model_input_names=["input_ids", "attention_mask"],
    )


def make_other_wordpiece_tokenizer():
    """A WordPiece vocabulary different from conftest's (other corpus, other special-token ids)."""
    from bert_kd.core.tiny_models import wordpiece_tokenizer

    corpus = [" ".join(reversed(WORDS))] * 5 + ["zebra quantum orbit"] * 5
    return wordpiece_tokenizer(corpus, vocab_size=120, special_tokens=("[MASK]", "[SEP]", "[UNK]", "[PAD]", "[CLS]"))


def tiny_roberta(tokenizer, layers: int = 3, hidden: int = 24, heads: int = 3, seed: int = 2):
    from transformers import RobertaConfig, RobertaForSequenceClassification

    torch.manual_seed(seed)
    config = RobertaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=2 * hidden,
        max_position_embeddings=80,
        type_vocab_size=1,
        num_labels=2,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    return RobertaForSequenceClassification(config).eval()


def manual_masked_mse(s, t, mask):
    total, count = 0.0, 0
    for b in range(s.shape[0]):
        for pos in range(s.shape[1]):
            if mask[b, pos]:
                total = total + ((s[b, pos] - t[b, pos]) ** 2).mean()
                count += 1
    return total / count


def manual_attention_mse(s, t, mask):
    if s.shape[1] != t.shape[1]:
        s, t = s.mean(1, keepdim=True), t.mean(1, keepdim=True)
    per_head = []
    for h in range(s.shape[1]):
        total, count = 0.0, 0
        for b in range(s.shape[0]):
            for q in range(s.shape[2]):
                for k in range(s.shape[3]):
                    if mask[b, q] and mask[b, k]:
                        total = total + (s[b, h, q, k] - t[b, h, q, k]) ** 2
                        count += 1
        per_head.append(total / count)
    return sum(per_head) / len(per_head)


def manual_mean_pool(h, mask):
    m = mask.float().unsqueeze(-1)
    return (h * m).sum(1) / m.sum(1)


def soft_ce(s, t, temperature):
    return -(F.softmax(t / temperature, -1) * F.log_softmax(s / temperature, -1)).sum(-1).mean()


def random_features(batch: int, length: int, layers: int, width: int, heads: int, mask, classes: int = 2, seed=0):
    """Hand-made Features; padded attention entries hold a huge value that must be ignored."""
    g = torch.Generator().manual_seed(seed)
    hidden = tuple(torch.randn(batch, length, width, generator=g) for _ in range(layers + 1))
    pad_pair = ~(mask.bool()[:, None, :, None] & mask.bool()[:, None, None, :])
    scores = [torch.randn(batch, heads, length, length, generator=g).masked_fill(pad_pair, 1e4) for _ in range(layers)]
    return Features(
        logits=torch.randn(batch, classes, generator=g),
        attention_mask=mask,
        hidden_states=hidden,
        attention_scores=scores,
    )


def fit_briefly(objective, hetero, steps=3):
    logged = []
    config = TrainingConfig(
        max_steps=steps,
        batch_size=8,
        eval_batch_size=16,
        log_every_steps=1,
        progress_bar=False,
        cpu=True,
        seed=0,
        warmup_ratio=0.0,
        learning_rate=1e-3,
    )
    result = fit(
        objective,
        hetero.ds["train"],
        hetero.ds["validation"],
        config,
        collator=hetero.collator,
        evaluate_fn=lambda p, l: {"accuracy": float((p.argmax(-1) == l).mean())},
        log_fn=lambda m, step: logged.append(dict(m)),
    )
    return result, [m for m in logged if "train/loss" in m]
