"""One process of the two-process DDP test (run by torchrun, or alone as the reference).

    python -m torch.distributed.run --standalone --nproc_per_node 2 tests/ddp_fit_worker.py \
        TEACHER_DIR GLUE_DIR OUT_DIR PER_PROCESS_BATCH

Trains the tiny BERT of conftest (dropout off, so one batch of 2B equals two of B) for a few
steps through ``fit`` inside ``tracked_run`` and writes this rank's final weights to
``OUT_DIR/rank<RANK>.pt`` (the last checkpoint stays in ``OUT_DIR/checkpoints/last``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch


def main(teacher_dir: str, glue_dir: str, out_dir: str, batch_size: int) -> None:
    from bert_kd.data.glue import load_glue_task
    from bert_kd.data.tokenize import tokenize_splits
    from bert_kd.models import load_classifier, load_tokenizer
    from bert_kd.tracking import tracked_run
    from bert_kd.training import Collator, SupervisedObjective, TrainingConfig, fit

    tokenizer = load_tokenizer(teacher_dir)
    data = tokenize_splits(load_glue_task("sst2", glue_dir, allow_download=False), tokenizer, 32)
    torch.manual_seed(0)
    model = load_classifier(teacher_dir, 2)
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    config = TrainingConfig(epochs=1, batch_size=batch_size, eval_batch_size=8, learning_rate=1e-3,
                            warmup_ratio=0.0, seed=3, progress_bar=False, cpu=True, mixed_precision="no",
                            group_by_length=False,  # the grouped order depends on the per-process batch size
                            checkpoint_dir=str(Path(out_dir) / "checkpoints"), keep_checkpoint=True)
    with tracked_run("ddp-test", enabled=True) as run:
        result = fit(SupervisedObjective(model), data["train"], data["validation"], config,
                     collator=Collator({"": tokenizer.pad_token_id}),
                     evaluate_fn=lambda p, y: {"accuracy": float((p.argmax(-1) == y).mean()), "n": float(len(y))},
                     log_fn=run.log_metrics)
    rank = int(os.environ.get("RANK", "0"))
    torch.save({"state": model.state_dict(), "history": result.history, "num_processes": result.num_processes},
               Path(out_dir) / f"rank{rank}.pt")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
