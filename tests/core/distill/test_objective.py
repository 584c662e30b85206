"""Tests for bert_kd.core.distill.objective and the method registry (ALP-KD family + TinyBERT)."""

from __future__ import annotations

import math

import pytest
import torch

from bert_kd.core.data.glue import load_glue_task
from bert_kd.core.data.tokenize import tokenize_splits
from bert_kd.core.distill import losses
from bert_kd.core.distill.methods import METHODS, build_method
from bert_kd.core.distill.methods.base import check_method_config
from bert_kd.core.distill.objective import (
    DistillationObjective,
    Teacher,
    WeightSchedule,
    build_teacher_cache,
    load_teacher_cache,
    save_teacher_cache,
    validate_weights,
)
from bert_kd.core.distill.outputs import forward_features
from bert_kd.core.models import build_student, load_classifier, load_tokenizer
from bert_kd.core.training import Collator, TrainingConfig, fit, make_loader


def _distill_methods() -> tuple[str, ...]:
    """The methods the ``distill_methods`` recipes of ``conf/base`` run (single teacher, one each)."""
    import yaml

    from tests.conftest import REPO_ROOT

    recipes = yaml.safe_load((REPO_ROOT / "conf" / "base" / "parameters_distill.yml").read_text())["distill_methods"]
    return tuple(dict.fromkeys(recipe["method"] for recipe in recipes.values()))


CONF_METHODS = _distill_methods()
CACHEABLE = ("rkd", "logits_mse", "pkd", "ckd", "alp")


@pytest.fixture(scope="module")
def data(tiny_teacher_dir, tiny_glue_dir):
    tokenizer = load_tokenizer(str(tiny_teacher_dir))
    splits = load_glue_task("sst2", tiny_glue_dir, allow_download=False)
    ds = tokenize_splits(splits, tokenizer, 32)
    return ds, Collator({"": tokenizer.pad_token_id})


@pytest.fixture()
def teacher(tiny_teacher_dir):
    torch.manual_seed(0)
    return load_classifier(str(tiny_teacher_dir), 2)


def narrow_student(teacher, hidden: int = 16, layers: int = 2):
    """A BERT student with the teacher's vocabulary but a smaller width (needs projections)."""
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(
        **{
            **teacher.config.to_dict(),
            "hidden_size": hidden,
            "num_attention_heads": 2,
            "intermediate_size": 2 * hidden,
            "num_hidden_layers": layers,
        }
    )
    config._attn_implementation = "eager"
    torch.manual_seed(1)
    return BertForSequenceClassification(config)


def make_student(teacher, kind: str):
    return build_student(teacher, 2)[0] if kind == "shallow" else narrow_student(teacher)


def first_batch(data, batch_size: int = 8, seed: int = 3):
    ds, collator = data
    return next(iter(make_loader(ds["train"], batch_size, collator, shuffle=True, seed=seed)))


def count_calls(module) -> list[int]:
    calls = [0]
    module.register_forward_pre_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    return calls


# --------------------------------------------------------------------------- registry / weights


def test_registry_holds_every_method_of_the_conf_recipes():
    assert set(CONF_METHODS) <= set(METHODS)
    for name in CONF_METHODS:
        assert METHODS[name].name == name


def test_unknown_method_lists_the_available_ones(teacher):
    student, _ = build_student(teacher, 2)
    with pytest.raises(ValueError, match="unknown distillation method 'alpkd'") as info:
        build_method({"method": "alpkd"}, student, [teacher])
    for name in CONF_METHODS:
        assert repr(name) in str(info.value)
    with pytest.raises(ValueError, match="available"):
        build_method({}, student, [teacher])


def test_unknown_method_option_is_rejected(teacher):
    student, _ = build_student(teacher, 2)
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['mapping'\] for method 'rkd'"):
        build_method({"method": "rkd", "mapping": "all"}, student, [teacher])
    with pytest.raises(ValueError, match="temperature of method .rkd. must be a number > 0"):
        build_method({"method": "rkd", "temperature": 0}, student, [teacher])


def test_ce_weight_is_the_complement_when_not_given(teacher):
    student, _ = build_student(teacher, 2)
    method = build_method({"method": "alp", "weights": {"kd": 0.5, "layer": 0.3}}, student, [teacher])
    assert method.weights == pytest.approx({"ce": 0.2, "kd": 0.5, "layer": 0.3})
    with pytest.raises(ValueError, match="give 'ce' explicitly"):
        build_method({"method": "rkd", "weights": {"kd": 1.5}}, student, [teacher])
    explicit = build_method({"method": "rkd", "weights": {"kd": 1.5, "ce": 1.0}}, student, [teacher])
    assert explicit.weights == {"ce": 1.0, "kd": 1.5}


def test_validate_weights():
    assert validate_weights({"ce": 1, "kd": 0}, ("ce", "kd")) == {"ce": 1.0, "kd": 0.0}
    with pytest.raises(ValueError, match=r"loss weights must be >= 0, got \{'kd': -0.1\}"):
        validate_weights({"ce": 1.0, "kd": -0.1}, ("ce", "kd"))
    with pytest.raises(ValueError, match=r"unknown loss term\(s\) \['alp'\]"):
        validate_weights({"ce": 1.0, "alp": 0.5}, ("ce", "kd"))
    with pytest.raises(ValueError, match="at least one loss weight must be > 0"):
        validate_weights({"ce": 0.0, "kd": 0.0}, ("ce", "kd"))
    with pytest.raises(ValueError, match="at least one loss weight must be > 0"):
        validate_weights({}, ("ce",))


def test_objective_validates_its_weights(teacher):
    student, _ = build_student(teacher, 2)
    method = build_method({"method": "pkd"}, student, [teacher])
    with pytest.raises(ValueError, match="unknown loss term"):
        DistillationObjective(student, [Teacher(teacher)], method, {"ce": 1.0, "attn": 1.0})
    with pytest.raises(ValueError, match="at least one teacher"):
        DistillationObjective(student, [], method, method.weights)


# --------------------------------------------------------------------------- one step, a few fit steps


@pytest.mark.parametrize("kind", ["shallow", "narrow"])
@pytest.mark.parametrize("name", CONF_METHODS)
def test_training_step_and_fit_keep_the_teacher_frozen(teacher, data, name, kind):
    student = make_student(teacher, kind)
    method = build_method({"method": name}, student, [teacher])
    objective = DistillationObjective(student, [Teacher(teacher)], method, method.weights).train()
    teacher_calls = count_calls(teacher)
    assert objective.model.training and not objective.teacher_0.training
    assert not any(p.requires_grad for p in teacher.parameters())
    frozen = {k: v.clone() for k, v in teacher.state_dict().items()}

    batch = first_batch(data)
    terms = objective.training_step(batch)
    assert set(terms) == {"loss", *method.term_names}
    assert torch.isfinite(terms["loss"]) and terms["loss"].requires_grad
    expected = sum(w * terms[t] for t, w in objective.weights.items() if w)
    torch.testing.assert_close(terms["loss"].detach(), expected)
    assert teacher_calls[0] == (0 if name == "nkd" else 1)
    terms["loss"].backward()

    student_grads = [p.grad for p in student.parameters() if p.grad is not None]
    assert student_grads and sum(g.abs().sum() for g in student_grads) > 0
    assert student.bert.encoder.layer[0].attention.self.query.weight.grad is not None
    aux = list(method.named_parameters())
    if name in ("ckd", "tinybert") or (kind == "narrow" and name in ("pkd", "alp")):
        assert aux, f"{name} with a {kind} student should own projections/combiners"
    else:
        assert not aux
    for param_name, param in aux:
        assert param.grad is not None and param.grad.abs().sum() > 0, param_name
    assert all(p.grad is None for p in teacher.parameters())
    objective.zero_grad(set_to_none=True)

    config = TrainingConfig(
        max_steps=3, batch_size=8, learning_rate=1e-3, warmup_ratio=0.0, progress_bar=False, cpu=True
    )
    student_before = {k: v.clone() for k, v in student.state_dict().items()}
    aux_before = {k: v.clone() for k, v in method.state_dict().items()}
    result = fit(objective, data[0]["train"], None, config, collator=data[1])
    assert result.global_step == 3
    for key, value in teacher.state_dict().items():
        assert torch.equal(value, frozen[key]), f"teacher tensor {key} changed"
    assert all(p.grad is None for p in teacher.parameters())
    assert not teacher.training
    assert any(not torch.equal(student_before[k], v) for k, v in student.state_dict().items())
    for key, value in method.state_dict().items():
        assert not torch.equal(aux_before[key], value), f"auxiliary parameter {key} was not trained"


# --------------------------------------------------------------------------- teacher cache


def test_build_teacher_cache_holds_eval_mode_logits_and_cls(teacher, data):
    ds, collator = data
    teacher.train()
    cache = build_teacher_cache(teacher, ds["train"], batch_size=16, collator=collator, progress=False, key="k")
    assert teacher.training  # mode restored
    n = len(ds["train"])
    assert cache.logits.shape == (n, 2) and cache.cls.shape == (n, 5, 32) and cache.key == "k"
    batch = first_batch(data)
    teacher.eval()
    with torch.no_grad():
        live = forward_features(teacher, batch, hidden_states=True)
    cached = cache.lookup(batch["idx"])
    torch.testing.assert_close(cached.logits, live.logits, rtol=0, atol=1e-6)
    torch.testing.assert_close(cached.cls(), live.cls(), rtol=0, atol=1e-6)
    # examples the cache does not hold: beyond its largest idx, or a hole in the table
    with pytest.raises(KeyError, match=r"no entry for example idx \[10000\]"):
        cache.lookup(torch.tensor([1, 10_000]))
    cache.row_of_idx[3] = -1
    with pytest.raises(KeyError, match=r"teacher cache 'k' has no entry for example idx \[3\]"):
        cache.lookup(torch.tensor([1, 3]))


def test_a_cache_built_into_files_is_the_in_memory_one_and_moves_into_its_entry_whole(teacher, data, tmp_path):
    """Built into memory-mapped files (a transfer set's cache is never held in memory), saved by moving them,
    mapped back on load: the same logits and [CLS] states as the in-memory build, looked up per example."""
    ds, collator = data
    in_memory = build_teacher_cache(teacher, ds["train"], batch_size=16, collator=collator, progress=False)
    building = tmp_path / "checkpoint"
    on_disk = build_teacher_cache(
        teacher, ds["train"], batch_size=16, collator=collator, progress=False, key="k", directory=building
    )
    assert sorted(p.name for p in building.iterdir()) == ["cls.npy", "logits.npy", "row_of_idx.npy"]
    assert in_memory.directory is None and on_disk.directory == building
    entry = tmp_path / "entry"
    entry.mkdir()
    save_teacher_cache(on_disk, entry)
    assert not any(building.iterdir()) and on_disk.directory == entry  # moved, not copied; it names where they are
    torch.testing.assert_close(on_disk.logits, in_memory.logits, rtol=0, atol=0)  # its maps outlive the move
    save_teacher_cache(in_memory, tmp_path)  # an in-memory cache is written out, and stays in memory
    assert in_memory.directory is None
    for stored in (load_teacher_cache(entry, "k"), load_teacher_cache(tmp_path)):
        torch.testing.assert_close(stored.logits, in_memory.logits, rtol=0, atol=0)
        torch.testing.assert_close(stored.cls, in_memory.cls, rtol=0, atol=0)
        assert torch.equal(stored.row_of_idx, in_memory.row_of_idx)
    loaded = load_teacher_cache(entry, "k")
    assert loaded.directory == entry and loaded.key == "k"
    idx = torch.tensor([5, 0, 9])
    torch.testing.assert_close(loaded.lookup(idx).logits, in_memory.lookup(idx).logits, rtol=0, atol=0)


def test_teacher_cache_batches_rows_of_similar_length(teacher, data, monkeypatch):
    """The cache's forwards go longest first, so a batch pads only to its own rows' length (in dataset
    order every batch pads to whichever long row it drew); the cache still answers per example."""
    from bert_kd.core.distill import objective as objective_module

    ds, collator = data
    columns = [c for c in ("input_ids", "attention_mask", "token_type_ids") if c in ds["train"].column_names]
    # lengths 3..8 in turn: 8 rows of each length, so sorted batches of 4 need no padding at all
    train = ds["train"].map(lambda row, i: {c: row[c][: 3 + i % 6] for c in columns}, with_indices=True)
    padded_and_real = []
    real_forward = objective_module.forward_features

    def recording_forward(model, batch, **kwargs):
        padded_and_real.append((batch["attention_mask"].numel(), int(batch["attention_mask"].sum())))
        return real_forward(model, batch, **kwargs)

    monkeypatch.setattr(objective_module, "forward_features", recording_forward)
    cache = build_teacher_cache(teacher, train, batch_size=4, collator=collator, progress=False)
    assert len(padded_and_real) == 12
    assert sum(p for p, _ in padded_and_real) == sum(r for _, r in padded_and_real)  # dataset order: 1.33× the tokens
    teacher.eval()
    batch = next(iter(make_loader(train, 6, collator, shuffle=False)))  # 6 rows of 6 lengths
    with torch.no_grad():
        live = real_forward(teacher, batch, hidden_states=True)
    torch.testing.assert_close(cache.lookup(batch["idx"]).logits, live.logits, rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", CACHEABLE)
def test_cache_gives_the_same_terms_as_a_live_teacher(teacher, data, name):
    ds, collator = data
    student, _ = build_student(teacher, 2)
    method = build_method({"method": name}, student, [teacher])
    cache = build_teacher_cache(teacher, ds["train"], collator=collator, progress=False)
    live = DistillationObjective(student, [Teacher(teacher)], method, method.weights).train()
    cached = DistillationObjective(student, [Teacher(teacher, cache=cache)], method, method.weights).train()
    teacher_calls = count_calls(teacher)
    batch = first_batch(data, seed=11)

    torch.manual_seed(5)  # same dropout masks in the student for both passes
    live_terms = live.training_step(batch)
    assert teacher_calls[0] == 1
    torch.manual_seed(5)
    cached_terms = cached.training_step(batch)
    assert teacher_calls[0] == 1  # served from the cache: the teacher did not run
    assert live_terms.keys() == cached_terms.keys()
    for term in live_terms:
        torch.testing.assert_close(
            cached_terms[term].detach(),
            live_terms[term].detach(),
            rtol=0,
            atol=1e-6,
            msg=f"{name}: term {term!r} differs",
        )


def test_cache_is_ignored_when_the_method_needs_hidden_states(teacher, data):
    ds, collator = data
    student, _ = build_student(teacher, 2)
    method = build_method({"method": "tinybert"}, student, [teacher])
    cache = build_teacher_cache(teacher, ds["train"], collator=collator, progress=False)
    objective = DistillationObjective(student, [Teacher(teacher, cache=cache)], method, method.weights)
    calls = count_calls(teacher)
    objective.training_step(first_batch(data))
    assert calls[0] == 1


# --------------------------------------------------------------------------- ALP specifics


def test_alp_projects_a_narrower_student(teacher, data):
    student = narrow_student(teacher)
    method = build_method({"method": "alp"}, student, [teacher])
    assert isinstance(method.projection, torch.nn.Linear)
    assert (method.projection.in_features, method.projection.out_features) == (16, 32)
    with pytest.raises(ValueError, match="student width 16 != teacher width 32"):
        build_method({"method": "alp", "projection": False}, student, [teacher])
    with pytest.raises(ValueError, match="student width 16 != teacher width 32"):
        build_method({"method": "pkd", "projection": False}, student, [teacher])
    same_width, _ = build_student(teacher, 2)
    assert build_method({"method": "alp"}, same_width, [teacher]).projection is None
    assert build_method({"method": "alp", "projection": True}, same_width, [teacher]).projection is not None
    # CKD projects the teachers' buckets instead, so it never needs a student projection
    ckd = build_method({"method": "ckd", "projection": False}, student, [teacher])
    assert ckd.projection is None and ckd.combiners["1"].out_features == 16


@pytest.mark.parametrize("mapping, n_student", [("all", 2), ("buckets_no", 3)])
def test_alp_diagnostics_rows_are_attention_distributions(teacher, data, mapping, n_student):
    student, _ = build_student(teacher, n_student)
    method = build_method({"method": "alp", "mapping": mapping}, student, [teacher])
    assert method.diagnostics() == {}
    student.eval()
    teacher.eval()
    ds, collator = data
    alphas = []
    with torch.no_grad():
        for batch in make_loader(ds["validation"], 10, collator, shuffle=False):
            s = forward_features(student, batch, hidden_states=True)
            t = forward_features(teacher, batch, hidden_states=True)
            method.observe(s, {0: t}, batch)
            alphas.append(losses.alp_attention(s.cls()[:, 1:], t.cls()[:, 1:], method.mapping))
    attention = torch.tensor(method.diagnostics()["alp_attention"])
    assert attention.shape == (n_student, 4)
    for j, bucket in enumerate(method.mapping, start=1):
        row = attention[j - 1]
        if bucket:
            assert row.sum().item() == pytest.approx(1.0, abs=1e-5)
            outside = [k for k in range(1, 5) if k not in bucket]
            assert all(row[k - 1] == 0 for k in outside)
            assert all(row[k - 1] > 0 for k in bucket)
        else:
            assert row.sum().item() == 0  # the unconnected last student layer
    # the diagnostics are the average α over every observed example
    torch.testing.assert_close(attention, torch.cat(alphas).mean(0), rtol=0, atol=1e-6)
    assert math.isclose(float(attention[0].sum()), 1.0, abs_tol=1e-5)


def test_diagnostics_read_the_teacher_live_not_the_training_cache(teacher, data):
    """The cache covers training examples only; dev ids overlap train ids, so a dev lookup in it
    would silently return other examples' states (or fail when the ids are absent)."""
    from bert_kd.core.distill.objective import collect_diagnostics

    ds, collator = data
    train = ds["train"].map(lambda row: {"idx": row["idx"] + 1000})  # disjoint from the dev ids
    student = build_student(teacher, 2)[0]
    method = build_method({"method": "alp"}, student, [teacher])
    cache = build_teacher_cache(teacher, train, collator=collator, progress=False)
    cached = DistillationObjective(student, [Teacher(teacher, cache=cache)], method, method.weights)
    dev = make_loader(ds["validation"], 8, collator, shuffle=False)
    with_cache = collect_diagnostics(cached, dev)["alp_attention"]

    method_live = build_method({"method": "alp"}, student, [teacher])
    live = DistillationObjective(student, [Teacher(teacher)], method_live, method_live.weights)
    without_cache = collect_diagnostics(live, dev)["alp_attention"]
    assert torch.allclose(torch.tensor(with_cache), torch.tensor(without_cache), atol=1e-6)


def test_teachers_can_run_in_bf16_apart_from_the_student(teacher, data):
    """teacher_mixed_precision: live teacher features come back fp32 and close to the fp32 ones;
    a bf16 cache stores fp32 tensors close to the fp32 cache."""
    student = build_student(teacher, 2)[0]
    method = build_method({"method": "alp"}, student, [teacher])
    objective = DistillationObjective(student, [Teacher(teacher)], method, method.weights).train()
    batch = first_batch(data)
    reference = objective.teacher_features(0, batch)
    objective.frozen_precision = "bf16"
    low = objective.teacher_features(0, batch)
    assert low.logits.dtype == torch.float32 and all(h.dtype == torch.float32 for h in low.hidden_states)
    assert torch.allclose(low.logits, reference.logits, atol=0.1) and not torch.equal(low.logits, reference.logits)
    assert torch.isfinite(objective.training_step(batch)["loss"])
    ds, collator = data
    fp32 = build_teacher_cache(teacher, ds["train"], collator=collator, progress=False)
    bf16 = build_teacher_cache(teacher, ds["train"], collator=collator, progress=False, autocast_dtype=torch.bfloat16)
    assert bf16.logits.dtype == torch.float32 and torch.allclose(bf16.logits, fp32.logits, atol=0.1)
    assert torch.equal(bf16.row_of_idx, fp32.row_of_idx)


# --------------------------------------------------------------------------- staged recipes

TINYBERT_TERMS = ("ce", "pred", "emb", "hidden", "attn", "cos")
INTERMEDIATE = {"emb": 1.0, "hidden": 1.0, "attn": 1.0}
TWO_STAGES = [{"epochs": 1, "weights": INTERMEDIATE}, {"weights": {"pred": 1.0}}]


def test_weight_schedule_lays_stages_over_the_run():
    schedule = WeightSchedule.parse(
        [{"fraction": 0.6, "weights": INTERMEDIATE}, {"weights": {"pred": 1.0}}], TINYBERT_TERMS
    )
    assert schedule.stage_lengths(5) == [3, 2] and schedule.stage_lengths(3) == [2, 1]  # 1.8 → 2
    assert [schedule.stage_at(e, 5) for e in range(5)] == [0, 0, 0, 1, 1]
    # a term absent from a stage has weight 0 there
    assert schedule.weights_at(0, 5) == {"ce": 0.0, "pred": 0.0, "emb": 1.0, "hidden": 1.0, "attn": 1.0, "cos": 0.0}
    assert schedule.weights_at(4, 5) == {"ce": 0.0, "pred": 1.0, "emb": 0.0, "hidden": 0.0, "attn": 0.0, "cos": 0.0}
    three = WeightSchedule.parse(
        [{"epochs": 2, "weights": {"attn": 1}}, {"fraction": 0.25, "weights": {"emb": 1}}, {"weights": {"pred": 1}}],
        TINYBERT_TERMS,
    )
    assert three.stage_lengths(8) == [2, 2, 4]
    assert [three.stage_at(e, 8) for e in range(8)] == [0, 0, 1, 1, 2, 2, 2, 2]


@pytest.mark.parametrize(
    "stages, words",
    [
        (
            [{"epochs": 1, "weights": {"attn": 1}}, {"weights": {"pred": 1, "logits": 1}}],
            r"stages\[1\]\.weights: unknown loss term\(s\) \['logits'\]",
        ),
        (
            [{"epochs": 0, "weights": {"attn": 1}}, {"weights": {"pred": 1}}],
            r"stages\[0\]\.epochs must be a whole number >= 1",
        ),
        (
            [{"epochs": 1.5, "weights": {"attn": 1}}, {"weights": {"pred": 1}}],
            r"stages\[0\]\.epochs must be a whole number",
        ),
        (
            [{"fraction": 1.2, "weights": {"attn": 1}}, {"weights": {"pred": 1}}],
            r"stages\[0\]\.fraction must be a number in \(0, 1\)",
        ),
        (
            [{"weights": {"attn": 1}}, {"weights": {"pred": 1}}],
            r"stages\[0\] needs exactly one of epochs .* or fraction",
        ),
        (
            [{"epochs": 1, "weights": {"attn": 1}}, {"epochs": 2, "weights": {"pred": 1}}],
            r"stages\[1\] is the last stage",
        ),
        (
            [{"epochs": 1, "weights": {"attn": 0}}, {"weights": {"pred": 1}}],
            r"stages\[0\]\.weights: at least one loss weight",
        ),
        (
            [{"epochs": 1, "epoch": 2, "weights": {"attn": 1}}, {"weights": {"pred": 1}}],
            r"stages\[0\]: unknown key\(s\) \['epoch'\]",
        ),
        (
            [
                {"fraction": 0.5, "weights": {"attn": 1}},
                {"fraction": 0.5, "weights": {"emb": 1}},
                {"weights": {"pred": 1}},
            ],
            r"stages: the fractions sum to 1 >= 1",
        ),
        ([], r"stages must be a non-empty list"),
    ],
)
def test_stage_errors_name_the_stage_and_field(stages, words):
    with pytest.raises(ValueError, match=words):
        check_method_config({"method": "tinybert", "stages": stages})


def test_recipe_weights_beside_stages_are_an_error_not_ignored():
    stages = [{"epochs": 1, "weights": INTERMEDIATE}, {"weights": {"pred": 1}}]
    with pytest.raises(ValueError, match=r"stages: the recipe's weights \{'pred': 2\} would not train"):
        check_method_config({"method": "tinybert", "weights": {"pred": 2}, "stages": stages})
    defaults = check_method_config({"method": "tinybert", "stages": stages})  # what the hook writes back is fine
    assert check_method_config({"method": "tinybert", "weights": defaults, "stages": stages}) == defaults


def test_stages_longer_than_the_run_say_so():
    schedule = WeightSchedule.parse([{"epochs": 3, "weights": INTERMEDIATE}, {"weights": {"pred": 1}}], TINYBERT_TERMS)
    with pytest.raises(
        ValueError, match=r"with 3 training epoch\(s\) the stages get \[3, 0\] epochs, so stages\[1\] would never run"
    ):
        schedule.stage_lengths(3)


def staged_tinybert(teacher, stages=TWO_STAGES):
    student, _ = build_student(teacher, 2)
    method = build_method({"method": "tinybert", "temperature": 1.0, "stages": stages}, student, [teacher])
    return DistillationObjective(student, [Teacher(teacher)], method, method.weights)


def gradients_after_step(objective, batch) -> tuple[dict, dict]:
    objective.zero_grad(set_to_none=True)
    terms = objective.training_step(batch)
    terms["loss"].backward()
    grads = {
        name: (p.grad.abs().sum().item() if p.grad is not None else 0.0) for name, p in objective.named_parameters()
    }
    return terms, grads


def test_staged_tinybert_switches_terms_at_the_stage_boundary(teacher, data):
    objective = staged_tinybert(teacher)
    batch = first_batch(data)
    assert objective.set_epoch(0, 2) == {"stage": 1.0}
    terms, grads = gradients_after_step(objective, batch)
    torch.testing.assert_close(terms["loss"], terms["emb"] + terms["hidden"] + terms["attn"])
    assert grads["model.classifier.weight"] == 0.0  # the prediction term has no gradient in stage 1
    assert (
        grads["method.hidden_projection.weight"] > 0
        and grads["model.bert.encoder.layer.0.attention.self.query.weight"] > 0
    )

    assert objective.set_epoch(1, 2) == {"stage": 2.0}
    assert objective.weights["attn"] == objective.weights["hidden"] == objective.weights["emb"] == 0.0
    assert objective.method.wants("pred") and not objective.method.wants("attn")
    terms, grads = gradients_after_step(objective, batch)
    torch.testing.assert_close(terms["loss"], terms["pred"])  # the attention term no longer counts
    assert grads["method.hidden_projection.weight"] == grads["method.embedding_projection.weight"] == 0.0
    assert grads["model.classifier.weight"] > 0


def test_an_unstaged_recipe_ignores_the_epoch(teacher):
    student, _ = build_student(teacher, 2)
    method = build_method({"method": "tinybert"}, student, [teacher])
    objective = DistillationObjective(student, [Teacher(teacher)], method, method.weights)
    before = dict(objective.weights)
    assert method.schedule is None and objective.set_epoch(3, 5) == {} and objective.weights == before


class CrashingStaged(DistillationObjective):
    """A staged distillation objective that records its weights per step and can die like a killed job."""

    def __init__(self, *args, crash_after=None):
        super().__init__(*args)
        self.crash_after, self.seen = crash_after, []

    def training_step(self, batch):
        if self.crash_after is not None and len(self.seen) >= self.crash_after:
            raise KeyboardInterrupt("simulated crash")
        self.seen.append((self.stage, self.weights["attn"], self.weights["pred"]))
        return super().training_step(batch)


def test_a_run_resumed_in_stage_two_trains_with_stage_two(teacher, data, tmp_path):
    ds, collator = data
    config = TrainingConfig(
        epochs=2,
        batch_size=8,
        learning_rate=1e-3,
        warmup_ratio=0.0,
        progress_bar=False,
        cpu=True,
        seed=3,
        checkpoint_dir=str(tmp_path / "ckpt"),
        checkpoint_every_steps=1,
    )
    steps_per_epoch = math.ceil(len(ds["train"]) / 8)

    def objective(crash_after=None):
        staged = staged_tinybert(teacher)
        return CrashingStaged(
            staged.model, [Teacher(teacher)], staged.method, staged.method.weights, crash_after=crash_after
        )

    with pytest.raises(KeyboardInterrupt):  # dies two steps into epoch 2 (stage 2)
        fit(objective(crash_after=steps_per_epoch + 2), ds["train"], None, config, collator=collator)
    logged = []
    resumed = objective()
    result = fit(resumed, ds["train"], None, config, collator=collator, log_fn=lambda m, step: logged.append((m, step)))
    assert result.resumed_from_step == steps_per_epoch + 2
    assert resumed.seen and set(resumed.seen) == {(1, 0.0, 1.0)}  # every resumed step ran stage 2's weights
    assert ({"train/stage": 2.0}, steps_per_epoch + 2) in logged


def test_a_loaded_model_runs_sdpa_and_switches_to_eager_per_forward(tiny_teacher_dir, monkeypatch):
    """A loaded model's forwards run PyTorch's fused attention; a forward that needs the maps runs
    eager inside ``attention_implementation`` (same logits), and the model is back on SDPA after it."""
    import torch

    from bert_kd.core.distill.objective import attention_implementation
    from bert_kd.core.models import load_classifier

    model = load_classifier(str(tiny_teacher_dir), 2).eval()
    fused_calls = []
    fused = torch.nn.functional.scaled_dot_product_attention
    monkeypatch.setattr(
        torch.nn.functional, "scaled_dot_product_attention", lambda *a, **k: fused_calls.append(1) or fused(*a, **k)
    )
    ids = torch.randint(5, 50, (2, 7))
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[0, 5:] = 0
    with torch.no_grad():
        with attention_implementation(model, "eager"):
            eager = model(input_ids=ids, attention_mask=mask).logits
        assert not fused_calls
        sdpa = model(input_ids=ids, attention_mask=mask).logits
    assert len(fused_calls) == model.config.num_hidden_layers
    assert model.config._attn_implementation == "sdpa"
    assert torch.allclose(eager, sdpa, atol=1e-5)


def test_only_the_last_stages_epochs_of_a_staged_recipe_are_selectable(teacher):
    student, _ = build_student(teacher, 2)
    staged = {"method": "tinybert", "stages": [{"epochs": 2, "weights": {"attn": 1.0}}, {"weights": {"pred": 1.0}}]}
    for recipe, selectable in ((staged, [False, False, True, True]), ({"method": "kd"}, [True] * 4)):
        method = build_method(recipe, student, [teacher])
        objective = DistillationObjective(student, [Teacher(teacher)], method, method.weights)
        seen = []
        for epoch in range(4):
            objective.set_epoch(epoch, 4)
            seen.append(objective.selectable)
        assert seen == selectable, recipe
