"""Each CPU loop's share of this machine's peak: the dense FP32 matmul throughput measured here (large
squares and the loops' own shapes) and, in the same run, the FLOP/s each loop of the main job and its
relatives achieves.

The loops, each on real SST-2 rows at length 64 with the offline MiniLM-L6 teacher (6 layers, width 384)
and a 2-layer student copied from it, through the code the pipelines run (``fit`` with length-grouped
batches and fused AdamW, ``build_teacher_cache``, ``predict_logits``):

- teacher fine-tuning (batch 32), the teacher-output cache (forward, batch 64), ALP-KD distillation with a
  live and with the cached teacher, Tang et al.'s BiLSTM (300 units per direction over the teacher's 384-wide
  embeddings, a supervised step: the same FLOPs as its distillation step against cached logits), TinyBERT's
  general distillation (the stand-in GLUE corpus, 64-token passages), and the evaluation of the teacher and of
  the student (batch 64).

FLOPs are counted from the model's shapes and the token counts of the batches each model actually saw (a
forward hook records every attention mask): per encoder layer and example of L tokens, 2·L·(4h² + 2hf) for
the projections and the feed-forward layer and 4·L²·h for attention's two products; the pooler and
classifier per example; an LSTM direction 8·H·(E + H) per token. A trained model costs 3× its forward
(backward ≈ 2×), a frozen or evaluated one 1×. The loss terms, the optimizer and the embedding lookups are
not counted (they are not matrix products; the optimizer's time is in the loop's wall time). "Real" counts
each example's own tokens; "padded" counts the batch's padded length, as the CPU computes it; the
difference is reported apart. The achieved FLOP/s divide real FLOPs by the loop's seconds from its first
forward to its end (the set-up before the first batch is reported apart).

    PYTHONPATH=src python benchmarks/share_of_peak.py --steps 40 \\
        --out benchmarks/results/share_of_peak.json --md benchmarks/results/share_of_peak.md
    PYTHONPATH=src python benchmarks/share_of_peak.py --steps 3 --square 512   # a check that it runs
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from busy_machine import processor  # noqa: E402 - the CPU model name, as every benchmark record names it

TRAIN, FROZEN = 3, 1  # forward-equivalents of a trained and of a frozen (or evaluated) model


def transformer_flops(config, lengths, padded: int) -> tuple[float, float]:
    """(real, padded) forward FLOPs of a BERT-family classifier over one batch: ``lengths`` are the examples'
    real token counts, ``padded`` the batch's padded length."""
    h, f, n = int(config.hidden_size), int(config.intermediate_size), int(config.num_hidden_layers)
    labels = int(getattr(config, "num_labels", 2) or 2)
    head = 2 * h * h + 2 * h * labels  # pooler and classifier, per example

    def one(tokens: int) -> float:
        return n * (2 * tokens * (4 * h * h + 2 * h * f) + 4 * tokens * tokens * h) + head

    return float(sum(one(int(length)) for length in lengths)), float(len(lengths) * one(padded))


def bilstm_flops(config, lengths, padded: int) -> tuple[float, float]:
    """(real, padded) forward FLOPs of the BiLSTM student over one batch: two directions of 4 gates, each
    gate an (E + H) × H product per token, and the ReLU classifier per example."""
    e, hid, c = int(config.embedding_size), int(config.hidden_size), int(config.classifier_size)
    per_token = 2 * 8 * hid * (e + hid)
    head = 2 * (2 * hid) * c + 2 * c * int(getattr(config, "num_labels", 2) or 2)
    return (
        float(sum(per_token * int(length) + head for length in lengths)),
        float(len(lengths) * (per_token * padded + head)),
    )


def model_flops(model, lengths, padded: int) -> tuple[float, float]:
    config = model.config
    return (bilstm_flops if hasattr(config, "embedding_size") else transformer_flops)(config, lengths, padded)


class Counter:
    """Forward hooks on the given models recording each call's attention mask: the FLOPs a loop ran, real and
    padded, each model weighted by its forward-equivalents, and when its first batch began."""

    def __init__(self, weighted: dict) -> None:
        self.real = self.padded = 0.0
        self.tokens = self.padded_tokens = 0
        self.first: float | None = None
        self.handles = [
            model.register_forward_pre_hook(self._hook(model, weight), with_kwargs=True)
            for model, weight in weighted.items()
        ]

    def _hook(self, model, weight):
        def hook(module, args, kwargs):
            if self.first is None:
                self.first = time.perf_counter()
            mask = kwargs.get("attention_mask")
            ids = kwargs.get("input_ids", args[0] if args else None)
            if mask is None:
                mask = ids.new_ones(ids.shape)
            lengths = mask.sum(dim=1).tolist()
            real, padded = model_flops(model, lengths, int(mask.shape[1]))
            self.real += weight * real
            self.padded += weight * padded
            if weight:
                self.tokens += int(sum(lengths))
                self.padded_tokens += int(mask.numel())

        return hook

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()


def matmul_rate(m: int, k: int, n: int, repeats: int) -> float:
    """FLOP/s of an (m × k) @ (k × n) FP32 product: the median of ``repeats`` timed products after a warm-up."""
    import torch

    a, b = torch.randn(m, k), torch.randn(k, n)
    out = torch.empty(m, n)
    inner = max(1, int(2e8 // (2 * m * k * n)))  # about 0.2 GFLOP a timing, so small shapes are not all overhead
    torch.mm(a, b, out=out)
    rates = []
    for _ in range(repeats):
        begin = time.perf_counter()
        for _ in range(inner):
            torch.mm(a, b, out=out)
        rates.append(2 * m * k * n * inner / (time.perf_counter() - begin))
    return statistics.median(rates)


def loop_shapes_rate(tokens: int, hidden: int, intermediate: int, repeats: int) -> float:
    """FLOP/s of one encoder layer's products at ``tokens`` rows (QKV and output projections, feed-forward
    up and down), forward shapes, weighted by their FLOPs."""
    shapes = [(tokens, hidden, 3 * hidden), (tokens, hidden, hidden), (tokens, hidden, intermediate)]
    shapes.append((tokens, intermediate, hidden))
    flops = [2 * m * k * n for m, k, n in shapes]
    seconds = [f / matmul_rate(*shape, repeats) for f, shape in zip(flops, shapes, strict=True)]
    return sum(flops) / sum(seconds)


def timed(name: str, run, weighted: dict, notes: str = "") -> dict:
    """Run ``run()`` under a [`Counter`][] of ``weighted`` models; the loop's record."""
    counter = Counter(weighted)
    begin = time.perf_counter()
    try:
        run()
    finally:
        counter.close()
    end = time.perf_counter()
    steady = end - (counter.first or begin)
    record = {
        "loop": name,
        "wall_s": round(end - begin, 2),
        "setup_s": round((counter.first or begin) - begin, 2),
        "batches_s": round(steady, 2),
        "real_gflop": round(counter.real / 1e9, 2),
        "padded_gflop": round(counter.padded / 1e9, 2),
        "padding_share": round(1 - counter.real / counter.padded, 3) if counter.padded else 0.0,
        "real_gflops_per_s": round(counter.real / steady / 1e9, 2),
        "padded_gflops_per_s": round(counter.padded / steady / 1e9, 2),
        "tokens": counter.tokens,
        "padded_tokens": counter.padded_tokens,
        "notes": notes,
    }
    print(json.dumps(record), flush=True)
    return record


class Setup:
    """What every loop reads: the SST-2 rows tokenized, the dev rows, the teacher and the training settings."""

    def __init__(self, args) -> None:
        from teacher_cache import SST2_TRAIN, TEACHER, load_rows

        from bert_kd.core.data.glue import read_glue_tsv
        from bert_kd.core.data.tokenize import tokenize_frame
        from bert_kd.core.models import load_classifier, load_tokenizer
        from bert_kd.core.training import Collator, TrainingConfig

        self.args = args
        frame, _ = load_rows(args.steps * args.batch_size)
        self.tokenizer = load_tokenizer(TEACHER)
        self.dataset = tokenize_frame(frame, self.tokenizer, args.max_length)
        self.collator = Collator({"": self.tokenizer.pad_token_id})
        dev = read_glue_tsv(SST2_TRAIN.parent / "dev.tsv", "sst2", "dev").head(args.eval_rows)
        self.dev = tokenize_frame(dev, self.tokenizer, args.max_length)
        self.teacher = load_classifier(TEACHER, 2)
        self.config = TrainingConfig(
            epochs=1,
            batch_size=args.batch_size,
            learning_rate=5e-5,
            progress_bar=False,
            cpu=True,
            mixed_precision="no",
            seed=42,
            group_by_length=True,
        )

    def fit_run(self, objective):
        from bert_kd.core.training import fit

        return lambda: fit(objective, self.dataset, None, self.config, collator=self.collator)

    def alp(self, cache=None):
        """A fresh 2-layer ALP-KD student and its objective (the teacher live, or its ``cache``)."""
        from bert_kd.core.distill.methods import build_method
        from bert_kd.core.distill.objective import DistillationObjective, Teacher
        from bert_kd.core.models import build_student

        student, _ = build_student(self.teacher, 2)
        method = build_method({"method": "alp"}, student, [self.teacher])
        return student, DistillationObjective(student, [Teacher(self.teacher, cache=cache)], method, method.weights)


def task_loops(setup: Setup) -> tuple[list[dict], float, object]:
    """Teacher fine-tuning, the cache, ALP-KD live and cached, the BiLSTM; the mean padded tokens of a teacher
    fine-tuning batch (the loops' matmul rows); a trained student for the evaluation."""
    from bert_kd.config.schema import BiLSTM
    from bert_kd.core.bilstm import bilstm_student
    from bert_kd.core.distill.objective import build_teacher_cache
    from bert_kd.core.training import SupervisedObjective

    teacher, records, cache = setup.teacher, [], {}
    trainee = copy.deepcopy(teacher).requires_grad_(True).train()
    records.append(timed("teacher fine-tuning", setup.fit_run(SupervisedObjective(trainee)), {trainee: TRAIN}))
    batch_tokens = records[-1]["padded_tokens"] / max(1, setup.args.steps)

    def build():
        cache["cache"] = build_teacher_cache(
            teacher, setup.dataset, batch_size=64, collator=setup.collator, progress=False
        )

    records.append(timed("teacher-output cache (forward, batch 64)", build, {teacher: FROZEN}))
    student, live = setup.alp()
    records.append(timed("ALP-KD student, live teacher", setup.fit_run(live), {student: TRAIN, teacher: FROZEN}))
    student, cached = setup.alp(cache["cache"])
    records.append(timed("ALP-KD student, cached teacher", setup.fit_run(cached), {student: TRAIN, teacher: FROZEN}))
    bilstm = bilstm_student(teacher, BiLSTM(), 2, siamese=False)
    records.append(timed("BiLSTM student (cached logits)", setup.fit_run(SupervisedObjective(bilstm)), {bilstm: TRAIN}))
    return records, batch_tokens, student


def general_loop(setup: Setup) -> dict:
    """TinyBERT's general distillation on the stand-in corpus, as the general job batches it (random batches)."""
    import torch

    from bert_kd.core.data.glue_corpus import glue_training_sentences
    from bert_kd.core.data.shards import open_shards, write_shards
    from bert_kd.core.distill.general import GeneralDistillation
    from bert_kd.core.models import build_student
    from bert_kd.core.training import Collator, make_loader, make_optimizer

    args = setup.args
    passages = itertools.islice(glue_training_sentences(args.glue_dir), args.batch_size * (args.steps + 1))
    shards = write_shards(
        passages, setup.tokenizer, Path(tempfile.mkdtemp()) / "shards", max_seq_length=args.max_length
    )
    student, _ = build_student(setup.teacher, 2)
    general = GeneralDistillation(student, setup.teacher, "tinybert")
    optimizer = make_optimizer(general, setup.config, torch.device("cpu"))
    collator = Collator(tokenizers={"": setup.tokenizer})
    corpus = make_loader(open_shards(shards), args.batch_size, collator, shuffle=True, seed=0)

    def run():
        for batch in itertools.islice(corpus, args.steps):
            general(batch)["loss"].backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

    weighted = {student: TRAIN, setup.teacher: FROZEN}
    return timed("TinyBERT general distillation", run, weighted, "projections W_e, W_h not counted")


def evaluation_loops(setup: Setup, student) -> list[dict]:
    """The teacher's and the student's evaluation on the dev rows (batch 64, longest first)."""
    from bert_kd.core.training import SupervisedObjective, make_loader
    from bert_kd.core.training.loop import predict_logits

    loader = make_loader(setup.dev, 64, setup.collator, shuffle=False, group_by_length=True)
    records = []
    for name, model in (("teacher", setup.teacher), ("student", student)):
        objective = SupervisedObjective(model)
        model.eval()
        run = lambda objective=objective: predict_logits(objective, loader)  # noqa: E731
        records.append(timed(f"evaluation, {name} (batch 64)", run, {model: FROZEN}))
    return records


def loops(args) -> tuple[list[dict], float]:
    """Every loop's record, and the mean padded tokens per teacher fine-tuning batch (the loops' matmul rows)."""
    setup = Setup(args)
    records, batch_tokens, student = task_loops(setup)
    records.append(general_loop(setup))
    return records + evaluation_loops(setup, student), batch_tokens


def markdown(record: dict) -> str:
    peak = record["peak"]
    lines = [
        "# Each CPU loop's share of the machine's peak",
        "",
        f"`{record['command']}`, {record['date']}, {record['machine']['processor']}, "
        f"{record['machine']['threads']} torch threads, commit {record['commit']}. Other processes' CPU use before "
        f"the run: {record['machine']['other_cores_before']} cores (load average {record['machine']['load_before']}).",
    ]
    if (record["machine"]["other_cores_before"] or 0) > 0.3:
        lines += [
            "",
            "**The machine was not idle**: other work shared the cores during the run, and what it left varied",
            "between the peak's measurement and each loop's: read these shares as lower bounds, not the idle machine's.",
        ]
    lines += [
        "",
        f"Peak, dense FP32 `torch.mm` measured here: **{peak['square_gflops']:.1f} GFLOP/s** on "
        f"{peak['square']} × {peak['square']} squares, **{peak['loop_shapes_gflops']:.1f} GFLOP/s** on one encoder "
        f"layer's products at the loops' {peak['loop_tokens']} rows (a teacher fine-tuning batch's tokens).",
        "",
        "| loop | seconds (set-up) | real GFLOP | padding share | real GFLOP/s | share of square peak | share of "
        "loop-shape peak |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in record["loops"]:
        lines.append(
            f"| {r['loop']} | {r['batches_s']:.1f} ({r['setup_s']:.1f}) | {r['real_gflop']:.1f} | "
            f"{100 * r['padding_share']:.1f}% | {r['real_gflops_per_s']:.1f} | {100 * r['share_of_square_peak']:.1f}% | "
            f"{100 * r['share_of_loop_shape_peak']:.1f}% |"
        )
    lines += [
        "",
        f"{record['steps']} batches of {record['batch_size']} per training loop, {record['eval_rows']} dev rows per "
        "evaluation. Seconds: the first batch to the end (in brackets the set-up before it). Real FLOPs count each "
        "example's own tokens; the padding share is the part of the FLOPs the CPU computed (at each batch's padded "
        "length) that went to padding.",
    ]
    return "\n".join(lines) + "\n"


def commit() -> str:
    import subprocess

    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).parent,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40, help="batches per training loop")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--eval-rows", type=int, default=872)
    parser.add_argument("--square", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: every usable core)")
    parser.add_argument("--glue-dir", default=str(Path(__file__).resolve().parents[2] / "shared" / "glue"))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--md", type=Path)
    args = parser.parse_args(argv)

    import torch

    from bert_kd.core.machine import cpu_use_now, machine_load, usable_cores

    before, (load, _) = cpu_use_now(window_s=1.0), machine_load()
    torch.set_num_threads(args.threads or usable_cores())
    torch.manual_seed(0)
    square = matmul_rate(args.square, args.square, args.square, args.repeats)
    records, batch_tokens = loops(args)
    tokens = int(round(batch_tokens))
    shapes = loop_shapes_rate(tokens, 384, 1536, args.repeats)
    square = max(square, matmul_rate(args.square, args.square, args.square, args.repeats))  # before and after
    for r in records:
        r["share_of_square_peak"] = round(r["real_gflops_per_s"] * 1e9 / square, 4)
        r["share_of_loop_shape_peak"] = round(r["real_gflops_per_s"] * 1e9 / shapes, 4)
    record = {
        "command": "python benchmarks/share_of_peak.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": commit(),
        "machine": {
            "processor": processor(),
            "threads": torch.get_num_threads(),
            "other_cores_before": None if before.other_cores is None else round(before.other_cores, 2),
            "load_before": None if load is None else round(load, 2),
            "torch": torch.__version__,
        },
        "peak": {
            "square": args.square,
            "square_gflops": round(square / 1e9, 2),
            "loop_tokens": tokens,
            "loop_shapes_gflops": round(shapes / 1e9, 2),
        },
        "steps": args.steps,
        "batch_size": args.batch_size,
        "eval_rows": args.eval_rows,
        "loops": records,
    }
    text = markdown(record)
    print(text)
    if args.out:
        args.out.write_text(json.dumps(record, indent=1) + "\n")
    if args.md:
        args.md.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
