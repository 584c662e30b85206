"""One process of the two-process DDP tests (run by torchrun, or alone as the reference).

    python -m torch.distributed.run --standalone --nproc_per_node 2 tests/ddp_fit_worker.py \
        TEACHER_DIR GLUE_DIR OUT_DIR PER_PROCESS_BATCH [grouped [CRASH_AFTER]]

Trains the tiny BERT of conftest (dropout off, so one batch of 2B equals two of B) for a few
steps through ``fit`` inside ``tracked_run`` and writes this rank's final weights to
``OUT_DIR/rank<RANK>.pt`` (the last checkpoint stays in ``OUT_DIR/checkpoints/last``).

``grouped``: dropout on, length-grouped batches, 2 epochs, a checkpoint every step (a resume test);
with ``CRASH_AFTER`` every rank dies before its micro-batch number CRASH_AFTER + 1, and a re-run with
the same OUT_DIR resumes from the checkpoint.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch


def main(
    teacher_dir: str,
    glue_dir: str,
    out_dir: str,
    batch_size: int,
    grouped: bool = False,
    crash_after: int | None = None,
) -> None:
    from bert_kd.core.data.glue import load_glue_task
    from bert_kd.core.data.tokenize import tokenize_splits
    from bert_kd.core.models import load_classifier, load_tokenizer
    from bert_kd.core.training import Collator, SupervisedObjective, TrainingConfig, fit
    from bert_kd.tracking import tracked_run

    class CrashingObjective(SupervisedObjective):
        """Fine-tuning that dies (on every rank alike) after ``crash_after`` micro-batches."""

        calls = 0

        def training_step(self, batch):
            if crash_after is not None and self.calls >= crash_after:
                raise RuntimeError("simulated crash")
            self.calls += 1
            return super().training_step(batch)

    tokenizer = load_tokenizer(teacher_dir)
    data = tokenize_splits(load_glue_task("sst2", glue_dir, allow_download=False), tokenizer, 32)
    torch.manual_seed(0)
    model = load_classifier(teacher_dir, 2)
    if not grouped:
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0
    config = TrainingConfig(
        epochs=2 if grouped else 1,
        batch_size=batch_size,
        eval_batch_size=8,
        learning_rate=1e-3,
        warmup_ratio=0.0,
        seed=3,
        progress_bar=False,
        cpu=True,
        mixed_precision="no",
        # off in the dropout-free mode: the grouped order depends on the per-process batch size
        group_by_length=grouped,
        checkpoint_dir=str(Path(out_dir) / "checkpoints"),
        keep_checkpoint=True,
        checkpoint_every_steps=1 if grouped else 0,
    )
    with tracked_run("ddp-test", enabled=True) as run:
        result = fit(
            CrashingObjective(model),
            data["train"],
            data["validation"],
            config,
            collator=Collator({"": tokenizer.pad_token_id}),
            evaluate_fn=lambda p, y: {"accuracy": float((p.argmax(-1) == y).mean()), "n": float(len(y))},
            log_fn=run.log_metrics,
        )
    rank = int(os.environ.get("RANK", "0"))
    torch.save(
        {
            "state": model.state_dict(),
            "history": result.history,
            "num_processes": result.num_processes,
            "resumed_from_step": result.resumed_from_step,
        },
        Path(out_dir) / f"rank{rank}.pt",
    )


if __name__ == "__main__":
    grouped_mode = len(sys.argv) > 5 and sys.argv[5] == "grouped"
    main(
        sys.argv[1],
        sys.argv[2],
        sys.argv[3],
        int(sys.argv[4]),
        grouped=grouped_mode,
        crash_after=int(sys.argv[6]) if len(sys.argv) > 6 else None,
    )
