"""Nodes of the ``distill_*`` pipelines: build the student, cache the teacher, distil, compare."""

from __future__ import annotations

import copy
import dataclasses
import logging
from functools import partial, update_wrapper
from pathlib import Path

import pandas as pd
import torch

from bert_kd import jobs
from bert_kd.data.glue import get_task
from bert_kd.data.tokenize import merge_tokenized, tokenize_splits
from bert_kd.distill import figures as paper_figures
from bert_kd.distill.methods import build_method
from bert_kd.distill.methods.base import hidden_size
from bert_kd.mapping import layer_map
from bert_kd.distill.objective import (
    DistillationObjective,
    Teacher,
    TeacherCache,
    build_teacher_cache,
    collect_diagnostics,
)
from bert_kd.models import (
    ModelBundle,
    build_pretrained_student,
    build_student,
    count_parameters,
    init_key_material,
    load_classifier,
    load_tokenizer,
    num_layers,
    student_init,
)
from bert_kd.pipelines import common
from bert_kd.pipelines.data_processing.nodes import split_frames
from bert_kd.plots import attention_heatmap, comparison_bars, comparison_title
from bert_kd.tracking import log_comparison_to_parent
from bert_kd.tracking_models import default_registered_name
from bert_kd.tracking_models import register_best_student as register_model_version
from bert_kd.verdict import MAJORITY_METHOD, Verdict, comparison_verdict, noise_tolerance
from bert_kd.training import fit, make_loader, resolve_mixed_precision

log = logging.getLogger(__name__)

TEACHER_PREFIX = "t0_"
CACHE_FILE = "teacher_cache.pt"


def check_teacher(teacher: ModelBundle, task: str) -> None:
    """Refuse a teacher fine-tuned for another task or label count."""
    spec = get_task(task)
    labels = int(teacher.model.config.num_labels)
    if labels != spec.num_labels:
        raise ValueError(f"teacher has {labels} labels but task {spec.name} needs {spec.num_labels}")
    trained_for = teacher.info.get("task")
    if trained_for and trained_for != spec.name:
        raise ValueError(f"teacher was fine-tuned on {trained_for!r}, not on {spec.name!r}")


def shallow_student(teacher: ModelBundle, student: dict, task: str, default_selection: str = "first"):
    """(model, 1-based layers kept) of a ``student.num_layers``-layer student whose layers
    (``student.layer_selection``) come from the fine-tuned teacher (``student.init: teacher``) or
    from the pre-trained checkpoint the teacher was fine-tuned from (``pretrained``, fresh classifier)."""
    n_student, selection = int(student["num_layers"]), student.get("layer_selection", default_selection)
    if student_init(student) == "pretrained":
        base = teacher.info.get("base_model")
        if not base:
            raise ValueError("student.init: pretrained needs the checkpoint the teacher was fine-tuned from, "
                             "but the teacher's bert_kd.json names no base_model; use student.init: teacher")
        spec = get_task(task)
        return build_pretrained_student(base, n_student, selection, spec.num_labels, is_regression=spec.is_regression)
    return build_student(teacher.model, n_student, selection)


def build_student_model(teacher: ModelBundle, student: dict, task: str) -> ModelBundle:
    """A shallower copy of the teacher's layers or of its pre-trained checkpoint's
    (``student.num_layers``, ``layer_selection``, ``init``) or, with ``student.model``, any HF
    model/config sized for the task."""
    check_teacher(teacher, task)
    spec = get_task(task)
    if student.get("model"):
        model = load_classifier(student["model"], spec.num_labels, is_regression=spec.is_regression)
        tokenizer, kept = load_tokenizer(student["model"]), None
    else:
        model, kept = shallow_student(teacher, student, task)
        tokenizer = teacher.tokenizer
    info = {
        "role": "student_init",
        "task": spec.name,
        "init": None if student.get("model") else student_init(student),
        "initialised_from_teacher_layers": kept,
        "parameters": count_parameters(model),
        "teacher_parameters": count_parameters(teacher.model),
    }
    log.info("student: %d parameters (teacher %d), layers %s", info["parameters"], info["teacher_parameters"], kept)
    return ModelBundle(model, tokenizer, info)


def prepare_student_data(student: ModelBundle, teacher: ModelBundle, teacher_tokenized, train, validation, max_seq_length: int):
    """Student inputs; when the student reads another vocabulary, the teacher's own tokenization
    is carried alongside under the ``t0_`` prefix."""
    if student.tokenizer.get_vocab() == teacher.tokenizer.get_vocab():
        return teacher_tokenized
    own = tokenize_splits(split_frames(train, validation), student.tokenizer, max_seq_length)
    return merge_tokenized(own, {TEACHER_PREFIX: teacher_tokenized})


def cache_teacher_outputs(teacher: ModelBundle, tokenized, cache: dict, runtime: dict | None = None) -> TeacherCache | None:
    """Teacher logits and per-layer [CLS] states of the train split, computed once per
    (teacher, exact train rows) and reused across epochs, methods and runs."""
    if not cache.get("enabled", True):
        return None
    root = Path(cache.get("directory", "data/07_model_output/teacher_cache"))
    precision = resolve_mixed_precision(str(cache.get("mixed_precision", "no")))  # "auto": bf16 where native
    job = jobs.Job("teacher_cache", {"teacher": teacher.info.get("key"), "precision": precision,
                                     "data": jobs.dataset_fingerprint({"train": tokenized["train"]})}, root)

    def build(_checkpoint_dir):
        return build_teacher_cache(teacher.model, tokenized["train"], batch_size=int(cache.get("batch_size", 64)), key=job.key,
                                   collator=common.collator_for(teacher.tokenizer),
                                   autocast_dtype={"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision))

    def save(result: TeacherCache, directory: Path) -> None:
        torch.save({"logits": result.logits, "cls": result.cls, "row_of_idx": result.row_of_idx}, directory / CACHE_FILE)

    def load(directory: Path) -> TeacherCache:
        stored = torch.load(directory / CACHE_FILE, weights_only=True)
        return TeacherCache(stored["logits"], stored["cls"], stored["row_of_idx"], job.key)

    return jobs.run_job(job, build, save, load, recompute=common.recompute(runtime), writer=common.is_main_process()).value


def recipe_spec(method_config: dict) -> dict:
    """The JSON part of a method recipe (objects handed in by nodes are keyed by their upstream job)."""
    return {k: v for k, v in method_config.items() if v is None or isinstance(v, (str, int, float, bool, list, tuple, dict))}


def student_start_spec(student: ModelBundle, student_params: dict) -> dict:
    """What the student starts from: the teacher copy's layer selection (``init: pretrained``: from
    the teacher's pre-trained checkpoint; ``init: teacher`` is left out, as before the option existed),
    or another model's identity."""
    spec = {"num_layers": student_params.get("num_layers"), "layer_selection": student_params.get("layer_selection", "first"),
            "from_job": student.info.get("key")}
    if student_params.get("model"):
        spec["model"] = common.model_identity(student_params["model"])
    else:
        spec.update(init_key_material({"init": student_init(student_params)}))
    return spec


def distill_student(
    teacher: ModelBundle,
    student: ModelBundle,
    student_data,
    teacher_cache: TeacherCache | None,
    method_config: dict,
    student_params: dict,
    task: str,
    seed: int,
    tracking: dict,
    runtime: dict,
    upstream: dict | None = None,
    row: str | None = None,
    data_source: dict | None = None,
) -> ModelBundle:
    """Distil ``teacher`` into ``student`` with the method's recipe through the shared loop
    (``upstream``: keys of other jobs the recipe reads, e.g. TED's Stage I filters; ``row``: the
    recipe's name in its table, e.g. ``alp_no``, default the method; ``data_source``: glue_dir and
    sample caps, recorded on the MLflow run)."""
    spec = get_task(task)
    check_teacher(teacher, task)
    config = common.training_config(student_params.get("training"), runtime, seed, spec.name, None)
    job = common.job("student", {
        "task": spec.name, "recipe": recipe_spec(method_config), "teacher": teacher.info.get("key"),
        "start": student_start_spec(student, student_params), "max_seq_length": student_params.get("max_seq_length"),
        "training": jobs.training_spec(vars(config)), "seed": seed, "data": jobs.dataset_fingerprint(student_data),
        "upstream": upstream or {},
    })

    train = partial(_distill, teacher=teacher, student=student, student_data=student_data, teacher_cache=teacher_cache,
                    method_config=method_config, student_params=student_params, spec=spec, seed=seed, tracking=tracking,
                    runtime=runtime, job=job, row=row or method_config["method"], data_source=data_source or {})
    bundle = common.run_model_job(job, train, tracking, recompute=common.recompute(runtime))
    bundle.info["method"] = row or method_config["method"]  # a stored result may have been trained under another name
    return bundle


def _distill(checkpoint_dir, *, teacher, student, student_data, teacher_cache, method_config, student_params, spec, seed,
             tracking, runtime, job, row, data_source) -> ModelBundle:
    """Train one student from ``student``'s initial weights (a copy) and record the run."""
    name = method_config["method"]
    model = copy.deepcopy(student.model)  # the in-memory init stays untouched for reruns
    method = build_method(dict(method_config), model, [teacher.model], regression=spec.is_regression)
    prefix = TEACHER_PREFIX if TEACHER_PREFIX + "input_ids" in student_data["train"].column_names else ""
    token_level = method.teacher_needs.get("hidden") or method.teacher_needs.get("attention")
    if prefix and token_level and not method.reads_teacher_prefixes:
        raise ValueError(
            f"method {name!r} compares token positions, but student.model uses another tokenizer "
            "than the teacher: use a [CLS]-level method (rkd, pkd, ckd, alp) or multi_teacher"
        )
    source = Teacher(teacher.model, prefix=prefix, cache=teacher_cache if not prefix else None, name="teacher")
    objective = DistillationObjective(model, [source], method, method.weights)
    settings = common.training_config(student_params.get("training"), runtime, seed, spec.name, checkpoint_dir,
                                      n_train=len(student_data["train"]))
    collator = common.collator_for(student.tokenizer, {TEACHER_PREFIX: teacher.tokenizer} if prefix else None)
    eval_split = common.evaluation_split(student_data)
    with common.tracked_run(f"distill_{row}:{spec.name}", common.tracking_enabled(tracking), {"role": "student", "method": row, "task": spec.name}) as run:
        common.log_job_columns(run, job, spec.name, seed, data_source, len(student_data["train"]), model, method=method, name=row)
        run.log_params({
            "mapping": getattr(method, "mapping", None), "weights": method.weights,
            "temperature": method.temperature,
            "projection": "learned linear (student→teacher width)" if getattr(method, "projection", None) is not None else "none",
            "teacher_cache": objective.uses_cache(0), "student": student_params,
            "student_layers_from_teacher": student.info.get("initialised_from_teacher_layers"),
            "student_parameters": count_parameters(model), "teacher_parameters": count_parameters(teacher.model),
            "training": vars(settings), "key": job.key,
            **({"stages": method_config["stages"]} if method_config.get("stages") else {}),  # per-epoch weights
        })
        common.log_gradient_shares(run, objective, student_data["train"], collator, settings, tracking, f"distill_{row}")
        result = fit(objective, student_data["train"], student_data[eval_split], settings, collator=collator,
                     evaluate_fn=common.evaluate_fn(spec.name), log_fn=common.step_logger(run), description=f"{name} {spec.name}")
        diagnostics = collect_diagnostics(objective, make_loader(student_data[eval_split], settings.eval_batch_size, collator, shuffle=False))
        if "alp_attention" in diagnostics:
            run.log_figure(attention_heatmap(diagnostics["alp_attention"], f"ALP α ({row}) on {spec.name} dev",
                                             mapping=getattr(method, "mapping", None)), "alp_attention.png")
            run.log_dict({"alpha": diagnostics["alp_attention"]}, "alp_attention.json")
    return ModelBundle(model, student.tokenizer, {
        "role": "student", "method": row, "algorithm": name, "task": spec.name, "teacher_key": teacher.info.get("key"), "key": job.key,
        "best_epoch": result.best_epoch, "best_metrics": result.best_metrics, "history": result.history,
        "diagnostics": diagnostics, "mlflow_run_id": run.run_id,
    })


def compare_methods(teacher_metrics: dict, *student_metrics: dict, table: str | None = None):
    """A Table-1-style comparison: one row per method plus the teacher and the majority class,
    % of teacher kept (``table``: its name, e.g. ``distill_baselines``, used in the chart's
    title). When every student ties with the majority class or with each other
    (:func:`bert_kd.verdict.comparison_verdict`) the log and the parent run say so instead of
    naming a best student."""
    rows = [_row("teacher", teacher_metrics, teacher_metrics)]
    majority = majority_row(teacher_metrics, student_metrics)
    rows += [majority] if majority else []
    students = [_row(m["info"].get("method", "?"), m, teacher_metrics) for m in student_metrics]
    rows += students
    frame = pd.DataFrame(rows)
    metric = teacher_metrics["primary_metric"]
    title = comparison_title(table, teacher_metrics["task"], metric)
    figure = comparison_bars([r["method"] for r in students], [r[metric] for r in students], teacher_metrics["score"], metric, title)
    verdict = table_verdict(students, majority, metric, teacher_metrics)
    body = markdown_table(frame)
    markdown = with_verdict(body, verdict, title)
    common.log_to_active_run({"comparison.md": markdown}, {"comparison.png": figure})
    log_comparison_to_parent(frame, metric, markdown=body, title=title, warning=verdict.warning,
                             teacher_run_id=teacher_metrics.get("info", {}).get("mlflow_run_id"))
    return frame, markdown, figure


def majority_row(teacher_metrics: dict, student_metrics, kept_column: str = "% of teacher") -> dict | None:
    """The majority-class row (:data:`bert_kd.verdict.MAJORITY_METHOD`) from the first evaluation
    that recorded it (same dev rows for every model of a table); None for regression tasks."""
    for evaluation in (teacher_metrics, *student_metrics):
        splits = {k: v for k, v in (evaluation.get("majority_class") or {}).items() if v}
        if splits:
            break
    else:
        return None
    metric = evaluation["primary_metric"]
    main = splits.get(common.evaluation_split(splits), next(iter(splits.values())))
    row = {"method": MAJORITY_METHOD, "task": evaluation["task"]}
    for split, metrics in splits.items():
        for key, value in metrics.items():
            row[key if len(splits) == 1 else f"{split}/{key}"] = round(float(value), 4)
    row[metric] = round(float(main[metric]), 4)
    teacher_score = teacher_metrics.get("score")
    row[kept_column] = round(100.0 * main[metric] / teacher_score, 1) if teacher_score else None
    return row


def register_best_student(table: pd.DataFrame, teacher_metrics: dict, tracking: dict, task: str, *student_metrics: dict,
                          table_name: str | None = None, label=None) -> dict:
    """Register the comparison's best student (``tracking.registered_model``, default
    ``bert_kd-<task>-student``) with its lineage tags, unless every student ties
    (:func:`table_verdict`), tracking is off or ``tracking.register_best`` is false. → what was
    done (``registered``, ``uri`` or ``reason``), also tagged on the parent run."""
    label = label or (lambda info: info.get("method", "?"))
    if not common.tracking_enabled(tracking) or not (tracking or {}).get("register_best", True) or not common.is_main_process():
        return {"registered": False, "reason": "tracking.enabled or tracking.register_best is false"}
    metric = teacher_metrics["primary_metric"] if isinstance(teacher_metrics, dict) else None
    rows = table.to_dict("records")
    majority = next((r for r in rows if r.get("method") == MAJORITY_METHOD), None)
    students = [r for r in rows if r.get("method") not in ("teacher", MAJORITY_METHOD)]
    row_label = (lambda r: f"{r['method']}[{r['teachers']}]") if "teachers" in table.columns else None
    verdict = table_verdict(students, majority, metric, teacher_metrics, label=row_label)
    if verdict.best is None:
        log.warning("%s: no student registered: %s", table_name or "comparison", verdict.warning)
        return {"registered": False, "reason": verdict.warning}
    best = next(e for e in student_metrics if label(e["info"]) == verdict.best)
    name = (tracking or {}).get("registered_model") or default_registered_name(get_task(task).name)
    version = register_model_version(best["info"], teacher_metrics.get("info"), name, extra_tags={
        "bert_kd.metric": metric, "bert_kd.score": format(float(best["score"]), ".6g"), "bert_kd.table": table_name or ""})
    uri = f"models:/{name}/{version.version}"
    log.info("%s: best student %s registered as %s", table_name or "comparison", verdict.best, uri)
    import mlflow

    if mlflow.active_run() is not None:
        mlflow.set_tags({"registered_model": uri, "registered_method": verdict.best})
    return {"registered": True, "uri": uri, "name": name, "version": str(version.version), "method": verdict.best}


def registration_node(table_name: str, label=None):
    """:func:`register_best_student` as a node function over ``(table, teacher_metrics,
    *student_metrics, run_settings)``: tracking and task come from the run settings."""

    def register(table, teacher_metrics, *students_and_settings):
        *students, settings = students_and_settings
        return register_best_student(table, teacher_metrics, settings["tracking"], settings["task"], *students,
                                     table_name=table_name, label=label)

    return update_wrapper(register, register_best_student)


def with_verdict(markdown: str, verdict: Verdict, title: str) -> str:
    """``markdown`` headed by the verdict's warning (also logged), or unchanged when a best student exists."""
    if not verdict.warning:
        return markdown
    log.warning("%s: %s", title, verdict.warning)
    return f"**No best student**: {verdict.warning}.\n\n" + markdown


def table_verdict(students: list[dict], majority: dict | None, metric: str, reference: dict, label=None) -> Verdict:
    """The verdict over ``students`` rows (their ``metric`` column) against the majority row, at the
    noise of the evaluation split's size (``reference['score_examples']``)."""
    label = label or (lambda row: row["method"])
    scores = {label(row): row.get(metric) for row in students}
    floor = majority.get(metric) if majority else None
    return comparison_verdict(scores, floor, noise_tolerance(reference.get("score_examples")), metric)


def _row(name: str, evaluation: dict, teacher: dict) -> dict:
    metric = evaluation["primary_metric"]
    row = {"method": name, "task": evaluation["task"]}
    for split, metrics in evaluation["metrics"].items():
        for key, value in metrics.items():
            row[key if len(evaluation["metrics"]) == 1 else f"{split}/{key}"] = round(float(value), 4)
    row[metric] = round(float(evaluation["score"]), 4)
    row["% of teacher"] = round(100.0 * evaluation["score"] / teacher["score"], 1) if teacher["score"] else None
    row["parameters (M)"] = round(evaluation["parameters"] / 1e6, 2)
    row["throughput (ex/s)"] = round(evaluation["throughput_examples_per_s"], 1)
    return row


def markdown_table(table: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown rendering of ``table``."""
    header = "| " + " | ".join(str(c) for c in table.columns) + " |"
    rule = "|" + "|".join("---" for _ in table.columns) + "|"
    body = ["| " + " | ".join("" if pd.isna(v) else str(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join([header, rule, *body]) + "\n"


# ---------------------------------------------------------------- ALP-KD Figures 3 and 4 (issue 11)
def _dev_batch(student: ModelBundle, teacher: ModelBundle, student_data, n: int, seed: int):
    """``n`` random dev rows (the model-selection split) collated for the student and, when it
    reads another vocabulary, the teacher; (batch, row indices, split, teacher column prefix)."""
    split = common.evaluation_split(student_data)
    prefix = TEACHER_PREFIX if TEACHER_PREFIX + "input_ids" in student_data[split].column_names else ""
    collator = common.collator_for(student.tokenizer, {TEACHER_PREFIX: teacher.tokenizer} if prefix else None)
    batch, index = paper_figures.dev_examples(student_data[split], n, collator, seed)
    return batch, index, split, prefix


def alp_attention_report(student: ModelBundle, teacher: ModelBundle, student_data, method_config: dict, figures: dict,
                         task: str, row: str = "alp"):
    """ALP-KD Figure 3 for one ALP row: α (Eq. 5–6) between each student layer and every teacher
    layer for ``figures.alp_attention_examples`` random dev examples, one row per example (not
    averaged); unconnected student layers drawn and listed as such. → (CSV table, figure)."""
    if method_config.get("method") != "alp":
        raise ValueError(f"distill_methods.{row}.method: Figure 3 needs an ALP recipe (method: alp), "
                         f"got {method_config.get('method')!r}")
    n, seed = int(figures["alp_attention_examples"]), int(figures.get("seed", 0))
    batch, index, split, prefix = _dev_batch(student, teacher, student_data, n, seed)
    title = f"ALP-KD Figure 3: α per dev example ({row}, {task} {split}, {len(index)} examples)"
    if hidden_size(student.model) != hidden_size(teacher.model):
        reason = (f"student width {hidden_size(student.model)} != teacher width {hidden_size(teacher.model)}: α needs "
                  "ALP's learned projection, which is not stored with the student")
        log.warning("Figure 3 (%s) not drawn: %s", row, reason)
        table, figure = pd.DataFrame([{"row": row, "not_drawn": reason}]), paper_figures.unavailable_figure(title, reason)
    else:
        result = paper_figures.alp_attention_per_example(
            student.model, teacher.model, batch, method_config.get("mapping", "all"), n_examples=len(index), seed=seed,
            teacher_prefix=prefix)
        result = dataclasses.replace(result, examples=index[result.examples])  # dev row numbers, not batch positions
        table, figure = paper_figures.alpha_table(result), paper_figures.alp_attention_figure(result, title)
    common.log_to_active_run({f"figures/alp_attention_{row}.csv": table.to_csv(index=False)},
                             {f"figures/alp_attention_{row}.png": figure})
    return table, figure


def layer_alignment_report(teacher: ModelBundle, alp_student: ModelBundle, pkd_student: ModelBundle, student_data,
                           pkd_config: dict, figures: dict, task: str):
    """ALP-KD Figure 4: PCA of the ALP and PKD students' layer outputs with their teacher layers
    for ``figures.alignment_examples`` random dev examples, and each example's cosine distance
    to the teacher. Layer pairs: ``figures.alignment_pairs``, default the PKD row's one-to-one
    connections (:func:`~bert_kd.distill.figures.alignment_pairs`). → (CSV table, figure)."""
    n, seed = int(figures["alignment_examples"]), int(figures.get("seed", 0))
    pairs = figures.get("alignment_pairs")
    if pairs:
        pairs = [tuple(int(v) for v in pair) for pair in pairs]
    else:
        mapping = layer_map(pkd_config.get("mapping", "pkd_skip"), num_layers(teacher.model), num_layers(pkd_student.model))
        pairs = paper_figures.alignment_pairs(mapping)
    batch, index, split, prefix = _dev_batch(alp_student, teacher, student_data, n, seed)
    title = f"ALP-KD Figure 4: student vs teacher layers ({task} {split}, {len(index)} examples)"
    students = {"ALP": alp_student, "PKD": pkd_student}
    widths = {name: hidden_size(s.model) for name, s in students.items()}
    reason = None
    if not pairs:
        reason = "the PKD map connects no student layer to a single teacher layer: set figures.alignment_pairs"
    elif any(w != hidden_size(teacher.model) for w in widths.values()):
        reason = f"student widths {widths} != teacher width {hidden_size(teacher.model)}: no common space to compare"
    if reason:
        log.warning("Figure 4 not drawn: %s", reason)
        table, figure = pd.DataFrame([{"not_drawn": reason}]), paper_figures.unavailable_figure(title, reason)
    else:
        alignments = paper_figures.layer_alignment(teacher.model, {k: s.model for k, s in students.items()}, batch, pairs,
                                                   n_examples=len(index), seed=seed, teacher_prefix=prefix)
        table = paper_figures.alignment_table(alignments, index)
        figure = paper_figures.layer_alignment_figure(alignments, title)
    common.log_to_active_run({"figures/layer_alignment.csv": table.to_csv(index=False)},
                             {"figures/layer_alignment.png": figure})
    return table, figure
