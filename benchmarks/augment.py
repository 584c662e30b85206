"""Rows per second of the transfer set's augmentation and of the teacher labelling it, and peak memory.

One run, on this machine's CPU, with the offline MiniLM-L6 teacher (``minilm-l6``; labelling speed does not
depend on its fine-tuning):

1. augmentation: a GLUE task's whole training split, Tang et al.'s three rules (``augment`` defaults,
   ``--copies`` rewrites per row), tokenized for the teacher and written to Arrow shards in a temporary
   folder (``write_rows``, the ``augment_glue`` job's body), never held whole in memory;
2. teacher labelling: the teacher cache (logits and per-layer [CLS] states) of the first ``--label-rows`` rows,
   read memory-mapped from the shards and written batch by batch into ``.npy`` files, as the ``*_transfer``
   pipelines build it (``build_teacher_cache``): neither side held whole in memory;
3. student inference: rows/s of Tang et al.'s BiLSTM (its default sizes) and of the 2-layer BERT student
   (the teacher's first two layers) over the same rows, batch ``--batch-size``.

Peak memory is the process's maximum resident set (``getrusage``) after each step; the load average is
recorded because the machine is shared. ``--out`` writes the record as Markdown (and ``.json``):

    nice -n 10 .venv/bin/python benchmarks/augment.py --glue-dir ../shared/glue --task sst2 --copies 20 \\
        --label-rows 20000 --out benchmarks/results/augment.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import torch  # noqa: E402

from bert_kd.config.schema import (
    Augment,  # noqa: E402
    BiLSTM,  # noqa: E402
)
from bert_kd.core.bilstm import bilstm_student  # noqa: E402
from bert_kd.core.data.glue import load_glue_task  # noqa: E402
from bert_kd.core.data.shards import read_shards  # noqa: E402
from bert_kd.core.distill.objective import build_teacher_cache  # noqa: E402
from bert_kd.core.models import ModelBundle, build_student, count_parameters, load_classifier, load_tokenizer  # noqa: E402
from bert_kd.core.training import Collator  # noqa: E402
from bert_kd.experiment.training_jobs.transfer_set import write_rows  # noqa: E402

TEACHER = "minilm-l6"


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def folder_mib(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def batches(shards: Path, tokenizer, rows: int, batch_size: int):
    data = read_shards(shards)
    data = data.select(range(min(rows, len(data)))).select_columns(["idx", "input_ids", "attention_mask"])
    collate = Collator({"": tokenizer.pad_token_id})
    for start in range(0, len(data), batch_size):
        yield collate([data[i] for i in range(start, min(start + batch_size, len(data)))])


@torch.no_grad()
def student_speed(shards: Path, teacher, tokenizer, rows: int, batch_size: int) -> dict:
    """Rows/s of the BiLSTM and the 2-layer BERT student on the first ``rows`` rows (forward only)."""
    students = {
        "bilstm": bilstm_student(teacher, BiLSTM(), 2, siamese=False),
        "bert_2_layers": build_student(teacher, 2)[0],
    }
    loaded = list(batches(shards, tokenizer, rows, batch_size))
    result = {}
    for name, model in students.items():
        model.eval()
        started = time.perf_counter()
        for batch in loaded:
            model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        seconds = time.perf_counter() - started
        result[name] = {
            "rows_per_s": round(sum(len(b["idx"]) for b in loaded) / seconds),
            "parameters": count_parameters(model),
        }
    return result


def label(shards: Path, teacher, tokenizer, rows: int, batch_size: int, out: Path) -> int:
    """The teacher cache of the first ``rows`` rows of ``shards`` as the ``*_transfer`` pipelines build it: logits
    and per-layer [CLS] states written batch by batch into ``.npy`` files under ``out`` (``build_teacher_cache``)."""
    data = read_shards(shards)
    data = data.select(range(min(rows, len(data)))).select_columns(["idx", "input_ids", "attention_mask"])
    collator = Collator({"": tokenizer.pad_token_id})
    cache = build_teacher_cache(teacher, data, batch_size=batch_size, collator=collator, directory=out)
    return len(cache.logits)


def run(args) -> dict:
    torch.set_num_threads(args.threads)
    train = load_glue_task(args.task, Path(args.glue_dir), allow_download=False)["train"]
    if args.source_rows:
        train = train.head(args.source_rows)
    tokenizer = load_tokenizer(TEACHER)
    teacher = load_classifier(TEACHER, 2)
    bundle = ModelBundle(teacher, tokenizer, {"model": TEACHER})
    record = {"task": args.task, "source_rows": len(train), "copies": args.copies, "threads": args.threads}
    record["load_average_before"] = os.getloadavg()
    record["peak_mib_loaded"] = round(peak_mib(), 1)
    with tempfile.TemporaryDirectory() as tmp:
        shards, labels = Path(tmp) / "set", Path(tmp) / "labels"
        started = time.perf_counter()
        rows = write_rows(train, Augment(copies=args.copies), bundle, args.max_length, shards)
        seconds = time.perf_counter() - started
        record.update(augmented_rows=rows, augment_seconds=round(seconds, 1), augment_rows_per_s=round(rows / seconds))
        record.update(shards_mib=round(folder_mib(shards), 1), peak_mib_after_augment=round(peak_mib(), 1))
        started = time.perf_counter()
        labelled = label(shards, teacher, tokenizer, args.label_rows, args.batch_size, labels)
        seconds = time.perf_counter() - started
        record.update(
            labelled_rows=labelled, label_seconds=round(seconds, 1), label_rows_per_s=round(labelled / seconds)
        )
        record.update(cache_mib=round(folder_mib(labels), 1), peak_mib_after_label=round(peak_mib(), 1))
        record["students"] = student_speed(shards, teacher, tokenizer, args.label_rows, args.batch_size)
    record["load_average_after"] = os.getloadavg()
    record["machine"] = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    return record


def markdown(record: dict, command: str) -> str:
    hours = record["augmented_rows"] / max(record["label_rows_per_s"], 1) / 3600
    return "\n".join(
        [
            "# Transfer-set augmentation and teacher labelling on the CPU",
            "",
            f"`{command}` (one run; the machine is shared: load average "
            f"{record['load_average_before'][0]:.2f} before, {record['load_average_after'][0]:.2f} after, "
            f"{record['machine']}, {record['threads']} torch thread{'s' if record['threads'] != 1 else ''}).",
            "",
            "| step | rows | seconds | rows/s | peak memory after (MiB) |",
            "|---|---:|---:|---:|---:|",
            f"| model loaded | | | | {record['peak_mib_loaded']} |",
            f"| augmentation ({record['task']}, {record['source_rows']} rows × {record['copies']} rewrites, Tang's "
            f"rules, tokenized, {record['shards_mib']} MiB of shards) | {record['augmented_rows']} | "
            f"{record['augment_seconds']} | {record['augment_rows_per_s']} | {record['peak_mib_after_augment']} |",
            "| teacher labelling (the teacher cache of the first rows: MiniLM-L6 logits and per-layer [CLS] states "
            f"written to {record['cache_mib']} MiB of .npy files, as the pipelines do) | {record['labelled_rows']} | "
            f"{record['label_seconds']} | {record['label_rows_per_s']} | {record['peak_mib_after_label']} |",
            "",
            f"At that labelling rate the whole set takes about {hours:.1f} h on this machine.",
            "",
            "| student (forward only, same rows) | parameters | rows/s |",
            "|---|---:|---:|",
            *[
                f"| {name} | {value['parameters']:,} | {value['rows_per_s']} |"
                for name, value in record["students"].items()
            ],
            "",
        ]
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--glue-dir", default="../shared/glue")
    parser.add_argument("--task", default="sst2")
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--source-rows", type=int, default=None)
    parser.add_argument("--label-rows", type=int, default=20_000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    record = run(args)
    print(json.dumps(record, indent=2))
    if args.out:
        command = "python benchmarks/augment.py " + " ".join(a for a in (argv or __import__("sys").argv[1:]))
        Path(args.out).write_text(markdown(record, command))
        Path(args.out).with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
