"""Tests for bert_kd.training's loop: a recorded trace of ``fit`` that a refactor must reproduce bit for bit."""

from __future__ import annotations

import hashlib
import json
import os
from functools import partial
from pathlib import Path

import pytest
import torch

from bert_kd.training import Collator, SupervisedObjective, TrainingConfig, fit

#: The trace of :func:`traced_runs` recorded with the code before the training package was split
#: (commit f167f58). ``BERT_KD_RECORD_FIT_TRACE=1`` rewrites it (only after a deliberate change).
TRACE_FILE = Path(__file__).with_name("fit_trace.json")
RECORD_ENV = "BERT_KD_RECORD_FIT_TRACE"


class ScriptedObjective(SupervisedObjective):
    """Fine-tuning that announces a metric per epoch and can die after ``crash_after`` micro-batches."""

    def __init__(self, model, crash_after: int | None = None):
        super().__init__(model)
        self.crash_after, self.calls, self.epoch = crash_after, 0, None

    def set_epoch(self, epoch, n_epochs):
        self.epoch = epoch
        return {"phase": float(epoch) / n_epochs}

    def training_step(self, batch):
        if self.crash_after is not None and self.calls >= self.crash_after:
            raise KeyboardInterrupt("simulated crash")
        self.calls += 1
        return super().training_step(batch)


#: Scripted selection scores of epochs 1–3: the 2nd epoch's weights are kept, so they come from after the resume.
SCORES = (0.2, 0.9, 0.5)


def scored_evaluation(objective: ScriptedObjective):
    """Accuracy, the mean logit (moves with every weight) and the scripted score of the epoch."""

    def evaluate(preds, labels):
        return {"accuracy": float((preds.argmax(-1) == labels).mean()), "mean_logit": float(preds.mean()),
                "score": SCORES[objective.epoch]}

    return evaluate


def environment() -> dict:
    """What float results depend on besides the code: the torch build and the CPU kernels it picks."""
    return {"torch": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability()}


def weight_digests(model) -> dict[str, str]:
    return {name: hashlib.sha256(value.detach().cpu().contiguous().numpy().tobytes()).hexdigest()[:16]
            for name, value in model.state_dict().items()}


def synthetic_splits() -> dict[str, list[dict]]:
    """Rows of 3–20 token ids (label: the first real token is even), the same in every process (no
    trained tokenizer, whose vocabulary order may differ between processes)."""
    generator = torch.Generator().manual_seed(11)
    splits = {}
    for split, n in (("train", 48), ("validation", 24)):
        rows = []
        for i in range(n):
            length = int(torch.randint(3, 21, (1,), generator=generator))
            ids = torch.randint(5, 60, (length,), generator=generator).tolist()
            rows.append({"idx": i, "label": ids[0] % 2, "input_ids": [2, *ids], "attention_mask": [1] * (length + 1)})
        splits[split] = rows
    return splits


def tiny_bert():
    """A 2-layer random BERT classifier (dropout on), seeded."""
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(3)
    return BertForSequenceClassification(BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2,
                                                    num_attention_heads=4, intermediate_size=64,
                                                    max_position_embeddings=32, num_labels=2))


def traced_run(splits, checkpoint_dir: Path, group_by_length: bool,
               crash_after: int | None = None) -> dict:
    """One fit over 3 epochs of 3 optimizer steps (2 accumulated batches each; dropout on, warm-up,
    evaluation with best-epoch selection, a checkpoint every 2 steps)."""
    config = TrainingConfig(epochs=3, batch_size=8, eval_batch_size=16, learning_rate=1e-3, warmup_ratio=0.2,
                            gradient_accumulation_steps=2, group_by_length=group_by_length, log_every_steps=2,
                            checkpoint_dir=str(checkpoint_dir), checkpoint_every_steps=2, select_metric="score",
                            progress_bar=False, cpu=True, seed=7)
    model = tiny_bert()
    logged = []
    objective = ScriptedObjective(model, crash_after)
    result = fit(objective, splits["train"], splits["validation"], config,
                 collator=Collator(), evaluate_fn=scored_evaluation(objective), log_fn=lambda values, step: logged.append([step, dict(values)]))
    return {"weights": weight_digests(model), "history": result.history, "logged": logged,
            "best_epoch": result.best_epoch, "best_metrics": result.best_metrics, "global_step": result.global_step,
            "resumed_from_step": result.resumed_from_step, "padded_per_real_token": result.padded_per_real_token}


@pytest.fixture
def one_thread():
    """Float sums do not depend on how many threads split them."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_fit_reproduces_its_recorded_trace_and_a_resume_matches_it_exactly(tmp_path, one_thread):
    splits = synthetic_splits()
    trace = {"environment": environment()}
    for batching, grouped in (("random", False), ("grouped", True)):
        run = partial(traced_run, splits, group_by_length=grouped)
        straight = run(tmp_path / batching / "straight")
        with pytest.raises(KeyboardInterrupt):  # dies in the 2nd epoch, after step 4 was checkpointed
            run(tmp_path / batching / "resumed", crash_after=9)
        resumed = run(tmp_path / batching / "resumed")
        assert resumed["resumed_from_step"] == 4 and straight["global_step"] == resumed["global_step"] == 9
        assert straight["best_epoch"] == resumed["best_epoch"] == 2
        trace[batching] = {"straight": straight, "resumed": resumed}
    random = trace["random"]
    # bit for bit: RNG, data order, optimizer and scheduler restored. Not so with grouped batches: the
    # DataLoader over LengthGroupedBatchSampler draws its base seed from the global RNG when an epoch
    # starts, so a resumed epoch's dropout masks are one draw apart (recorded as it is, not asserted).
    assert random["resumed"]["weights"] == random["straight"]["weights"]
    assert random["resumed"]["history"] == random["straight"]["history"]
    assert random["resumed"]["logged"][-4:-1] == random["straight"]["logged"][-4:-1]  # steps 6, 8 and 9

    trace = json.loads(json.dumps(trace))
    if os.environ.get(RECORD_ENV) == "1":
        TRACE_FILE.write_text(json.dumps(trace, indent=1, sort_keys=True) + "\n")
    recorded = json.loads(TRACE_FILE.read_text())
    if recorded["environment"] != trace["environment"]:
        pytest.skip(f"{TRACE_FILE.name} was recorded under {recorded['environment']}, this is {trace['environment']} "
                    f"(floats may differ; {RECORD_ENV}=1 records it here)")
    assert trace == recorded
