"""TED Stage I: task-aware filters (Liang et al., 2023, Sec. 3.1, Eq. 4–5, Remark 3.1).

A *filter* g^k reads the token-level hidden states H^{l} (B, L, d) of one model layer l and
maps them to a filtered representation (B, L, d_t); a *task head* on the filtered sequence
turns it into a prediction (linear → softmax for classification, linear for STS-B
regression). The head pools the filtered sequence with the summary token: the FIRST token
([CLS]) for BERT-like models (the last real token for XLNet, see
[`bert_kd.core.distill.outputs.summary_position`][]).

Filter architectures (Remark 3.1, Sec. 6.5, Table 8), [`FILTER_ARCHS`][]:

``linear``            one linear map d → d_t (default; d_t = teacher width, so teacher and
                      student filtered spaces match; TED Sec. 4.3/5.3, App. A.2.4).
``mlp``               Linear(d, d_t) → GeLU → Linear(d_t, d_t).
``subsequent_layer``  a copy of the model's NEXT transformer layer (layer l+1 for a filter on
                      layer l; for the last layer a copy of the layer itself), followed by a
                      linear map to d_t when d != d_t.

Stage I trains the K filters of a frozen model jointly on Σ_k task-loss(head_k) (Eq. 5) with
[`FilterTrainingObjective`][] through the one training loop [`bert_kd.core.training.fit`][training.loop.fit]
(see [`train_filters`][]). Student filters are either trained the same way on a (fine-tuned)
student or copied from the teacher filters at the mapped layers ([`copy_filters_for_student`][],
App. A.4 Case 2.2; needs student width == teacher width).

[`TaskFilters`][] is the catalogued artifact (``save``/``load``: safetensors state dict +
JSON config, written atomically) and carries provenance (task, fingerprint of the model the
filters were trained on) so callers can refuse filters trained for another task or teacher
([`TaskFilters.check_compatible`][]; TED Table 5 shows mismatched filters silently hurt).

Layer numbers are 1-based (= index into HF ``hidden_states``; 0 = embeddings, never filtered).

Modules: `mapping` (M(·)), [`filters`][] (the filter modules), [`student`][]
(student filters copied from the teacher's), [`persistence`][]
(on-disk format), [`artifact`][] (the Stage I result directory), [`objective`][] (Eq. 5),
[`stage1`][] (the driver).
"""

from bert_kd.core.distill.ted_filters.artifact import load_ted_filters, save_ted_filters
from bert_kd.core.distill.ted_filters.filter_objective import FilterTrainingObjective
from bert_kd.core.distill.ted_filters.filters import FILTER_ARCHS, TaskFilter, TaskFilters
from bert_kd.core.distill.ted_filters.stage1 import (
    FilterPlacement,
    FilterTraining,
    evaluate_filters,
    filters_evaluate_fn,
    train_filters,
)
from bert_kd.core.distill.ted_filters.student import copy_filters_for_student
from bert_kd.core.distill.ted_filters.teacher_layers import ted_layer_map

__all__ = [
    "FilterPlacement",
    "FilterTraining",
    "FILTER_ARCHS",
    "FilterTrainingObjective",
    "TaskFilter",
    "TaskFilters",
    "copy_filters_for_student",
    "evaluate_filters",
    "filters_evaluate_fn",
    "load_ted_filters",
    "save_ted_filters",
    "ted_layer_map",
    "train_filters",
]
