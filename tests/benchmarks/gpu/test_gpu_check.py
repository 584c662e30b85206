"""benchmarks/gpu/gpu_check.py: the tiny CPU mode end to end, and the GPU-hours arithmetic on fake timings."""

from __future__ import annotations

import importlib.util
import json
import sys
from types import SimpleNamespace

import pytest

from tests.conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "benchmarks" / "gpu" / "gpu_check.py"


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


@pytest.mark.slow
def test_tiny_mode_times_every_kind_of_step_and_estimates_every_table(gpu_check, tmp_path, capsys):
    out = tmp_path / "gpu_check.json"
    gpu_check.main(["--tiny", "--json", str(out)])
    report = json.loads(out.read_text())
    printed = capsys.readouterr().out
    assert "| share of dense peak |" in printed
    rows = [line for line in printed.splitlines() if line.startswith("| tiny 4→2 |")]
    assert rows and all(line.split("|")[8].strip() == "unknown" for line in rows)  # a CPU has no peak in the table
    assert all(t["share_of_peak"] is None and t["tflops"] > 0 for t in report["timings"])
    assert all(t["compile"] is None and t["pipelined_examples_per_s"] > 0 for t in report["timings"])
    assert report["compiled_estimates"] == {}  # no --compile: eager rows only
    works = {(t["work"], t["precision"]) for t in report["timings"]}
    assert {w for w, _ in works} == {"teacher_finetune", "live_distill", "cached_distill"}
    assert all(t["examples_per_s"] > 0 for t in report["timings"])
    agreement = report["fused_adamw_agreement"]
    assert 0 <= agreement["max_abs_difference"] < 1e-4 < agreement["max_abs_parameter"]
    assert {"alp_kd_table1", "ted_table4", "multi_teacher_tables", "cpu_protocol"} <= set(report["estimates"])
    assert report["estimates"]["cpu_protocol"]["trials"] == 81
    assert all(e["total_hours"] > 0 for e in report["estimates"].values())
    sweep = report["sweep_throughput"]  # 1 and 2 concurrent worker processes, each timed after a common start
    assert [row["workers"] for row in sweep] == [1, 2]
    assert all(row["examples_per_s"] > 0 and row["trials_per_hour"] > 0 for row in sweep)
    assert sweep[0]["speedup"] == 1.0 and sweep[1]["speedup"] == sweep[1]["examples_per_s"] / sweep[0]["examples_per_s"]
    assert "| workers | student examples/s | vs one worker | trials/hour | cpu_protocol_v2 GPU-hours (" in printed


def test_gpu_hours_with_several_workers_divide_the_students_only(gpu_check):
    estimate = {"teacher_hours": 2.0, "student_hours": 30.0, "total_hours": 32.0}
    assert gpu_check.hours_with_workers(estimate, 1.0) == 32.0
    assert gpu_check.hours_with_workers(estimate, 3.0) == 12.0  # the teacher fine-tuning is not shared out


def test_the_sweep_table_takes_trials_per_hour_and_gpu_hours_from_one_baseline(gpu_check, capsys):
    """With an estimate, a worker row's trials/hour is the table's trials over its GPU-hours (the estimate's rates
    × the workers' speed-up), not the workers' own live-ALP rate, which another baseline sets."""
    estimates = {"t": {"trials": 120, "teacher_hours": 2.0, "student_hours": 30.0, "total_hours": 32.0}}
    rows = [
        {"pair": "p", "table": "t", "workers": 1, "examples_per_s": 100.0, "speedup": 1.0, "trials_per_hour": 7.0},
        {"pair": "p", "table": "t", "workers": 2, "examples_per_s": 150.0, "speedup": 1.5, "trials_per_hour": 10.5},
    ]
    gpu_check.print_sweep(rows, estimates, "GPU", "bf16")
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2:] == ["| 1 | 100 | 1.00× | 3.8 | 32.0 |", "| 2 | 150 | 1.50× | 5.5 | 22.0 |"]  # 120/32, 120/22
    gpu_check.print_sweep(rows, None, "GPU", "bf16")
    assert capsys.readouterr().out.splitlines()[-1] == "| 2 | 150 | 1.50× | 10.5 | – |"  # no estimate: the workers' own


def test_examples_per_trial_of_the_v2_table(gpu_check):
    # cpu_protocol_v2: 5 epochs over all of MRPC (3,668 rows) or over SST-2 capped at 10,000 rows, as many
    # trials on each task (80 + 80), so the mean trial trains on the mean of the two.
    assert gpu_check.examples_per_trial("cpu_protocol_v2") == (3668 * 5 + 10000 * 5) / 2


def trial(task, method, epochs=None):
    return SimpleNamespace(task=task, recipe={"method": method}, training={} if epochs is None else {"epochs": epochs})


def test_gpu_hours_from_fake_rates(gpu_check):
    pairs = gpu_check.PAIRS
    rates = {
        ("bert-base 12→4", "teacher_finetune"): 100.0,
        ("bert-base 12→4", "live_distill"): 200.0,
        ("bert-base 12→4", "cached_distill"): 400.0,
    }
    settings = {"teacher": {"model": "bert-base-uncased"}, "student": {"num_layers": 4}}
    sizes = {"rte": 3600, "mrpc": 7200}
    trials = [trial("rte", "alp"), trial("rte", "nkd"), trial("mrpc", "pkd", epochs=1)]
    estimate = gpu_check.estimate_table(
        trials, settings, rates, pairs, teacher_epochs=2, default_epochs=3, train_sizes=sizes
    )
    # students: rte ALP 3600·3/200 s, rte NKD (cached rate) 3600·3/400 s, mrpc PKD 7200·1/200 s
    assert estimate["student_hours"] == pytest.approx((54 + 27 + 36) / 3600)
    # one teacher per task: (3600 + 7200)·2/100 s
    assert estimate["teacher_hours"] == pytest.approx(216 / 3600)
    assert estimate["trials"] == 3 and estimate["pair"] == "bert-base 12→4"


def test_tables_pick_the_nearest_measured_pair(gpu_check):
    pairs = gpu_check.PAIRS
    assert (
        gpu_check.pair_for({"teacher": {"model": "minilm-l6"}, "student": {"num_layers": 2}}, pairs) == "minilm-l6 6→2"
    )
    assert (
        gpu_check.pair_for({"teacher": {"model": "bert-base-uncased"}, "student": {"num_layers": 6}}, pairs)
        == "bert-base 12→6"
    )
    assert gpu_check.pair_for({"student": {"num_layers": 3}}, pairs) == "bert-base 12→4"


@pytest.mark.parametrize(
    "name, family",
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA A100 80GB PCIe", "A100"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA H100 NVL", None),
        ("NVIDIA GeForce RTX 4090", None),
        ("cpu", None),
    ],
)
def test_device_names_map_to_their_dense_peaks(gpu_check, name, family):
    assert gpu_check.device_family(name) == family
    assert (gpu_check.peak_tflops(name, "bf16") is None) == (family is None)


def test_flops_of_a_bert_base_fine_tuning_step(gpu_check):
    """12 layers × 128 tokens × (2·(4·768² + 2·768·3072) + 4·128·768) per forward, × 3 for a training step."""
    forward = 12 * 128 * (2 * (4 * 768**2 + 2 * 768 * 3072) + 4 * 128 * 768)
    assert gpu_check.step_flops("teacher_finetune", gpu_check.BERT_BASE, 4, 128) == 3 * forward
    student = forward // 3
    assert gpu_check.step_flops("live_distill", gpu_check.BERT_BASE, 4, 128) == forward + 3 * student
    assert gpu_check.step_flops("cached_distill", gpu_check.BERT_BASE, 4, 128) == 3 * student


def timing(gpu_check, work, rate, compile=None, precision="bf16", pair="bert-base 12→4"):
    return gpu_check.Timing(pair, work, precision, rate, None, compile=compile)


@pytest.mark.slow  # torch.compile on a CPU: 20-50 s on 2 cores, run in the slow tier
def test_compiled_rates_replace_the_eager_ones_they_were_measured_for(gpu_check):
    eager = [timing(gpu_check, w, r) for w, r in (("teacher_finetune", 100.0), ("live_distill", 200.0))]
    eager += [timing(gpu_check, "cached_distill", 400.0), timing(gpu_check, "live_distill", 1.0, precision="tf32")]
    compiled = [timing(gpu_check, w, r, "inductor") for w, r in (("teacher_finetune", 200.0), ("live_distill", 400.0))]
    pairs = {"bert-base 12→4": gpu_check.PAIRS["bert-base 12→4"]}
    plain = gpu_check.estimate_paper_tables(eager + compiled, pairs, "bf16")
    faster = gpu_check.estimate_paper_tables(eager + compiled, pairs, "bf16", "inductor")
    assert plain == gpu_check.estimate_paper_tables(
        eager, pairs, "bf16"
    )  # compiled rows stay out of the eager estimate
    # ALP-KD Table 1 trains ALP students (live: twice as fast) and NKD/RKD ones (cached: eager rate kept)
    settings, trials = gpu_check.sweep_tables("alp_kd_table1")["alp_kd_table1"]
    rates = {("bert-base 12→4", w): r for w, r in (("teacher_finetune", 200.0), ("live_distill", 400.0))}
    expected = gpu_check.estimate_table(trials, settings, {**rates, ("bert-base 12→4", "cached_distill"): 400.0}, pairs)
    assert faster["alp_kd_table1"] == expected
    assert plain["alp_kd_table1"]["total_hours"] / 2 < expected["total_hours"] < plain["alp_kd_table1"]["total_hours"]
    assert faster["cpu_protocol"]["teacher_hours"] == pytest.approx(plain["cpu_protocol"]["teacher_hours"] / 2)


def test_compile_compiles_the_trained_model_for_its_row_only_as_the_loop_does_for_a_run(gpu_check, monkeypatch):
    import torch

    from bert_kd.core.training import precision

    compiled = []
    real = precision.compile_model
    monkeypatch.setattr(
        precision, "compile_model", lambda module, setting: compiled.append(module) or real(module, setting)
    )
    teacher, student = gpu_check.build_pair(gpu_check.TINY, 2, torch.device("cpu"))
    objective = gpu_check.objectives(teacher, student, gpu_check.TINY, 4, torch.device("cpu"))["live_distill"]()
    batch = gpu_check.random_batch(gpu_check.TINY, 4, 8, torch.device("cpu"))
    gpu_check.time_steps(objective, batch, torch.device("cpu"), "fp32", 1, compile="eager", warmup=0)
    assert compiled == [objective.model] and objective.model is not teacher  # the teacher: only BACKEND+teacher rows
    assert objective.model._compiled_call_impl is None  # restored: the row's model is plain again after it


def test_a_backend_that_fails_prints_its_error_and_the_rest_is_measured(gpu_check, capsys):
    import torch

    failures = []
    timings = gpu_check.measure(gpu_check.TINY_PAIRS, torch.device("cpu"), 2, 1, ["no_such_backend"], failures)
    assert {t.compile for t in timings} == {None} and len(timings) == 3 * len(gpu_check.precisions(torch.device("cpu")))
    assert [(f["work"], f["compile"]) for f in failures] == [
        ("teacher_finetune", "no_such_backend"),
        ("live_distill", "no_such_backend"),
        ("cached_distill", "no_such_backend"),
    ]
    assert "| no_such_backend | failed: " in capsys.readouterr().out


def test_a_compiled_teacher_row_layers_over_its_backend_rows(gpu_check):
    pairs = {"bert-base 12→4": gpu_check.PAIRS["bert-base 12→4"]}
    rows = [timing(gpu_check, w, r) for w, r in (("teacher_finetune", 100.0), ("live_distill", 200.0))]
    rows += [timing(gpu_check, "cached_distill", 400.0)]
    rows += [timing(gpu_check, w, r, "cudagraphs") for w, r in (("teacher_finetune", 300.0), ("live_distill", 400.0))]
    rows += [timing(gpu_check, "live_distill", 800.0, "cudagraphs+teacher")]
    both = gpu_check.estimate_paper_tables(rows, pairs, "bf16", "cudagraphs+teacher")
    settings, trials = gpu_check.sweep_tables("alp_kd_table1")["alp_kd_table1"]
    rates = {("bert-base 12→4", "teacher_finetune"): 300.0, ("bert-base 12→4", "live_distill"): 800.0}
    rates[("bert-base 12→4", "cached_distill")] = 400.0
    assert both["alp_kd_table1"] == gpu_check.estimate_table(trials, settings, rates, pairs)


@pytest.mark.slow  # torch.compile on a CPU: 20-50 s on 2 cores, run in the slow tier
def test_compile_teacher_compiles_the_frozen_teacher_of_that_row_only(gpu_check, capsys):
    import torch

    timings = gpu_check.measure(gpu_check.TINY_PAIRS, torch.device("cpu"), 2, 1, ["eager"], [], compile_teacher=True)
    compiled = [(t.work, t.compile) for t in timings if t.compile]
    assert compiled == [
        ("live_distill", "eager+teacher"),
        ("teacher_finetune", "eager"),
        ("live_distill", "eager"),
        ("cached_distill", "eager"),
    ]
    assert "| eager+teacher |" in capsys.readouterr().out


@pytest.mark.slow  # torch.compile on a CPU: 20-50 s on 2 cores, run in the slow tier
def test_merged_reports_estimate_from_every_file_and_a_pair_subset_estimates_nothing(gpu_check, tmp_path, capsys):
    eager = tmp_path / "eager.json"
    gpu_check.main(["--tiny", "--workers", "--json", str(eager)])
    first = json.loads(eager.read_text())
    assert first["complete"] and first["estimates"]["cpu_protocol"]["trials"] == 81
    live = next(
        t for t in first["timings"] if t["work"] == "live_distill" and t["precision"] == first["precision_for_estimate"]
    )
    compiled = dict(first, timings=[dict(live, compile="eager", examples_per_s=1e9)], profile=None)
    later = tmp_path / "compiled.json"
    later.write_text(json.dumps(compiled))
    merged = gpu_check.main(["--merge", str(eager), str(later), "--json", str(tmp_path / "merged.json")])
    assert len(merged["timings"]) == len(first["timings"]) + 1 and merged["complete"]
    assert set(merged["compiled_estimates"]) == {"eager"}
    assert (
        merged["compiled_estimates"]["eager"]["cpu_protocol"]["student_hours"]
        < merged["estimates"]["cpu_protocol"]["student_hours"]
    )
    assert json.loads((tmp_path / "merged.json").read_text())["merged_from"] == [str(eager), str(later)]
    pairs = {"bert-base 12→4": gpu_check.PAIRS["bert-base 12→4"]}
    assert gpu_check.print_estimates([timing(gpu_check, "live_distill", 1.0)], pairs, "bf16", "cpu", False) == (
        None,
        {},
    )
    assert "not estimated" in capsys.readouterr().out
    other = dict(first, device="NVIDIA H100 80GB HBM3")
    (tmp_path / "other.json").write_text(json.dumps(other))
    with pytest.raises(SystemExit, match="different devices"):
        gpu_check.main(["--merge", str(eager), str(tmp_path / "other.json")])


def test_the_profile_splits_a_step_into_host_and_device_time(gpu_check, capsys):
    import torch

    profile = gpu_check.profile_step(gpu_check.TINY_PAIRS, torch.device("cpu"), 2, steps=2)
    assert profile["host_ms"] > 0 and profile["wall_ms"] > 0 and profile["device_ms"] == 0  # a CPU: no device time
    assert profile["top_host_ops"] and all(row["calls"] > 0 for row in profile["top_host_ops"])
    assert "kernel launches per step" in capsys.readouterr().out
