"""Ship a student: ONNX export, optional dynamic int8 quantization (ONNX Runtime), a check
that the exported model predicts like the PyTorch one, and a latency table.

Kedro-free; the ``export_student`` pipeline calls [`export_and_verify`][] and
[`latency_table`][].
"""

from __future__ import annotations

import logging
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from bert_kd.core.files import write_file_atomically
from bert_kd.core.metrics import glue_metrics, primary_metric
from bert_kd.core.training import Collator, make_loader

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")

log = logging.getLogger(__name__)


class _LogitsOnly(nn.Module):
    """The classifier as ``(input_ids, attention_mask[, token_type_ids]) -> logits`` for tracing."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        return self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).logits


def model_input_names(model: nn.Module) -> list[str]:
    """The inputs the exported graph takes (``token_type_ids`` only when the model has them)."""
    has_types = getattr(model.config, "type_vocab_size", 0) > 0
    return [name for name in INPUT_NAMES if name != "token_type_ids" or has_types]


def export_onnx(model: nn.Module, path: str | Path, opset: int = 17) -> Path:
    """Write ``model`` (eval mode, fp32, CPU) to ``path`` with dynamic batch and sequence axes.

    Uses the TorchScript-based ``torch.onnx.export(dynamo=False)``: the dynamo exporter needs
    ``onnxscript``, which this project does not install. Written atomically ([`bert_kd.core.files.write_file_atomically`][]).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    names = model_input_names(model)
    model = model.to("cpu", torch.float32).eval()
    example = tuple(
        torch.ones(2, 8, dtype=torch.long) if n != "token_type_ids" else torch.zeros(2, 8, dtype=torch.long)
        for n in names
    )

    def write(tmp: Path) -> None:
        with torch.no_grad():
            torch.onnx.export(
                _LogitsOnly(model),
                example,
                str(tmp),
                dynamo=False,
                input_names=names,
                output_names=["logits"],
                dynamic_axes={**{n: {0: "batch", 1: "sequence"} for n in names}, "logits": {0: "batch"}},
                opset_version=opset,
            )

    return write_file_atomically(path, write)


def quantize_int8(onnx_path: str | Path, path: str | Path) -> Path:
    """Dynamic int8 quantization of the weights of MatMul/Gemm (ONNX Runtime's ``quantize_dynamic``)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    path = Path(path)
    return write_file_atomically(
        path, lambda tmp: quantize_dynamic(str(onnx_path), str(tmp), weight_type=QuantType.QInt8)
    )


class OnnxClassifier:
    """An exported classifier behind an ONNX Runtime CPU session: ``logits(batch) -> np.ndarray``."""

    def __init__(self, path: str | Path, threads: int | None = None):
        import onnxruntime as ort

        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        self.path = Path(path)
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.input_names = [i.name for i in self.session.get_inputs()]

    def logits(self, batch: Mapping[str, torch.Tensor]) -> np.ndarray:
        feed = {name: batch[name].cpu().numpy().astype(np.int64) for name in self.input_names}
        return self.session.run(["logits"], feed)[0]


def torch_logits_fn(model: nn.Module, dtype: torch.dtype = torch.float32) -> Callable[[Mapping], np.ndarray]:
    """``batch -> logits`` of a PyTorch model (``torch.bfloat16``: CPU autocast)."""
    model = model.eval()

    @torch.no_grad()
    def run(batch):
        inputs = {k: v for k, v in batch.items() if k in INPUT_NAMES}
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
            return model(**inputs).logits.float().numpy()

    return run


def predict(logits_fn: Callable[[Mapping], np.ndarray], dataset, collator: Collator, batch_size: int = 64):
    """Logits and labels of ``logits_fn`` over ``dataset`` (dataset order)."""
    preds, labels = [], []
    for batch in make_loader(dataset, batch_size, collator, shuffle=False):
        preds.append(logits_fn(batch))
        labels.append(batch["labels"].numpy())
    return np.concatenate(preds), np.concatenate(labels)


@dataclass
class Verification:
    """How an exported model's dev predictions compare with the PyTorch model's."""

    name: str
    metric: str
    reference_score: float
    score: float
    agreement: float  # share of examples with the same predicted class
    max_abs_logit_diff: float
    tolerance_points: float = 0.5

    @property
    def within_tolerance(self) -> bool:
        return abs(self.delta_points) <= self.tolerance_points

    @property
    def delta_points(self) -> float:
        return 100.0 * (self.score - self.reference_score)

    def as_dict(self) -> dict:
        return {**vars(self), "delta_points": self.delta_points, "within_tolerance": self.within_tolerance}


def verify(
    name: str,
    task: str,
    reference: np.ndarray,
    exported: np.ndarray,
    labels: np.ndarray,
    tolerance_points: float = 0.5,
    strict: bool = True,
) -> Verification:
    """Compare ``exported`` logits with ``reference`` logits. When the dev metric moves by more
    than ``tolerance_points`` (points = 100 × metric): a ValueError naming the model if ``strict``,
    else a warning (the result says ``within_tolerance=False``)."""
    metric = primary_metric(task)
    result = Verification(
        name=name,
        metric=metric,
        reference_score=float(glue_metrics(task, reference, labels)[metric]),
        score=float(glue_metrics(task, exported, labels)[metric]),
        agreement=float((reference.argmax(-1) == exported.argmax(-1)).mean())
        if reference.shape[-1] > 1
        else float("nan"),
        max_abs_logit_diff=float(np.abs(reference - exported).max()),
        tolerance_points=tolerance_points,
    )
    if not result.within_tolerance:
        message = (
            f"exported model {name!r}: dev {metric} {result.score:.4f} vs PyTorch {result.reference_score:.4f} "
            f"({result.delta_points:+.2f} points, tolerance {tolerance_points})"
        )
        if strict:
            raise ValueError(message)
        log.warning("%s", message)
    return result


def export_and_verify(
    model: nn.Module,
    dataset,
    collator: Collator,
    task: str,
    directory: str | Path,
    quantize: bool = True,
    tolerance_points: float = 0.5,
) -> tuple[dict[str, Path], list[Verification]]:
    """Export ``model`` to ``directory/student.onnx`` (and ``student.int8.onnx``) and verify both
    on ``dataset`` against the PyTorch fp32 model: the fp32 export must hold the metric (else a
    ValueError); int8 is reported, with a warning when it loses more than the tolerance."""
    directory = Path(directory)
    paths = {"onnx_fp32": export_onnx(model, directory / "student.onnx")}
    if quantize:
        paths["onnx_int8"] = quantize_int8(paths["onnx_fp32"], directory / "student.int8.onnx")
    reference, labels = predict(torch_logits_fn(model), dataset, collator)
    checks = []
    for name, path in paths.items():
        exported, _ = predict(OnnxClassifier(path).logits, dataset, collator)
        checks.append(verify(name, task, reference, exported, labels, tolerance_points, strict=name == "onnx_fp32"))
    return paths, checks


def time_batches(logits_fn: Callable[[Mapping], np.ndarray], batches: Sequence[Mapping], repeats: int = 3) -> float:
    """Median milliseconds per batch over ``repeats`` passes (after one warm-up batch)."""
    logits_fn(batches[0])
    per_pass = []
    for _ in range(repeats):
        start = time.perf_counter()
        for batch in batches:
            logits_fn(batch)
        per_pass.append((time.perf_counter() - start) / len(batches))
    return 1000.0 * statistics.median(per_pass)


def latency_table(
    candidates: Mapping[str, tuple[Callable[[Mapping], np.ndarray], object, Collator]],
    batch_sizes: Sequence[int] = (1, 32),
    max_batches: int = 8,
    repeats: int = 3,
    scores: Mapping[str, float] | None = None,
) -> list[dict]:
    """One row per (model, batch size): ms/batch, examples/s and the speed-up over the first model.

    ``candidates`` maps a name to ``(logits_fn, dev dataset in that model's tokenization, collator)``;
    every model reads the same dev rows, in dataset order.
    """
    rows = []
    for batch_size in batch_sizes:
        baseline = None
        for name, (logits_fn, dataset, collator) in candidates.items():
            batches = list(make_loader(dataset, batch_size, collator, shuffle=False))[:max_batches]
            if not batches:
                raise ValueError(f"latency_table: no dev examples for {name!r}")
            ms = time_batches(logits_fn, batches, repeats)
            baseline = baseline or ms
            rows.append(
                {
                    "model": name,
                    "batch_size": batch_size,
                    "ms_per_batch": round(ms, 3),
                    "examples_per_s": round(1000.0 * batch_size / ms, 1),
                    "speedup_vs_first": round(baseline / ms, 2),
                    "dev_score": None if scores is None else scores.get(name),
                }
            )
    return rows
