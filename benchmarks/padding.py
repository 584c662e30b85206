"""Padded/real token ratio of training batches on real GLUE train sets: random batches vs.
length-grouped batches (``make_loader(..., group_by_length=True)``), MiniLM-L6 tokenizer.

    PYTHONPATH=src python benchmarks/padding.py --glue ../shared/glue --batch-size 32
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bert_kd.core.data.glue import load_glue_task  # noqa: E402
from bert_kd.core.data.tokenize import tokenize_frame  # noqa: E402
from bert_kd.core.models import load_tokenizer  # noqa: E402
from bert_kd.core.training import Collator, make_loader, padding_ratio, sequence_lengths  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--glue", default="../shared/glue")
    parser.add_argument("--tasks", default="sst2,mrpc,rte")
    parser.add_argument("--max-lengths", default="64,128")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    tokenizer = load_tokenizer("minilm-l6")
    collator = Collator({"": tokenizer.pad_token_id})
    print("| task | max length | train rows | random batches | length-grouped |")
    print("|---|---|---|---|---|")
    for task in args.tasks.split(","):
        frame = load_glue_task(task, args.glue, allow_download=False, splits=["train"])["train"]
        for max_length in map(int, args.max_lengths.split(",")):
            dataset = tokenize_frame(frame, tokenizer, max_length)
            lengths = sequence_lengths(dataset)
            ratios = [
                padding_ratio(
                    make_loader(
                        dataset,
                        args.batch_size,
                        collator,
                        shuffle=True,
                        seed=args.seed,
                        group_by_length=grouped,
                        lengths=lengths,
                    )
                )
                for grouped in (False, True)
            ]
            print(f"| {task} | {max_length} | {len(dataset)} | {ratios[0]:.2f} | {ratios[1]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
