"""Node of ``train_teacher``: the teacher's job body ([`bert_kd.experiment.training_jobs.teacher`][])."""

from __future__ import annotations

from typing import Mapping

from bert_kd.config.schema import Block, Teacher
from bert_kd.core.models import ModelBundle
from bert_kd.experiment.run_setup import RunSettings
from bert_kd.experiment.training_jobs import teacher as teacher_job


def train_teacher(tokenized, teacher: Block[Teacher], run: RunSettings | Mapping) -> ModelBundle:
    """Fine-tune ``teacher.model`` on the run's task, or reuse the teacher already trained from the same
    content ([`bert_kd.experiment.training_jobs.teacher.train_teacher`][])."""
    return teacher_job.train_teacher(tokenized, teacher, run)
