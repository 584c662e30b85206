"""Does the dev metric hold? Fine-tuning of MiniLM-L6 (``--layers 2``: the 2-layer student copied
from it) on ``--rows`` SST-2 training rows, scored on the whole SST-2 dev set, over ``--seeds``
seeds, for: fp32 + length-grouped batches (the default), fp32 + random batches, bf16 + grouped.

    PYTHONPATH=src python benchmarks/dev_metric_check.py --rows 1000 --epochs 1 --seeds 1,2,3
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from bert_kd.data.glue import load_glue_task  # noqa: E402
from bert_kd.data.tokenize import tokenize_frame  # noqa: E402
from bert_kd.metrics import glue_metrics  # noqa: E402
from bert_kd.models import build_student, load_classifier, load_tokenizer  # noqa: E402
from bert_kd.training import Collator, SupervisedObjective, TrainingConfig, fit  # noqa: E402

VARIANTS = {
    "fp32 grouped": dict(mixed_precision="no", group_by_length=True),
    "fp32 random": dict(mixed_precision="no", group_by_length=False),
    "bf16 grouped": dict(mixed_precision="bf16", group_by_length=True),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--glue", default="../shared/glue")
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--epochs", type=float, default=1)
    parser.add_argument("--layers", type=int, default=0, help="0 = the whole MiniLM-L6 (6 layers)")
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args()
    splits = load_glue_task("sst2", args.glue, allow_download=False)
    tokenizer = load_tokenizer("minilm-l6")
    train = tokenize_frame(splits["train"].sample(n=args.rows, random_state=0), tokenizer, args.max_length)
    dev = tokenize_frame(splits["validation"], tokenizer, args.max_length)
    collator = Collator({"": tokenizer.pad_token_id})
    teacher = load_classifier("minilm-l6", 2)
    results: dict[str, list[tuple[float, float, float]]] = {}
    for seed in map(int, args.seeds.split(",")):
        for name in args.variants.split(","):
            torch.manual_seed(seed)
            student = build_student(teacher, args.layers)[0] if args.layers else copy.deepcopy(teacher)
            config = TrainingConfig(epochs=args.epochs, batch_size=32, eval_batch_size=128,
                                    learning_rate=args.learning_rate, seed=seed, progress_bar=False, cpu=True,
                                    **VARIANTS[name])
            start = time.perf_counter()
            result = fit(SupervisedObjective(student), train, dev, config, collator=collator,
                         evaluate_fn=lambda p, y: glue_metrics("sst2", p, y))
            seconds = time.perf_counter() - start
            accuracy = result.history[-1]["accuracy"]
            results.setdefault(name, []).append((accuracy, seconds, result.padded_per_real_token))
            print(f"seed {seed} {name}: dev accuracy {accuracy:.4f}, {seconds:.1f} s (incl. eval), "
                  f"padded/real {result.padded_per_real_token:.2f}", flush=True)
    print("\n| variant | dev accuracy (mean ± sd over seeds) | seconds (median) | padded/real |\n|---|---|---|---|")
    for name, rows in results.items():
        accs = [100 * r[0] for r in rows]
        sd = statistics.stdev(accs) if len(accs) > 1 else 0.0
        print(f"| {name} | {statistics.mean(accs):.2f} ± {sd:.2f} ({', '.join(f'{a:.2f}' for a in accs)}) | "
              f"{statistics.median(r[1] for r in rows):.1f} | {statistics.mean(r[2] for r in rows):.2f} |")


if __name__ == "__main__":
    main()
