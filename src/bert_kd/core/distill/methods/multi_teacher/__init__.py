"""Multi-teacher distillation with one-to-many layer mapping (Shi & Guo 2023, "MT" Eq. 1–13)
and its multi-teacher baselines: OKD, multi-teacher PKD and RSE-KD.

K frozen, fine-tuned teachers distil one N-layer student. Methods registered here:

``multi_teacher``  MT Eq. 1–13. Teacher k's M_k layers split in order into N contiguous groups
                   (``layer_map("one_to_many", M_k, N)``); student layer i learns from every
                   layer of group I_{k,i} of every teacher (hidden states through a learned
                   projection W_{h,k}, pre-softmax attention scores QKᵀ/√δ averaged over heads),
                   plus an embedding term through W_{e,k} and the averaged soft-label term.
                   K = 1 is the single-teacher version.
``okd``            Averaged soft labels only: (1−β)·CE + β·MT Eq. 1.
``multi_pkd``      One-to-one [CLS] mapping per teacher (``pkd_skip``), normalised [CLS] MSE
                   (PKD), averaged over teachers, plus MT Eq. 1 and CE.
``rse_kd``         Random single-teacher selection per training mini-batch (Fukuda et al.
                   2017): CE + MT Eq. 1 against ONE teacher drawn per batch; all teachers at
                   evaluation / diagnostics.

Loss weights (L = Σ_name weight_name · term_name, summed by
[`DistillationObjective`][objective.DistillationObjective]) are derived from ``alpha``/``beta``:

* ``multi_teacher``: MT Eq. 12–13, L = β(α·L_hidden + L_attn + L_emb + (1−α)·L_pred) + (1−β)·L_CE,
  i.e. weights ``{ce: 1−β, pred: β(1−α), hidden: βα, attn: β, emb: β}``.
* ``multi_pkd``: the same shape with the PKD layer term in place of the hidden one:
  ``{ce: 1−β, pred: β(1−α), layer: βα}``.
* ``okd`` / ``rse_kd``: ``{ce: 1−β, pred: β}``.

An explicit ``weights`` dict in the config overrides individual derived weights. The paper's
grid is τ ∈ {1, 5, 10}, α ∈ {0.1, 0.2, 0.5}, β ∈ {0.2, 0.5, 0.7}; the defaults α = 0.2,
β = 0.5 are the grid medians (the paper does not report its chosen values). The prediction
term is MT Eq. 1 (soft cross-entropy at temperature τ averaged over the teachers; MSE to each
teacher's score for regression), via [`multi_teacher_prediction_loss`][losses.multi_teacher_prediction_loss],
multiplied by τ² (option ``scale_by_t2``, default true): Eq. 1 as printed has no τ², but then at
the paper's τ = 5 the soft labels carry ~6% of the gradient of CE (measured by ``benchmarks/soft_label_gradient_share.py``) and the
method degenerates to CE training; ``scale_by_t2: false`` gives the literal Eq. 1.

Notes on the paper's typos (following the authoritative summary): Eq. 3/8 use the plain mean
over the group (not 1/(q−p)); Eq. 9 sums d^a (not d^h); Eq. 11 has no leading minus.

Heterogeneous teachers (architecture, depth, width, heads, tokenizer)
--------------------------------------------------------------------
Each teacher reads the batch columns of its own tokenization (``{prefix}input_ids`` …, made by
[`merge_tokenized`][data.tokenize.merge_tokenized]); the student reads the unprefixed columns.

*Alignment rule* (``alignment: token``, the default), decided **per batch and per teacher**:

* ``token`` — the teacher's positions are the student's: its ``input_ids`` and
  ``attention_mask`` have the student's shape, the masks are equal and the ids are equal on every
  valid position (a teacher reading the student's own columns, prefix ``""``, always is). The
  terms compare tokens exactly as the paper writes them (padding ids may differ; padding is
  masked out of every loss).
* ``span`` — otherwise (another tokenizer, or another max length): the terms run on the
  **shared character spans** of the two tokenizations ([`spans`][]): each side's sub-tokens
  are averaged per span (hidden states, Eq. 2–4, and embeddings, Eq. 11), and the attention
  maps are pooled to span × span ([`pool_attention_scores`][spans.pool_attention_scores]: key side log-Σ-exp,
  the pre-softmax score of attending to the span; query side mean), then Eq. 6–9 as for
  tokens. Special tokens, padding, whitespace and spans only one side covers (truncation) are
  left out; both sentences of a pair are aligned. The span ids come with the batch
  (``{prefix}span_ids``, ``{prefix}student_span_ids``, made at tokenization time from fast
  tokenizers' character offsets by [`merge_tokenized`][data.tokenize.merge_tokenized]); a batch
  that needs spans and lacks them is an error naming this option.

``alignment: sentence`` compares per-layer sentence vectors for every teacher and skips the
attention term (no attention scores are computed): hidden terms use the same one-to-many groups
and projection W_{h,k} on ``sentence_repr: mean`` (default; masked mean over valid tokens) or
``summary`` (each model's own summary token via ``Features.cls()``: first token for
BERT/RoBERTa, last real token for XLNet); the embedding term compares masked-mean-pooled
embedding-layer outputs through W_{e,k} (the summary token's embedding output is the same
vector for every input of a BERT-like model, so it carries no sentence information). This was
the only path for teachers with another tokenizer before shared-span alignment existed.

Each term is averaged over the teachers that contribute to it in the batch (= 1/K Σ_k as in
the paper, with ``alignment: token`` every teacher contributes to every term).
Different head counts: [`attention_score_mse`][losses.attention_score_mse] compares
head-averaged scores. Different widths: the per-teacher projections. What was chosen per
teacher is exposed by [`MultiTeacherOneToMany.alignment_report`][] (and logged as per-batch
terms ``aligned_t{k}``, ``span_aligned_t{k}``, ``hidden_t{k}``, ``attn_t{k}``, ``emb_t{k}``, which carry no weight).

Teacher prefixes reach the method either through the ``teacher_prefixes`` option (one per
teacher, YAML-friendly) or [`MultiTeacherBase.bind_teachers`][] with the
[`Teacher`][objective.Teacher] specs (done by [`build_multi_teacher_objective`][]).
Without either, a batch that carries prefixed token columns is an error (the method cannot
know which columns a teacher read).

Modules: [`base`][] (validation, α/β, teacher binding), [`alignment`][] (the alignment
rule), [`spans`][] (shared character spans and span pooling), [`one_to_many`][] (MT terms), [`baselines`][] (OKD, multi-PKD, RSE-KD),
[`reporting`][] (alignment report and metrics), [`build_objective`][] (wiring).
"""

from bert_kd.core.distill.methods.multi_teacher.base import MultiTeacherBase, check_unit_interval
from bert_kd.core.distill.methods.multi_teacher.baselines import MultiPKD, OnlineKD, RandomSingleTeacherKD
from bert_kd.core.distill.methods.multi_teacher.build_objective import build_multi_teacher_objective
from bert_kd.core.distill.methods.multi_teacher.one_to_many import MultiTeacherOneToMany

__all__ = [
    "MultiTeacherBase",
    "MultiTeacherOneToMany",
    "OnlineKD",
    "MultiPKD",
    "RandomSingleTeacherKD",
    "build_multi_teacher_objective",
    "check_unit_interval",
]
