"""Helpers of ``benchmarks/gpu_run.sh``: a tiny local teacher and GLUE folder (``--dry-run``) and the summary.

python benchmarks/gpu_run_helper.py tiny OUTDIR      # OUTDIR/tiny_teacher, OUTDIR/tiny_glue/SST-2
python benchmarks/gpu_run_helper.py summary OUTDIR   # OUTDIR/summary.md from steps.tsv, mlflow.db, gpu_check.log
"""

from __future__ import annotations

import argparse
import importlib.metadata
import platform
import random
import shutil
import subprocess
import sys
from pathlib import Path

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
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    directory.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok.train_from_iterator([" ".join(WORDS)] * 20, trainers.WordPieceTrainer(vocab_size=200, special_tokens=specials))
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_input_names=["input_ids", "token_type_ids", "attention_mask"],
    )
    tokenizer.save_pretrained(directory)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=128,
        num_labels=2,
    )
    BertForSequenceClassification(config).save_pretrained(directory)
    return directory


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
    """One table row per MLflow run in ``db``: its name and its accuracy-like metrics."""
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
            if any(part in key for part in ("acc", "f1", "corr", "matthews")) and "step" not in key
        }
        if wanted:
            shown = ", ".join(f"{key} = {value:.4f}" for key, value in wanted.items())
            rows.append(f"| {run.info.run_name} | {shown} |")
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
    lines += ["", "## Accuracies (MLflow, OUTDIR/mlflow.db)", "", *_mlflow_metrics(outdir / "mlflow.db")]
    gpu_check = outdir / "gpu_check.log"  # its printed table (examples/s, TFLOP/s, share of peak); JSON beside it
    lines += ["", "## gpu_check (gpu_check.log; numbers in gpu_check.json)", "", "```"]
    lines += [gpu_check.read_text().strip() if gpu_check.exists() else "(no gpu_check.log)", "```"]
    path = outdir / "summary.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["tiny", "summary"])
    parser.add_argument("outdir", type=Path)
    args = parser.parse_args(argv)
    if args.command == "tiny":
        make_tiny_teacher(args.outdir / "tiny_teacher")
        write_tiny_sst2(args.outdir / "tiny_glue")
    else:
        print(write_summary(args.outdir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
