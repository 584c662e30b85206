"""Tests for bert_kd.core.training.checkpoints: a killed fit resumes where its checkpoint left off."""

from __future__ import annotations

import pytest
import torch

from bert_kd.core.training import Collator, SupervisedObjective, fit
from tests.core.training.helpers import accuracy, assert_states_close, base_config, new_model, state_copy


class CrashingObjective(SupervisedObjective):
    """Raises after ``crash_after`` training steps, like a killed job."""

    def __init__(self, model, crash_after=None):
        super().__init__(model)
        self.crash_after = crash_after
        self.calls = 0

    def training_step(self, batch):
        if self.crash_after is not None and self.calls >= self.crash_after:
            raise KeyboardInterrupt("simulated crash")
        self.calls += 1
        return super().training_step(batch)


def test_fit_resumes_after_a_crash_and_matches_an_uninterrupted_run(tiny_teacher_dir, sst2, tmp_path):
    ds, tokenizer = sst2
    collator = Collator({"": tokenizer.pad_token_id})
    config = base_config(epochs=2, select_metric="accuracy")  # 12 steps, dropout active
    reference_model = new_model(tiny_teacher_dir, seed=1)
    reference = fit(
        SupervisedObjective(reference_model),
        ds["train"],
        ds["validation"],
        config,
        collator=collator,
        evaluate_fn=accuracy,
    )

    resumable = base_config(
        epochs=2, select_metric="accuracy", checkpoint_dir=str(tmp_path / "ckpt"), checkpoint_every_steps=1
    )
    model = new_model(tiny_teacher_dir, seed=1)
    with pytest.raises(KeyboardInterrupt):  # dies mid-epoch 2, after step 8 was checkpointed
        fit(
            CrashingObjective(model, crash_after=8),
            ds["train"],
            ds["validation"],
            resumable,
            collator=collator,
            evaluate_fn=accuracy,
        )
    model = new_model(tiny_teacher_dir, seed=1)  # a fresh process: weights come from the checkpoint
    objective = CrashingObjective(model)
    resumed = fit(objective, ds["train"], ds["validation"], resumable, collator=collator, evaluate_fn=accuracy)
    assert resumed.resumed_from_step == 8
    assert objective.calls == 4  # only the remaining steps ran
    assert resumed.global_step == reference.global_step == 12
    assert resumed.history == reference.history
    assert resumed.best_epoch == reference.best_epoch
    assert not (tmp_path / "ckpt" / "last").exists()  # a finished run removes its checkpoint by default
    # same data order (per-epoch seeded loaders, skipped batches), same dropout (RNG restored),
    # same optimizer and scheduler state: the weights agree with the uninterrupted run
    assert_states_close(state_copy(model), state_copy(reference_model), atol=1e-6)


class EpochAwareObjective(CrashingObjective):
    """Records what fit tells it before every epoch and asks for one metric to be logged."""

    def __init__(self, model, crash_after=None):
        super().__init__(model, crash_after)
        self.told: list[tuple[int, int]] = []

    def set_epoch(self, epoch, n_epochs):
        self.told.append((epoch, n_epochs))
        return {"phase": float(epoch)}


def test_fit_tells_the_objective_its_epoch_also_after_a_resume(tiny_teacher_dir, sst2, tmp_path):
    ds, tokenizer = sst2
    collator = Collator({"": tokenizer.pad_token_id})
    config = base_config(epochs=3, checkpoint_dir=str(tmp_path / "ckpt"), checkpoint_every_steps=1)  # 6 steps an epoch
    first = EpochAwareObjective(new_model(tiny_teacher_dir), crash_after=8)
    with pytest.raises(KeyboardInterrupt):  # dies in the middle of the second epoch
        fit(first, ds["train"], None, config, collator=collator)
    assert first.told == [(0, 3), (1, 3)]
    resumed, logged = EpochAwareObjective(new_model(tiny_teacher_dir)), []
    fit(resumed, ds["train"], None, config, collator=collator, log_fn=lambda m, step: logged.append((m, step)))
    assert resumed.told == [(1, 3), (2, 3)]  # the interrupted epoch is announced again before its remaining steps
    assert [entry for entry in logged if "train/phase" in entry[0]] == [
        ({"train/phase": 1.0}, 8),
        ({"train/phase": 2.0}, 12),
    ]


def test_fit_extends_max_steps_from_a_checkpoint(tiny_teacher_dir, sst2, tmp_path):
    ds, tokenizer = sst2
    collator = Collator({"": tokenizer.pad_token_id})
    ckpt = str(tmp_path / "ckpt")
    model = new_model(tiny_teacher_dir, seed=2)
    first = fit(
        SupervisedObjective(model),
        ds["train"],
        None,
        base_config(max_steps=3, checkpoint_dir=ckpt, keep_checkpoint=True),
        collator=collator,
    )
    assert first.global_step == 3 and first.resumed_from_step == 0
    assert (tmp_path / "ckpt" / "last" / "trainer_state.json").exists()  # kept for the extension
    after_first = state_copy(model)

    model = new_model(tiny_teacher_dir, seed=2)
    objective = CrashingObjective(model)
    second = fit(objective, ds["train"], None, base_config(max_steps=10, checkpoint_dir=ckpt), collator=collator)
    assert second.resumed_from_step == 3
    assert objective.calls == 7 and second.global_step == 10  # the whole new budget, even past an epoch end
    assert second.history[0] == first.history[0]  # the first run's history is kept
    assert any(not torch.equal(after_first[k], v) for k, v in model.state_dict().items())

    model = new_model(tiny_teacher_dir, seed=2)
    straight = fit(SupervisedObjective(model), ds["train"], None, base_config(max_steps=10), collator=collator)
    assert straight.global_step == 10
    # NOT equal to an uninterrupted 10-step run, by design rather than because of RNG state (RNG,
    # optimizer and scheduler step are restored exactly, see the crash test above):
    # 1. the linear decay schedule is built from the run's own max_steps, so the first run used
    #    lr·(1, 2/3, 1/3) for its 3 steps and the resumed one continues with lr·(7/10, 6/10, …),
    #    while the straight run used lr·(1, 9/10, 8/10, …);
    # 2. stopping at max_steps=3 closes epoch 1 after 3 of its 6 batches, so the resumed run starts
    #    with epoch 2's order and never sees the other 3 batches of epoch 1.
    worst = max(
        (after - ref).abs().max().item()
        for after, ref in zip(state_copy(model).values(), state_copy(objective.model).values())
    )
    assert worst > 0
