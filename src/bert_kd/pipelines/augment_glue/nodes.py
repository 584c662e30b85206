"""Nodes: augment a task's training split into a transfer set, and hand it to the distillation blocks."""

from __future__ import annotations

import json
import logging

from bert_kd.config.schema import Augment, typed
from bert_kd.core.data.augment import NO_LABEL
from bert_kd.core.models import ModelBundle
from bert_kd.experiment.store import recompute
from bert_kd.experiment.training_jobs.transfer_set import (
    TransferSet,
    check_transfer_set,
    transfer_set_job,
    verified_transfer_set,
)

log = logging.getLogger(__name__)


def build_transfer_set(
    train, teacher: ModelBundle, augment, max_seq_length: int, task: str, runtime=None
) -> TransferSet:
    """The content-keyed transfer set of ``train`` (``augment``: the ``augment`` block; ``augment.path``: a
    stored set to use instead, refused when its files do not match its manifest or it is of another task or
    tokenizer)."""
    block = typed(Augment, augment, "augment")
    if block.path:
        transfer = verified_transfer_set(block.path)
    else:
        transfer = transfer_set_job(train, teacher, block, task, max_seq_length, recompute=recompute(runtime))
    check_transfer_set(transfer, task, teacher.tokenizer, max_seq_length, "augment.path" if block.path else "augment")
    return transfer


def transfer_set_report(transfer: TransferSet) -> dict:
    """What the set is: its key, folder, rows and what made them (data/08_reporting/transfer_set.json)."""
    return json.loads(
        json.dumps({"key": transfer.key, "path": str(transfer.path), "rows": len(transfer.rows), **transfer.info})
    )


def with_transfer_set(tokenized, transfer: TransferSet):
    """``tokenized`` with the transfer set's rows after the training split's own (``labels`` =
    ``NO_LABEL``: the teacher's outputs are their only targets); the dev splits unchanged."""
    from datasets import DatasetDict, concatenate_datasets

    train = tokenized["train"]
    extra = transfer.rows.select_columns(train.column_names).cast(train.features)
    if len(extra) and set(extra.unique("labels")) != {NO_LABEL}:
        raise ValueError(f"transfer set {transfer.path} carries gold labels; its rows must be labelled by the teacher")
    log.info("training split: %d rows + %d transfer-set rows", len(train), len(extra))
    combined = concatenate_datasets([train, extra])
    combined.info.description = ""  # the training split's record of its cut rows counts its own rows only
    return DatasetDict({**tokenized, "train": combined})
