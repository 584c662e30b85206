"""Node of ``predict_glue``: one model's predictions on ``task``'s GLUE test split(s), written as
the server's TSV file(s) with their records and (re)zipped with the earlier server files of the
output folder whose records vouch for them."""

from __future__ import annotations

import json
import logging
import zipfile
from pathlib import Path

from bert_kd.config.errors import UserError
from bert_kd.config.schema import Block, PredictGlue, Tracking, typed
from bert_kd.core.data.glue import get_task, resolve_glue_dir
from bert_kd.core.data.glue_submission import (
    AX_FILE,
    prediction_strings,
    read_test_split,
    submission_contents,
    submission_files,
    submission_frame,
    submission_problem,
    write_submission,
    write_zip,
)
from bert_kd.core.data.tokenize import tokenize_frame
from bert_kd.core.files import file_sha256
from bert_kd.core.training import SupervisedObjective, make_loader, predict_logits
from bert_kd.experiment.run_setup import collator_for
from bert_kd.experiment.tracker import kedro_run
from bert_kd.pipelines.evaluate.nodes import load_model_for_task, model_source_hint

log = logging.getLogger(__name__)


def _check_output_dir(output: Path) -> None:
    """``predict_glue.output_dir`` must be a folder (created when missing), never an existing file."""
    for folder in (output, *output.parents):
        if folder.exists() and not folder.is_dir():
            raise UserError(
                f"{folder} is a file, not a folder: the submission cannot be written under it",
                "predict_glue.output_dir",
                "give a folder (it is created when missing): --params predict_glue.output_dir=<folder>, "
                "or move the file away",
            )
        if folder.exists():
            break
    _check_creatable(output)


def _check_creatable(output: Path) -> None:
    """The missing folders of ``output`` can be created: made and removed again (nothing is left behind when
    the run stops later), a [`UserError`][] naming the folder otherwise."""
    missing = [folder for folder in (output, *output.parents) if not folder.exists()]
    made = []
    try:
        for folder in reversed(missing):
            folder.mkdir()
            made.append(folder)
    except OSError as exc:
        raise UserError(
            f"the folder {output} cannot be created ({exc.strerror or exc}: {exc.filename or folder})",
            "predict_glue.output_dir",
            "give a folder you can write to: --params predict_glue.output_dir=<folder> "
            "(default data/07_model_output/glue_submission)",
        ) from exc
    finally:
        for folder in reversed(made):
            folder.rmdir()


def _test_sources(targets, ax_file: str | None, root: Path) -> None:
    """Every test file of the task exists before anything is predicted or written; the diagnostic
    set (MNLI's ``AX.tsv``) is named with its parameter."""
    for target in targets:
        if target.split != "test_ax" or target.source.is_file():
            continue
        if target.source.is_dir():
            raise UserError(
                f"the GLUE diagnostic set {target.source} is a directory, not a file",
                f"{target.source} (predict_glue.ax_file)",
                f"name the file itself: --params predict_glue.ax_file={target.source / 'diagnostic.tsv'}",
            )
        given = "predict_glue.ax_file" if ax_file else f"glue_dir ({root})"
        raise UserError(
            f"the GLUE diagnostic set {target.source} does not exist (an MNLI submission includes AX.tsv, "
            "predicted by the MNLI model)",
            f"{target.source} (predict_glue.ax_file; default from {given})",
            f"put GLUE's diagnostic set at {root / AX_FILE} (python download_glue_data.py --tasks diagnostic), "
            "or name it: --params predict_glue.ax_file=<path to diagnostic.tsv>",
        )


def predict_glue_test(
    predict_glue: Block[PredictGlue], task: str, glue_dir: str | None, tracking: Block[Tracking]
) -> dict:
    """``predict_glue.model`` on every test split of ``task`` (MNLI: matched, mismatched and AX) →
    ``<output_dir>/<Task>.tsv`` with its record ``<Task>.tsv.json``, and ``<output_dir>/submission.zip``
    of the server files whose records vouch for them; a summary (files, rows, files left out).

    Checked before anything is written: the output folder, the model (its task, its positions) and
    every test file (present, unlabelled, unique non-empty indexes)."""
    settings = typed(PredictGlue, predict_glue, "predict_glue")
    source = settings.model or ""
    if not source:
        raise UserError(
            "no model given",
            "predict_glue.model",
            model_source_hint("predict_glue.model"),
        )
    output = Path(settings.output_dir)
    _check_output_dir(output)
    spec = get_task(task)
    bundle, model_task = load_model_for_task(
        source,
        spec.name,
        "predict_glue.model",
        settings.max_seq_length,
        settings.allow_task_mismatch,
        verb="predict with",
    )
    root, _ = resolve_glue_dir(glue_dir)
    targets = submission_files(spec.name, root, settings.ax_file)
    _test_sources(targets, settings.ax_file, Path(root))
    frames = {target.name: read_test_split(target.source, spec.name) for target in targets}  # AX: MNLI's columns
    collator = collator_for(bundle.tokenizer)
    objective = SupervisedObjective(bundle.model)
    written = {}
    for target in targets:
        frame = frames[target.name]
        tokenized = tokenize_frame(frame, bundle.tokenizer, settings.max_seq_length)
        loader = make_loader(tokenized, settings.batch_size, collator, shuffle=False)
        outputs, _ = predict_logits(objective, loader)
        record = {
            "model": source,
            "model_task": model_task,
            "task": spec.name,
            "split": target.split,
            "test_file": str(target.source),
            "test_sha256": file_sha256(target.source),
        }
        path = write_submission(
            submission_frame(frame["index"], prediction_strings(spec.name, outputs)), output / target.name, record
        )
        problem = submission_problem(path)
        if problem is not None:  # what was just written must be what was predicted
            raise RuntimeError(f"predict_glue wrote {path}, which fails its own check: {problem}")
        written[target.name] = {"rows": len(frame), "source": str(target.source), "path": str(path)}
        log.info("predict_glue: %s (%d rows) from %s", path, len(frame), target.source)
    included, skipped = submission_contents(output)
    archive = write_zip(output)
    summary = {
        "task": spec.name,
        "model": source,
        "files": written,
        "zip": str(archive),
        "zipped": included,
        "skipped": skipped,
    }
    log.info(
        "predict_glue: %s holds %s; upload it at https://gluebenchmark.com/submit",
        archive,
        ", ".join(sorted(zipfile.ZipFile(archive).namelist())),
    )
    if typed(Tracking, tracking, "tracking").enabled:
        kedro_run().log_files({"glue_submission/summary.json": json.dumps(summary, indent=2)}, {})
    return summary
