"""Node: fine-tune a teacher on the task, or reuse the one already trained with these settings."""

from __future__ import annotations

import logging

from bert_kd.data.glue import get_task
from bert_kd.models import ModelBundle, load_classifier, load_tokenizer
from bert_kd.pipelines import common
from bert_kd.training import SupervisedObjective, config_fingerprint, fit

log = logging.getLogger(__name__)


def teacher_key(task: str, teacher: dict, seed: int, tokenized) -> str:
    """Everything that determines the fine-tuned teacher."""
    return config_fingerprint(
        task, teacher["model"], teacher["max_seq_length"], teacher.get("training"), seed, common.data_fingerprint(tokenized)
    )


def train_teacher(tokenized, task: str, teacher: dict, seed: int, tracking: dict, runtime: dict) -> ModelBundle:
    """Fine-tune ``teacher.model`` on the task (AdamW, warm-up, clipping, best dev epoch kept).

    A teacher already trained with the same settings and data is reused unless
    ``teacher.retrain`` is true, so distillation pipelines fine-tune it only once.
    """
    spec = get_task(task)
    seed = int(teacher.get("seed", seed))
    key = teacher_key(spec.name, teacher, seed, tokenized)
    store = common.store_dir("teachers", spec.name, key)
    if not teacher.get("retrain", False):
        stored = common.load_stored_bundle(store)
        if stored is not None:
            log.info("reusing the fine-tuned teacher at %s (set teacher.retrain=true to train again)", store)
            return stored

    tokenizer = load_tokenizer(teacher["model"])
    model = load_classifier(teacher["model"], spec.num_labels, is_regression=spec.is_regression)
    config = common.training_config(
        teacher.get("training"), runtime, seed, spec.name, common.STORE_ROOT / "checkpoints" / "teachers" / key
    )
    run_name = f"train_teacher:{spec.name}"
    with common.tracked_run(run_name, common.tracking_enabled(tracking), {"role": "teacher", "task": spec.name}) as run:
        run.log_params({"task": spec.name, "teacher": teacher, "seed": seed, "training": vars(config)})
        result = fit(
            SupervisedObjective(model),
            tokenized["train"],
            tokenized[common.evaluation_split(tokenized)],
            config,
            collator=common.collator_for(tokenizer),
            evaluate_fn=common.evaluate_fn(spec.name),
            log_fn=run.log_metrics,
            description=f"teacher {spec.name}",
        )
        info = {
            "role": "teacher",
            "task": spec.name,
            "num_labels": spec.num_labels,
            "base_model": teacher["model"],
            "key": key,
            "seed": seed,
            "best_epoch": result.best_epoch,
            "best_metrics": result.best_metrics,
            "history": result.history,
            "mlflow_run_id": run.run_id,
        }
        bundle = ModelBundle(model, tokenizer, info)
        common.store_bundle(bundle, store)
        common.log_model_artifact(store, run, tracking)
    return bundle
