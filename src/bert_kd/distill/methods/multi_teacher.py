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
:class:`~bert_kd.distill.objective.DistillationObjective`) are derived from ``alpha``/``beta``:

* ``multi_teacher``: MT Eq. 12–13, L = β(α·L_hidden + L_attn + L_emb + (1−α)·L_pred) + (1−β)·L_CE,
  i.e. weights ``{ce: 1−β, pred: β(1−α), hidden: βα, attn: β, emb: β}``.
* ``multi_pkd``: the same shape with the PKD layer term in place of the hidden one:
  ``{ce: 1−β, pred: β(1−α), layer: βα}``.
* ``okd`` / ``rse_kd``: ``{ce: 1−β, pred: β}``.

An explicit ``weights`` dict in the config overrides individual derived weights. The paper's
grid is τ ∈ {1, 5, 10}, α ∈ {0.1, 0.2, 0.5}, β ∈ {0.2, 0.5, 0.7}; the defaults α = 0.2,
β = 0.5 are the grid medians (the paper does not report its chosen values). The prediction
term is MT Eq. 1 literally (soft cross-entropy, NOT scaled by τ²; MSE to each teacher's score
for regression), via :func:`~bert_kd.distill.losses.multi_teacher_prediction_loss`.

Notes on the paper's typos (following the authoritative summary): Eq. 3/8 use the plain mean
over the group (not 1/(q−p)); Eq. 9 sums d^a (not d^h); Eq. 11 has no leading minus.

Heterogeneous teachers (architecture, depth, width, heads, tokenizer)
--------------------------------------------------------------------
Each teacher reads the batch columns of its own tokenization (``{prefix}input_ids`` …, made by
:func:`~bert_kd.data.tokenize.merge_tokenized`); the student reads the unprefixed columns.

*Alignment rule* (``alignment: auto``, the default): token-level terms of teacher k (attention,
full-sequence hidden states, token embeddings) are used for a batch iff its positions align
with the student's, decided **per batch** and exactly: the teacher's ``input_ids`` and
``attention_mask`` have the student's shape, the masks are equal and the ids are equal on
every valid (unmasked) position. A teacher reading the student's own columns (prefix ``""``)
is aligned by definition. Padding ids may differ (they are masked out of every loss).
``alignment: sentence`` forces the sentence-level path for every teacher (and then no
attention scores are computed at all).

*Fallback* for a misaligned batch: hidden terms compare per-layer sentence vectors with the
same one-to-many groups and the same projection W_{h,k}: ``sentence_repr: mean`` (default;
masked mean over valid tokens — defined identically for every tokenizer and architecture) or
``summary`` (each model's own summary token via ``Features.cls()``: first token for
BERT/RoBERTa, last real token for XLNet). The attention term is skipped for that teacher.
The embedding term compares masked-mean-pooled embedding-layer outputs through W_{e,k}
(always mean pooling: the summary token's embedding output is the same vector for every
input of a BERT-like model, so it carries no sentence information).

Each term is averaged over the teachers that contribute to it in the batch (= 1/K Σ_k as in
the paper when every teacher is aligned); with no aligned teacher the attention term is 0.
Different head counts: :func:`~bert_kd.distill.losses.attention_score_mse` compares
head-averaged scores. Different widths: the per-teacher projections. What was chosen per
teacher is exposed by :meth:`MultiTeacherOneToMany.alignment_report` (and logged as per-batch
terms ``aligned_t{k}``, ``hidden_t{k}``, ``attn_t{k}``, ``emb_t{k}``, which carry no weight).

Teacher prefixes reach the method either through the ``teacher_prefixes`` option (one per
teacher, YAML-friendly) or :meth:`MultiTeacherBase.bind_teachers` with the
:class:`~bert_kd.distill.objective.Teacher` specs (done by :func:`build_multi_teacher_objective`).
Without either, a batch that carries prefixed token columns is an error (the method cannot
know which columns a teacher read).
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor, nn

from bert_kd.distill import losses
from bert_kd.distill.mapping import layer_map
from bert_kd.distill.methods.base import Method, build_method, hidden_size, register_method
from bert_kd.distill.outputs import Features
from bert_kd.models import num_layers
from bert_kd.training import task_loss

__all__ = [
    "MultiTeacherBase",
    "MultiTeacherOneToMany",
    "OnlineKD",
    "MultiPKD",
    "RandomSingleTeacherKD",
    "build_multi_teacher_objective",
    "check_unit_interval",
]

SENTENCE_REPRS = ("mean", "summary")
ALIGNMENT_MODES = ("auto", "sentence")
PROJECTION_MODES = ("always", "auto")


def check_unit_interval(name: str, value) -> float:
    """``value`` as a float in [0, 1]; ``ValueError`` naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    value = float(value)
    if not (0.0 <= value <= 1.0):  # also rejects NaN
        raise ValueError(f"{name} must lie in [0, 1], got {value}")
    return value


def _num_heads(model: nn.Module) -> int | None:
    config = model.config
    for attr in ("num_attention_heads", "n_head", "n_heads"):
        value = getattr(config, attr, None)
        if value is not None:
            return int(value)
    return None


def _num_labels(model: nn.Module) -> int | None:
    value = getattr(getattr(model, "config", None), "num_labels", None)
    return None if value is None else int(value)


class MultiTeacherBase(Method):
    """Shared set-up of the multi-teacher methods: validation, α/β weights, teacher binding.

    Validation (``ValueError`` before training): empty teacher list, a teacher whose label
    count differs from the student's, ``alpha``/``beta`` outside [0, 1], a
    ``teacher_prefixes`` list of the wrong length.
    """

    uses_alpha = False
    known_options: tuple[str, ...] = ("beta", "teacher_prefixes")
    default_alpha = 0.2
    default_beta = 0.5

    def __init__(self, config, student, teachers, regression=False):
        config = dict(config or {})
        teachers = list(teachers or [])
        if not teachers:
            raise ValueError(f"method {self.name!r} needs at least one teacher, got an empty teacher list")
        self.alpha, self.beta = self.alpha_beta(config)
        super().__init__(config, student, teachers, regression)
        n_labels = _num_labels(student)
        for k, teacher in enumerate(teachers):
            t_labels = _num_labels(teacher)
            if n_labels is not None and t_labels is not None and t_labels != n_labels:
                raise ValueError(
                    f"teacher {k} predicts {t_labels} label(s) but the student predicts {n_labels}; "
                    f"every teacher must be fine-tuned on the student's task"
                )
        self.n_teachers = len(teachers)
        self.n_student = num_layers(student)
        self.student_width = hidden_size(student)
        self.student_heads = _num_heads(student)
        self.teacher_layers = [num_layers(t) for t in teachers]
        self.teacher_widths = [hidden_size(t) for t in teachers]
        self.teacher_heads = [_num_heads(t) for t in teachers]
        self.teacher_types = [str(getattr(t.config, "model_type", type(t).__name__)) for t in teachers]
        self.teacher_names = [f"teacher_{k}" for k in range(self.n_teachers)]
        prefixes = config.get("teacher_prefixes")
        if prefixes is not None:
            if isinstance(prefixes, str) or len(prefixes) != self.n_teachers:
                raise ValueError(
                    f"teacher_prefixes must list one column prefix per teacher ({self.n_teachers}), got {prefixes!r}"
                )
            prefixes = [str(p) for p in prefixes]
        self.teacher_prefixes: list[str] | None = prefixes

    # ------------------------------------------------------------------ weights
    @classmethod
    def alpha_beta(cls, config: dict) -> tuple[float | None, float]:
        """α (when the method has one) and β from the config, each checked to lie in [0, 1]."""
        alpha = check_unit_interval("alpha", config.get("alpha", cls.default_alpha)) if cls.uses_alpha else None
        return alpha, check_unit_interval("beta", config.get("beta", cls.default_beta))

    @classmethod
    def derived_weights(cls, alpha: float | None, beta: float) -> dict[str, float]:
        """Term weights implied by α and β (see the module docstring)."""
        return {"ce": 1.0 - beta, "pred": beta}

    @classmethod
    def resolve_weights(cls, config: dict) -> dict[str, float]:
        weights = cls.derived_weights(*cls.alpha_beta(config))
        given = config.get("weights")
        if given:
            unknown = sorted(set(given) - set(cls.term_names))
            if unknown:
                raise ValueError(f"unknown loss term(s) {unknown} in weights; method {cls.name!r} has {list(cls.term_names)}")
            weights.update({k: float(v) for k, v in given.items()})
        return weights

    # ------------------------------------------------------------------ teachers
    def bind_teachers(self, specs: Sequence) -> "MultiTeacherBase":
        """Record each teacher's batch-column prefix and name from
        :class:`~bert_kd.distill.objective.Teacher` specs (same order as at construction)."""
        specs = list(specs)
        if len(specs) != self.n_teachers:
            raise ValueError(f"method {self.name!r} was built for {self.n_teachers} teachers, got {len(specs)} specs")
        self.teacher_prefixes = [str(getattr(s, "prefix", "")) for s in specs]
        names = [str(getattr(s, "name", "") or f"teacher_{k}") for k, s in enumerate(specs)]
        # Keep names unique so that reports keyed by name never collide.
        self.teacher_names = [n if names.count(n) == 1 else f"{n}_{k}" for k, n in enumerate(names)]
        return self

    def prefix_of(self, k: int, batch: dict[str, Tensor]) -> str:
        """Batch-column prefix of teacher ``k``."""
        if self.teacher_prefixes is not None:
            return self.teacher_prefixes[k]
        prefixed = sorted(key for key in batch if key.endswith("input_ids") and key != "input_ids")
        if prefixed:
            raise ValueError(
                f"the batch carries other tokenizations {prefixed} but method {self.name!r} does not know which "
                f"columns each teacher reads: set the option teacher_prefixes or call method.bind_teachers(specs)"
            )
        return ""

    def prediction_terms(self, student: Features, teachers: dict[int, Features]) -> Tensor:
        """MT Eq. 1: (1/K) Σ_k soft-CE(τ) (no τ²), or the mean MSE to the teachers' scores."""
        return losses.multi_teacher_prediction_loss(
            student.logits, [teachers[k].logits for k in sorted(teachers)], self.temperature, self.regression
        )

    def describe_teacher(self, k: int) -> dict:
        return {
            "index": k,
            "model_type": self.teacher_types[k],
            "prefix": None if self.teacher_prefixes is None else self.teacher_prefixes[k],
            "layers": self.teacher_layers[k],
            "width": self.teacher_widths[k],
            "heads": self.teacher_heads[k],
        }


# --------------------------------------------------------------------------- the MT method


@register_method("multi_teacher")
class MultiTeacherOneToMany(MultiTeacherBase):
    """MT Eq. 1–13 with one-to-many groups per teacher and the heterogeneous-teacher fallback.

    Options: ``alpha``, ``beta``, ``temperature``, ``sentence_repr`` (``mean`` | ``summary``),
    ``alignment`` (``auto`` | ``sentence``), ``projection`` (``always`` = W_{h,k}, W_{e,k} for
    every teacher as in the paper | ``auto`` = identity when the widths match),
    ``teacher_prefixes``.
    """

    term_names = ("ce", "pred", "hidden", "attn", "emb")
    uses_alpha = True
    known_options = ("alpha", "beta", "teacher_prefixes", "sentence_repr", "alignment", "projection")
    student_needs = {"hidden": True, "attention": True}
    teacher_needs = {"hidden": True, "attention": True}

    def __init__(self, config, student, teachers, regression=False):
        super().__init__(config, student, teachers, regression)
        self.sentence_repr = str(self.config.get("sentence_repr", "mean"))
        if self.sentence_repr not in SENTENCE_REPRS:
            raise ValueError(f"sentence_repr must be one of {SENTENCE_REPRS}, got {self.sentence_repr!r}")
        self.alignment = str(self.config.get("alignment", "auto"))
        if self.alignment not in ALIGNMENT_MODES:
            raise ValueError(f"alignment must be one of {ALIGNMENT_MODES}, got {self.alignment!r}")
        projection = self.config.get("projection", "always")
        if projection not in PROJECTION_MODES:
            raise ValueError(f"projection must be one of {PROJECTION_MODES}, got {projection!r}")
        if self.alignment == "sentence":  # no token-level term can run: skip attention scores
            self.student_needs = {"hidden": True}
            self.teacher_needs = {"hidden": True}
        self.groups: list[list[list[int]]] = []
        for k, m_k in enumerate(self.teacher_layers):
            if m_k < self.n_student:
                raise ValueError(
                    f"teacher {k} has {m_k} layers, fewer than the student's {self.n_student}: the one-to-many "
                    f"mapping needs every teacher at least as deep as the student"
                )
            self.groups.append(layer_map("one_to_many", m_k, self.n_student))
        d_s = self.student_width

        def make(d_t: int) -> nn.Module:
            return nn.Identity() if projection == "auto" and d_t == d_s else nn.Linear(d_s, d_t)

        self.hidden_projections = nn.ModuleList([make(d) for d in self.teacher_widths])  # W_{h,k}
        self.embedding_projections = nn.ModuleList([make(d) for d in self.teacher_widths])  # W_{e,k}
        self._seen = [0] * self.n_teachers
        self._aligned = [0] * self.n_teachers

    @classmethod
    def derived_weights(cls, a, b):
        return {"ce": 1.0 - b, "pred": b * (1.0 - a), "hidden": b * a, "attn": b, "emb": b}

    # ------------------------------------------------------------------ alignment
    def token_aligned(self, k: int, batch: dict[str, Tensor]) -> bool:
        """Whether teacher k's token positions equal the student's for this batch (the rule in
        the module docstring)."""
        if self.alignment == "sentence":
            return False
        prefix = self.prefix_of(k, batch)
        if prefix == "":
            return True
        key = prefix + "input_ids"
        if key not in batch:
            raise KeyError(f"teacher {k} ({self.teacher_names[k]}) reads column {key!r}, which the batch lacks")
        ids_s, ids_t = batch["input_ids"], batch[key]
        if ids_s.shape != ids_t.shape:
            return False
        mask_s = batch.get("attention_mask", torch.ones_like(ids_s))
        mask_t = batch.get(prefix + "attention_mask", torch.ones_like(ids_t))
        if mask_s.shape != mask_t.shape or not torch.equal(mask_s.bool(), mask_t.bool()):
            return False
        valid = mask_s.bool()
        return bool(torch.equal(ids_s[valid], ids_t[valid]))

    def sentence_states(self, features: Features) -> Tensor:
        """Per-layer sentence vectors (B, layers + 1, H) under ``sentence_repr``."""
        return features.cls() if self.sentence_repr == "summary" else features.mean_pooled()

    # ------------------------------------------------------------------ per-teacher distances
    def hidden_distance(self, k: int, student: Features, teacher: Features, aligned: bool) -> Tensor:
        """D_k^h (Eq. 2–4): Σ_i mean_{j ∈ I_{k,i}} MSE(h_i^S W_{h,k}, h_j^{T,k}); token-level when
        aligned, else on per-layer sentence vectors."""
        project = self.hidden_projections[k]
        if aligned:
            s_states = [project(h) for h in student.hidden_states[1:]]
            t_states = list(teacher.hidden_states[1:])
            mask = student.attention_mask
        else:
            s_states = list(project(self.sentence_states(student)[:, 1:]).unbind(1))
            t_states = list(self.sentence_states(teacher)[:, 1:].unbind(1))
            mask = None
        return losses.group_mean_mse(s_states, t_states, self.groups[k], mask, kind="hidden")

    def attention_distance(self, k: int, student: Features, teacher: Features) -> Tensor:
        """D_k^a (Eq. 6–9): Σ_i mean_{j ∈ I_{k,i}} head-averaged MSE of QKᵀ/√δ (aligned only)."""
        return losses.group_mean_mse(
            list(student.attention_scores), list(teacher.attention_scores), self.groups[k],
            student.attention_mask, kind="attention",
        )

    def embedding_distance(self, k: int, student: Features, teacher: Features, aligned: bool) -> Tensor:
        """Eq. 11 for one teacher: MSE(E^S W_{e,k}, E^{T,k}); mean-pooled embeddings if misaligned."""
        project = self.embedding_projections[k]
        if aligned:
            return losses.masked_mse(project(student.hidden_states[0]), teacher.hidden_states[0], student.attention_mask)
        return losses.masked_mse(project(student.mean_pooled()[:, 0]), teacher.mean_pooled()[:, 0])

    # ------------------------------------------------------------------ terms
    def terms(self, student, teachers, batch):
        result = {"ce": task_loss(student.logits, batch["labels"])}
        result["pred"] = self.prediction_terms(student, teachers)
        zero = student.logits.new_zeros(())
        hidden, attn, emb = [], [], []
        for k in sorted(teachers):
            teacher = teachers[k]
            aligned = self.token_aligned(k, batch)
            self._seen[k] += 1
            self._aligned[k] += int(aligned)
            h = self.hidden_distance(k, student, teacher, aligned) if self.wants("hidden") else zero
            e = self.embedding_distance(k, student, teacher, aligned) if self.wants("emb") else zero
            a = self.attention_distance(k, student, teacher) if aligned and self.wants("attn") else zero
            hidden.append(h)
            emb.append(e)
            if aligned:
                attn.append(a)
            result[f"aligned_t{k}"] = zero + float(aligned)
            result[f"hidden_t{k}"] = h.detach()
            result[f"attn_t{k}"] = a.detach()
            result[f"emb_t{k}"] = e.detach()
        result["hidden"] = torch.stack(hidden).mean()
        result["emb"] = torch.stack(emb).mean()
        result["attn"] = torch.stack(attn).mean() if attn else zero
        return result

    # ------------------------------------------------------------------ reporting
    def alignment_report(self) -> dict:
        """Per teacher (keyed by name): token alignment seen so far (``token_aligned`` is True /
        False when every / no training batch aligned, ``"mixed"`` otherwise, None before the
        first batch), its fraction, the levels the terms ran at, heads, width, depth, groups
        and projections — for logging to MLflow."""
        report = {}
        for k, name in enumerate(self.teacher_names):
            seen, aligned = self._seen[k], self._aligned[k]
            fraction = aligned / seen if seen else None
            if fraction is None:
                flag, level = None, None
            elif fraction == 1.0:
                flag, level = True, "token"
            elif fraction == 0.0:
                flag, level = False, "sentence"
            else:
                flag, level = "mixed", "mixed"
            info = self.describe_teacher(k)
            info.update(
                token_aligned=flag,
                token_aligned_fraction=fraction,
                batches=seen,
                hidden_level=level,
                attention="used" if flag is True else ("skipped" if flag is False else flag),
                embedding_level=level,
                sentence_repr=self.sentence_repr,
                alignment_rule=self.alignment,
                student_heads=self.student_heads,
                student_width=self.student_width,
                groups=[list(g) for g in self.groups[k]],
                hidden_projection=_describe_projection(self.hidden_projections[k], self.student_width, self.teacher_widths[k]),
                embedding_projection=_describe_projection(self.embedding_projections[k], self.student_width, self.teacher_widths[k]),
            )
            report[name] = info
        return report

    def alignment_metrics(self) -> dict[str, float]:
        """Flat numeric view of :meth:`alignment_report` (``align/<teacher>/<field>``) for MLflow."""
        metrics = {}
        for name, info in self.alignment_report().items():
            if info["token_aligned_fraction"] is not None:
                metrics[f"align/{name}/token_aligned_fraction"] = float(info["token_aligned_fraction"])
            for key in ("layers", "width", "heads"):
                if info[key] is not None:
                    metrics[f"align/{name}/{key}"] = float(info[key])
        return metrics

    def reset_alignment_counts(self) -> None:
        self._seen = [0] * self.n_teachers
        self._aligned = [0] * self.n_teachers

    def diagnostics(self):
        return {"alignment": self.alignment_report()}


def _describe_projection(module: nn.Module, d_s: int, d_t: int) -> str:
    return "identity" if isinstance(module, nn.Identity) else f"linear {d_s}->{d_t}"


# --------------------------------------------------------------------------- baselines


@register_method("okd")
class OnlineKD(MultiTeacherBase):
    """OKD: averaged soft labels of all teachers, L = (1−β)·CE + β·(1/K) Σ_k soft-CE(τ)."""

    term_names = ("ce", "pred")

    def terms(self, student, teachers, batch):
        return {"ce": task_loss(student.logits, batch["labels"]), "pred": self.prediction_terms(student, teachers)}

    def alignment_report(self) -> dict:
        return {name: dict(self.describe_teacher(k), level="prediction") for k, name in enumerate(self.teacher_names)}


@register_method("multi_pkd")
class MultiPKD(MultiTeacherBase):
    """Multi-teacher PKD: per teacher, a one-to-one [CLS] mapping (``pkd_skip`` by default,
    ``mapping: pkd_last``) with PKD's normalised [CLS] MSE, averaged over teachers:
    L = β(α·L_layer + (1−α)·L_pred) + (1−β)·L_CE. Summary tokens come from each model's own
    tokenization (``Features.cls()``), so heterogeneous tokenizers need no alignment. A
    learned projection per teacher maps the student's width to the teacher's when they differ
    (``projection: auto``; ``always`` projects for every teacher)."""

    term_names = ("ce", "pred", "layer")
    uses_alpha = True
    known_options = ("alpha", "beta", "teacher_prefixes", "mapping", "projection")
    student_needs = {"cls": True}
    teacher_needs = {"cls": True}

    def __init__(self, config, student, teachers, regression=False):
        super().__init__(config, student, teachers, regression)
        strategy = self.config.get("mapping", "pkd_skip")
        if strategy not in ("pkd_skip", "pkd_last"):
            raise ValueError(f"multi_pkd mapping must be 'pkd_skip' or 'pkd_last', got {strategy!r}")
        projection = self.config.get("projection", "auto")
        if projection not in PROJECTION_MODES:
            raise ValueError(f"projection must be one of {PROJECTION_MODES}, got {projection!r}")
        self.mappings = []
        for k, m_k in enumerate(self.teacher_layers):
            try:
                self.mappings.append(layer_map(strategy, m_k, self.n_student))
            except ValueError as exc:
                raise ValueError(f"teacher {k} ({m_k} layers) with a {self.n_student}-layer student: {exc}") from exc
        d_s = self.student_width
        self.projections = nn.ModuleList(
            [nn.Identity() if projection == "auto" and d == d_s else nn.Linear(d_s, d) for d in self.teacher_widths]
        )

    @classmethod
    def derived_weights(cls, a, b):
        return {"ce": 1.0 - b, "pred": b * (1.0 - a), "layer": b * a}

    def layer_distance(self, k: int, student: Features, teacher: Features) -> Tensor:
        s, t = losses.gather_one_to_one(student.cls()[:, 1:], teacher.cls()[:, 1:], self.mappings[k])
        return losses.pkd_loss(self.projections[k](s), t)

    def terms(self, student, teachers, batch):
        result = {"ce": task_loss(student.logits, batch["labels"]), "pred": self.prediction_terms(student, teachers)}
        if self.wants("layer"):
            result["layer"] = torch.stack([self.layer_distance(k, student, teachers[k]) for k in sorted(teachers)]).mean()
        else:
            result["layer"] = student.logits.new_zeros(())
        return result

    def alignment_report(self) -> dict:
        return {
            name: dict(
                self.describe_teacher(k), level="summary token", mapping=[list(g) for g in self.mappings[k]],
                projection=_describe_projection(self.projections[k], self.student_width, self.teacher_widths[k]),
            )
            for k, name in enumerate(self.teacher_names)
        }


@register_method("rse_kd")
class RandomSingleTeacherKD(MultiTeacherBase):
    """RSE-KD (Fukuda et al. 2017): each training mini-batch distils from ONE teacher drawn
    uniformly at random, L = (1−β)·CE + β·soft-CE(τ) to that teacher; evaluation and
    diagnostics use all teachers.

    Draw t uses ``torch.Generator().manual_seed(seed · 1_000_003 + t)`` with the draw counter
    ``t`` kept in a persistent buffer, so the sequence is reproducible from ``seed`` (pass the
    training seed) and continues correctly when a run resumes from a checkpoint.
    """

    term_names = ("ce", "pred")
    known_options = ("beta", "teacher_prefixes", "seed")

    def __init__(self, config, student, teachers, regression=False):
        super().__init__(config, student, teachers, regression)
        seed = self.config.get("seed", 42)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"seed must be an int, got {seed!r}")
        self.seed = int(seed)
        self.register_buffer("draw_step", torch.zeros((), dtype=torch.long))
        self.draw_counts = [0] * self.n_teachers

    def choose_teachers(self, n_teachers: int, training: bool) -> list[int]:
        if not training or n_teachers == 1:
            return list(range(n_teachers))
        step = int(self.draw_step)
        generator = torch.Generator().manual_seed((self.seed * 1_000_003 + step) % (2**63))
        k = int(torch.randint(n_teachers, (1,), generator=generator))
        self.draw_step.add_(1)
        self.draw_counts[k] += 1
        return [k]

    def terms(self, student, teachers, batch):
        return {"ce": task_loss(student.logits, batch["labels"]), "pred": self.prediction_terms(student, teachers)}

    def alignment_report(self) -> dict:
        total = sum(self.draw_counts)
        return {
            name: dict(
                self.describe_teacher(k), level="prediction", draws=self.draw_counts[k],
                draw_fraction=self.draw_counts[k] / total if total else None,
            )
            for k, name in enumerate(self.teacher_names)
        }

    def diagnostics(self):
        return {"draw_counts": list(self.draw_counts)}


# --------------------------------------------------------------------------- wiring


def build_multi_teacher_objective(student: nn.Module, teachers: Sequence, config: dict, regression: bool = False):
    """A :class:`~bert_kd.distill.objective.DistillationObjective` for ``config['method']``
    (default ``multi_teacher``) whose method knows each teacher's batch prefix and name.

    ``teachers`` are :class:`~bert_kd.distill.objective.Teacher` specs (model, prefix, cache, name).
    """
    from bert_kd.distill.objective import DistillationObjective

    teachers = list(teachers)
    if not teachers:
        raise ValueError("distillation needs at least one teacher, got an empty teacher list")
    config = dict(config)
    config.setdefault("method", "multi_teacher")
    method = build_method(config, student, [t.model for t in teachers], regression)
    if hasattr(method, "bind_teachers"):
        method.bind_teachers(teachers)
    return DistillationObjective(student, teachers, method, method.weights)

