"""Tests for bert_kd.training: config parsing, collation, the fit loop, resume, predictions."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bert_kd.data.glue import load_glue_task
from bert_kd.errors import ParameterError
from bert_kd.data.tokenize import tokenize_splits
from bert_kd.models import load_classifier, load_tokenizer
from bert_kd.training import (
    Collator,
    FitResult,
    LengthGroupedBatchSampler,
    Objective,
    SupervisedObjective,
    TrainingConfig,
    config_fingerprint,
    fit,
    cpu_has_bf16,
    make_loader,
    make_optimizer,
    padding_ratio,
    predict_logits,
    resolve_mixed_precision,
    sequence_lengths,
    task_loss,
)

# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def sst2(tiny_teacher_dir, tiny_glue_dir):
    """Tiny SST-2 (48 train / 24 dev rows, the label is readable from one word)."""
    tokenizer = load_tokenizer(str(tiny_teacher_dir))
    splits = load_glue_task("sst2", tiny_glue_dir, allow_download=False)
    return tokenize_splits(splits, tokenizer, 32), tokenizer


def new_model(tiny_teacher_dir, seed: int = 0):
    """The tiny 4-layer BERT of conftest with a fresh, seeded classification head."""
    torch.manual_seed(seed)
    return load_classifier(str(tiny_teacher_dir), 2)


def base_config(**overrides) -> TrainingConfig:
    values = dict(epochs=1, batch_size=8, eval_batch_size=16, learning_rate=1e-3, warmup_ratio=0.0,
                  progress_bar=False, cpu=True, seed=7)
    values.update(overrides)
    return TrainingConfig(**values)


def accuracy(preds, labels):
    return {"accuracy": float((preds.argmax(-1) == labels).mean())}


def state_copy(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def assert_states_close(a: dict, b: dict, atol: float = 1e-6) -> None:
    assert a.keys() == b.keys()
    worst = max((a[k].float() - b[k].float()).abs().max().item() for k in a)
    assert worst <= atol, f"states differ by up to {worst}"


def mean_train_loss(model, dataset, collator) -> float:
    objective = SupervisedObjective(model)
    preds, labels = predict_logits(objective, make_loader(dataset, 16, collator, shuffle=False))
    return float(task_loss(torch.from_numpy(preds), torch.from_numpy(labels)))


# --------------------------------------------------------------------------- TrainingConfig


def test_from_dict_accepts_known_keys_and_defaults():
    config = TrainingConfig.from_dict({"batch_size": 4, "learning_rate": 1e-4, "select_metric": "accuracy"})
    assert config.batch_size == 4 and config.learning_rate == 1e-4 and config.select_metric == "accuracy"
    assert TrainingConfig.from_dict(None) == TrainingConfig()


def test_from_dict_rejects_unknown_keys_naming_them():
    with pytest.raises(ValueError, match="lerning_rate") as info:
        TrainingConfig.from_dict({"lerning_rate": 1e-4, "batch_size": 8})
    assert "batch_size" not in str(info.value).split("valid")[0]  # only the unknown key is reported as unknown


@pytest.mark.parametrize(
    "key, value",
    [
        ("batch_size", 0),
        ("eval_batch_size", -1),
        ("gradient_accumulation_steps", 0),
        ("learning_rate", 0.0),
        ("learning_rate", -1e-5),
        ("epochs", 0),
        ("mixed_precision", "fp8"),
        ("log_every_steps", 0),  # used as a modulus in fit: 0 would crash mid-training
        ("max_steps", -3),  # a negative step budget would silently train nothing
        ("batch_size", "large"),  # wrong types must name the key too, not fail inside int()/<=
        ("learning_rate", "fast"),
        ("warmup_ratio", 1.5),  # the schema's range, unchecked before TrainingConfig followed it
        ("fused_optimizer", "sometimes"),
    ],
)
def test_from_dict_rejects_bad_values_naming_the_key(key, value):
    with pytest.raises(ParameterError, match=key):
        TrainingConfig.from_dict({key: value})


def test_from_dict_follows_the_schema_on_epochs():
    """``epochs: 0`` is refused as the parameter schema refuses it (with ``max_steps``, leave epochs
    out); ``epochs: null`` is the default, as an unset schema key is."""
    with pytest.raises(ParameterError, match="epochs"):
        TrainingConfig.from_dict({"epochs": 0, "max_steps": 5})
    assert TrainingConfig.from_dict({"epochs": None, "max_steps": 5}).epochs == TrainingConfig().epochs


# --------------------------------------------------------------------------- Collator / loader


def test_collator_pads_each_prefix_with_its_own_pad_id():
    rows = [
        {"idx": 3, "label": 1, "input_ids": [5, 6, 7], "attention_mask": [1, 1, 1], "token_type_ids": [0, 0, 1],
         "t0_input_ids": [2, 3], "t0_attention_mask": [1, 1], "sentence": "dropped"},
        {"idx": 9, "label": 0, "input_ids": [5], "attention_mask": [1], "token_type_ids": [0],
         "t0_input_ids": [2, 3, 4, 8], "t0_attention_mask": [1, 1, 1, 1], "sentence": "dropped"},
    ]
    batch = Collator({"": 0, "t0_": 99})(rows)
    assert batch["input_ids"].tolist() == [[5, 6, 7], [5, 0, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert batch["token_type_ids"].tolist() == [[0, 0, 1], [0, 0, 0]]
    assert batch["t0_input_ids"].tolist() == [[2, 3, 99, 99], [2, 3, 4, 8]]
    assert batch["t0_attention_mask"].tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]
    assert batch["labels"].tolist() == [1, 0]  # "label" is renamed
    assert batch["idx"].dtype == torch.long and batch["idx"].tolist() == [3, 9]
    assert "sentence" not in batch and "label" not in batch


def test_collator_unknown_prefix_pads_with_zero():
    batch = Collator({"t0_": 5})([{"input_ids": [1, 2]}, {"input_ids": [1]}])
    assert batch["input_ids"].tolist() == [[1, 2], [1, 0]]


def test_make_loader_order_depends_only_on_seed():
    data = [{"idx": i, "labels": 0, "input_ids": [i + 1]} for i in range(20)]

    def order(seed):
        return torch.cat([b["idx"] for b in make_loader(data, 4, Collator(), shuffle=True, seed=seed)]).tolist()

    torch.manual_seed(0)
    first = order(3)
    torch.manual_seed(123)  # the global RNG must not matter
    assert order(3) == first
    assert order(4) != first
    assert sorted(first) == list(range(20))
    plain = torch.cat([b["idx"] for b in make_loader(data, 4, Collator(), shuffle=False)]).tolist()
    assert plain == list(range(20))


def varied_lengths(n: int = 400, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [{"idx": i, "labels": 0, "input_ids": [5] * int(k), "attention_mask": [1] * int(k)}
            for i, k in enumerate(rng.integers(2, 60, size=n))]


def test_grouped_loader_is_seeded_covers_every_example_and_pads_less():
    data = varied_lengths()

    def order(seed):
        loader = make_loader(data, 8, Collator(), shuffle=True, seed=seed, group_by_length=True)
        return torch.cat([b["idx"] for b in loader]).tolist()

    torch.manual_seed(0)
    first = order(3)
    torch.manual_seed(99)
    assert order(3) == first and order(4) != first
    assert sorted(first) == list(range(len(data)))
    grouped = padding_ratio(make_loader(data, 8, Collator(), shuffle=True, seed=3, group_by_length=True))
    random_order = padding_ratio(make_loader(data, 8, Collator(), shuffle=True, seed=3))
    assert grouped < 1.1 < 1.5 < random_order


def test_grouped_batches_come_in_a_shuffled_order_not_longest_to_shortest():
    data = varied_lengths()  # fewer rows than one mega-batch: everything is sorted together
    sampler = LengthGroupedBatchSampler([len(row["input_ids"]) for row in data], batch_size=8, seed=5)
    batches = list(sampler)
    assert len(batches) == len(sampler) == math.ceil(len(data) / 8)
    assert sorted(i for batch in batches for i in batch) == list(range(len(data)))
    longest = [max(len(data[i]["input_ids"]) for i in batch) for batch in batches]
    assert longest != sorted(longest, reverse=True) and longest != sorted(longest)
    assert list(sampler) == batches and list(LengthGroupedBatchSampler(sampler.lengths, 8, seed=6)) != batches


def test_grouped_batches_of_n_processes_are_the_global_batches_of_one():
    """Accelerate gives process r every N-th batch: N consecutive parts must make up exactly the
    batch one process with batch N·B would draw (else N processes train on other batches)."""
    lengths = [(7 * i) % 23 + 1 for i in range(203)]  # several mega-batches and a short last batch
    one = list(LengthGroupedBatchSampler(lengths, batch_size=6, seed=4, mega_batch_batches=5))
    parts = LengthGroupedBatchSampler(lengths, batch_size=3, seed=4, mega_batch_batches=5, processes=2)
    it, rebuilt = iter(list(parts)), []
    for batch in one:
        rebuilt.append([i for _ in range(math.ceil(len(batch) / 3)) for i in next(it)])
    assert rebuilt == one and next(it, None) is None and len(parts) == len(list(parts))
    assert list(LengthGroupedBatchSampler(lengths, 6, seed=4, mega_batch_batches=5, processes=1)) == one


def test_grouped_eval_loader_is_longest_first_and_keeps_labels_with_rows():
    data = [{"idx": i, "labels": i, "input_ids": [1] * (i % 7 + 1)} for i in range(30)]
    assert sequence_lengths(data) == [i % 7 + 1 for i in range(30)]
    batches = list(make_loader(data, 4, Collator(), shuffle=False, group_by_length=True))
    lengths = [len(data[i]["input_ids"]) for b in batches for i in b["idx"].tolist()]
    assert lengths == sorted(lengths, reverse=True)
    assert all(torch.equal(b["idx"], b["labels"]) for b in batches)


def test_sequence_lengths_reads_a_datasets_column(sst2):
    ds, _ = sst2
    assert sequence_lengths(ds["train"]) == [len(row["input_ids"]) for row in ds["train"]]


def test_padding_ratio_counts_padded_over_real_tokens():
    batches = [{"attention_mask": torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])}]
    assert padding_ratio(batches) == pytest.approx(8 / 6)


@pytest.mark.parametrize("flags, expected", [("fpu avx2 amx_bf16 amx_tile", True), ("fpu avx512f avx512_bf16", True),
                                              ("fpu avx2 avx512f", False), ("", False)])
def test_cpu_has_bf16_reads_the_flags_line(flags, expected):
    assert cpu_has_bf16(f"processor : 0\nflags\t\t: {flags}\nbugs : x\n") is expected


def test_resolve_mixed_precision_auto_follows_the_hardware(monkeypatch):
    import bert_kd.training.config as training_config

    assert resolve_mixed_precision("fp16") == "fp16" and resolve_mixed_precision("no") == "no"
    monkeypatch.setattr(training_config, "cpu_has_bf16", lambda: True)
    assert resolve_mixed_precision("auto", cpu=True) == "bf16"
    monkeypatch.setattr(training_config, "cpu_has_bf16", lambda: False)
    assert resolve_mixed_precision("auto", cpu=True) == "no"
    with pytest.raises(ParameterError, match="mixed_precision"):
        TrainingConfig.from_dict({"mixed_precision": "int8"})


def test_frozen_autocast_follows_the_teacher_precision(tiny_teacher_dir):
    objective = SupervisedObjective(new_model(tiny_teacher_dir))
    x = torch.ones(2, 2)
    with objective.frozen_autocast():
        assert (x @ x).dtype == torch.float32  # "same": nothing changes
    objective.frozen_precision = "bf16"
    with objective.frozen_autocast():
        assert (x @ x).dtype == torch.bfloat16
    objective.frozen_precision = "no"
    with torch.autocast("cpu", dtype=torch.bfloat16), objective.frozen_autocast():
        assert (x @ x).dtype == torch.float32  # fp32 teachers under a bf16 student
    with pytest.raises(ParameterError, match="teacher_mixed_precision"):
        TrainingConfig.from_dict({"teacher_mixed_precision": "int4"})


def test_objective_forward_is_the_training_step(tiny_teacher_dir, sst2):
    ds, tokenizer = sst2
    objective = SupervisedObjective(new_model(tiny_teacher_dir)).eval()
    batch = next(iter(make_loader(ds["train"], 4, Collator({"": tokenizer.pad_token_id}), shuffle=False)))
    assert torch.equal(objective(batch)["loss"], objective.training_step(batch)["loss"])


@pytest.mark.parametrize("setting, device, fused", [("auto", "cpu", True), ("auto", "cuda", True), ("auto", "meta", None),
                                                     (False, "cpu", None), (True, "cpu", True)])
def test_make_optimizer_fuses_adamw_on_cpu_and_cuda_by_default(tiny_teacher_dir, setting, device, fused):
    objective = SupervisedObjective(new_model(tiny_teacher_dir))
    optimizer = make_optimizer(objective, TrainingConfig.from_dict({"fused_optimizer": setting}), torch.device(device))
    assert optimizer.defaults["fused"] is fused
    assert sum(len(g["params"]) for g in optimizer.param_groups) == len(list(objective.parameters()))


def test_loaders_use_workers_and_pinned_memory_only_on_a_gpu(tiny_teacher_dir, sst2, monkeypatch):
    from bert_kd.training import use_device_loading

    data, tokenizer = sst2
    ds = data["train"]
    collator = Collator({"": tokenizer.pad_token_id})
    on_cpu = use_device_loading(make_loader(ds, 4, collator, shuffle=True), torch.device("cpu"))
    assert on_cpu.num_workers == 0 and not on_cpu.pin_memory
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    on_gpu = use_device_loading(make_loader(ds, 4, collator, shuffle=True), torch.device("cuda"))
    assert on_gpu.num_workers == 4 and on_gpu.pin_memory


# --------------------------------------------------------------------------- fit


def test_fit_learns_the_tiny_task(tiny_teacher_dir, sst2):
    ds, tokenizer = sst2
    collator = Collator({"": tokenizer.pad_token_id})
    model = new_model(tiny_teacher_dir)
    before_state = state_copy(model)
    before = mean_train_loss(model, ds["train"], collator)
    logged = []
    config = base_config(epochs=8, learning_rate=3e-3, log_every_steps=1, group_by_length=False)
    result = fit(SupervisedObjective(model), ds["train"], ds["validation"], config,
                 collator=collator, evaluate_fn=accuracy, log_fn=lambda values, step: logged.append((step, values)))
    after = mean_train_loss(model, ds["train"], collator)
    assert after < 0.8 * before, (before, after)  # from chance (ln 2) to clearly below it
    assert max(r["accuracy"] for r in result.history) >= 0.9
    assert any(not torch.equal(before_state[k], v) for k, v in model.state_dict().items())
    assert isinstance(result, FitResult)
    steps_per_epoch = math.ceil(48 / 8)
    assert result.global_step == 8 * steps_per_epoch and result.resumed_from_step == 0
    assert [r["epoch"] for r in result.history] == list(range(1, 9))
    assert [r["global_step"] for r in result.history] == [6 * e for e in range(1, 9)]
    assert all("accuracy" in r for r in result.history)
    # log_fn receives averaged training terms every step and eval metrics every epoch
    train_logs = [v for _, v in logged if "train/loss" in v]
    assert len(train_logs) == 48 and all({"train/ce", "train/lr"} <= v.keys() for v in train_logs)
    assert sum("eval/accuracy" in v for _, v in logged) == 8
    # no select_metric: the last epoch is kept
    assert result.best_epoch == 8 and result.best_metrics == result.history[-1]


@pytest.mark.parametrize("greater_is_better, script, best", [(True, [0.2, 0.9, 0.5], 2), (False, [0.7, 0.9, 0.1], 3),
                                                             (False, [0.3, 0.9, 0.5], 1)])
def test_fit_restores_the_best_epochs_state(tiny_teacher_dir, sst2, greater_is_better, script, best):
    ds, tokenizer = sst2
    model = new_model(tiny_teacher_dir)
    snapshots = []

    def scripted(preds, labels):  # called after each epoch's training, before selection
        snapshots.append(state_copy(model))
        return {"score": script[len(snapshots) - 1], "n": len(labels)}

    config = base_config(epochs=3, select_metric="score", greater_is_better=greater_is_better)
    result = fit(SupervisedObjective(model), ds["train"], ds["validation"], config,
                 collator=Collator({"": tokenizer.pad_token_id}), evaluate_fn=scripted)
    assert len(snapshots) == 3
    assert result.best_epoch == best
    assert result.best_metrics["score"] == script[best - 1] and result.best_metrics["epoch"] == best
    assert [r["score"] for r in result.history] == script
    assert_states_close(state_copy(model), snapshots[best - 1], atol=0.0)
    if best != 3:
        assert any(not torch.equal(snapshots[best - 1][k], snapshots[2][k]) for k in snapshots[2])


def test_fit_reports_padding_and_resolved_precision(tiny_teacher_dir, sst2):
    ds, tokenizer = sst2
    logged = {}
    result = fit(SupervisedObjective(new_model(tiny_teacher_dir)), ds["train"], ds["validation"],
                 base_config(max_steps=3, group_by_length=True), collator=Collator({"": tokenizer.pad_token_id}),
                 evaluate_fn=accuracy, log_fn=lambda values, step: logged.update(values))
    assert 1.0 <= result.padded_per_real_token == logged["train/padded_per_real_token"]
    assert result.num_processes == 1 and result.mixed_precision in ("no", "bf16")
    assert 0.0 <= logged["eval/accuracy"] <= 1.0  # the longest-first dev order still scores every row


def test_fits_with_different_precisions_run_in_one_process(tiny_teacher_dir, sst2):
    ds, tokenizer = sst2
    collator = Collator({"": tokenizer.pad_token_id})
    for precision in ("no", "bf16", "no"):
        result = fit(SupervisedObjective(new_model(tiny_teacher_dir)), ds["train"], None,
                     base_config(max_steps=1, mixed_precision=precision), collator=collator)
        assert result.mixed_precision == precision and result.global_step == 1


def test_fit_runs_without_eval_set(tiny_teacher_dir, sst2):
    ds, tokenizer = sst2
    result = fit(SupervisedObjective(new_model(tiny_teacher_dir)), ds["train"], None, base_config(max_steps=3),
                 collator=Collator({"": tokenizer.pad_token_id}))
    assert result.global_step == 3 and result.best_epoch == -1 and result.best_metrics == {}
    assert result.history == [{"epoch": 1, "global_step": 3}]


def test_fit_gradient_accumulation_counts_optimizer_steps(tiny_teacher_dir, sst2):
    ds, tokenizer = sst2
    result = fit(SupervisedObjective(new_model(tiny_teacher_dir)), ds["train"], None,
                 base_config(epochs=1, batch_size=4, gradient_accumulation_steps=3),
                 collator=Collator({"": tokenizer.pad_token_id}))
    assert result.global_step == math.ceil(48 / 4 / 3)


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
    reference = fit(SupervisedObjective(reference_model), ds["train"], ds["validation"], config,
                    collator=collator, evaluate_fn=accuracy)

    resumable = base_config(epochs=2, select_metric="accuracy", checkpoint_dir=str(tmp_path / "ckpt"),
                            checkpoint_every_steps=1)
    model = new_model(tiny_teacher_dir, seed=1)
    with pytest.raises(KeyboardInterrupt):  # dies mid-epoch 2, after step 8 was checkpointed
        fit(CrashingObjective(model, crash_after=8), ds["train"], ds["validation"], resumable,
            collator=collator, evaluate_fn=accuracy)
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
    assert [entry for entry in logged if "train/phase" in entry[0]] == [({"train/phase": 1.0}, 8), ({"train/phase": 2.0}, 12)]


def test_fit_extends_max_steps_from_a_checkpoint(tiny_teacher_dir, sst2, tmp_path):
    ds, tokenizer = sst2
    collator = Collator({"": tokenizer.pad_token_id})
    ckpt = str(tmp_path / "ckpt")
    model = new_model(tiny_teacher_dir, seed=2)
    first = fit(SupervisedObjective(model), ds["train"], None,
                base_config(max_steps=3, checkpoint_dir=ckpt, keep_checkpoint=True), collator=collator)
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
    worst = max((after - ref).abs().max().item() for after, ref in zip(state_copy(model).values(),
                                                                         state_copy(objective.model).values()))
    assert worst > 0


def test_fit_rejects_an_empty_training_set(tiny_teacher_dir, sst2):
    ds, tokenizer = sst2
    empty = ds["train"].select([])
    with pytest.raises(ValueError, match="empty"):
        fit(SupervisedObjective(new_model(tiny_teacher_dir)), empty, None, base_config(max_steps=2))


class NaNObjective(Objective):
    def training_step(self, batch):
        loss = self.predict(batch).sum() * float("nan")
        return {"loss": loss, "ce": loss.detach()}


def test_non_finite_loss_raises(tiny_teacher_dir, sst2):
    ds, tokenizer = sst2
    with pytest.raises(FloatingPointError, match="non-finite loss"):
        fit(NaNObjective(new_model(tiny_teacher_dir)), ds["train"], None, base_config(max_steps=2),
            collator=Collator({"": tokenizer.pad_token_id}), description="nan-run")


def test_parameter_groups_put_auxiliary_modules_apart(tiny_teacher_dir):
    objective = SupervisedObjective(new_model(tiny_teacher_dir))
    objective.projection = torch.nn.Linear(4, 4)
    objective.add_frozen("frozen", torch.nn.Linear(3, 3))
    groups = objective.parameter_groups(base_config(aux_learning_rate=0.5, weight_decay=0.1))
    assert len(groups) == 3
    decay, no_decay, aux = groups
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert all(p.ndim >= 2 for p in decay["params"]) and all(p.ndim < 2 for p in no_decay["params"])
    assert aux["lr"] == 0.5 and {id(p) for p in aux["params"]} == {id(p) for p in objective.projection.parameters()}
    grouped = {id(p) for g in groups for p in g["params"]}
    assert not grouped & {id(p) for p in objective.frozen.parameters()}
    assert "frozen.weight" not in objective.trainable_state() and "projection.weight" in objective.trainable_state()
    objective.train()
    assert objective.model.training and not objective.frozen.training


def test_predict_logits_shapes_and_mode(tiny_teacher_dir, sst2):
    ds, tokenizer = sst2
    objective = SupervisedObjective(new_model(tiny_teacher_dir)).train()
    loader = make_loader(ds["validation"], 5, Collator({"": tokenizer.pad_token_id}), shuffle=False)
    preds, labels = predict_logits(objective, loader)
    assert preds.shape == (24, 2) and labels.shape == (24,)
    assert np.array_equal(labels, np.array(ds["validation"]["labels"]))
    assert objective.training  # mode restored
    again, _ = predict_logits(objective, loader)
    np.testing.assert_allclose(preds, again, atol=1e-6)  # eval mode: no dropout


def test_config_fingerprint_is_stable_and_sensitive():
    a = config_fingerprint({"lr": 1e-4, "bs": 8}, "sst2")
    assert a == config_fingerprint({"bs": 8, "lr": 1e-4}, "sst2")
    assert len(a) == 12
    assert a != config_fingerprint({"lr": 2e-4, "bs": 8}, "sst2")
    assert a != config_fingerprint({"lr": 1e-4, "bs": 8}, "rte")


# --------------------------------------------------------------------------- several processes


def run_worker(args: list[str], tmp_path, processes: int) -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    worker = str(Path(__file__).parent / "ddp_fit_worker.py")
    launcher = ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}"] if processes > 1 else []
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, *launcher, worker, *args], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


def test_two_cpu_processes_train_like_one_with_the_same_global_batch(tiny_teacher_dir, tiny_glue_dir, tmp_path):
    """DDP (gloo) through torchrun: both ranks end identical, equal to one process with batch 2B,
    evaluation covers every dev row once, and MLflow holds exactly one run (num_processes = 2)."""
    import mlflow

    ddp, single = tmp_path / "ddp", tmp_path / "single"
    ddp.mkdir(), single.mkdir()
    run_worker([str(tiny_teacher_dir), str(tiny_glue_dir), str(ddp), "4"], ddp, processes=2)
    run_worker([str(tiny_teacher_dir), str(tiny_glue_dir), str(single), "8"], single, processes=1)
    rank0, rank1 = torch.load(ddp / "rank0.pt", weights_only=True), torch.load(ddp / "rank1.pt", weights_only=True)
    reference = torch.load(single / "rank0.pt", weights_only=True)
    assert rank0["num_processes"] == 2 and reference["num_processes"] == 1
    assert_states_close(rank0["state"], rank1["state"], atol=0.0)
    assert_states_close(rank0["state"], reference["state"], atol=1e-4)
    assert any(not torch.equal(rank0["state"][k], v) for k, v in state_copy(new_model(tiny_teacher_dir)).items()
               if "classifier" not in k)  # it trained
    assert rank0["history"][0]["n"] == rank1["history"][0]["n"] == 24  # gathered: all dev rows, none twice
    checkpoint = ddp / "checkpoints" / "last"  # every rank's RNG state is saved, so every rank can resume
    assert {p.name for p in checkpoint.glob("random_states_*.pkl")} == {"random_states_0.pkl", "random_states_1.pkl"}
    assert not (ddp / "checkpoints" / "last.staging").exists()
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{ddp / 'mlflow.db'}")  # no process-wide URI change
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert len(runs) == 1 and runs[0].data.params["num_processes"] == "2"


# --------------------------------------------------------------------------- padding by the tokenizer's rules (issue 19)

XLNET_WORDS = "the a movie film was great good bad not very dog sat on mat and it fun".split()


def tiny_xlnet_tokenizer():
    from transformers import XLNetTokenizer

    specials = ["<unk>", "<s>", "</s>", "<cls>", "<sep>", "<pad>", "<mask>"]
    vocab = [(t, 0.0) for t in specials] + [("▁" + w, -1.0) for w in XLNET_WORDS]
    vocab += [(c, -5.0) for c in "abcdefghijklmnopqrstuvwxyz"]
    return XLNetTokenizer(vocab=vocab, unk_id=0)


def tiny_xlnet(vocab_size: int):
    from transformers import XLNetConfig, XLNetForSequenceClassification

    torch.manual_seed(0)
    config = XLNetConfig(vocab_size=vocab_size, d_model=32, n_layer=2, n_head=4, d_inner=64, num_labels=2)
    return XLNetForSequenceClassification(config).eval()


def logits_of(model, collator, rows):
    batch = collator([dict(row) for row in rows])
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in batch}
    with torch.no_grad():
        return model(**inputs).logits


def encoded_rows(tokenizer, texts):
    return [dict(tokenizer(text)) for text in texts]


@pytest.mark.parametrize("family", ["bert", "xlnet"])
def test_predictions_do_not_depend_on_batch_composition(family, tiny_teacher_dir):
    """A short row gives the same logits alone and padded next to a longer one (tiny random models)."""
    from bert_kd.models import load_classifier, load_tokenizer
    from bert_kd.pipelines.common import collator_for

    if family == "bert":
        tokenizer, model = load_tokenizer(str(tiny_teacher_dir)), load_classifier(str(tiny_teacher_dir), 2).eval()
    else:
        tokenizer = tiny_xlnet_tokenizer()
        model = tiny_xlnet(len(tokenizer))
    short, long = encoded_rows(tokenizer, ["the movie was great", "a dog sat on the mat and it was very very fun"])
    collator = collator_for(tokenizer)
    alone = logits_of(model, collator, [short])
    beside = logits_of(model, collator, [short, long])[0:1]
    torch.testing.assert_close(beside, alone, rtol=1e-4, atol=1e-5)


def test_right_padding_changes_xlnet_logits():
    """The failure the tokenizer's padding fixes: XLNet right-padded reads a pad as its last token."""
    tokenizer = tiny_xlnet_tokenizer()
    model = tiny_xlnet(len(tokenizer))
    short, long = encoded_rows(tokenizer, ["the movie was great", "a dog sat on the mat and it was very very fun"])
    right_padded = Collator({"": tokenizer.pad_token_id})
    assert not torch.allclose(logits_of(model, right_padded, [short, long])[0:1], logits_of(model, right_padded, [short]), atol=1e-4)


def test_bert_padding_is_unchanged_by_the_tokenizer_collator(tiny_teacher_dir):
    from bert_kd.models import load_tokenizer

    tokenizer = load_tokenizer(str(tiny_teacher_dir))
    rows = [{**dict(tokenizer(a, b)), "idx": i, "label": i % 2} for i, (a, b) in
            enumerate([("the movie", "was great"), ("a dog sat on the mat", "and it was fun"), ("bad", "no")])]
    by_tokenizer = Collator(tokenizers={"": tokenizer})(rows)
    by_hand = Collator({"": tokenizer.pad_token_id})(rows)
    assert by_tokenizer.keys() == by_hand.keys()
    for key in by_hand:
        assert torch.equal(by_tokenizer[key], by_hand[key]), key
        assert by_tokenizer[key].dtype == by_hand[key].dtype


def test_collator_passes_token_aligned_extras_on_the_groups_padding_side():
    """Per-token extra fields (e.g. a teacher's character offsets) are padded with their group."""
    tokenizer = tiny_xlnet_tokenizer()
    short, long = encoded_rows(tokenizer, ["bad", "the movie was great"])
    for row in (short, long):
        row["t0_input_ids"], row["t0_attention_mask"] = row["input_ids"], row["attention_mask"]
        row["t0_offsets"] = [(i, i + 1) for i in range(len(row["input_ids"]))]
        row["weight"] = 0.5
    batch = Collator(tokenizers={"": tokenizer, "t0_": tokenizer})([short, long])
    width = len(long["input_ids"])
    assert batch["t0_offsets"].shape == (2, width, 2)
    pad = width - len(short["input_ids"])
    assert batch["t0_offsets"][0, :pad].tolist() == [[0, 0]] * pad  # left, like XLNet's input_ids
    assert batch["t0_offsets"][0, pad:].tolist() == [list(o) for o in short["t0_offsets"]]
    assert batch["t0_input_ids"][0, :pad].tolist() == [tokenizer.pad_token_id] * pad
    assert batch["weight"].tolist() == [0.5, 0.5]


def test_collator_refuses_a_ragged_field_that_matches_no_token_group():
    rows = [{"input_ids": [1, 2], "spans": [[0, 1]]}, {"input_ids": [1], "spans": [[0, 1], [1, 2], [2, 3]]}]
    with pytest.raises(ValueError, match="'spans'"):
        Collator()(rows)
