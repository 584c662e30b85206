"""A model's evaluation on a task's dev splits (Kedro-free): GLUE metrics per split, the
majority-class floor, parameter counts, size on disk and inference throughput."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from bert_kd.core.data.glue import get_task
from bert_kd.core.data.tokenize import input_cut
from bert_kd.core.machine import machine_load
from bert_kd.core.metrics import glue_metrics, primary_metric
from bert_kd.core.models import ModelBundle, count_parameters
from bert_kd.core.reports.verdict import majority_class_metrics
from bert_kd.core.training import SupervisedObjective, make_loader, module_device, predict_logits
from bert_kd.experiment.lineage import Lineage
from bert_kd.experiment.run_setup import collator_for


def evaluation_split(tokenized) -> str:
    """The dev split used for model selection (MNLI: matched)."""
    names = [name for name in tokenized if name != "train"]
    return "validation_matched" if "validation_matched" in names else names[0]


def evaluate_fn(task: str):
    """``fit``'s ``evaluate_fn`` for ``task``: its GLUE metrics of (predictions, labels)."""
    return lambda predictions, labels: glue_metrics(task, predictions, labels)


@torch.no_grad()
def measure_throughput(model, dataset, collator, batch_size: int = 32, max_batches: int = 10) -> float:
    """Inference examples per second on the model's device (a few dev batches; a GPU is synchronised
    before the clock stops)."""
    model.eval()
    device = module_device(model)
    loader = make_loader(dataset, batch_size, collator, shuffle=False)

    def forward(batch) -> None:
        model(**{k: v.to(device) for k, v in batch.items() if k in ("input_ids", "attention_mask", "token_type_ids")})

    forward(next(iter(loader)))
    seen, start = 0, time.perf_counter()
    for i, batch in enumerate(loader):
        if i >= max_batches:
            break
        forward(batch)
        seen += len(batch["labels"])
    if device is not None and device.type == "cuda":
        torch.cuda.synchronize(device)
    return seen / max(time.perf_counter() - start, 1e-9)


def evaluate_bundle(bundle: ModelBundle, tokenized, task: str, batch_size: int = 64) -> dict:
    """GLUE metrics on every dev split, parameter count, size on disk, throughput (with the machine's
    load average and cores when it was measured) and the seconds all this took;
    the rows cut at the max length per split (``input_cut``, where the tokenization recorded them);
    for classification also ``correct``: per split, ``"1"``/``"0"`` per example in dev order (the paired
    test of [`bert_kd.core.reports.verdict.comparison_verdict`][])."""
    started = time.perf_counter()
    spec = get_task(task)
    collator = collator_for(bundle.tokenizer)
    objective = SupervisedObjective(bundle.model)
    result: dict = {"task": spec.name, "metrics": {}, "majority_class": {}, "examples": {}, "correct": {}}
    for split in [name for name in tokenized if name != "train"]:
        loader = make_loader(tokenized[split], batch_size, collator, shuffle=False)
        predictions, labels = predict_logits(objective, loader)
        result["metrics"][split] = glue_metrics(spec.name, predictions, labels)
        result["majority_class"][split] = majority_class_metrics(spec.name, labels)  # the floor of every table
        result["examples"][split] = int(len(labels))
        if not spec.is_regression:
            ids = np.asarray(predictions)
            hits = (ids.argmax(axis=-1) if ids.ndim > 1 else ids) == np.asarray(labels)
            result["correct"][split] = "".join("1" if hit else "0" for hit in hits)
    main = result["metrics"][evaluation_split(tokenized)]
    result["score_examples"] = result["examples"][evaluation_split(tokenized)]
    result["input_cut"] = {name: record for name, dataset in tokenized.items() if (record := input_cut(dataset))}
    result["primary_metric"] = primary_metric(spec.name)
    result["score"] = main[result["primary_metric"]]
    result["parameters"] = count_parameters(bundle.model)
    encoder = getattr(bundle.model, bundle.model.base_model_prefix, bundle.model)
    result["encoder_parameters"] = count_parameters(encoder)
    result["size_on_disk_bytes"] = _saved_size(bundle)
    result["throughput_examples_per_s"] = measure_throughput(
        bundle.model, tokenized[evaluation_split(tokenized)], collator
    )
    result["load_average"], result["cores"] = machine_load()  # a busy machine's throughput is not the model's
    result["device"] = "cuda" if torch.cuda.is_available() else "cpu"
    result["info"] = {k: v for k, v in bundle.info.items() if k != "history"}
    result["evaluation_seconds"] = round(time.perf_counter() - started, 3)
    return result


def _model_files(folder: Path) -> list[Path]:
    """The files ``save_pretrained`` writes for a model: its config and (sharded) safetensors weights."""
    return [
        f
        for f in folder.iterdir()
        if f.is_file() and (f.name == "config.json" or f.name.startswith("model") and ".safetensors" in f.name)
    ]


def _saved_size(bundle: ModelBundle) -> int:
    """Bytes of the model's config + weights: read from its store entry when the job path wrote one
    (the in-memory model is that entry), else measured by saving it to a temporary folder."""
    import tempfile

    stored = Lineage.of(bundle.info).store_path
    files = _model_files(Path(stored)) if stored and Path(stored).is_dir() else []
    if any(f.suffix == ".safetensors" for f in files):
        return sum(f.stat().st_size for f in files)
    with tempfile.TemporaryDirectory() as tmp:
        bundle.model.save_pretrained(tmp, safe_serialization=True)
        return sum(f.stat().st_size for f in _model_files(Path(tmp)))
