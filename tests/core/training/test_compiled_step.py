"""A worker compiles once: later runs of the same shapes reuse the compiled step; the update (clip and
AdamW) is compiled with the model; the recorded GPU rates decide ``mixed_precision: auto`` and ``compile: auto``."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from bert_kd.core.training import compiled_step
from bert_kd.core.training.compiled_step import CompileCounts, remember_compiled, resolve_compile
from bert_kd.core.training.precision import numeric_key_material, resolve_precision, trial_precision_material
from bert_kd.core.training.speed_record import (
    AUTO_COMPILE,
    GPU_SPEED_RECORD,
    compile_break_even_steps,
    fastest_precision,
)
from tests.conftest import REPO_ROOT
from tests.core.training.test_precision import cuda_with_bf16, run_tiny_fit


@pytest.mark.slow  # torch.compile on a CPU: 20-50 s on 2 cores, run in the slow tier
def test_a_second_fit_of_the_same_shapes_compiles_nothing_and_its_update_is_compiled(tiny_teacher_dir, monkeypatch):
    """Two fits of fresh models of one class and config in one process (as a sweep worker runs trials):
    the first compiles the model's step and the update, the second reuses both (0 graphs, 0 recompilations);
    the optimizer's own ``step`` never runs under compile (the compiled update replaces it), and the
    weights match an eager fit's."""
    torch._dynamo.reset()
    eager_model, eager = run_tiny_fit(tiny_teacher_dir, {"epochs": 2})
    assert eager.compile is False and eager.compile_counts == {}

    def eager_step(*args, **kwargs):
        raise AssertionError("AdamW.step ran outside the compiled update")

    monkeypatch.setattr(torch.optim.AdamW, "step", eager_step)
    first_model, first = run_tiny_fit(tiny_teacher_dir, {"compile": "aot_eager", "epochs": 2})
    second_model, second = run_tiny_fit(tiny_teacher_dir, {"compile": "aot_eager", "epochs": 2})
    assert first.compile == "aot_eager"
    assert first.compile_counts["compile/graphs"] == 2  # the model's forward and backward; the update
    assert first.compile_counts["compile/recompiles"] == 0
    assert second.compile_counts["compile/graphs"] == 0 and second.compile_counts["compile/recompiles"] == 0
    assert second.compile_counts["compile/seconds"] == 0.0
    for name, value in eager_model.state_dict().items():
        torch.testing.assert_close(first_model.state_dict()[name], value, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(second_model.state_dict()[name], value, atol=1e-5, rtol=1e-5)


def test_recompilations_are_counted_from_dynamo_compile_ids():
    before = CompileCounts.now()
    trigger = SimpleNamespace(name="DYNAMO")
    for compile_id in ("3/0", "3/1", "3/1_1", "7/2"):
        compiled_step._on_compile_start(SimpleNamespace(callback_trigger=trigger, compile_id=compile_id))
    compiled_step._on_compile_start(
        SimpleNamespace(callback_trigger=SimpleNamespace(name="LAZY_BACKWARD"), compile_id="3/4")
    )
    compiled_step._on_compile_start("another signature")  # counted as nothing, never raised into dynamo
    assert CompileCounts.now().since(before).recompiles == 2  # 3/1 and 7/2; a restart (3/1_1) is the same one


def test_the_speed_record_is_the_committed_gpu_check_file():
    report = json.loads((REPO_ROOT / GPU_SPEED_RECORD["source"]).read_text())
    rows = {
        (row["precision"], row["compile"]): row
        for row in report["timings"]
        if row["pair"] == "bert-base 12→4" and row["work"] == GPU_SPEED_RECORD["work"]
    }
    rates = GPU_SPEED_RECORD["examples_per_s"]
    assert rates["eager"] == {"no": rows["tf32", None]["examples_per_s"], "bf16": rows["bf16", None]["examples_per_s"]}
    compiled = rows["bf16", "reduce-overhead+teacher"]
    assert rates["compiled"] == {"bf16": compiled["examples_per_s"]}
    assert GPU_SPEED_RECORD["first_step_s"] == compiled["first_step_s"]
    assert report["device"].startswith(GPU_SPEED_RECORD["device"])


def test_auto_precision_is_the_recorded_fastest_per_compile_mode(monkeypatch):
    assert fastest_precision(compiled=False) == "no" and fastest_precision(compiled=True) == "bf16"
    assert fastest_precision(True, {"examples_per_s": {"eager": {"no": 1.0}}}) == "bf16"  # no rate: bf16
    assert resolve_precision("auto", "cpu", compiled=True) == "no"  # CPUs unchanged
    cuda_with_bf16(monkeypatch)
    assert resolve_precision("auto", "cuda") == "no" and resolve_precision("auto", "cuda", compiled=True) == "bf16"
    assert resolve_precision("bf16", "cuda") == "bf16"


def test_compile_auto_is_off_on_a_cpu_and_on_for_long_gpu_jobs_or_reused_graphs(monkeypatch):
    steps = compile_break_even_steps()
    eager_step, compiled_step_s = 32 / 1671.6902700627145, 32 / 2671.5330868120154
    assert steps == pytest.approx(63.036683138 / (eager_step - compiled_step_s), abs=1)
    assert 2_000 < steps < 10_000
    assert resolve_compile("auto", "cpu", 10**9) is False
    assert (
        resolve_compile("auto", "cuda", steps - 1) is False and resolve_compile("auto", "cuda", steps) == AUTO_COMPILE
    )
    remember_compiled(("Model", "config", 32, "auto", "bf16"))
    assert resolve_compile("auto", "cuda", 1, ("Model", "config", 32, "auto", "bf16")) == AUTO_COMPILE
    assert resolve_compile("aot_eager", "cpu", 1) == "aot_eager" and resolve_compile(False, "cuda", 10**9) is False
    # keys name what runs: auto on a CPU is off (the key made before auto existed); on a GPU it is keyed
    assert numeric_key_material({"mixed_precision": "auto", "compile": "auto"}) == {"mixed_precision": "no"}
    assert trial_precision_material({"compile": "auto"}) == {"mixed_precision": None, "teacher_mixed_precision": None}
    cuda_with_bf16(monkeypatch)
    assert numeric_key_material({"mixed_precision": "auto", "compile": "auto"}) == {
        "mixed_precision": "bf16",
        "compile": "auto",
    }


def test_an_update_that_fails_to_compile_runs_eager_with_a_warning_and_the_same_numbers(caplog):
    def fails_to_compile(*args):
        raise RuntimeError("backend exploded")

    def run(update):
        torch.manual_seed(0)
        layer = torch.nn.Linear(3, 2)
        optimizer = torch.optim.AdamW(layer.parameters(), lr=torch.tensor(0.1))
        layer(torch.ones(4, 3)).sum().backward()
        compiled_step.clip_and_step(optimizer, list(layer.parameters()), 0.5, update=update)
        return layer, optimizer

    guarded = compiled_step._eager_if_it_fails_to_compile(fails_to_compile, "some-backend")
    with caplog.at_level("WARNING"):
        layer, optimizer = run(guarded)
    assert "failed to compile, so it runs eager" in caplog.text and "backend exploded" in caplog.text
    reference, _ = run(None)
    for got, expected in zip(layer.parameters(), reference.parameters()):
        assert torch.equal(got, expected)
    assert set(optimizer.state[layer.weight]) == {"step", "exp_avg", "exp_avg_sq"}  # AdamW's own state layout


def test_the_functional_update_equals_adamw_step_with_clipping():
    """The update is PyTorch's AdamW and clip_grad_norm_, through their functional forms."""

    def run(functional: bool):
        torch.manual_seed(0)
        layer = torch.nn.Linear(3, 2)
        optimizer = torch.optim.AdamW(
            [{"params": [layer.weight], "weight_decay": 0.01}, {"params": [layer.bias], "weight_decay": 0.0}],
            lr=torch.tensor(0.1),
        )
        for _ in range(3):
            (10 * layer(torch.randn(4, 3))).pow(2).sum().backward()
            if functional:
                compiled_step.clip_and_step(optimizer, list(layer.parameters()), 1.0)
            else:
                torch.nn.utils.clip_grad_norm_(layer.parameters(), 1.0)
                optimizer.step()
            optimizer.zero_grad()
        return layer

    for got, expected in zip(run(True).parameters(), run(False).parameters()):
        torch.testing.assert_close(got, expected, atol=1e-7, rtol=1e-6)
