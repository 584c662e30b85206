"""The offline stand-in corpus for general distillation: the training sentences of every GLUE task found
in a GLUE folder, each sentence once. A stand-in, not TinyBERT's English Wikipedia (2,500 M words):
a few hundred thousand sentences from the tasks' own domains (docs/general_distillation.md)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Iterator

from bert_kd.core.data.glue import TASKS, read_glue_tsv


def glue_tasks_present(glue_dir: str | Path) -> list[str]:
    """The GLUE tasks with a training file under ``glue_dir``, in the registry's order."""
    root = Path(glue_dir)
    return [name for name, spec in TASKS.items() if (root / spec.dir_name / spec.train_file).is_file()]


def glue_training_sentences(glue_dir: str | Path) -> Iterator[str]:
    """Every sentence (first and second of a pair) of every GLUE training file under ``glue_dir``,
    stripped, each distinct text once in first-seen order (task by task)."""
    seen: set[bytes] = set()
    root = Path(glue_dir)
    for name in glue_tasks_present(root):
        spec = TASKS[name]
        frame = read_glue_tsv(root / spec.dir_name / spec.train_file, name, "train")
        for column in ("sentence1", "sentence2"):
            for text in frame[column].dropna():
                text = str(text).strip()
                digest = hashlib.blake2b(text.encode(), digest_size=12).digest()
                if text and digest not in seen:
                    seen.add(digest)
                    yield text


def write_glue_stand_in(glue_dir: str | Path, target: str | Path) -> Path:
    """Write [`glue_training_sentences`][] to ``target``, one a line (atomically)."""
    from bert_kd.core.files import write_atomically

    target = Path(target)
    if not glue_tasks_present(glue_dir):
        raise FileNotFoundError(f"no GLUE training file under {glue_dir} (expected e.g. SST-2/train.tsv)")

    def write(folder: Path) -> None:
        with open(folder / "corpus.txt", "w", encoding="utf-8") as handle:
            for text in glue_training_sentences(glue_dir):
                handle.write(text.replace("\n", " ") + "\n")

    write_atomically(target, write)
    return target / "corpus.txt"
