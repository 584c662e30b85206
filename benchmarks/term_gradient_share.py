"""How much of the student's gradient each weighted distillation term carries (the CPU protocol's question: does the layer term do anything?).

For a recipe L = Σ_name w_name · term_name (ALP-KD Eq. 10: β·L_ce + η·L_KD + λ·L_layer) and a few
training batches, it computes every term's gradient w.r.t. the student's parameters θ separately,
    g_name = w_name · ∂term_name/∂θ        (one ``torch.autograd.grad`` per term, same forward pass)
and reports ‖g_name‖, its share ‖g_name‖ / Σ‖g‖, the cosine between g_name and the prediction
term's gradient g_kd (TinyBERT: g_pred), and the weight at which ‖g_name‖ would equal ‖g_kd‖
(w_kd · ‖∂kd/∂θ‖ / ‖∂name/∂θ‖). Norms and cosines are means over the batches; the ``total`` row is
‖Σ g‖ (what gradient clipping, max_grad_norm 1, sees).

Two points: (a) ``init``, the student built as training builds it (the teacher's first layers,
:func:`bert_kd.pipelines.distill.nodes.build_student_model`), and (b) ``trained``, the students in
the store trained from the same teacher (recipe read from each one's ``manifest.json``; students
of methods with trained auxiliary modules — CKD combiners, TinyBERT/ALP projections — are skipped,
those modules are not stored). θ is the student's own parameters (auxiliary modules excluded).

The recipes are the ``cpu_protocol`` rows of conf/base/parameters_reproduce.yml (the recipes of
parameters_distill.yml with the table's overrides), built by the sweep's own parser. The student
runs in training mode (dropout on, the same masks for every recipe), the teacher in eval mode,
as in training; ``--eval-mode`` turns dropout off.

    PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/term_gradient_share.py --glue-dir ../shared/glue
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
import yaml
from torch import Tensor, nn

from bert_kd.core.data.glue import get_task
from bert_kd.core.data.tokenize import tokenize_frame
from bert_kd.core.distill.gradient_share import batch_term_gradients, flat_gradient  # noqa: F401 (the package's measurement)
from bert_kd.core.distill.methods import build_method
from bert_kd.core.distill.objective import DistillationObjective, Teacher
from bert_kd.core.models import ModelBundle, load_bundle
from bert_kd.core.training import make_loader
from bert_kd.experiment.parameters import explicit_weights
from bert_kd.experiment.run_setup import collator_for
from bert_kd.experiment.training_jobs.student import build_student_model
from bert_kd.pipelines.data_processing.nodes import ingest_glue
from bert_kd.sweeps.spec import build_sweep

PROJECT = Path(__file__).resolve().parents[1]
CONF = PROJECT / "conf" / "base"
STORE = PROJECT / "data" / "06_models" / "store"
RECIPE_FILES = ("parameters_distill.yml", "parameters_ted.yml", "parameters_multi_teacher.yml")
TABLE = "cpu_protocol"
ROWS = ("nkd", "rkd", "pkd_1", "pkd_3", "pkd_6", "ckd", "alp", "tinybert")
PREDICTION_TERMS = ("kd", "pred")  # the soft-label term each other term is compared with
TASK_TERMS = ("ce",)


@dataclass
class TermGradient:
    """One weighted term's gradient statistics, averaged over batches (and students)."""

    term: str
    weight: float
    norm: float  # ‖w · ∂term/∂θ‖
    unweighted_norm: float  # ‖∂term/∂θ‖
    share: float  # norm / Σ norms of the recipe's terms
    cos_with_prediction: float | None  # cos(∂term/∂θ, ∂kd/∂θ); None without a prediction term
    parity_weight: float | None  # w at which ‖g_term‖ = ‖g_kd‖ (inf when the term has no gradient)


# ---------------------------------------------------------------- recipes, models, data
def protocol_recipes(rows: Sequence[str] = ROWS, conf: Path = CONF, table: str = TABLE) -> dict[str, dict]:
    """The table's rows as explicit recipes (``set`` overrides applied, ALP-KD's β = 1 − η − λ expanded)."""
    recipes = {}
    for name in RECIPE_FILES:
        recipes.update(yaml.safe_load((conf / name).read_text(encoding="utf-8")))
    reproduce = yaml.safe_load((conf / "parameters_reproduce.yml").read_text(encoding="utf-8"))["reproduce"]
    sweep = build_sweep(
        {**reproduce, "table": table, "methods": list(rows), "tasks": None, "seeds": None, "grid": None}, recipes
    )
    result = {}
    for method in sweep.methods:
        if method.job != "distill":
            raise ValueError(
                f"--recipes: {method.name!r} is a {method.job} row; only distill_methods rows are measured"
            )
        result[method.name] = {**method.recipe, "weights": explicit_weights(method.recipe)}
    return result


def canonical(recipe: dict) -> str:
    """A recipe as a comparable string (explicit weights, float temperature)."""
    recipe = {**recipe, "weights": explicit_weights(recipe)}
    if "temperature" in recipe:
        recipe["temperature"] = float(recipe["temperature"])
    return json.dumps(recipe, sort_keys=True)


def newest_teacher(task: str, store: Path = STORE) -> Path:
    """The most recently written ``task`` teacher of the model store."""
    found = []
    for info in (store / "teacher").glob("*/bert_kd.json"):
        if json.loads(info.read_text(encoding="utf-8")).get("task") == task:
            found.append((info.stat().st_mtime, info.parent))
    if not found:
        raise FileNotFoundError(f"--teacher: no {task} teacher under {store / 'teacher'}; pass a teacher directory")
    return max(found)[1]


def stored_students(students_dir: Path, teacher_key: str, task: str) -> list[tuple[Path, dict]]:
    """(directory, recipe) of every finished student of ``task`` distilled from ``teacher_key``."""
    result = []
    for manifest in sorted(students_dir.glob("*/manifest.json")):
        spec = json.loads(manifest.read_text(encoding="utf-8")).get("spec", {})
        if spec.get("task") == task and spec.get("teacher") == teacher_key and isinstance(spec.get("recipe"), dict):
            result.append((manifest.parent, spec["recipe"]))
    return result


def training_batches(
    teacher: ModelBundle, task: str, glue_dir: str | None, batches: int, batch_size: int, max_seq_length: int, seed: int
) -> list[dict[str, Tensor]]:
    """``batches`` × ``batch_size`` seeded training examples, tokenized as the teacher was trained."""
    train, _, _ = ingest_glue(task, glue_dir, batches * batch_size, 1, seed)
    dataset = tokenize_frame(train, teacher.tokenizer, max_seq_length)
    loader = make_loader(dataset, batch_size, collator_for(teacher.tokenizer), shuffle=False)
    return [batch for _, batch in zip(range(batches), loader)]


# ---------------------------------------------------------------- the measurement
def term_gradients(
    students: Sequence[nn.Module],
    teacher: nn.Module,
    recipe: dict,
    batches: Sequence[dict],
    *,
    regression: bool = False,
    seed: int = 0,
    dropout: bool = True,
) -> list[TermGradient]:
    """Per-term gradient norms, shares and cosines of ``recipe`` over ``students`` × ``batches``
    (the last entry, term ``total``, is ‖Σ_name g_name‖ with share 1)."""
    sums: dict[str, dict[str, float]] = {}
    count = 0
    for student in students:
        torch.manual_seed(seed)  # auxiliary modules (projections, combiners) start alike for every student
        method = build_method(dict(recipe), student, [teacher], regression=regression)
        objective = DistillationObjective(student, [Teacher(teacher)], method, method.weights)
        objective.train(dropout)
        for i, batch in enumerate(batches):
            torch.manual_seed(seed + i)  # the same dropout masks for every recipe
            grads = batch_term_gradients(objective, batch, allow_cache=False)
            reference = next((grads[t] for t in PREDICTION_TERMS if t in grads), None)
            total = sum(method.weights.get(name, 0.0) * g for name, g in grads.items())
            for name, g in grads.items():
                row = sums.setdefault(name, {"unweighted": 0.0, "cos": 0.0})
                row["unweighted"] += float(g.norm())
                if reference is not None:
                    row["cos"] += float(torch.nn.functional.cosine_similarity(g, reference, dim=0, eps=1e-30))
            sums.setdefault("total", {"unweighted": 0.0, "cos": 0.0})["unweighted"] += float(
                torch.as_tensor(total).norm()
            )
            count += 1
            del grads, total, reference
    weights = dict(method.weights)
    prediction = next((t for t in PREDICTION_TERMS if t in sums), None)
    mean = {name: row["unweighted"] / count for name, row in sums.items()}
    weighted = {name: weights.get(name, 0.0) * mean[name] for name in mean if name != "total"}
    denominator = sum(weighted.values())
    rows = []
    for name in weighted:
        parity = None
        if prediction is not None and name not in PREDICTION_TERMS + TASK_TERMS:
            target = weighted[prediction]
            parity = target / mean[name] if mean[name] > 0 else math.inf
        rows.append(
            TermGradient(
                name,
                weights.get(name, 0.0),
                weighted[name],
                mean[name],
                weighted[name] / denominator if denominator else 0.0,
                sums[name]["cos"] / count if prediction is not None else None,
                parity,
            )
        )
    rows.append(TermGradient("total", 1.0, mean["total"], mean["total"], 1.0, None, None))
    return rows


def share_at(rows: Sequence[TermGradient], term: str, weight: float) -> float:
    """``term``'s share of Σ‖g‖ had its weight been ``weight`` (the other weights kept)."""
    norms = {r.term: (weight if r.term == term else r.weight) * r.unweighted_norm for r in rows if r.term != "total"}
    total = sum(norms.values())
    return norms[term] / total if total else 0.0


def layer_terms(rows: Sequence[TermGradient]) -> list[TermGradient]:
    """The intermediate-layer terms of a recipe (not the task, prediction or total rows)."""
    return [r for r in rows if r.term not in PREDICTION_TERMS + TASK_TERMS + ("total",)]


# ---------------------------------------------------------------- report
def number(value: float | None, digits: int = 3) -> str:
    if value is None:
        return ""
    if math.isinf(value):
        return "∞"
    return f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:.0f}"


def markdown(results: list[tuple[str, str, list[TermGradient]]]) -> str:
    lines = [
        "| recipe | point | term | weight | ‖g‖ | share | cos(g, g_kd) | weight for ‖g‖ = ‖g_kd‖ |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for recipe, point, rows in results:
        for r in rows:
            share = "" if r.term == "total" else f"{100 * r.share:.1f}%"
            weight = "" if r.term == "total" else number(r.weight)
            lines.append(
                f"| {recipe} | {point} | {r.term} | {weight} | {number(r.norm)} | {share} | "
                f"{number(r.cos_with_prediction, 2)} | {number(r.parity_weight)} |"
            )
    return "\n".join(lines)


def what_if(results: list[tuple[str, str, list[TermGradient]]], weights: Sequence[float]) -> str:
    """Each layer term's share of Σ‖g‖ at other weights (the other terms' weights kept)."""
    lines = [
        "| recipe | point | term | " + " | ".join(f"share at {number(w)}" for w in weights) + " |",
        "|---|---|---|" + "---:|" * len(weights),
    ]
    for recipe, point, rows in results:
        for r in layer_terms(rows):
            if r.unweighted_norm > 0:
                lines.append(
                    f"| {recipe} | {point} | {r.term} | "
                    + " | ".join(f"{100 * share_at(rows, r.term, w):.1f}%" for w in weights)
                    + " |"
                )
    return "\n".join(lines)


def summary(results: list[tuple[str, str, list[TermGradient]]]) -> str:
    """One line: the intermediate-layer terms' share and parity weight at each point (init, trained)."""
    parts = []
    for kind in ("init", "trained"):
        layer = [r for _, point, rows in results if point.startswith(kind) for r in layer_terms(rows) if r.weight > 0]
        if not layer:
            continue
        shares = [r.share for r in layer]
        parities = [r.parity_weight for r in layer if r.parity_weight is not None]
        parts.append(
            f"{kind}: weighted layer terms carry {100 * min(shares):.1f}–{100 * max(shares):.1f}% of Σ‖g‖, "
            f"parity with the KD term at weight {number(min(parities))}–{number(max(parities))}"
        )
    return "Summary: " + ("; ".join(parts) if parts else "no intermediate-layer term measured")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--teacher", type=Path, default=None, help="teacher directory (default: newest <task> teacher in the store)"
    )
    parser.add_argument(
        "--glue-dir", default=None, help="GLUE root (default: $GLUE_DIR or the project's data/01_raw/glue)"
    )
    parser.add_argument(
        "--students",
        default=str(STORE / "student"),
        help="folder of trained students (<key>/manifest.json); '' skips point (b)",
    )
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-seq-length", type=int, default=64)
    parser.add_argument("--task", default="mrpc")
    parser.add_argument("--recipes", default=" ".join(ROWS), help=f"space-separated {TABLE} rows")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--eval-mode", action="store_true", help="dropout off in the student")
    parser.add_argument(
        "--what-if",
        default="0.2 0.7 2 20 200",
        help="space-separated layer-term weights for the second table (other weights kept)",
    )
    args = parser.parse_args()

    task = get_task(args.task)
    teacher_dir = args.teacher or newest_teacher(task.name)
    teacher = load_bundle(teacher_dir)
    recipes = protocol_recipes(args.recipes.split())
    batches = training_batches(
        teacher, task.name, args.glue_dir, args.batches, args.batch_size, args.max_seq_length, args.seed
    )
    student_params = {"num_layers": 2, "layer_selection": "first"}
    student_params.update(
        yaml.safe_load((CONF / "parameters_reproduce.yml").read_text(encoding="utf-8"))["reproduce"]["tables"][
            TABLE
        ].get("student")
        or {}
    )
    init = build_student_model(teacher, student_params, task.name).model
    options = {"regression": task.is_regression, "seed": args.seed, "dropout": not args.eval_mode}

    trained: dict[str, list[Path]] = {}
    if args.students:
        by_recipe = {canonical(r): name for name, r in recipes.items()}
        for directory, recipe in stored_students(
            Path(args.students), teacher.info.get("key", teacher_dir.name), task.name
        ):
            name = by_recipe.get(canonical(recipe))
            if name is not None:
                trained.setdefault(name, []).append(directory)
    print(
        f"teacher {teacher_dir} · {args.batches} batches of {args.batch_size} {task.name} training examples "
        f"(max length {args.max_seq_length}) · student {'eval' if args.eval_mode else 'train'} mode"
    )
    results = []
    for name, recipe in recipes.items():
        results.append((name, "init", term_gradients([init], teacher.model, recipe, batches, **options)))
        directories = trained.get(name, [])
        if not directories:
            continue
        if any(p.requires_grad for p in build_method(dict(recipe), init, [teacher.model]).parameters()):
            print(f"{name}: {len(directories)} trained student(s) skipped: their auxiliary modules are not stored")
            continue
        students = [load_bundle(d).model for d in directories]
        results.append(
            (name, f"trained (n={len(students)})", term_gradients(students, teacher.model, recipe, batches, **options))
        )
    print(markdown(results))
    print()
    print(what_if(results, [float(w) for w in args.what_if.split()]))
    print(summary(results))


if __name__ == "__main__":
    main()
