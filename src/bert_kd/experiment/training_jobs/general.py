"""General distillation's job body (Kedro-free): a corpus tokenized once into shards, then a general student
distilled from a pre-trained teacher on it (TinyBERT's first stage or DistilBERT's triple loss), stored as a
content-keyed entry (``general_student/<key>``) that ``student.model`` names for the task stage.

The unit is the optimizer step (``general.training.max_steps``): a corpus epoch is long, checkpoints come
every ``runtime.checkpoint_every_steps`` and a killed run resumes at the same batch (the loop's seeded data
order, the checkpoint's step-in-epoch and random states). See docs/general_distillation.md.
"""

from __future__ import annotations

import itertools
import logging
from functools import partial
from pathlib import Path
from typing import Iterator

from bert_kd.config.errors import ParameterError
from bert_kd.config.schema import General, GeneralCorpus, typed
from bert_kd.core.data.glue import TASKS
from bert_kd.core.data.glue_corpus import glue_tasks_present, glue_training_sentences
from bert_kd.core.data.shards import (
    corpus_key,
    files_identity,
    open_shards,
    read_passages,
    shards_manifest,
    shards_problem,
    write_shards,
)
from bert_kd.core.distill.general import GeneralDistillation, has_masked_lm_head
from bert_kd.core.models import (
    ModelBundle,
    build_student,
    count_parameters,
    load_classifier,
    load_tokenizer,
    resolve_model_name,
)
from bert_kd.core.training import TrainingConfig, fit
from bert_kd.core.training.distributed import broadcast_from_rank_zero
from bert_kd.experiment import jobs
from bert_kd.experiment.publishing import JobRunSpec, run_model_job
from bert_kd.experiment.run_setup import RunSettings, collator_for, step_logger
from bert_kd.experiment.store import STORE_ROOT, model_identity
from bert_kd.experiment.store import job as store_job
from bert_kd.experiment.tracker import is_main_process

log = logging.getLogger(__name__)

#: Store kinds: the tokenized corpus and the general student.
CORPUS_KIND = "corpus_shards"
GENERAL_KIND = "general_student"
#: ``bert_kd.json``'s role of a general student (its model card says what it is).
GENERAL_ROLE = "general_student"


def corpus_source(corpus: GeneralCorpus, glue_dir: str | None) -> tuple[dict, Iterator[str]]:
    """(key material, passages) of the configured corpus (``max_passages``: the first n only)."""
    if corpus.files:
        missing = [f for f in corpus.files if not Path(f).is_file()]
        if missing:
            raise ParameterError([("general.corpus.files", f"no such file: {missing}")], fix="list text files")
        identity, passages = files_identity(corpus.files), read_passages(corpus.files)
    elif corpus.hf_dataset:
        identity = {"hf_dataset": corpus.hf_dataset, "split": corpus.hf_split, "column": corpus.hf_column}
        passages = _hub_passages(corpus)
    else:
        if not glue_dir or not glue_tasks_present(glue_dir):
            raise ParameterError(
                [("general.corpus.glue_stand_in", f"no GLUE training file under glue_dir={glue_dir!r}")],
                fix="set glue_dir to a folder with the GLUE tasks (e.g. glue_dir=../shared/glue)",
            )
        root = Path(glue_dir)
        train_files = [root / TASKS[t].dir_name / TASKS[t].train_file for t in glue_tasks_present(root)]
        identity = {"glue_stand_in": files_identity(train_files)}
        passages = glue_training_sentences(glue_dir)
    if corpus.max_passages:
        identity = {**identity, "max_passages": corpus.max_passages}
        passages = itertools.islice(passages, corpus.max_passages)
    return identity, passages


def _hub_passages(corpus: GeneralCorpus) -> Iterator[str]:
    import datasets

    rows = datasets.load_dataset(corpus.hf_dataset, split=corpus.hf_split, streaming=True)
    for row in rows:
        text = str(row[corpus.hf_column] or "").strip()
        if text:
            yield text


def prepare_corpus(general: General, glue_dir: str | None = None, store_root: Path = STORE_ROOT) -> Path:
    """The corpus tokenized by the teacher's tokenizer into shards under ``corpus_shards/<key>`` (reused
    when they exist and match what was recorded when they were written; a damaged folder is moved aside to
    ``<key>.corrupt-<time>`` with a warning naming it and the corpus tokenized again; written by rank 0, the other
    processes wait for its path)."""
    general = typed(General, general, "general")
    identity, passages = corpus_source(general.corpus, glue_dir)
    key = corpus_key(identity, model_identity(general.teacher), general.max_seq_length)
    target = Path(store_root) / CORPUS_KIND / key
    if is_main_process() and target.exists():
        problem = shards_problem(target)
        if problem is not None:
            jobs.move_aside(target, problem)
    if is_main_process() and not target.exists():
        tokenizer = load_tokenizer(general.teacher)
        write_shards(passages, tokenizer, target, max_seq_length=general.max_seq_length, source=identity)
        log.info("corpus %s: %d passages tokenized into %s", key, shards_manifest(target)["rows"], target)
    return Path(broadcast_from_rank_zero(str(target)))


def load_general_teacher(general: General):
    """The frozen teacher: its masked-LM model for ``distilbert`` (refused when the checkpoint has no masked-LM
    head: HF would draw one at random), any encoder with a throw-away 2-label head for ``tinybert``."""
    if general.loss == "tinybert":
        return load_classifier(general.teacher, 2)
    from transformers import AutoModelForMaskedLM

    try:
        model, info = AutoModelForMaskedLM.from_pretrained(
            resolve_model_name(general.teacher), output_loading_info=True, attn_implementation="eager"
        )
    except ValueError as error:
        raise ParameterError(
            [("general.teacher", f"{general.teacher!r} has no masked-LM form: {error}")],
            fix="use general.loss: tinybert or a teacher with a masked-LM head (e.g. bert-base-uncased)",
        ) from None
    head_missing = any(k.startswith(("cls.", "lm_head", "vocab_")) for k in info.get("missing_keys", []))
    if head_missing or not has_masked_lm_head(model):
        raise ParameterError(
            [
                (
                    "general.teacher",
                    f"{general.teacher!r} has no trained masked-LM head, which DistilBERT's L_ce and L_mlm read",
                )
            ],
            fix="use general.loss: tinybert, or a checkpoint saved with its masked-LM head (BertForMaskedLM)",
        )
    return model


def general_config(general: General, run: RunSettings, checkpoint_dir) -> TrainingConfig:
    """The run's TrainingConfig: random batches (length grouping would read every row's length), no evaluation."""
    config = TrainingConfig.from_schema(
        general.training, run.runtime, seed=run.seed, select_metric=None, checkpoint_dir=checkpoint_dir
    )
    config.group_by_length = False
    if checkpoint_dir is not None:
        config.keep_checkpoint = True
    return config


def general_job(shards: Path, general: General, run: RunSettings) -> jobs.Job:
    """The store job: keyed on the corpus shards, the teacher, the recipe, the student and the training."""
    recipe = general.model_dump(include={"loss", "weights", "temperature", "mask_probability"})
    if general.loss == "distilbert":  # options of the triple loss only: TinyBERT's students keep their keys
        recipe.update(distill_positions=general.distill_positions, mask_smoothing=general.mask_smoothing)
    spec = {
        "corpus": Path(shards).name,
        "teacher": model_identity(general.teacher),
        "recipe": recipe,
        "student": {"num_layers": general.num_layers, "layer_selection": general.layer_selection},
        "max_seq_length": general.max_seq_length,
        "training": jobs.training_spec(vars(general_config(general, run, None))),
        "seed": run.seed,
    }
    return store_job(GENERAL_KIND, spec)


def train_general_student(shards: str | Path, general: General, run) -> ModelBundle:
    """Distil (or reuse) the general student of ``general`` on the corpus ``shards``."""
    general, run = typed(General, general, "general"), RunSettings.of(run)
    job = general_job(Path(shards), general, run)
    train = partial(_distil, shards=Path(shards), general=general, settings=run, key=job.key)
    return run_model_job(
        job,
        train,
        run.tracking,
        recompute=run.runtime.recompute,
        job_run=JobRunSpec(f"distill_general:{general.loss}", {"role": GENERAL_ROLE}),
    )


def token_counts(corpus, vocab_size: int):
    """How often each vocabulary id occurs in the corpus's ``input_ids`` (DistilBERT's smoothing weights)."""
    import numpy as np
    import torch

    counts = np.zeros(vocab_size, dtype=np.int64)
    for start in range(0, len(corpus), 10_000):
        rows = corpus[start : start + 10_000]["input_ids"]
        if rows:
            counts += np.bincount(np.concatenate([np.asarray(r, dtype=np.int64) for r in rows]), minlength=vocab_size)[
                :vocab_size
            ]
    return torch.from_numpy(counts)


def _distil(checkpoint_dir, *, shards: Path, general: General, settings: RunSettings, key: str, run) -> ModelBundle:
    teacher = load_general_teacher(general)
    tokenizer = load_tokenizer(general.teacher)
    student, kept = build_student(teacher, general.num_layers, general.layer_selection)
    corpus = open_shards(shards)
    smoothed = general.loss == "distilbert" and general.mask_smoothing > 0
    objective = GeneralDistillation(
        student,
        teacher,
        general.loss,
        general.weights,
        temperature=general.temperature,
        mask_probability=general.mask_probability,
        mask_token_id=tokenizer.mask_token_id,
        distill_positions=general.distill_positions,
        mask_smoothing=general.mask_smoothing,
        token_counts=token_counts(corpus, student.config.vocab_size) if smoothed else None,
    )
    config = general_config(general, settings, checkpoint_dir)
    corpus = open_shards(shards)  # checked against its recorded rows and sha256: cut shards train nothing
    run.log_params({"general": general.model_dump(), "training": vars(config), "key": key})
    result = fit(
        objective,
        corpus,
        None,
        config,
        collator=collator_for(tokenizer),
        log_fn=step_logger(run),
        description=f"general {general.loss}",
    )
    encoder = student if general.loss == "distilbert" else student.base_model
    info = {
        "role": GENERAL_ROLE,
        "method": f"{general.loss}_general",
        "base_model": general.teacher,
        "key": key,
        "seed": settings.seed,
        "corpus": shards.name,
        "corpus_rows": shards_manifest(shards)["rows"],
        "corpus_source": sorted(shards_manifest(shards).get("source", {})),
        "initialised_from_teacher_layers": kept,
        "layer_map": objective.mapping,
        "global_step": result.global_step,
        "resumed_from_step": result.resumed_from_step,
        "parameters": count_parameters(encoder),
        "mlflow_run_id": run.run_id,
    }
    return ModelBundle(encoder, tokenizer, info)
