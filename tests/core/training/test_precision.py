"""The numeric path resolved per device (mixed precision, TF32, compile) and what of it enters keys."""

from __future__ import annotations

import pytest
import torch

from bert_kd.core.training import SupervisedObjective, TrainingConfig, fit
from bert_kd.core.training.precision import (
    PRECISIONS,
    numeric_key_material,
    resolve_precision,
    trial_precision_material,
    uses_tf32,
)
from bert_kd.experiment import jobs


def cuda_with_bf16(monkeypatch, bf16: bool = True) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16)


def test_auto_is_the_recorded_fastest_on_a_cuda_device_with_bf16_and_fp32_elsewhere(monkeypatch):
    """On the recorded GPU an eager step ran fastest in fp32 with TF32, a compiled one in bf16."""
    assert resolve_precision("auto", "cpu") == "no"
    for explicit in ("no", "bf16", "fp16"):
        assert resolve_precision(explicit, "cpu") == explicit
    cuda_with_bf16(monkeypatch)
    assert resolve_precision("auto", "cuda") == "no" and resolve_precision("auto", torch.device("cuda", 0)) == "no"
    assert resolve_precision("auto", "cuda", compiled=True) == "bf16"
    assert resolve_precision("auto", "cpu") == "no"
    cuda_with_bf16(monkeypatch, bf16=False)
    assert resolve_precision("auto", "cuda") == "no"
    with pytest.raises(ValueError, match="mixed_precision must be one of"):
        resolve_precision("int8", "cpu")


def test_tf32_runs_only_for_fp32_work_on_cuda():
    assert uses_tf32(True, "no", "cuda")
    assert (
        not uses_tf32(True, "bf16", "cuda") and not uses_tf32(True, "no", "cpu") and not uses_tf32(False, "no", "cuda")
    )


def test_cpu_keys_of_the_new_defaults_equal_the_old_fp32_keys():
    """``auto``, ``tf32: true`` and ``compile: false`` on a CPU give the keys ``mixed_precision: no`` gave."""
    new = TrainingConfig.from_dict({})
    old = {k: v for k, v in vars(new).items() if k not in ("tf32", "compile")} | {"mixed_precision": "no"}
    assert new.mixed_precision == "auto" and new.tf32 and not new.compile
    assert jobs.training_spec(vars(new)) == jobs.training_spec(old)
    assert trial_precision_material({"mixed_precision": "auto", "teacher_mixed_precision": "same", "tf32": True}) == {
        "mixed_precision": "no",
        "teacher_mixed_precision": "same",
    }
    assert trial_precision_material({}) == {"mixed_precision": None, "teacher_mixed_precision": None}


def test_a_teacher_at_the_students_precision_keeps_the_students_key():
    """``runtime.teacher_mixed_precision=auto`` on a CPU resolves to fp32, the student's own precision: the same
    numbers as ``same``, so the same key (it retrained the student under a new key before)."""
    settings = vars(TrainingConfig.from_dict({}))
    same = jobs.training_spec(settings)
    for teacher in ("auto", "no"):
        assert jobs.training_spec({**settings, "teacher_mixed_precision": teacher}) == same
    assert jobs.training_spec({**settings, "teacher_mixed_precision": "bf16"}) != same  # another precision: keyed
    for teacher in ("auto", "no"):
        material = trial_precision_material({"mixed_precision": "auto", "teacher_mixed_precision": teacher})
        assert material == {"mixed_precision": "no", "teacher_mixed_precision": "same"}


def test_the_gpu_numeric_path_enters_keys(monkeypatch):
    cuda_with_bf16(monkeypatch)
    settings = vars(TrainingConfig.from_dict({}))
    assert numeric_key_material(settings) == {"mixed_precision": "no", "tf32": True}  # eager: TF32 recorded fastest
    assert numeric_key_material({**settings, "compile": "reduce-overhead"})["mixed_precision"] == "bf16"
    fp32 = vars(TrainingConfig.from_dict({"mixed_precision": "no"}))
    assert numeric_key_material(fp32) == {"mixed_precision": "no", "tf32": True}
    assert numeric_key_material({**fp32, "tf32": False}) == {"mixed_precision": "no"}
    assert numeric_key_material({**fp32, "cpu": True}) == {"mixed_precision": "no"}  # runtime.cpu: no TF32
    assert jobs.training_spec({**settings, "compile": True})["compile"] == "inductor"
    assert jobs.training_spec({**settings, "compile": "aot_eager"})["compile"] == "aot_eager"
    assert trial_precision_material({"mixed_precision": "auto"})["mixed_precision"] == "no"
    assert trial_precision_material({"mixed_precision": "auto", "compile": True})["mixed_precision"] == "bf16"


def test_a_cpu_fit_leaves_the_tf32_flags_alone(tiny_teacher_dir, monkeypatch):
    """Setting PyTorch's TF32 flags, even to off, changed CPU float rounding of a recorded fit."""
    calls = []
    monkeypatch.setattr("bert_kd.core.training.loop.set_tf32", calls.append)
    run_tiny_fit(tiny_teacher_dir, {})
    assert calls == []


def run_tiny_fit(tiny_teacher_dir, settings: dict, compiled_steps: list | None = None, lengths: list | None = None):
    """A tiny BERT fitted on 16 random rows of 4–11 tokens at batch 8: (model, FitResult). Each step appends
    to ``compiled_steps`` whether its model ran compiled, to ``lengths`` its batch length."""
    from transformers import AutoModelForSequenceClassification

    from bert_kd.core.models import prefer_fused_attention

    torch.manual_seed(0)
    model = prefer_fused_attention(
        AutoModelForSequenceClassification.from_pretrained(str(tiny_teacher_dir), attn_implementation="eager")
    )
    generator = torch.Generator().manual_seed(0)
    rows = [
        {"input_ids": torch.randint(5, 50, (int(n),), generator=generator).tolist(), "labels": int(n) % 2, "idx": i}
        for i, n in enumerate(torch.randint(4, 12, (16,), generator=generator))
    ]
    config = TrainingConfig.from_dict(
        {"epochs": 1, "batch_size": 8, "progress_bar": False, "cpu": True, "group_by_length": False, **settings}
    )

    class Spy(SupervisedObjective):
        def training_step(self, batch):
            if compiled_steps is not None:
                compiled_steps.append(self.model._compiled_call_impl is not None)
            if lengths is not None:
                lengths.append(int(batch["input_ids"].shape[1]))
            return super().training_step(batch)

    return model, fit(Spy(model), rows, None, config)


@pytest.mark.slow  # torch.compile on a CPU: 20-50 s on 2 cores, run in the slow tier
def test_compile_is_opt_in_and_trains_a_tiny_model_on_cpu(tiny_teacher_dir):
    """torch.compile through TorchDynamo with the ``aot_eager`` backend (inductor's C++ build of a
    training graph takes minutes on a CPU; the same path, another code generator)."""
    plain_model, plain = run_tiny_fit(tiny_teacher_dir, {})
    compiled = []
    compiled_model, _ = run_tiny_fit(tiny_teacher_dir, {"compile": "aot_eager"}, compiled_steps=compiled)
    assert not hasattr(plain_model.forward, "_torchdynamo_orig_callable")
    assert compiled == [True, True]  # each step ran the model compiled (nn.Module.compile, in place) ...
    assert compiled_model._compiled_call_impl is None  # ... and the plain forward is back after the run
    assert set(compiled_model.state_dict()) == set(plain_model.state_dict())  # names without _orig_mod
    for name, value in plain_model.state_dict().items():
        torch.testing.assert_close(compiled_model.state_dict()[name], value, atol=1e-4, rtol=1e-4)
    assert PRECISIONS == ("auto", "no", "bf16", "fp16")


def test_an_inductor_mode_compiles_with_that_mode_and_a_backend_with_that_backend(monkeypatch):
    from bert_kd.core.training.precision import INDUCTOR_MODES, compile_backend, compile_model, uses_cuda_graphs

    calls = []
    monkeypatch.setattr(torch.nn.Module, "compile", lambda self, **kwargs: calls.append(kwargs))
    for setting in ("reduce-overhead", True, "cudagraphs"):
        compile_model(torch.nn.Linear(2, 2), setting)
    assert calls == [
        {"dynamic": True, "mode": "reduce-overhead"},
        {"dynamic": True, "backend": "inductor"},
        {"dynamic": True, "backend": "cudagraphs"},
    ]
    assert "reduce-overhead" in INDUCTOR_MODES and compile_backend("reduce-overhead") == "reduce-overhead"
    assert uses_cuda_graphs("reduce-overhead") and uses_cuda_graphs("cudagraphs")
    assert (
        not uses_cuda_graphs(True)
        and not uses_cuda_graphs(False)
        and not uses_cuda_graphs("max-autotune-no-cudagraphs")
    )


@pytest.mark.slow  # torch.compile on a CPU: 20-50 s on 2 cores, run in the slow tier
def test_a_cuda_graph_compile_marks_where_every_training_step_begins(tiny_teacher_dir, monkeypatch):
    """Replayed CUDA graphs overwrite their outputs: the loop tells PyTorch where each step begins."""
    marks = []
    monkeypatch.setattr("bert_kd.core.training.precision.compile_model", lambda model, setting: None)
    monkeypatch.setattr(torch.compiler, "cudagraph_mark_step_begin", lambda: marks.append(1))
    run_tiny_fit(tiny_teacher_dir, {})
    assert marks == []
    run_tiny_fit(tiny_teacher_dir, {"compile": "reduce-overhead"})
    assert len(marks) == 2  # 16 rows at batch 8: two steps


@pytest.mark.slow  # a TorchDynamo capture on the CPU, ~20 s
def test_a_cuda_graph_compile_pads_every_batch_to_a_multiple_of_32_tokens(tiny_teacher_dir, monkeypatch):
    """One CUDA graph is recorded per batch shape: batches padded to their longest row gave a short GPU job
    one recording per length (docs/gpu.md). Other settings pad to the longest row as before."""
    from bert_kd.core.training.precision import CUDA_GRAPH_PAD_MULTIPLE

    monkeypatch.setattr("bert_kd.core.training.precision.compile_model", lambda model, setting: None)
    for setting, expected in (("reduce-overhead", {CUDA_GRAPH_PAD_MULTIPLE}), ("cudagraphs", {32}), (False, None)):
        lengths = []
        run_tiny_fit(tiny_teacher_dir, {"compile": setting}, lengths=lengths)
        if expected is None:
            assert len(lengths) == 2 and max(lengths) <= 11  # the longest row: 4–11 tokens
        else:
            assert set(lengths) == expected, setting


@pytest.mark.slow  # torch.compile on a CPU: 20-50 s on 2 cores, run in the slow tier
def test_a_compiled_distillation_compiles_its_live_teacher_for_the_run_only(tiny_teacher_dir, monkeypatch):
    """The teacher's forward is half the launches of a live-ALP step; it serves later jobs uncompiled."""
    from transformers import AutoModelForSequenceClassification

    from bert_kd.core.distill.methods import build_method
    from bert_kd.core.distill.objective import DistillationObjective, Teacher
    from bert_kd.core.models import build_student, prefer_fused_attention
    from bert_kd.core.training import precision

    compiled = []
    real = precision.compile_model
    monkeypatch.setattr(
        precision, "compile_model", lambda module, setting: compiled.append(module) or real(module, setting)
    )
    torch.manual_seed(0)
    teacher = prefer_fused_attention(
        AutoModelForSequenceClassification.from_pretrained(str(tiny_teacher_dir), attn_implementation="eager")
    ).eval()
    student = build_student(teacher, 2)[0]
    method = build_method({"method": "alp", "mapping": "all"}, student, [teacher])
    objective = DistillationObjective(student, [Teacher(teacher)], method, method.weights)
    rows = [
        {"input_ids": list(range(5, 5 + n)), "attention_mask": [1] * n, "labels": n % 2, "idx": i}
        for i, n in enumerate(range(4, 12))
    ]
    config = TrainingConfig.from_dict(
        {
            "epochs": 1,
            "batch_size": 4,
            "progress_bar": False,
            "cpu": True,
            "group_by_length": False,
            "compile": "aot_eager",
        }
    )
    fit(objective, rows, None, config)
    assert compiled == [student, teacher]
    assert student._compiled_call_impl is None and teacher._compiled_call_impl is None  # restored after the run
