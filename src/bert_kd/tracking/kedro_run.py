"""The MLflow side of [`bert_kd.experiment.tracker.KedroRunReporter`][]: what report nodes show on
the run kedro-mlflow opened for a ``kedro run`` (every call a no-op when no run is active)."""

from __future__ import annotations

from typing import Mapping

from bert_kd.config.credentials import mask, scrub
from bert_kd.experiment.tracker import Comparison, KedroRunReporter
from bert_kd.tracking.comparison import log_comparison_to_parent
from bert_kd.tracking.evaluation import flat_eval_metrics, floor_tag
from bert_kd.tracking.format import metric_key
from bert_kd.tracking.runs import is_main_process, log_to_active_run
from bert_kd.tracking.ui import MAX_NOTE_CHARS, NOTE_TAG


def _active() -> bool:
    import mlflow

    return mlflow.active_run() is not None and is_main_process()


class MlflowKedroRun(KedroRunReporter):
    """[`bert_kd.experiment.tracker.KedroRunReporter`][] on MLflow's active run."""

    def log_files(self, texts: Mapping[str, str], figures: Mapping[str, object]) -> None:
        log_to_active_run(texts, figures)

    def log_report(self, name: str, table, figure) -> None:
        log_to_active_run({f"{name}.csv": table.to_csv(index=False)}, {f"{name}.png": figure})

    def log_comparison(self, comparison: Comparison) -> None:
        c = comparison
        log_to_active_run({f"{c.name}.md": c.markdown}, {f"{c.name}.png": c.figure})
        log_comparison_to_parent(
            c.frame, c.metric, markdown=c.body, title=c.title, warning=c.warning, teacher_run_id=c.teacher_run_id
        )

    def set_tags(self, tags: Mapping[str, str]) -> None:
        import mlflow

        if mlflow.active_run() is not None:
            mlflow.set_tags(scrub(dict(tags)))

    def head_note(self, line: str) -> None:
        """``line`` above the run's description (its Overview shows the first lines without "Show more")."""
        if not _active():
            return
        import mlflow

        run = mlflow.active_run()
        note = mlflow.MlflowClient().get_run(run.info.run_id).data.tags.get(NOTE_TAG, "")
        mlflow.set_tag(NOTE_TAG, mask(f"{line}\n\n{note}")[:MAX_NOTE_CHARS])

    def log_evaluation(self, evaluation: Mapping) -> None:
        if not _active():
            return
        import mlflow

        mlflow.log_metrics(flat_eval_metrics(evaluation))
        mlflow.log_dict(dict(evaluation), "evaluation.json")
        mlflow.set_tags({"evaluated_model": evaluation["model"], **floor_tag(evaluation)})

    def log_metrics(self, metrics: Mapping[str, float]) -> None:
        if not _active() or not metrics:
            return
        import mlflow

        mlflow.log_metrics({key: float(value) for key, value in metrics.items()})

    def log_reproduction(self, note: str, compare_means: Mapping[tuple[str, str], float], paths) -> None:
        if not _active():
            return
        import mlflow

        mlflow.set_tag(NOTE_TAG, mask(note)[:MAX_NOTE_CHARS])
        metrics = {f"compare/{metric_key(method)}/{metric_key(task)}": v for (method, task), v in compare_means.items()}
        if metrics:
            mlflow.log_metrics(metrics)
        for path in paths:
            mlflow.log_artifact(str(path), "reproduce")
