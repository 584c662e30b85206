"""Thin nodes of ``distill_general``: the corpus shards, then the general student (job bodies in
[`bert_kd.experiment.training_jobs.general`][])."""

from __future__ import annotations

from bert_kd.experiment.training_jobs.general import prepare_corpus, train_general_student


def tokenize_corpus(general, glue_dir) -> str:
    """The configured corpus (``general.corpus``) tokenized into content-keyed shards; their folder."""
    return str(prepare_corpus(general, glue_dir))


def distill_general(corpus_shards: str, general, run) -> dict:
    """The general student distilled on ``corpus_shards`` (or reused); what the run produced and where it is stored."""
    bundle = train_general_student(corpus_shards, general, run)
    keep = ("key", "store_path", "reused", "global_step", "resumed_from_step", "corpus", "corpus_rows", "parameters")
    return {name: bundle.info.get(name) for name in keep}


def start_from_general(general_student: dict, teacher, student, run_settings, row: str | None = None):
    """The task-stage student's start: the general student (``student.model`` = its store folder) with a
    fresh task head; the rest of the ``student`` block (training) as configured."""
    from bert_kd.config.schema import Student, typed
    from bert_kd.experiment.training_jobs.student import build_student_model

    params = typed(Student, student, "student").model_copy(update={"model": general_student["store_path"]})
    return build_student_model(teacher, params, run_settings, row)
