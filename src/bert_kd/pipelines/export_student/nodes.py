"""Node: export the distilled student to ONNX (and int8), verify it, time it against the teacher."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Mapping

import pandas as pd
import torch

from bert_kd.config.errors import UserError
from bert_kd.config.schema import Block, ExportStudent, Tracking, set_values, typed
from bert_kd.core.data.glue import get_task
from bert_kd.core.metrics import glue_metrics, primary_metric
from bert_kd.core.models import ModelBundle, load_bundle
from bert_kd.core.onnx_export import OnnxClassifier, export_and_verify, latency_table, predict, torch_logits_fn
from bert_kd.core.reports.markdown_tables import markdown_table
from bert_kd.experiment.evaluation import evaluation_split
from bert_kd.experiment.lineage import Lineage
from bert_kd.experiment.run_setup import RunSettings, collator_for
from bert_kd.experiment.tracker import JobTracker, default_registered_name, discard_download, tracker_for
from bert_kd.pipelines.evaluate.nodes import resolve_model_source

log = logging.getLogger(__name__)


def export_student(
    student: ModelBundle,
    student_data,
    teacher: ModelBundle,
    teacher_tokenized,
    settings: Block[ExportStudent],
    run: RunSettings | Mapping,
):
    """ONNX files of ``student`` (fp32, optional dynamic int8), the verification report, and the
    latency table (batch sizes × teacher / student fp32 / student bf16 / ONNX models) on the run's task."""
    logged = set_values(settings)  # the export run's ``export.*`` params
    run = RunSettings.of(run)
    settings, tracking = typed(ExportStudent, settings, "export_student"), run.tracking
    spec = get_task(run.task)
    student, source = chosen_student(student, settings.model, tracking, spec.name)
    split = evaluation_split(student_data)
    student_dev = student_data[split]
    teacher_dev = teacher_tokenized[split]
    student_collator = collator_for(student.tokenizer)
    teacher_collator = collator_for(teacher.tokenizer)
    threads = torch.get_num_threads()
    with tempfile.TemporaryDirectory() as tmp:
        paths, checks = export_and_verify(
            student.model,
            student_dev,
            student_collator,
            spec.name,
            tmp,
            quantize=settings.quantize_int8,
            tolerance_points=settings.tolerance_points,
        )
        files = {path.name: path.read_bytes() for path in paths.values()}
        candidates = {
            "teacher (PyTorch fp32)": (torch_logits_fn(teacher.model), teacher_dev, teacher_collator),
            "student (PyTorch fp32)": (torch_logits_fn(student.model), student_dev, student_collator),
            "student (PyTorch bf16)": (torch_logits_fn(student.model, torch.bfloat16), student_dev, student_collator),
        }
        for name, path in paths.items():
            label = "student (ONNX int8)" if name == "onnx_int8" else "student (ONNX fp32)"
            candidates[label] = (OnnxClassifier(path, threads=threads).logits, student_dev, student_collator)
        metric = primary_metric(spec.name)
        scores = {}
        for name, (logits_fn, dataset, collator) in candidates.items():
            preds, labels = predict(logits_fn, dataset, collator)
            scores[name] = round(float(glue_metrics(spec.name, preds, labels)[metric]), 4)
        rows = latency_table(
            candidates,
            batch_sizes=settings.batch_sizes,
            max_batches=settings.max_batches,
            repeats=settings.repeats,
            scores=scores,
        )
    report = {
        "model": source,
        "task": spec.name,
        "split": split,
        "metric": metric,
        "scores": scores,
        "verification": [check.as_dict() for check in checks],
        "files": {name: len(content) for name, content in files.items()},
        "torch_threads": threads,
        "latency": rows,
    }
    log.info("export_student %s (%s): %s", spec.name, source, scores)
    tracker = tracker_for(tracking)
    with tracker.start_job(f"export_student:{spec.name}", {"role": "export", "task": spec.name}) as run:
        run.log_params({"export": logged, "student_run_id": Lineage.of(student.info).run_id})
        run.log_metrics({f"export/score/{_metric_key(k)}": v for k, v in scores.items()})
        run.log_metrics({f"export/ms_b{r['batch_size']}/{_metric_key(r['model'])}": r["ms_per_batch"] for r in rows})
        run.log_metrics({f"export/size_bytes/{k}": v for k, v in report["files"].items()})
        run.log_dict(report, "export_student.json")
        if run.enabled and tracking.log_models:
            _log_onnx_student(tracker, files[paths["onnx_fp32"].name], student, spec.name)
    table = pd.DataFrame(rows)
    return files, report, table, markdown_table(rows)


#: What the report says when the pipeline's own ALP student was exported.
PIPELINE_STUDENT = "the pipeline's ALP student"


def chosen_student(student: ModelBundle, model: str | None, tracking: Tracking, task: str) -> tuple[ModelBundle, str]:
    """(the student to export, where it came from): ``export_student.model`` when given, else the
    registered best (``models:/<name>@champion``) when tracking is on and the store has it, else
    the pipeline's ALP ``student``. A model from elsewhere must read the dev rows the way the
    pipeline tokenized them (the same vocabulary)."""
    key = "export_student.model"
    source = model
    if source is None:
        source = tracker_for(tracking).champion_source(tracking.registered_model or default_registered_name(task))
    if source is None:
        return student, PIPELINE_STUDENT
    path = resolve_model_source(source, key)
    try:
        bundle = load_bundle(path)
    finally:
        discard_download(path)  # an MLflow URI's download, once the model is in memory (a folder is left alone)
    if bundle.tokenizer.get_vocab() != student.tokenizer.get_vocab():
        raise UserError(
            f"{source} reads another vocabulary than this pipeline's student",
            key,
            "export a student distilled from this teacher, or set export_student.model: null",
        )
    log.info("export_student: exporting %s", source)
    return bundle, source


def _log_onnx_student(tracker: JobTracker, onnx_bytes: bytes, student: ModelBundle, task: str) -> str | None:
    """The fp32 ONNX student as a LoggedModel (``student_onnx``) of the export run."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "student.onnx"
        path.write_bytes(onnx_bytes)
        return tracker.log_onnx_model(
            path,
            tags={
                "task": task,
                "role": "student_onnx",
                "store_key": student.info.get("key", ""),
                "student_run_id": Lineage.of(student.info).run_id or "",
            },
        )


def _metric_key(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name).strip("_").replace("__", "_")
