"""The model card of a general student (``general_student/<key>``): what it was distilled from, on which
corpus, with which loss and how long; it has no task and no dev metric (the task stage gives those)."""

from __future__ import annotations

import json
from pathlib import Path

from bert_kd.core.files import MANIFEST
from bert_kd.experiment.card_text import escaped, link_target, literal

#: What the card says of the offline stand-in corpus.
STAND_IN_NOTE = (
    "The corpus is the offline **stand-in**: the training sentences of the GLUE tasks found under `glue_dir`, "
    "each once (about 0.9 M words for SST-2, MRPC, QNLI and RTE), not the papers' English Wikipedia "
    "(TinyBERT, 2,500 M words) or Wikipedia + Toronto Book Corpus (DistilBERT): three orders of magnitude "
    "smaller and from the tasks' own domains."
)


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, ValueError):
        return {}


def general_card(directory: str | Path, run_link: str | None = None) -> str:
    """The card's text (YAML header and body) from the entry's ``bert_kd.json`` and ``manifest.json``."""
    directory = Path(directory)
    info = _read(directory / "bert_kd.json")
    spec = (_read(directory / MANIFEST).get("spec")) or {}
    recipe = spec.get("recipe") or {}
    training = spec.get("training") or {}
    stand_in = "glue_stand_in" in (info.get("corpus_source") or [])
    student = spec.get("student") if isinstance(spec.get("student"), dict) else {}
    run = link_target(run_link)
    lines = [
        "---",
        "library_name: transformers",
        "license: apache-2.0",
        "tags: [bert-kd, knowledge-distillation, general-distillation]",
        "---",
        "",
        f"# General student ({escaped(info.get('method', 'general distillation'))})",
        "",
        f"A {escaped(student.get('num_layers', '?'))}-layer student distilled from the pre-trained "
        f"{literal(info.get('base_model'))} (teacher layers {literal(info.get('initialised_from_teacher_layers'))} "
        f"copied as its start, layer map {literal(info.get('layer_map'))}) with the {literal(recipe.get('loss'))} "
        f"general loss, weights {literal(recipe.get('weights') or 'as published')}, for "
        f"{escaped(info.get('global_step'))} steps of batch {escaped(training.get('batch_size'))} at learning rate "
        f"{escaped(training.get('learning_rate'))}, sequences cut at {escaped(spec.get('max_seq_length'))} tokens, "
        f"seed {escaped(info.get('seed'))}.",
        "",
        f"Corpus: {literal('corpus_shards/' + str(info.get('corpus')))} ({escaped(info.get('corpus_rows'))} passages).",
        STAND_IN_NOTE if stand_in else "",
        "",
        "It has no task head: start a task-stage student from it with `student.model: <this folder>`.",
        f"Store key: {literal('general_student/' + str(info.get('key')))}." + (f" MLflow run: <{run}>" if run else ""),
        "",
    ]
    return "\n".join(lines)
