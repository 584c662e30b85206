"""TED (Liang et al., 2023): Stage I filters, Stage II methods (ted, ted_kl, kd, lwd)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from bert_kd.distill import losses
from bert_kd.distill.methods import build_method
from bert_kd.distill.methods.ted import DEFAULT_TEMPERATURE, TED_GRID
from bert_kd.distill.objective import DistillationObjective, Teacher
from bert_kd.distill.outputs import Features
from bert_kd.distill.ted import (
    FilterTrainingObjective,
    TaskFilters,
    copy_filters_for_student,
    evaluate_filters,
    ted_layer_map,
    train_filters,
)
from bert_kd.models import build_student, parameters_fingerprint
from bert_kd.training import Collator, TrainingConfig, fit

# --------------------------------------------------------------------------- helpers


def tiny_bert(layers=4, hidden=8, heads=2, num_labels=2, seed=0):
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=30, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=hidden * 2, max_position_embeddings=32, num_labels=num_labels,
    )
    return BertForSequenceClassification(config).eval()


def snapshot(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def identical(before: dict, module: nn.Module) -> bool:
    after = module.state_dict()
    return before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)


def changed(before: dict, module: nn.Module) -> bool:
    after = module.state_dict()
    return any(not torch.equal(before[k], after[k]) for k in before)


def set_identity(filters: TaskFilters) -> None:
    with torch.no_grad():
        for f in filters.filters:
            nn.init.eye_(f.body.weight)
            f.body.bias.zero_()


FAST = dict(batch_size=8, eval_batch_size=16, learning_rate=1e-2, warmup_ratio=0.0, progress_bar=False, cpu=True,
            log_every_steps=1)


@pytest.fixture(scope="module")
def rte(tiny_teacher_dir, tiny_glue_dir):
    from bert_kd.data.glue import load_glue_task
    from bert_kd.data.tokenize import tokenize_splits
    from bert_kd.models import load_classifier, load_tokenizer

    tokenizer = load_tokenizer(str(tiny_teacher_dir))
    datasets = tokenize_splits(load_glue_task("rte", tiny_glue_dir, allow_download=False), tokenizer, 32)
    teacher = load_classifier(str(tiny_teacher_dir), 2)  # 4 layers, width 32
    return teacher, datasets, Collator({"": tokenizer.pad_token_id})


# --------------------------------------------------------------------------- mapping & filters


def test_ted_layer_map_default_and_errors():
    assert ted_layer_map("distilbert", 12, 6) == [1, 3, 5, 8, 10, 12]
    assert ted_layer_map("distilbert", 4, 2) == [1, 4]
    assert ted_layer_map([2, 4], 4, 2) == [2, 4]
    assert ted_layer_map([[2], [3]], 4, 2) == [2, 3]
    with pytest.raises(ValueError, match="exactly one teacher layer"):
        ted_layer_map("buckets_no", 4, 2)  # last student layer unconnected
    with pytest.raises(ValueError, match="outside 1..4"):
        ted_layer_map([1, 5], 4, 2)


@pytest.mark.parametrize("arch", ["linear", "mlp", "subsequent_layer"])
def test_filter_architectures_shapes(arch):
    teacher = tiny_bert(hidden=8)
    filters = TaskFilters.build(teacher, [1, 4], arch, out_width=12, task="rte")
    assert filters.in_width == 8 and filters.out_width == 12 and filters.num_labels == 2
    hidden = tuple(torch.randn(3, 5, 8) for _ in range(5))
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 0, 0, 0]])
    filtered = filters.filtered(hidden, mask)
    assert [tuple(f.shape) for f in filtered] == [(3, 5, 12)] * 2
    assert [tuple(l.shape) for l in filters(hidden, mask)] == [(3, 2)] * 2


def test_subsequent_layer_copies_next_layer_and_last_itself():
    teacher = tiny_bert(layers=4)
    stack = teacher.bert.encoder.layer
    filters = TaskFilters.build(teacher, [1, 4], "subsequent_layer")
    for k, source in ((0, stack[1]), (1, stack[3])):  # layer 1 -> layer 2, last layer -> itself
        copied = filters.filters[k].layer.state_dict()
        assert all(torch.equal(copied[n], t) for n, t in source.state_dict().items())
        assert filters.filters[k].layer is not source
    assert isinstance(filters.filters[0].body, nn.Identity)  # equal widths: no projection


def test_filter_width_and_depth_errors():
    teacher = tiny_bert(hidden=8)
    with pytest.raises(ValueError, match="outside the model's transformer layers 1..4"):
        TaskFilters.build(teacher, [1, 5])
    filters = TaskFilters.build(teacher, [1, 4])
    wide = tiny_bert(hidden=12, heads=2)
    with pytest.raises(ValueError, match="width 8 .* width 12"):
        filters.check_model(wide)
    with pytest.raises(ValueError, match="expects width 8"):
        filters.filtered(tuple(torch.randn(1, 3, 12) for _ in range(5)))
    shallow = tiny_bert(layers=2)
    with pytest.raises(ValueError, match="outside the teacher's transformer layers 1..2"):
        filters.check_model(shallow, "teacher")
    with pytest.raises(ValueError, match="unknown filter architecture"):
        TaskFilters.build(teacher, [1], "conv")


@pytest.mark.parametrize("arch", ["linear", "subsequent_layer"])
def test_save_load_roundtrip_and_provenance(tmp_path, arch):
    teacher = tiny_bert()
    filters = TaskFilters.build(teacher, [1, 4], arch, task="RTE")
    filters.info["note"] = "x"
    path = filters.save(tmp_path / "filters")
    assert not (tmp_path / "filters.partial").exists()
    loaded = TaskFilters.load(path)
    assert loaded.config == filters.config
    assert loaded.info == {"note": "x"}
    assert identical(snapshot(filters), loaded)
    hidden = tuple(torch.randn(2, 4, 8) for _ in range(5))
    mask = torch.ones(2, 4)
    filters.eval(), loaded.eval()
    for a, b in zip(filters(hidden, mask), loaded(hidden, mask)):
        assert torch.allclose(a, b)

    fp = parameters_fingerprint(teacher)
    assert loaded.task == "rte" and loaded.fingerprint == fp
    assert loaded.check_compatible("rte", fp) == []
    with pytest.raises(ValueError, match="trained for task 'rte', not 'sst2'"):
        loaded.check_compatible("sst-2", fp)
    other = tiny_bert(seed=1)
    with pytest.raises(ValueError, match="fingerprint"):
        loaded.check_compatible("rte", parameters_fingerprint(other))
    problems = loaded.check_compatible("sst2", parameters_fingerprint(other), allow_mismatch=True)
    assert len(problems) == 2
    with pytest.raises(FileNotFoundError):
        TaskFilters.load(tmp_path / "nowhere")


def test_copy_filters_for_student():
    teacher = tiny_bert(layers=4)
    filters = TaskFilters.build(teacher, [1, 4], task="rte")
    student, kept = build_student(teacher, 2, "distilbert")
    assert kept == [1, 4]
    copied = copy_filters_for_student(filters, student=student)
    assert copied.layers == [1, 2] and copied.copied_from == "teacher" and copied.role == "student"
    assert copied.fingerprint == filters.fingerprint and copied.task == "rte"
    for k in range(2):
        assert torch.equal(copied.filters[k].body.weight, filters.filters[k].body.weight)
        assert copied.filters[k].body.weight is not filters.filters[k].body.weight
    swapped = copy_filters_for_student(filters, [4, 1])
    assert torch.equal(swapped.filters[0].body.weight, filters.filters[1].body.weight)
    with pytest.raises(ValueError, match="teacher filters at layer"):
        copy_filters_for_student(filters, [2, 4])
    with pytest.raises(ValueError, match="student width 12 != teacher width 8"):
        copy_filters_for_student(filters, student=tiny_bert(layers=2, hidden=12))


# --------------------------------------------------------------------------- Stage I


def test_stage1_trains_filters_model_bit_identical(rte):
    teacher, data, collator = rte
    before = snapshot(teacher)
    flags = [p.requires_grad for p in teacher.parameters()]
    layers = ted_layer_map("distilbert", 4, 2)
    config = TrainingConfig(epochs=2, select_metric="accuracy", **FAST)
    torch.manual_seed(config.seed)  # same seed as train_filters -> same initial filters
    untrained = TaskFilters.build(teacher, layers, task="rte")
    filters, metrics = train_filters(teacher, data["train"], data["validation"], layers, "linear", "rte", config,
                                     collator)
    assert identical(before, teacher)
    assert [p.requires_grad for p in teacher.parameters()] == flags
    assert changed(snapshot(untrained), filters)
    assert set(metrics) == {1, 4} and all("accuracy" in m for m in metrics.values())
    assert filters.info["per_layer_metrics"]["4"] == metrics[4]
    assert filters.fingerprint == parameters_fingerprint(teacher) and filters.task == "rte"
    assert evaluate_filters(teacher, filters, data["validation"], collator, "rte") == metrics


def test_stage1_student_route_keeps_student_trainable(rte):
    teacher, data, collator = rte
    student, _ = build_student(teacher, 2, "distilbert")
    before = snapshot(student)
    config = TrainingConfig(max_steps=3, **FAST)
    filters, metrics = train_filters(student, data["train"], None, [1, 2], "mlp", "rte", config, collator,
                                     out_width=32, role="student")
    assert metrics == {} and filters.role == "student" and filters.out_width == 32
    assert identical(before, student)
    assert all(p.requires_grad for p in student.parameters())


def test_filter_objective_predicts_one_or_all_heads(rte):
    teacher, data, collator = rte
    frozen = copy.deepcopy(teacher)
    filters = TaskFilters.build(frozen, [2, 3], task="rte")
    batch = collator([data["train"][i] for i in range(4)])
    assert FilterTrainingObjective(frozen, filters).predict(batch).shape == (4, 4)
    objective = FilterTrainingObjective(frozen, filters, predict_position=1)
    assert objective.predict(batch).shape == (4, 2)
    step = objective.training_step(batch)
    assert set(step) == {"loss", "ce_L2", "ce_L3"}
    assert torch.allclose(step["loss"], step["ce_L2"] + step["ce_L3"])
    assert all(not n.startswith("encoder.") for n in objective.trainable_state())
    with pytest.raises(ValueError):
        FilterTrainingObjective(frozen, filters, predict_position=2)


# --------------------------------------------------------------------------- Stage II terms (hand-made tensors)


def handmade_features(seed, width=8, layers=4, batch=2, length=3):
    g = torch.Generator().manual_seed(seed)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])[:batch, :length]
    hidden = tuple(torch.randn(batch, length, width, generator=g) for _ in range(layers + 1))
    logits = torch.randn(batch, 2, generator=g)
    return Features(logits=logits, attention_mask=mask, hidden_states=hidden)


def manual_masked_mse(a, b, mask):
    total, count = 0.0, 0
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            if mask[i, j]:
                total += float(((a[i, j] - b[i, j]) ** 2).mean())
                count += 1
    return total / count


def manual_kl(s_logits, t_logits, T):
    s_logits, t_logits = s_logits.detach(), t_logits.detach()
    p_t = torch.softmax(t_logits / T, -1)
    return float((p_t * (p_t.log() - torch.log_softmax(s_logits / T, -1))).sum(-1).mean())


def test_ted_term_on_handmade_tensors():
    teacher, student = tiny_bert(layers=4), tiny_bert(layers=2, seed=3)
    t_filters = TaskFilters.build(teacher, [1, 4], task="rte")
    set_identity(t_filters)
    with torch.no_grad():
        t_filters.filters[1].body.weight.mul_(2.0)  # g_t^2(H) = 2H
    method = build_method({"method": "ted", "teacher_filters": t_filters, "task": "rte"}, student, [teacher])
    assert method.weights == {"ce": 1.0, "pred": 1.0, "ted": 100.0}
    assert method.temperature == DEFAULT_TEMPERATURE == 2.0
    assert method.mapping == [1, 4]
    s_feat = handmade_features(1, layers=2)
    t_feat = handmade_features(2, layers=4)
    t_feat.attention_mask = s_feat.attention_mask
    labels = torch.tensor([0, 1])
    terms = method.terms(s_feat, {0: t_feat}, {"labels": labels})
    # student filters are copies of the teacher's: g_s^1 = I, g_s^2 = 2I
    mask = s_feat.attention_mask
    expected = manual_masked_mse(t_feat.hidden_states[1], s_feat.hidden_states[1], mask) + manual_masked_mse(
        2 * t_feat.hidden_states[4], 2 * s_feat.hidden_states[2], mask
    )
    assert terms["ted"].item() == pytest.approx(expected, rel=1e-5)
    assert terms["pred"].item() == pytest.approx(manual_kl(s_feat.logits, t_feat.logits, 2.0), rel=1e-5)
    assert terms["ce"].item() == pytest.approx(nn.functional.cross_entropy(s_feat.logits, labels).item())
    # padding does not matter
    s2 = copy.deepcopy(s_feat)
    s2.hidden_states = tuple(h.clone() for h in s2.hidden_states)
    s2.hidden_states[2][1, 2] += 100.0
    assert method.terms(s2, {0: t_feat}, {"labels": labels})["ted"].item() == pytest.approx(expected, rel=1e-5)
    # gradient reaches the student filters, never the teacher filters
    terms["ted"].backward()
    assert method.student_filters.filters[0].body.weight.grad is not None
    assert all(p.grad is None and not p.requires_grad for p in method.teacher_filters.parameters())
    assert all(not p.requires_grad for h in method.student_filters.heads() for p in h.parameters())


def test_ted_kl_term_on_handmade_tensors():
    teacher, student = tiny_bert(layers=4), tiny_bert(layers=2, seed=3)
    t_filters = TaskFilters.build(teacher, [1, 4], task="rte")
    set_identity(t_filters)
    method = build_method({"method": "ted_kl", "teacher_filters": t_filters, "temperature": 1.5}, student, [teacher])
    assert method.weights["ted"] == 1.0
    s_feat, t_feat = handmade_features(5, layers=2), handmade_features(6, layers=4)
    terms = method.terms(s_feat, {0: t_feat}, {"labels": torch.tensor([1, 0])})
    expected = 0.0
    for k, (s_layer, t_layer) in enumerate(((1, 1), (2, 4))):
        head = t_filters.filters[k].head  # student heads are copies of the teacher heads
        t_logits = head(t_feat.hidden_states[t_layer][:, 0])
        s_logits = head(s_feat.hidden_states[s_layer][:, 0])
        expected += manual_kl(s_logits, t_logits, 1.5)
    assert terms["ted"].item() == pytest.approx(expected, rel=1e-5)
    assert all(p.requires_grad for h in method.student_filters.heads() for p in h.parameters())


def test_kd_and_lwd_terms():
    teacher, student = tiny_bert(layers=4, hidden=8), tiny_bert(layers=2, hidden=6, heads=2, seed=3)
    s_feat, t_feat = handmade_features(7, width=6, layers=2), handmade_features(8, width=8, layers=4)
    labels = {"labels": torch.tensor([0, 1])}

    kd = build_method({"method": "kd"}, student, [teacher])
    assert kd.student_needs == {} and kd.weights == {"ce": 1.0, "pred": 1.0}
    terms = kd.terms(s_feat, {0: t_feat}, labels)
    assert set(terms) == {"ce", "pred"}
    assert terms["pred"].item() == pytest.approx(losses.kl_div_loss(s_feat.logits, t_feat.logits, 2.0).item())

    lwd = build_method({"method": "lwd", "weights": {"layer": 10}}, student, [teacher])
    assert lwd.mapping == [1, 4] and lwd.weights == {"ce": 1.0, "pred": 1.0, "layer": 10.0}
    assert [tuple(p.weight.shape) for p in lwd.projections] == [(8, 6), (8, 6)]
    terms = lwd.terms(s_feat, {0: t_feat}, labels)
    mask = s_feat.attention_mask
    expected = sum(
        manual_masked_mse(t_feat.hidden_states[t], lwd.projections[k](s_feat.hidden_states[k + 1]).detach(), mask)
        for k, t in enumerate([1, 4])
    )
    assert terms["layer"].item() == pytest.approx(expected, rel=1e-5)

    reg = build_method({"method": "kd"}, student, [teacher], regression=True)
    s1, t1 = torch.randn(2, 1), torch.randn(2, 1)
    f_s = Features(logits=s1, attention_mask=mask)
    f_t = Features(logits=t1, attention_mask=mask)
    assert reg.terms(f_s, {0: f_t}, {"labels": torch.tensor([0.5, 1.0])})["pred"].item() == pytest.approx(
        nn.functional.mse_loss(s1, t1).item()
    )


def test_method_option_errors():
    teacher, student = tiny_bert(layers=4), tiny_bert(layers=2, seed=3)
    t_filters = TaskFilters.build(teacher, [1, 4], task="rte")
    with pytest.raises(ValueError, match="needs option teacher_filters"):
        build_method({"method": "ted"}, student, [teacher])
    with pytest.raises(ValueError, match="does not match the layers"):
        build_method({"method": "ted", "teacher_filters": t_filters, "mapping": [2, 4]}, student, [teacher])
    with pytest.raises(ValueError, match="outside 1..4"):
        build_method({"method": "lwd", "mapping": [1, 7]}, student, [teacher])
    with pytest.raises(ValueError, match="trained for task 'rte', not 'sst2'"):
        build_method({"method": "ted", "teacher_filters": t_filters, "task": "sst2"}, student, [teacher])
    with pytest.raises(ValueError, match="fingerprint"):
        build_method({"method": "ted", "teacher_filters": t_filters}, student, [tiny_bert(layers=4, seed=9)])
    ok = build_method({"method": "ted", "teacher_filters": t_filters, "task": "sst2", "allow_filter_mismatch": True},
                      student, [teacher])
    assert ok.mapping == [1, 4]
    narrow = tiny_bert(layers=2, hidden=4, heads=2)
    with pytest.raises(ValueError, match="student width 4 != teacher width 8"):
        build_method({"method": "ted", "teacher_filters": t_filters}, narrow, [teacher])
    random_route = build_method({"method": "ted", "teacher_filters": t_filters, "student_filters": "random"},
                                narrow, [teacher])
    assert random_route.student_filters.in_width == 4 and random_route.student_filters.out_width == 8
    with pytest.raises(ValueError, match="unknown option"):
        build_method({"method": "ted", "teacher_filters": t_filters, "alpha": 1}, student, [teacher])
    with pytest.raises(ValueError, match="exactly one teacher"):
        build_method({"method": "ted", "teacher_filters": t_filters}, student, [teacher, teacher])
    assert TED_GRID["alpha1"] == (1.0, 2.5, 5.0, 10.0) and 100.0 in TED_GRID["alpha2"]


def test_teacher_filters_stay_in_eval_mode():
    teacher, student = tiny_bert(layers=4), tiny_bert(layers=2, seed=3)
    t_filters = TaskFilters.build(teacher, [1, 4], "subsequent_layer", task="rte")
    method = build_method({"method": "ted", "teacher_filters": t_filters}, student, [teacher])
    objective = DistillationObjective(student, [Teacher(teacher)], method, method.weights)
    objective.train()
    assert not method.teacher_filters.training and not any(m.training for m in method.teacher_filters.modules())
    assert method.student_filters.training and not objective.teacher_0.training
    assert method.teacher_filters is not t_filters  # a frozen copy; the caller's object is untouched


# --------------------------------------------------------------------------- Stage II through fit


@pytest.mark.parametrize("name", ["ted", "ted_kl"])
def test_stage2_through_fit(rte, tmp_path, name):
    from bert_kd.metrics import glue_metrics

    teacher, data, collator = rte
    teacher = copy.deepcopy(teacher)
    layers = ted_layer_map("distilbert", 4, 2)
    t_filters, _ = train_filters(teacher, data["train"], None, layers, "linear", "rte",
                                 TrainingConfig(max_steps=3, **FAST), collator)
    t_filters.save(tmp_path / "filters")
    student, _ = build_student(teacher, 2, "distilbert")
    method = build_method({"method": name, "teacher_filters": str(tmp_path / "filters"), "task": "rte"},
                          student, [teacher])
    objective = DistillationObjective(student, [Teacher(teacher)], method, method.weights)
    teacher_before, t_filters_before = snapshot(teacher), snapshot(method.teacher_filters)
    student_before, s_filters_before = snapshot(student), snapshot(method.student_filters)
    logged = []
    result = fit(objective, data["train"], data["validation"], TrainingConfig(max_steps=4, **FAST),
                 collator=collator, evaluate_fn=lambda p, y: glue_metrics("rte", p, y),
                 log_fn=lambda m, s: logged.append(m))
    assert result.global_step == 4 and "accuracy" in result.best_metrics
    assert {"train/ce", "train/pred", "train/ted"} <= set(logged[0])
    assert identical(teacher_before, teacher)
    assert identical(t_filters_before, method.teacher_filters)
    assert changed(student_before, student)
    assert changed(s_filters_before, method.student_filters)
    heads_before = {k: v for k, v in s_filters_before.items() if ".head." in k}
    heads_changed = any(not torch.equal(v, method.student_filters.state_dict()[k]) for k, v in heads_before.items())
    assert heads_changed == (name == "ted_kl")  # ted drops the heads


@pytest.mark.parametrize("name", ["kd", "lwd"])
def test_baselines_through_fit(rte, name):
    teacher, data, collator = rte
    teacher = copy.deepcopy(teacher)
    student, _ = build_student(teacher, 2, "distilbert")
    method = build_method({"method": name}, student, [teacher])
    objective = DistillationObjective(student, [Teacher(teacher)], method, method.weights)
    teacher_before, student_before = snapshot(teacher), snapshot(student)
    aux_before = snapshot(method)
    fit(objective, data["train"], None, TrainingConfig(max_steps=3, **FAST), collator=collator)
    assert identical(teacher_before, teacher)
    assert changed(student_before, student)
    if name == "lwd":
        assert changed(aux_before, method)
