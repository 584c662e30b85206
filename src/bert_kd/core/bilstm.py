"""Tang et al. (2019)'s student: a single-layer BiLSTM with a non-linear classifier (Kedro-free).

One sentence: the last hidden state of each direction, concatenated (h = [h→, h←]), into a ReLU
layer and the output layer (their Fig. 1). Sentence pairs: the same BiLSTM encodes both sentences
(siamese) and the classifier reads the concatenate-compare feature [h1, h2, h1 ⊙ h2, |h1 − h2|]
(their Fig. 2, after Wang et al., 2018). No attention, no layer normalisation, as the paper insists.

It reads the teacher's WordPiece tokens (``input_ids``; ``token_type_ids`` split a pair's two
sentences) and its word embeddings start from the teacher's input embeddings (the paper: 300-d
word2vec); ``docs/fidelity.md`` lists both deviations. A Hugging Face ``PreTrainedModel`` registered
with ``AutoModelForSequenceClassification``, so it is stored, loaded, evaluated and exported to ONNX
as every other student; each direction is its own ``nn.LSTM`` run over the sentence's tokens (the
backward one over them reversed in place), which needs no packed sequences and exports as is.

The file imports nothing of bert-kd: a pushed BiLSTM carries it as its modelling code ([`AUTO_MAP`][]).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import AutoConfig, AutoModelForSequenceClassification, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import SequenceClassifierOutput

MODEL_TYPE = "bert_kd_bilstm"


class BiLSTMConfig(PretrainedConfig):
    """Sizes of the BiLSTM student; ``hidden_size`` per direction (defaults: ``config.schema.BiLSTM``)."""

    model_type = MODEL_TYPE

    #: Sizes and their defaults: the vocabulary, embedding width, units per direction, ReLU layer units. This
    #: file ships as a pushed BiLSTM's own modelling code (the Hub's custom-code convention), so it imports nothing
    #: of bert_kd: the student's sizes and dropout are written here as numbers, and a test holds them equal to
    #: the schema's defaults ([`bert_kd.config.schema.BiLSTM`][]).
    SIZES = {
        "vocab_size": 30522,
        "embedding_size": 300,
        "hidden_size": 300,
        "classifier_size": 400,
        "dropout": 0.0,
        "siamese": False,
        "pad_token_id": 0,
    }

    def __init__(self, **kwargs) -> None:
        sizes = {key: kwargs.pop(key, default) for key, default in self.SIZES.items()}
        kwargs.setdefault("type_vocab_size", 2)  # takes token_type_ids (a pair's two sentences)
        super().__init__(**kwargs)
        for key, value in sizes.items():
            setattr(self, key, value)


def _sentence(input_ids, keep, pad_id: int):
    """The tokens where ``keep`` (one contiguous run per row) moved to the front, with their lengths."""
    lengths = keep.long().sum(1)
    start = torch.argmax(keep.long(), dim=1)  # first kept position (0 when none)
    steps = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
    index = (start.unsqueeze(1) + steps).clamp(max=input_ids.shape[1] - 1)
    tokens = torch.gather(input_ids, 1, index)
    return torch.where(steps < lengths.unsqueeze(1), tokens, torch.full_like(tokens, pad_id)), lengths


class BiLSTMForSequenceClassification(PreTrainedModel):
    """Tang et al.'s BiLSTM (single sentences) or its siamese counterpart (pairs, ``config.siamese``)."""

    config_class = BiLSTMConfig
    base_model_prefix = "bilstm"
    main_input_name = "input_ids"

    def __init__(self, config: BiLSTMConfig) -> None:
        super().__init__(config)
        self.embeddings = nn.Embedding(config.vocab_size, config.embedding_size, padding_idx=config.pad_token_id)
        self.forward_lstm = nn.LSTM(config.embedding_size, config.hidden_size, batch_first=True)
        self.backward_lstm = nn.LSTM(config.embedding_size, config.hidden_size, batch_first=True)
        features = 2 * config.hidden_size * (4 if config.siamese else 1)
        self.classifier = nn.Sequential(
            nn.Dropout(config.dropout),
            nn.Linear(features, config.classifier_size),
            nn.ReLU(),
            nn.Dropout(config.dropout),
            nn.Linear(config.classifier_size, config.num_labels),
        )
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:  # PyTorch's own initialisation of each module
        return None

    def encode(self, input_ids, keep):
        """h = [h→_last, h←_first] of the tokens where ``keep`` (Tang et al., Fig. 1)."""
        tokens, lengths = _sentence(input_ids, keep, int(self.config.pad_token_id or 0))
        last = (lengths - 1).clamp(min=0)
        steps = torch.arange(tokens.shape[1], device=tokens.device).unsqueeze(0)
        reverse = torch.where(steps < lengths.unsqueeze(1), last.unsqueeze(1) - steps, steps)
        states = []
        for lstm, order in ((self.forward_lstm, tokens), (self.backward_lstm, torch.gather(tokens, 1, reverse))):
            out, _ = lstm(self.embeddings(order))
            states.append(out[torch.arange(out.shape[0], device=out.device), last])
        h = torch.cat(states, dim=-1)
        return h * (lengths > 0).unsqueeze(1).to(h.dtype)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None, return_dict=None, **_):
        mask = torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
        types = torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids
        if self.config.siamese:
            h1, h2 = self.encode(input_ids, mask & (types == 0)), self.encode(input_ids, mask & (types == 1))
            features = torch.cat([h1, h2, h1 * h2, (h1 - h2).abs()], dim=-1)
        else:
            features = self.encode(input_ids, mask)
        return SequenceClassifierOutput(logits=self.classifier(features))


#: The Auto classes of a pushed BiLSTM's ``config.json`` (``auto_map``): this file, copied beside the weights as
#: [`MODELING_FILE`][], is the Hub's custom code, which ``trust_remote_code=True`` loads without bert-kd.
AUTO_MAP = {
    "AutoConfig": "BiLSTMConfig",
    "AutoModelForSequenceClassification": "BiLSTMForSequenceClassification",
}
#: This file's name in a pushed BiLSTM's folder (the Hub's ``modeling_<model type>.py``).
MODELING_FILE = f"modeling_{MODEL_TYPE}.py"

if __name__.startswith("bert_kd."):  # as part of bert-kd; as a pushed model's code, transformers registers it
    AutoConfig.register(MODEL_TYPE, BiLSTMConfig)
    AutoModelForSequenceClassification.register(BiLSTMConfig, BiLSTMForSequenceClassification)


def bilstm_student(teacher: nn.Module, sizes, num_labels: int, siamese: bool) -> BiLSTMForSequenceClassification:
    """Tang et al.'s student for ``teacher``'s vocabulary (``sizes``: a ``config.schema.BiLSTM``), its word
    embeddings copied from the teacher's input embeddings unless ``sizes.embeddings`` is ``random``."""
    table = teacher.get_input_embeddings().weight
    config = BiLSTMConfig(
        vocab_size=table.shape[0],
        embedding_size=table.shape[1],
        hidden_size=sizes.hidden_size,
        classifier_size=sizes.classifier_size,
        dropout=sizes.dropout,
        siamese=siamese,
        num_labels=num_labels,
        pad_token_id=int(getattr(teacher.config, "pad_token_id", 0) or 0),
    )
    model = BiLSTMForSequenceClassification(config)
    if sizes.embeddings == "teacher":
        with torch.no_grad():
            model.embeddings.weight.copy_(table.detach())
    return model
