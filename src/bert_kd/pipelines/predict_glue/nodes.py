"""Node of ``predict_glue``: one model's predictions on ``task``'s GLUE test split(s), written as
the server's TSV file(s) and (re)zipped with the files already in the output folder."""

from __future__ import annotations

import json
import logging
import zipfile
from pathlib import Path

from bert_kd.data.glue import get_task, resolve_glue_dir
from bert_kd.data.tokenize import tokenize_frame
from bert_kd.errors import UserError
from bert_kd.glue_submission import prediction_strings, read_test_split, submission_files, submission_frame
from bert_kd.glue_submission import write_submission_tsv, write_zip
from bert_kd.pipelines import common
from bert_kd.pipelines.evaluate.nodes import load_model_for_task
from bert_kd.schema import Block, PredictGlue, Tracking, typed
from bert_kd.training import SupervisedObjective, make_loader, predict_logits

log = logging.getLogger(__name__)


def predict_glue_test(predict_glue: Block[PredictGlue], task: str, glue_dir: str | None,
                      tracking: Block[Tracking]) -> dict:
    """``predict_glue.model`` on every test split of ``task`` (MNLI: matched, mismatched and AX) →
    ``<output_dir>/<Task>.tsv`` and ``<output_dir>/submission.zip``; a summary (files, rows)."""
    settings = typed(PredictGlue, predict_glue, "predict_glue")
    source = settings.model or ""
    if not source:
        raise UserError("no model given", "predict_glue.model",
                        "--params predict_glue.model=<store dir | runs:/<id>/model | models:/<name>/<version>>")
    spec = get_task(task)
    bundle, _ = load_model_for_task(source, spec.name, "predict_glue.model", settings.max_seq_length,
                                    settings.allow_task_mismatch, verb="predict with")
    root, _ = resolve_glue_dir(glue_dir)
    output = Path(settings.output_dir)
    collator = common.collator_for(bundle.tokenizer)
    objective = SupervisedObjective(bundle.model)
    written = {}
    for target in submission_files(spec.name, root, settings.ax_file):
        frame = read_test_split(target.source, spec.name)  # AX has MNLI's columns and labels
        tokenized = tokenize_frame(frame, bundle.tokenizer, settings.max_seq_length)
        loader = make_loader(tokenized, settings.batch_size, collator, shuffle=False)
        outputs, _ = predict_logits(objective, loader)
        path = write_submission_tsv(submission_frame(frame["index"], prediction_strings(spec.name, outputs)),
                                    output / target.name)
        written[target.name] = {"rows": len(frame), "source": str(target.source), "path": str(path)}
        log.info("predict_glue: %s (%d rows) from %s", path, len(frame), target.source)
    archive = write_zip(output)
    summary = {"task": spec.name, "model": source, "files": written, "zip": str(archive)}
    log.info("predict_glue: %s holds %s; upload it at https://gluebenchmark.com/submit", archive,
             ", ".join(sorted(zipfile.ZipFile(archive).namelist())))
    if common.tracking_enabled(tracking):
        common.log_to_active_run({"glue_submission/summary.json": json.dumps(summary, indent=2)}, {})
    return summary
