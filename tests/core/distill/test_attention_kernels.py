"""Which attention kernel each forward runs: PyTorch's fused SDPA unless the forward feeds a term
that reads attention maps (then eager), and both kernels give the same outputs to float rounding."""

from __future__ import annotations

import pytest
import torch

from bert_kd.core.data.glue import load_glue_task
from bert_kd.core.data.tokenize import tokenize_splits
from bert_kd.core.distill.methods import build_method
from bert_kd.core.distill.objective import DistillationObjective, Teacher
from bert_kd.core.models import (
    attention_implementation,
    build_student,
    load_classifier,
    load_tokenizer,
    prefer_fused_attention,
    supports_fused_attention,
)
from bert_kd.core.training import Collator, make_loader
from tests.core.distill.tiny_encoders import tiny_encoder


def tiny_model(family: str):
    model = tiny_encoder(family)
    return model if family == "xlnet" else prefer_fused_attention(model)


def padded_batch(side: str) -> dict:
    generator = torch.Generator().manual_seed(2)
    ids = torch.randint(5, 40, (3, 7), generator=generator)
    mask = torch.ones(3, 7, dtype=torch.long)
    lengths = [7, 4, 2]
    for row, length in enumerate(lengths):
        if side == "left":
            mask[row, : 7 - length] = 0
        else:
            mask[row, length:] = 0
    return {"input_ids": ids * mask, "attention_mask": mask}


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("family", ["bert", "xlnet"])
def test_sdpa_and_eager_agree_on_logits_and_hidden_states(family, side):
    model = tiny_model(family)
    batch = padded_batch(side)
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        with attention_implementation(model, "eager"):
            eager = model(**batch, output_hidden_states=True)
        with attention_implementation(model, "sdpa"):
            fused = model(**batch, output_hidden_states=True)
    torch.testing.assert_close(fused.logits, eager.logits, atol=1e-5, rtol=1e-5)
    for ours, theirs in zip(fused.hidden_states, eager.hidden_states):
        torch.testing.assert_close(ours[real], theirs[real], atol=1e-5, rtol=1e-5)


def test_bert_has_the_fused_kernel_and_xlnet_keeps_its_own():
    bert, xlnet = tiny_model("bert"), tiny_model("xlnet")
    assert supports_fused_attention(bert) and bert.config._attn_implementation == "sdpa"
    assert not supports_fused_attention(xlnet)
    prefer_fused_attention(xlnet)
    assert xlnet.config._attn_implementation == "eager"  # relative attention: eager only


def test_a_bad_kernel_name_is_refused():
    model = tiny_model("bert")
    with pytest.raises(ValueError, match="'sdpa' or 'eager'"), attention_implementation(model, "flash"):
        pass


@pytest.fixture(scope="module")
def rte(tiny_teacher_dir, tiny_glue_dir):
    tokenizer = load_tokenizer(str(tiny_teacher_dir))
    datasets = tokenize_splits(load_glue_task("rte", tiny_glue_dir, allow_download=False), tokenizer, 32)
    batch = next(iter(make_loader(datasets["train"], 8, Collator({"": tokenizer.pad_token_id}), shuffle=False)))
    return load_classifier(str(tiny_teacher_dir), 2), batch


def fused_calls_per_model(objective, batch, monkeypatch) -> dict[str, int]:
    """Calls of PyTorch's SDPA made while the student's and the teacher's forwards run."""
    calls = {"student": 0, "teacher": 0}
    current = ["student"]
    fused = torch.nn.functional.scaled_dot_product_attention

    def counting(*args, **kwargs):
        calls[current[0]] += 1
        return fused(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", counting)
    objective.student_features(batch)
    current[0] = "teacher"
    objective.teacher_features(0, batch)
    return calls


@pytest.mark.parametrize(
    "recipe,kernel",
    [
        ({"method": "alp"}, "sdpa"),
        ({"method": "pkd"}, "sdpa"),
        ({"method": "kd"}, "sdpa"),
        ({"method": "tinybert"}, "eager"),
    ],
)
def test_a_recipe_that_reads_attention_maps_runs_eager_the_others_sdpa(rte, recipe, kernel, monkeypatch):
    teacher, batch = rte
    student, _ = build_student(teacher, 2)
    method = build_method(recipe, student, [teacher])
    assert method.student_attention == method.teacher_attention == kernel
    objective = DistillationObjective(student, [Teacher(teacher)], method, method.weights).train()
    calls = fused_calls_per_model(objective, batch, monkeypatch)
    expected = {"sdpa": (2, 4), "eager": (0, 0)}[kernel]  # one call per layer: student 2, teacher 4
    assert (calls["student"], calls["teacher"]) == expected
    # evaluation forwards read no attention map: SDPA, whatever the recipe
    assert student.config._attn_implementation == teacher.config._attn_implementation == "sdpa"
