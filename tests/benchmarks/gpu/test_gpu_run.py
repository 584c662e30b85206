"""benchmarks/gpu/gpu_run.sh: the prepared GPU run's dry run on the CPU, and its usage line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "benchmarks" / "gpu" / "gpu_run.sh"
STEPS = ("gpu_check", "distill_alp", "distill_alp_compiled", "distill_baselines", "reproduce")


def _run(*args: str, **env_vars: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **env_vars}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env, cwd=REPO_ROOT)


@pytest.mark.gpu_prep
def test_dry_run_writes_summary_with_every_step_and_mlflow_db(tmp_path):
    result = _run("--dry-run", str(tmp_path / "out"))
    assert result.returncode == 0, result.stdout + result.stderr
    summary = (tmp_path / "out" / "summary.md").read_text()
    for step in STEPS:
        assert f"| {step} | 0 |" in summary, summary
    assert "GPU: " in summary
    assert "eval/accuracy" in summary
    compiled_rows = [line for line in summary.splitlines() if line.startswith("| distill_alp:sst2 (compile: eager) |")]
    assert compiled_rows and "eval/accuracy = " in compiled_rows[0], summary  # the compiled main job, apart
    assert (tmp_path / "out" / "mlflow.db").exists()


def test_missing_outdir_exits_2_with_usage():
    for args in ((), ("--dry-run",)):
        result = _run(*args)
        assert result.returncode == 2
        assert "usage: bash benchmarks/gpu/gpu_run.sh [--dry-run] [--site TARBALL] OUTDIR" in result.stderr


def _helper():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "gpu_run_helper", REPO_ROOT / "benchmarks" / "gpu" / "gpu_run_helper.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_unpack_site_casts_transported_weights_back_to_float32(tmp_path):
    import tarfile

    import torch
    from safetensors.torch import load_file, save_file

    helper = _helper()
    weights = {"w": torch.tensor([0.1, -2.5, 3e-3]), "position_ids": torch.arange(3)}
    packed = tmp_path / "packed" / "pkg"
    packed.mkdir(parents=True)
    halved = {k: v.half() if v.is_floating_point() else v for k, v in weights.items()}
    save_file(halved, packed / "model.safetensors", {"format": "pt", "bert_kd": helper.TRANSPORT_NOTE})
    save_file({"other": torch.ones(2).half()}, packed / "kept_half.safetensors", {"format": "pt"})
    with tarfile.open(tmp_path / "site.tar.xz", "w:xz") as tar:
        tar.add(packed, arcname="pkg")
    _write_checksum(helper, tmp_path / "site.tar.xz")
    helper.unpack_site(tmp_path / "site.tar.xz", tmp_path / "site")
    restored = load_file(tmp_path / "site" / "pkg" / "model.safetensors")
    assert restored["w"].dtype == torch.float32 and restored["position_ids"].dtype == torch.int64
    assert torch.allclose(restored["w"], weights["w"], rtol=5e-4, atol=0)  # float16 rounding at most
    assert torch.equal(restored["position_ids"], weights["position_ids"])
    # a float16 file without the transport note is someone's float16 model: left as it is
    assert load_file(tmp_path / "site" / "pkg" / "kept_half.safetensors")["other"].dtype == torch.float16


def test_bundle_carries_neither_torch_nor_what_the_machine_has(tmp_path):
    helper = _helper()
    have = tmp_path / "have.txt"
    have.write_text("# the machine\nnumpy==2.5.2\nTransformers\nkedro_datasets==1.0\n")
    assert helper.machine_has(have) == {"numpy", "transformers", "kedro-datasets"}
    pins = helper.runtime_pins()
    assert not any(pin.split("==")[0] in {"torch", "accelerate", "kedro-viz"} for pin in pins)
    assert any(pin.startswith("kedro-mlflow==") for pin in pins) and any(pin.startswith("datasets==") for pin in pins)
    assert all(helper.MACHINE_OWNED.match(name) for name in ("torch", "triton", "nvidia-cublas-cu12", "cuda-bindings"))
    assert not helper.MACHINE_OWNED.match("transformers")


def _write_checksum(helper, tarball: Path) -> None:
    helper.checksum_file(tarball).write_text(f"{helper.file_sha256(tarball)}  {tarball.name}\n")


def _tarball(tmp_path: Path, members: dict[str, bytes], checksum: bool = True) -> Path:
    import io
    import tarfile

    path = tmp_path / "site.tar.xz"
    with tarfile.open(path, "w:xz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    if checksum:
        _write_checksum(_helper(), path)
    return path


def test_unpack_site_refuses_a_tarball_it_cannot_vouch_for(tmp_path):
    import pytest

    helper = _helper()
    cases = {
        "missing": (lambda: tmp_path / "nothing.tar.xz", "is missing"),
        "no checksum": (lambda: _tarball(tmp_path, {"pkg/a.py": b""}, checksum=False), "site.tar.xz.sha256 is missing"),
        "climbing": (lambda: _tarball(tmp_path, {"../../evil.py": b"x"}), "outside"),
        "start-up code": (lambda: _tarball(tmp_path, {"sitecustomize.py": b"print(1)"}), "carries sitecustomize.py"),
        "start-up package": (lambda: _tarball(tmp_path, {"sitecustomize/__init__.py": b""}), "carries sitecustomize/"),
        "start-up bytecode": (lambda: _tarball(tmp_path, {"usercustomize.pyc": b""}), "carries usercustomize.pyc"),
        "cached bytecode": (
            lambda: _tarball(tmp_path, {"__pycache__/sitecustomize.cpython-312.pyc": b""}),
            "carries __pycache__/sitecustomize",
        ),
        "start-up extension": (
            lambda: _tarball(tmp_path, {"sitecustomize.cpython-312-x86_64-linux-gnu.so": b""}),
            "carries sitecustomize.cpython",
        ),
    }
    for name, (make, reason) in cases.items():
        with pytest.raises(helper.SiteError, match=reason):
            helper.unpack_site(make(), tmp_path / name)
        assert not (tmp_path / name).exists() or not any((tmp_path / name).iterdir()), name
    assert not (tmp_path.parent / "evil.py").exists()
    replaced = _tarball(tmp_path, {"pkg/a.py": b""})
    replaced.write_bytes(replaced.read_bytes() + b"tail")
    with pytest.raises(helper.SiteError, match="does not match site.tar.xz.sha256"):
        helper.unpack_site(replaced, tmp_path / "replaced")
    corrupt = tmp_path / "site.tar.xz"
    corrupt.write_bytes(b"not a tarball")
    _write_checksum(helper, corrupt)
    with pytest.raises(helper.SiteError, match="cannot be unpacked"):
        helper.unpack_site(corrupt, tmp_path / "corrupt")


def test_gpu_run_with_a_bad_site_says_why_and_leaves_no_scratch_folder(tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    missing = _run("--site", str(tmp_path / "nothing.tar.xz"), str(tmp_path / "out"), TMPDIR=str(scratch))
    assert missing.returncode == 2 and "nothing.tar.xz: no such file" in missing.stderr
    corrupt = tmp_path / "site.tar.xz"
    corrupt.write_bytes(b"not a tarball")
    _write_checksum(_helper(), corrupt)
    result = _run("--site", str(corrupt), str(tmp_path / "out"), TMPDIR=str(scratch))
    assert result.returncode == 2, result.stderr
    assert "cannot be unpacked" in result.stderr and "gpu_run.sh: --site" in result.stderr
    assert not list(scratch.iterdir())  # mktemp's folder went with the script
