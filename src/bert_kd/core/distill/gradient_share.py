"""Each weighted loss term's share of the student's gradient (a loss term can be inert: a warning says so).

For a recipe L = Σ_t w_t · L_t, the share of term t is ‖w_t ∇_θ L_t‖ / Σ_u ‖w_u ∇_θ L_u‖ over the
student's parameters θ, averaged (the norms) over a few training batches. A term with w_t > 0 and
a share of a few percent barely moves the student: at the recipes' λ = 0.2 the intermediate-layer
term is 2–7% here, so PKD/ALP students train like RKD students (``benchmarks/term_gradient_share.py``).

Unweighted norms do not depend on the weights, so one measurement gives the shares of every
stage of a staged recipe ([`shares_for`][]).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import torch
from torch import Tensor, nn

from bert_kd.core.training import make_loader, module_device

log = logging.getLogger(__name__)

#: Below this share a term with weight > 0 is reported as (nearly) inert.
INERT_SHARE = 0.05


def flat_gradient(value: Tensor, params: Sequence[nn.Parameter]) -> Tensor:
    """∂value/∂params as one flat vector (zeros where the value does not depend on a parameter)."""
    if not value.requires_grad:
        return torch.zeros(sum(p.numel() for p in params))
    grads = torch.autograd.grad(value, list(params), retain_graph=True, allow_unused=True)
    return torch.cat([(torch.zeros_like(p) if g is None else g).flatten() for g, p in zip(grads, params)])


def batch_term_gradients(objective, batch: Mapping[str, Tensor], allow_cache: bool = True) -> dict[str, Tensor]:
    """Flat ∂term/∂θ_student of every term the objective's method computes on ``batch``
    (``objective``: a [`DistillationObjective`][objective.DistillationObjective])."""
    params = [p for p in objective.model.parameters() if p.requires_grad]
    features = objective.student_features(batch)
    chosen = objective.method.choose_teachers(len(objective.teacher_specs), objective.training)
    teachers = {k: objective.teacher_features(k, batch, allow_cache=allow_cache) for k in chosen}
    terms = objective.method.terms(features, teachers, batch)
    return {name: flat_gradient(value, params) for name, value in terms.items()}


@dataclass(frozen=True)
class TermShare:
    """One term of one set of weights: its weight, ‖∇L_t‖ (mean over batches), ‖w_t ∇L_t‖ and share."""

    term: str
    weight: float
    unweighted_norm: float
    norm: float
    share: float

    @property
    def inert(self) -> bool:
        """Weighted (> 0) but below [`INERT_SHARE`][] of the gradient."""
        return self.weight > 0 and self.share < INERT_SHARE


def shares_for(unweighted_norms: Mapping[str, float], weights: Mapping[str, float]) -> list[TermShare]:
    """Shares of ``weights``' terms given each term's mean unweighted gradient norm (terms of
    ``weights`` that were not measured count as 0)."""
    norms = {term: float(w) * float(unweighted_norms.get(term, 0.0)) for term, w in weights.items()}
    total = sum(norms.values())
    return [
        TermShare(
            term, float(weights[term]), float(unweighted_norms.get(term, 0.0)), norm, norm / total if total > 0 else 0.0
        )
        for term, norm in norms.items()
    ]


def mean_term_norms(
    objective, batches: Iterable[Mapping[str, Tensor]], *, seed: int = 0, all_terms: Sequence[str] = ()
) -> dict[str, float]:
    """Mean ‖∂L_t/∂θ‖ over ``batches`` for every term (``all_terms``: terms to compute even
    when the active weights switch them off, e.g. the other stages of a staged recipe).

    Leaves the objective's mode, its method's weights, the parameters' gradients and the global
    RNG state as they were (training starts exactly as without the measurement)."""
    method = objective.method
    saved_weights, was_training = dict(method.weights), objective.training
    sums: dict[str, float] = {}
    count = 0
    with torch.random.fork_rng(devices=[]):
        try:
            method.weights = {**{t: 1.0 for t in all_terms}, **{t: w for t, w in saved_weights.items() if w > 0}}
            objective.train()
            for i, batch in enumerate(batches):
                torch.manual_seed(seed + i)
                for name, gradient in batch_term_gradients(objective, batch).items():
                    sums[name] = sums.get(name, 0.0) + float(gradient.norm())
                count += 1
        finally:
            method.weights = saved_weights
            objective.train(was_training)
    return {name: total / count for name, total in sums.items()} if count else {}


def recipe_weight_sets(method) -> list[tuple[str, dict[str, float]]]:
    """(label, weights) per set of weights the run trains with: ``("", weights)``, or
    ``("stage1", …)``, ``("stage2", …)`` for a staged recipe."""
    schedule = getattr(method, "schedule", None)
    if schedule is None:
        return [("", {t: float(w) for t, w in method.weights.items()})]
    return [
        (f"stage{i + 1}", {t: float(w) for t, w in stage.weights.items()}) for i, stage in enumerate(schedule.stages)
    ]


def measure_recipe_shares(
    objective, batches: Sequence[Mapping[str, Tensor]], seed: int = 0
) -> list[tuple[str, list[TermShare]]]:
    """Per weight set of the objective's recipe ([`recipe_weight_sets`][]): every term's share."""
    sets = recipe_weight_sets(objective.method)
    terms = sorted({t for _, weights in sets for t, w in weights.items() if w > 0})
    norms = mean_term_norms(objective, batches, seed=seed, all_terms=terms)
    return [(label, shares_for(norms, {t: w for t, w in weights.items() if w > 0})) for label, weights in sets]


def share_metrics(measured: Sequence[tuple[str, Sequence[TermShare]]], prefix: str = "grad_share/") -> dict[str, float]:
    """``grad_share/<term>`` (``grad_share/<stage>/<term>`` for staged recipes), in [0, 1]; ``prefix=""``
    gives the bare names (``<term>``, ``<stage>/<term>``) a trial's result keeps."""
    return {f"{prefix}{label + '/' if label else ''}{r.term}": r.share for label, rows in measured for r in rows}


def inert_warnings(measured: Sequence[tuple[str, Sequence[TermShare]]], name: str = "") -> list[str]:
    """One sentence per weighted term below [`INERT_SHARE`][] of the gradient."""
    lines = []
    for label, rows in measured:
        where = f" ({label})" if label else ""
        for r in rows:
            if r.inert:
                lines.append(
                    f"{name + ': ' if name else ''}loss term {r.term!r}{where} has weight {r.weight:g} but only "
                    f"{100 * r.share:.1f}% of the student's gradient (< {100 * INERT_SHARE:.0f}%): it barely "
                    "trains the student; raise its weight to make it count"
                )
    return lines


def first_batches(dataset, batch_size: int, collator, n: int) -> list[dict[str, Tensor]]:
    """The first ``n`` batches of ``dataset`` in order (no shuffling: the same rows every run)."""
    if n <= 0 or len(dataset) == 0:
        return []
    loader = make_loader(dataset.select(range(min(len(dataset), n * batch_size))), batch_size, collator, shuffle=False)
    return [batch for _, batch in zip(range(n), loader)]


def log_gradient_shares(
    run, objective, dataset, collator, batch_size: int, batches: int, name: str = "", seed: int = 0
) -> list[tuple[str, list[TermShare]]]:
    """Measure on the first ``batches`` training batches, log ``grad_share/*`` metrics (step 0) and
    the ``grad_share.batches`` param to ``run`` (a [`RunLogger`][tracking.runs.RunLogger]) and warn
    about inert terms (log + tag ``grad_share.warning``). ``batches = 0`` measures nothing."""
    loaded = first_batches(dataset, batch_size, collator, batches)
    if not loaded:
        return []
    device = module_device(objective.model)
    # the method's own modules (CKD's combiners, projections) join the student before fit moves them: on a GPU
    # the student is already there and a CPU combiner failed CKD ("mat1 is on cuda:0 … other tensors on cpu")
    objective.to(device)
    loaded = [{k: v.to(device) if torch.is_tensor(v) else v for k, v in b.items()} for b in loaded]
    measured = measure_recipe_shares(objective, loaded, seed=seed)
    run.log_params({"grad_share.batches": len(loaded), "grad_share.batch_size": batch_size})
    run.log_metrics(share_metrics(measured), step=0)
    warnings = inert_warnings(measured, name)
    for line in warnings:
        log.warning(line)
    if warnings:
        run.set_tags({"grad_share.warning": " | ".join(warnings)[:5000]})
    return measured
