"""Nodes of the ``distill_*`` pipelines: build the student, cache the teacher, distil, compare."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pandas as pd
import torch

from bert_kd.config.schema import Figures, set_values, typed
from bert_kd.config.schema import TeacherCache as TeacherCacheBlock
from bert_kd.core.data.tokenize import merge_tokenized, tokenize_splits
from bert_kd.core.distill import alp_figures as paper_figures
from bert_kd.core.distill.methods.base import hidden_size, method_class
from bert_kd.core.distill.objective import (
    TeacherCache,
    build_teacher_cache,
    load_teacher_cache,
    save_teacher_cache,
)
from bert_kd.core.distill.outputs import summary_key_material
from bert_kd.core.layer_maps import layer_map
from bert_kd.core.models import (
    ModelBundle,
    num_layers,
)
from bert_kd.core.reports.markdown_tables import markdown_table
from bert_kd.core.reports.plots import comparison_bars, comparison_title
from bert_kd.core.reports.verdict import (
    tied_name,
)
from bert_kd.core.training import resolve_mixed_precision
from bert_kd.experiment import jobs
from bert_kd.experiment.comparison import (
    SAME_JOB_COLUMN,
    THROUGHPUT_COLUMN,
    busy_throughput,
    display_frame,
    evaluations_by_row,
    majority_row,
    same_job_rows,
    sort_score,
    table_row,
    table_verdict,
    with_verdict,
)
from bert_kd.experiment.evaluation import evaluation_split
from bert_kd.experiment.lineage import Lineage
from bert_kd.experiment.run_setup import collator_for
from bert_kd.experiment.store import recompute
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

#: A teacher cache stored before 2026-11-29 (one torch file, loaded whole); entries since are memory-mapped ``.npy``.
LEGACY_CACHE_FILE = "teacher_cache.pt"


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
            "teacher": Lineage.of(teacher.info).key,
            "precision": precision,
            "data": jobs.dataset_fingerprint({"train": tokenized["train"]}),
            **summary_key_material(teacher.model),
        },
        root,
    )

    writer = is_main_process()

    def build(checkpoint_dir: Path):
        return build_teacher_cache(
            teacher.model,
            tokenized["train"],
            batch_size=block.batch_size,
            key=job.key,
            collator=collator_for(teacher.tokenizer),
            autocast_dtype={"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision),
            directory=checkpoint_dir if writer else None,  # written as it goes, moved into the store entry
        )

    def load(directory: Path) -> TeacherCache:
        return load_cache_entry(directory, job.key)

    return jobs.run_job(job, build, save_teacher_cache, load, recompute=recompute(runtime), writer=writer).value


def load_cache_entry(directory: Path, key: str) -> TeacherCache:
    """A stored teacher cache: memory-mapped ``.npy`` files, or one torch file for an entry stored before them."""
    if (directory / LEGACY_CACHE_FILE).is_file():
        stored = torch.load(directory / LEGACY_CACHE_FILE, weights_only=True)
        return TeacherCache(stored["logits"], stored["cls"], stored["row_of_idx"], key)
    return load_teacher_cache(directory, key)


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
    rows = [table_row("teacher", teacher_metrics, teacher_metrics)]
    majority = majority_row(teacher_metrics, student_metrics)
    rows += [majority] if majority else []
    metric = teacher_metrics["primary_metric"]
    order = sorted(range(len(student_metrics)), key=lambda i: -sort_score(student_metrics[i].get("score")))
    student_metrics = tuple(student_metrics[i] for i in order)  # the table reads top score first
    students = [table_row(m["info"].get("method", "?"), m, teacher_metrics) for m in student_metrics]
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
            teacher_run_id=Lineage.of(teacher_metrics.get("info")).model_run_id,
        )
    )
    kedro_run().set_tags({f"comparison.{k.removeprefix('bert_kd.')}": v for k, v in verdict.tags().items()})
    return frame, markdown, figure


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
                similarity=recipe.get("similarity"), temperature=recipe.get("similarity_temperature")
            ),
        )
        result = dataclasses.replace(result, examples=index[result.examples])  # dev row numbers, not batch positions
        for layer in result.summary().itertuples():
            log.info(
                "Figure 3 (%s), student layer %d over %d dev examples: α's mean normalised entropy %.2f, largest SD "
                "across examples %.3f, mean α per teacher layer %s",
                row,
                layer.student_layer,
                layer.examples,
                layer.mean_normalised_entropy,
                layer.alpha_sd_across_examples_max,
                layer.mean_alpha,
            )
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
