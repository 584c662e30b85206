"""Nodes of the ``distill_*`` pipelines: build the student, cache the teacher, distil, compare."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from pathlib import Path

import pandas as pd
import torch

from bert_kd.config.schema import Figures, set_values, typed
from bert_kd.config.schema import TeacherCache as TeacherCacheBlock
from bert_kd.core.data.tokenize import merge_tokenized, tokenize_splits
from bert_kd.core.distill import alp_figures as paper_figures
from bert_kd.core.distill.methods.base import hidden_size, method_class
from bert_kd.core.distill.objective import TeacherCache, build_teacher_cache
from bert_kd.core.distill.outputs import summary_key_material
from bert_kd.core.layer_maps import layer_map
from bert_kd.core.machine import busy_note
from bert_kd.core.models import (
    ModelBundle,
    num_layers,
)
from bert_kd.core.reports.markdown_tables import markdown_table, rounded, significant
from bert_kd.core.reports.plots import comparison_bars, comparison_title
from bert_kd.core.reports.verdict import (
    MAJORITY_METHOD,
    Verdict,
    comparison_verdict,
    duplicate_rows,
    noise_tolerance,
    tied_name,
)
from bert_kd.core.training import resolve_mixed_precision
from bert_kd.experiment import jobs
from bert_kd.experiment.evaluation import evaluation_split
from bert_kd.experiment.run_setup import collator_for
from bert_kd.experiment.store import model_run_id, recompute
from bert_kd.experiment.tracker import (
    Comparison,
    is_main_process,
    kedro_run,
)
from bert_kd.experiment.training_jobs.student import (
    TEACHER_PREFIX,
    RunSettings,
    StudentStart,
    check_teacher,
    single_teacher_job,
    task_of,
    train_student,
)
from bert_kd.pipelines.data_processing.nodes import split_frames

log = logging.getLogger(__name__)

CACHE_FILE = "teacher_cache.pt"


def prepare_student_data(
    student: ModelBundle, teacher: ModelBundle, teacher_tokenized, train, validation, max_seq_length: int
):
    """Student inputs; when the student reads another vocabulary, the teacher's own tokenization
    is carried alongside under the ``t0_`` prefix."""
    if student.tokenizer.get_vocab() == teacher.tokenizer.get_vocab():
        return teacher_tokenized
    own = tokenize_splits(split_frames(train, validation), student.tokenizer, max_seq_length)
    return merge_tokenized(own, {TEACHER_PREFIX: teacher_tokenized})


def cache_teacher_outputs(teacher: ModelBundle, tokenized, cache, runtime=None) -> TeacherCache | None:
    """Teacher logits and per-layer [CLS] states of the train split, computed once per
    (teacher, exact train rows) and reused across epochs, methods and runs (``cache``: the
    ``teacher_cache`` block)."""
    block = typed(TeacherCacheBlock, cache, "teacher_cache")
    if not block.enabled:
        return None
    root = Path(block.directory)
    precision = resolve_mixed_precision(str(block.mixed_precision))  # "auto": bf16 where native
    job = jobs.Job(
        "teacher_cache",
        {
            "teacher": teacher.info.get("key"),
            "precision": precision,
            "data": jobs.dataset_fingerprint({"train": tokenized["train"]}),
            **summary_key_material(teacher.model),
        },
        root,
    )

    def build(_checkpoint_dir):
        return build_teacher_cache(
            teacher.model,
            tokenized["train"],
            batch_size=block.batch_size,
            key=job.key,
            collator=collator_for(teacher.tokenizer),
            autocast_dtype={"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision),
        )

    def save(result: TeacherCache, directory: Path) -> None:
        torch.save(
            {"logits": result.logits, "cls": result.cls, "row_of_idx": result.row_of_idx}, directory / CACHE_FILE
        )

    def load(directory: Path) -> TeacherCache:
        stored = torch.load(directory / CACHE_FILE, weights_only=True)
        return TeacherCache(stored["logits"], stored["cls"], stored["row_of_idx"], job.key)

    return jobs.run_job(job, build, save, load, recompute=recompute(runtime), writer=is_main_process()).value


def distill_student(
    teacher: ModelBundle, student: StudentStart, student_data, teacher_cache: TeacherCache | None, recipe, settings
) -> ModelBundle:
    """Distil ``teacher`` into ``student`` (built by [`build_student_model`][experiment.training_jobs.student.build_student_model], which names its
    row) with the row's ``recipe`` through the one distillation body
    ([`bert_kd.experiment.training_jobs.student.train_student`][]); ``settings``: the run settings."""
    run = RunSettings.of(settings)
    check_teacher(teacher, run.task)
    if not isinstance(student, StudentStart):
        raise TypeError(
            "distill_student needs the StudentStart of build_student_model (or TED's ted_student_init), "
            f"got {type(student).__name__}"
        )
    return train_student(single_teacher_job(teacher, student, student_data, teacher_cache, set_values(recipe), run))


def compare_methods(teacher_metrics: dict, *student_metrics: dict, table: str | None = None):
    """A Table-1-style comparison: one row per method plus the teacher and the majority class,
    % of teacher kept (``table``: its name, e.g. ``distill_baselines``, used in the chart's
    title). Rows that are the same job (same content key: the same layers connected with the same
    weights) say which row they repeat. The verdict ([`bert_kd.core.reports.verdict.comparison_verdict`][])
    crowns the top row only when the data separate it from the runner-up; otherwise the table,
    the log and the parent run name the tied rows (or say that the teacher or every student sits
    at the majority class)."""
    rows = [_row("teacher", teacher_metrics, teacher_metrics)]
    majority = majority_row(teacher_metrics, student_metrics)
    rows += [majority] if majority else []
    metric = teacher_metrics["primary_metric"]
    order = sorted(range(len(student_metrics)), key=lambda i: -sort_score(student_metrics[i].get("score")))
    student_metrics = tuple(student_metrics[i] for i in order)  # the table reads top score first
    students = [_row(m["info"].get("method", "?"), m, teacher_metrics) for m in student_metrics]
    evaluations = evaluations_by_row(student_metrics, lambda info: info.get("method", "?"))
    same_as = same_job_rows(evaluations)
    if same_as:
        for row in students:
            row[SAME_JOB_COLUMN] = same_as.get(row["method"])
    rows += students
    frame = pd.DataFrame(rows)
    title = comparison_title(table, teacher_metrics["task"], metric)
    verdict = table_verdict(students, majority, metric, teacher_metrics, evaluations=evaluations)
    figure = comparison_bars(
        [tied_name(r["method"], r["method"], verdict) for r in students],
        [r[metric] for r in students],
        teacher_metrics["score"],
        metric,
        title,
        floor=majority.get(metric) if majority else None,
        noise=verdict.tolerance,
    )
    busy = busy_throughput(teacher_metrics, *student_metrics)
    shown = frame.drop(columns=[THROUGHPUT_COLUMN]) if busy else frame
    body = markdown_table(display_frame(shown, metric))
    if busy:
        body += f"\n{THROUGHPUT_COLUMN} left out: measured on a loaded machine ({busy}); the CSV keeps it.\n"
    markdown = with_verdict(body, verdict, title)
    kedro_run().log_comparison(
        Comparison(
            "comparison",
            markdown,
            figure,
            frame,
            metric,
            body=body,
            title=title,
            warning=verdict.warning,
            teacher_run_id=model_run_id(teacher_metrics.get("info", {})),
        )
    )
    kedro_run().set_tags({f"comparison.{k.removeprefix('bert_kd.')}": v for k, v in verdict.tags().items()})
    return frame, markdown, figure


#: The column of a comparison that names the row a duplicate row's job is (only when a table has one).
SAME_JOB_COLUMN = "same job as"
#: A comparison's inference-speed column (left out of the Markdown table when measured on a busy machine).
THROUGHPUT_COLUMN = "throughput (ex/s)"
#: Significant digits of the Markdown table's metrics (the CSV keeps 4 decimals); other columns by name.
METRIC_DIGITS = 4
#: Decimals of the Markdown table's other numeric columns, by column name.
DECIMALS = {"% of teacher": 1, "parameters (M)": 2, THROUGHPUT_COLUMN: 0}


def display_frame(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    """``frame`` with its numbers as text for the Markdown table: metrics to
    [`METRIC_DIGITS`][] significant digits (0.7890, 0.04210),
    the other numeric columns to the decimals of [`DECIMALS`][];
    empty cells stay empty."""
    shown = frame.astype(object).copy()
    for column in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[column]) or pd.api.types.is_bool_dtype(frame[column]):
            continue
        if column in DECIMALS:
            shown[column] = [None if pd.isna(v) else rounded(float(v), DECIMALS[column]) for v in frame[column]]
        else:
            shown[column] = [None if pd.isna(v) else significant(float(v), METRIC_DIGITS) for v in frame[column]]
    return shown


def sort_score(score) -> float:
    """A row's score for sorting: unscored rows last."""
    try:
        value = float(score)
    except (TypeError, ValueError):
        return float("-inf")
    return value if value == value else float("-inf")


def busy_throughput(*evaluations: dict) -> str | None:
    """``load 3.1 on 2 cores`` when any evaluation measured its throughput on a busy machine
    ([`bert_kd.core.machine.is_busy`][]: the load average above the cores), else None."""
    for evaluation in evaluations:
        note = busy_note(evaluation.get("load_average"), evaluation.get("cores"))
        if note:
            return note.removeprefix("machine busy: ")
    return None


def majority_row(teacher_metrics: dict, student_metrics, kept_column: str = "% of teacher") -> dict | None:
    """The majority-class row ([`bert_kd.core.reports.verdict.MAJORITY_METHOD`][]) from the first evaluation
    that recorded it (same dev rows for every model of a table); None for regression tasks."""
    for evaluation in (teacher_metrics, *student_metrics):
        splits = {k: v for k, v in (evaluation.get("majority_class") or {}).items() if v}
        if splits:
            break
    else:
        return None
    metric = evaluation["primary_metric"]
    main = splits.get(evaluation_split(splits), next(iter(splits.values())))
    row = {"method": MAJORITY_METHOD, "task": evaluation["task"]}
    for split, metrics in splits.items():
        for key, value in metrics.items():
            row[key if len(splits) == 1 else f"{split}/{key}"] = round(float(value), 4)
    row[metric] = round(float(main[metric]), 4)
    teacher_score = teacher_metrics.get("score")
    row[kept_column] = round(100.0 * main[metric] / teacher_score, 1) if teacher_score else None
    return row


def with_verdict(markdown: str, verdict: Verdict, title: str) -> str:
    """``markdown`` headed by the verdict's warning (also logged), or unchanged when a best student exists."""
    if not verdict.warning:
        return markdown
    log.warning("%s: %s", title, verdict.warning)
    return f"**No best student**: {verdict.warning}.\n\n" + markdown


def evaluations_by_row(student_metrics, label) -> dict[str, dict]:
    """Each student evaluation under the label its table row carries (``label(info)``), so rows and evaluations
    are joined by name, never by position (a table sorted by score lists them in another order than the
    pipeline's inputs); two evaluations under one label are an error."""
    by_row: dict[str, dict] = {}
    for evaluation in student_metrics:
        name = label(evaluation.get("info", {}))
        if name in by_row:
            raise ValueError(f"two student evaluations are labelled {name!r}: the comparison cannot tell them apart")
        by_row[name] = evaluation
    return by_row


def table_verdict(
    students: list[dict],
    majority: dict | None,
    metric: str,
    reference: dict,
    label=None,
    evaluations: Mapping[str, dict] | None = None,
) -> Verdict:
    """The verdict over ``students`` rows (their ``metric`` column) against the majority row and the
    teacher (``reference['score']``), at the noise of the evaluation split's size
    (``reference['score_examples']``). ``evaluations``: row label → the row's evaluation
    ([`evaluations_by_row`][]), for the rows that are the same
    job (equal ``info['key']``) and the paired test (``correct``). The rows are read in label order, so the
    verdict does not depend on the table's order."""
    label = label or (lambda row: row["method"])
    students = sorted(students, key=label)
    scores = {label(row): row.get(metric) for row in students}
    floor = majority.get(metric) if majority else None
    same_as, correct = {}, {}
    if evaluations:
        missing = [name for name in scores if name not in evaluations]
        if missing:
            raise ValueError(f"comparison rows without an evaluation: {', '.join(missing)}")
        rows = {name: evaluations[name] for name in scores}
        same_as = same_job_rows(rows)
        for name, evaluation in rows.items():
            splits = evaluation.get("correct") or {}
            if splits:
                correct[name] = splits[evaluation_split(splits)]
    teacher = reference.get("score") if isinstance(reference, dict) else None
    return comparison_verdict(
        scores,
        floor,
        noise_tolerance(reference.get("score_examples")),
        metric,
        teacher=None if teacher is None else float(teacher),
        same_as=same_as,
        correct=correct,
    )


def same_job_rows(evaluations: Mapping[str, dict]) -> dict[str, str]:
    """Row → the row with the same job key that stands for it
    ([`duplicate_rows`][]), the rows read in label order so that the
    answer does not depend on the table's order."""
    rows = dict(sorted(evaluations.items()))
    return duplicate_rows(
        {name: e.get("info", {}).get("key") for name, e in rows.items()}, preferred=named_after_method(rows.values())
    )


def named_after_method(evaluations) -> set[str]:
    """The rows named after their method (``alp``, ``ckd``): they stand for rows that are the same job."""
    return {e["info"]["method"] for e in evaluations if e.get("info", {}).get("method") == e["info"].get("algorithm")}


def _row(name: str, evaluation: dict, teacher: dict) -> dict:
    metric = evaluation["primary_metric"]
    row = {"method": name, "task": evaluation["task"]}
    for split, metrics in evaluation["metrics"].items():
        for key, value in metrics.items():
            row[key if len(evaluation["metrics"]) == 1 else f"{split}/{key}"] = round(float(value), 4)
    row[metric] = round(float(evaluation["score"]), 4)
    row["% of teacher"] = round(100.0 * evaluation["score"] / teacher["score"], 1) if teacher["score"] else None
    row["parameters (M)"] = round(evaluation["parameters"] / 1e6, 2)
    row[THROUGHPUT_COLUMN] = round(evaluation["throughput_examples_per_s"], 1)
    return row


# ---------------------------------------------------------------- ALP-KD Figures 3 and 4
def _dev_batch(student: ModelBundle, teacher: ModelBundle, student_data, n: int, seed: int):
    """``n`` random dev rows (the model-selection split) collated for the student and, when it
    reads another vocabulary, the teacher; (batch, row indices, split, teacher column prefix)."""
    split = evaluation_split(student_data)
    prefix = TEACHER_PREFIX if TEACHER_PREFIX + "input_ids" in student_data[split].column_names else ""
    collator = collator_for(student.tokenizer, {TEACHER_PREFIX: teacher.tokenizer} if prefix else None)
    batch, index = paper_figures.dev_examples(student_data[split], n, collator, seed)
    return batch, index, split, prefix


def recipe_mapping(recipe: dict):
    """The recipe's layer mapping, or its method's default (ALP: ``all``, PKD: ``pkd_skip``)."""
    return recipe.get("mapping") or method_class(recipe).default_mapping


def alp_attention_report(student: ModelBundle, teacher: ModelBundle, student_data, method_config, figures, settings):
    """ALP-KD Figure 3 for one ALP row (the trained ``student``'s, ``info["method"]``): α (Eq. 5–6)
    between each student layer and every teacher layer for ``figures.alp_attention_examples``
    random dev examples, one row per example (not averaged); unconnected student layers drawn and
    listed as such. → (CSV table, figure)."""
    row, task = student.info.get("method", "alp"), task_of(settings)
    recipe, options = set_values(method_config), typed(Figures, figures, "figures")
    if recipe.get("method") != "alp":
        raise ValueError(
            f"distill_methods.{row}.method: Figure 3 needs an ALP recipe (method: alp), got {recipe.get('method')!r}"
        )
    batch, index, split, prefix = _dev_batch(
        student, teacher, student_data, options.alp_attention_examples, options.seed
    )
    title = f"ALP-KD Figure 3: α per dev example ({row}, {task} {split}, {len(index)} examples)"
    if hidden_size(student.model) != hidden_size(teacher.model):
        reason = (
            f"student width {hidden_size(student.model)} != teacher width {hidden_size(teacher.model)}: α needs "
            "ALP's learned projection, which is not stored with the student"
        )
        log.warning("Figure 3 (%s) not drawn: %s", row, reason)
        table, figure = (
            pd.DataFrame([{"row": row, "not_drawn": reason}]),
            paper_figures.unavailable_figure(title, reason),
        )
    else:
        result = paper_figures.alp_attention_per_example(
            student.model,
            teacher.model,
            batch,
            recipe_mapping(recipe),
            n_examples=len(index),
            seed=options.seed,
            teacher_prefix=prefix,
            score=paper_figures.AlphaScore(
                similarity=recipe.get("similarity") or "dot", temperature=recipe.get("similarity_temperature")
            ),
        )
        result = dataclasses.replace(result, examples=index[result.examples])  # dev row numbers, not batch positions
        table, figure = paper_figures.alpha_table(result), paper_figures.alp_attention_figure(result, title)
    kedro_run().log_report(f"figures/alp_attention_{row}", table, figure)
    return table, figure


def layer_alignment_report(
    teacher: ModelBundle, alp_student: ModelBundle, pkd_student: ModelBundle, student_data, pkd_config, figures
):
    """ALP-KD Figure 4: PCA of the ALP and PKD students' layer outputs with their teacher layers
    for ``figures.alignment_examples`` random dev examples, and each example's cosine distance
    to the teacher. Layer pairs: ``figures.alignment_pairs``, default the PKD row's one-to-one
    connections ([`alignment_pairs`][core.distill.alp_figures.alignment_pairs]). → (CSV table, figure)."""
    options, task = typed(Figures, figures, "figures"), alp_student.info.get("task", "?")
    if options.alignment_pairs:
        pairs = [tuple(int(v) for v in pair) for pair in options.alignment_pairs]
    else:
        mapping = layer_map(
            recipe_mapping(set_values(pkd_config)), num_layers(teacher.model), num_layers(pkd_student.model)
        )
        pairs = paper_figures.alignment_pairs(mapping)
    batch, index, split, prefix = _dev_batch(
        alp_student, teacher, student_data, options.alignment_examples, options.seed
    )
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
        alignments = paper_figures.layer_alignment(
            teacher.model,
            {k: s.model for k, s in students.items()},
            batch,
            pairs,
            n_examples=len(index),
            seed=options.seed,
            teacher_prefix=prefix,
        )
        table = paper_figures.alignment_table(alignments, index)
        figure = paper_figures.layer_alignment_figure(alignments, title)
    kedro_run().log_report("figures/layer_alignment", table, figure)
    return table, figure
