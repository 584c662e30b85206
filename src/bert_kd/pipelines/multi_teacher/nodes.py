"""Nodes of multi-teacher distillation: K teachers (own tokenizers) → one student."""

from __future__ import annotations

import logging
import re

from bert_kd.data.glue import get_task
from bert_kd.data.tokenize import merge_tokenized, tokenize_splits
from bert_kd.distill.methods import build_method
from bert_kd.distill.objective import DistillationObjective, Teacher
from bert_kd.models import ModelBundle, build_student, count_parameters
from bert_kd.pipelines import common
from bert_kd.pipelines.data_processing.nodes import split_frames, tokenize_for_model
from bert_kd.pipelines.distill.nodes import cache_teacher_outputs, check_teacher
from bert_kd.pipelines.train_teacher.nodes import train_teacher
from bert_kd.tracking import log_comparison_to_parent
from bert_kd.training import config_fingerprint, fit

log = logging.getLogger(__name__)


TEACHER_COLUMN = re.compile(r"^t\d+_")


def teacher_prefix(k: int) -> str:
    return f"t{k}_"


def _teacher_list(teachers: list[dict]) -> list[dict]:
    if not teachers:
        raise ValueError("multi_teachers is empty: list at least one teacher (model, seed, …)")
    names = [t.get("name", f"teacher{k}") for k, t in enumerate(teachers)]
    if len(set(names)) != len(names):
        raise ValueError(f"multi_teachers names must be unique, got {names}")
    return [{"name": n, **t} for n, t in zip(names, teachers)]


def train_multi_teachers(train, validation, teachers: list[dict], task: str, seed: int, tracking: dict,
                         runtime: dict) -> list[ModelBundle]:
    """Fine-tune every listed teacher with its own tokenizer (reused when already trained)."""
    bundles = []
    for spec in _teacher_list(teachers):
        settings = {k: v for k, v in spec.items() if k != "name"}
        tokenized = tokenize_for_model(train, validation, settings)
        bundle = train_teacher(tokenized, task, settings, int(settings.get("seed", seed)), tracking, runtime)
        bundle.info["name"] = spec["name"]
        bundles.append(bundle)
    return bundles


def evaluate_multi_teachers(bundles: list[ModelBundle], train, validation, teachers: list[dict], task: str,
                            tracking: dict) -> list[dict]:
    """Evaluate each teacher on its own tokenization of the dev set(s)."""
    results = []
    for bundle, spec in zip(bundles, _teacher_list(teachers)):
        tokenized = tokenize_splits(split_frames(train.head(1), validation), bundle.tokenizer, int(spec["max_seq_length"]))
        evaluation = common.evaluate_bundle(bundle, tokenized, task)
        evaluation["name"] = spec["name"]
        common.log_evaluation(evaluation, bundle.info.get("mlflow_run_id"), tracking)
        results.append(evaluation)
    return results


def prepare_multi_teacher_data(bundles: list[ModelBundle], train, validation, teachers: list[dict], student: dict):
    """The student's tokenization plus every teacher's own under prefix ``t<k>_``."""
    specs = _teacher_list(teachers)
    init = int(student.get("init_from_teacher", 0))
    frames = split_frames(train, validation)
    max_length = int(student.get("max_seq_length", specs[init]["max_seq_length"]))
    own = tokenize_splits(frames, bundles[init].tokenizer, max_length)
    others = {
        teacher_prefix(k): tokenize_splits(frames, bundle.tokenizer, int(spec["max_seq_length"]))
        for k, (bundle, spec) in enumerate(zip(bundles, specs))
    }
    return merge_tokenized(own, others)


def cache_multi_teacher_outputs(bundles: list[ModelBundle], data, cache: dict) -> list:
    """One logits/[CLS] cache per teacher, each over its own tokenization."""
    caches = []
    for k, bundle in enumerate(bundles):
        prefix = teacher_prefix(k)
        view = {split: _unprefixed(data[split], prefix) for split in data}
        caches.append(cache_teacher_outputs(bundle, view, cache))
    return caches


def _unprefixed(dataset, prefix: str):
    """A view of ``dataset`` where teacher ``prefix``'s token columns are the main ones."""
    keep = ["idx", "labels"] + [c for c in dataset.column_names if c.startswith(prefix)]
    view = dataset.select_columns(keep)
    return view.rename_columns({c: c[len(prefix):] for c in keep if c.startswith(prefix)})


def distill_multi_teacher(bundles: list[ModelBundle], data, caches: list, config: dict, student: dict, task: str,
                          seed: int, tracking: dict, runtime: dict) -> ModelBundle:
    """Distil the chosen teachers (``teachers: [indices]``, default all) into a fresh student."""
    spec = get_task(task)
    config = dict(config)
    chosen = config.pop("teachers", None) or list(range(len(bundles)))
    if any(not 0 <= k < len(bundles) for k in chosen):
        raise ValueError(f"teachers {chosen} must index multi_teachers (0..{len(bundles) - 1})")
    for k in chosen:
        check_teacher(bundles[k], task)
    init = int(student.get("init_from_teacher", 0))
    model, kept = build_student(bundles[init].model, int(student["num_layers"]), student.get("layer_selection", "first"))
    tokenizer = bundles[init].tokenizer
    teachers = [Teacher(bundles[k].model, teacher_prefix(k), caches[k] if caches else None, bundles[k].info.get("name", f"t{k}"))
                for k in chosen]
    method = build_method(config, model, [t.model for t in teachers], regression=spec.is_regression)
    objective = DistillationObjective(model, teachers, method, method.weights)
    key = config_fingerprint(config, chosen, student, seed, [b.info.get("key") for b in bundles], common.data_fingerprint(data))
    train_cfg = common.training_config(student.get("training"), runtime, seed, spec.name,
                                       common.STORE_ROOT / "checkpoints" / "multi_teacher" / key)
    collator = common.collator_for(tokenizer, {teacher_prefix(k): bundles[k].tokenizer for k in range(len(bundles))})
    name = config["method"]
    run_name = f"distill_multi_teacher:{name}[{','.join(t.name for t in teachers)}]:{spec.name}"
    with common.tracked_run(run_name, common.tracking_enabled(tracking), {"role": "student", "method": name, "task": spec.name}) as run:
        run.log_params({"task": spec.name, "method": name, "teachers": [t.name for t in teachers], "weights": method.weights,
                        "temperature": method.temperature, "config": config, "student": student, "seed": seed,
                        "student_parameters": count_parameters(model), "training": vars(train_cfg),
                        "teacher_cache": [objective.uses_cache(k) for k in range(len(teachers))]})
        if hasattr(method, "alignment_report"):
            run.log_dict(method.alignment_report(), "alignment_before.json")
        result = fit(objective, data["train"], data[common.evaluation_split(data)], train_cfg, collator=collator,
                     evaluate_fn=common.evaluate_fn(spec.name), log_fn=run.log_metrics, description=f"{name} {spec.name}")
        report = method.alignment_report() if hasattr(method, "alignment_report") else {}
        if report:
            run.log_dict(report, "alignment.json")
        if hasattr(method, "alignment_metrics"):
            run.log_metrics(method.alignment_metrics())
        info = {"role": "student", "method": name, "configuration": run_name, "teachers": [t.name for t in teachers],
                "task": spec.name, "best_epoch": result.best_epoch, "best_metrics": result.best_metrics,
                "history": result.history, "alignment": report, "mlflow_run_id": run.run_id,
                "initialised_from_teacher_layers": kept}
    return ModelBundle(model, tokenizer, info)


def evaluate_multi_student(bundle: ModelBundle, data, task: str, tracking: dict) -> dict:
    """Student metrics on its own tokenization (teacher columns ignored)."""
    view = {split: data[split].select_columns([c for c in data[split].column_names if not TEACHER_COLUMN.match(c)])
            for split in data}
    evaluation = common.evaluate_bundle(bundle, view, task)
    common.log_evaluation(evaluation, bundle.info.get("mlflow_run_id"), tracking)
    return evaluation


def compare_multi_teacher(teacher_metrics: list[dict], *students: dict):
    """Tables 2 (by teachers) and 3 (by strategy) of the paper, plus a bar chart."""
    import pandas as pd

    from bert_kd.pipelines.distill.nodes import markdown_table
    from bert_kd.plots import comparison_bars

    best_teacher = max(teacher_metrics, key=lambda e: e["score"])
    rows = [{"configuration": f"teacher {e['name']}", "method": "teacher", "teachers": e["name"],
             e["primary_metric"]: round(e["score"], 4), "% of best teacher": round(100 * e["score"] / best_teacher["score"], 1)}
            for e in teacher_metrics]
    for e in students:
        info = e["info"]
        rows.append({"configuration": info.get("configuration"), "method": info.get("method"),
                     "teachers": "+".join(info.get("teachers", [])), e["primary_metric"]: round(e["score"], 4),
                     "% of best teacher": round(100 * e["score"] / best_teacher["score"], 1)})
    table = pd.DataFrame(rows)
    metric = best_teacher["primary_metric"]
    by_teachers = table[table["method"].isin(["teacher", "multi_teacher"])]
    by_strategy = table[table["method"] != "teacher"]
    markdown = "## Table 2: by teachers\n\n" + markdown_table(by_teachers) + "\n## Table 3: by strategy\n\n" + markdown_table(by_strategy)
    students_only = table[table["method"] != "teacher"]
    figure = comparison_bars([f"{m}\n{t}" for m, t in zip(students_only["method"], students_only["teachers"])],
                             list(students_only[metric]), best_teacher["score"], metric, "multi-teacher students vs best teacher")
    common.log_to_active_run({"multi_teacher_comparison.md": markdown}, {"multi_teacher_comparison.png": figure})
    log_comparison_to_parent(table, metric, markdown=markdown, title=f"{best_teacher['task']} dev: multi-teacher students", teacher_run_id=best_teacher.get("info", {}).get("mlflow_run_id"))
    return table, markdown, figure
