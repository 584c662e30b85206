"""Run pipelines through a real Kedro session in a scratch folder, on tiny local models."""

from __future__ import annotations

import pytest

from tests.conftest import REPO_ROOT, migrated_mlflow_db

TINY_TRAINING = {"epochs": 1, "batch_size": 8, "eval_batch_size": 16}


@pytest.fixture
def run_pipeline(tmp_path, monkeypatch, tiny_teacher_dir, tiny_glue_dir):
    """``run_pipeline(name, **params)`` → (catalog outputs, scratch dir, tracking URI)."""
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    tracking_uri = migrated_mlflow_db(tmp_path / "mlflow.db")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking_uri)
    monkeypatch.delenv("GLUE_DIR", raising=False)
    import shutil

    # A scratch copy of the project's configuration: catalog paths resolve inside tmp_path.
    shutil.copy(REPO_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(REPO_ROOT / "conf" / "base", tmp_path / "conf" / "base")
    (tmp_path / "conf" / "local").mkdir()
    (tmp_path / "src").mkdir()  # bert_kd itself is imported from the installed package
    monkeypatch.chdir(tmp_path)
    bootstrap_project(tmp_path)

    def run(name: str, **params):
        runtime = {
            "task": "rte",
            "glue_dir": str(tiny_glue_dir),
            "max_train_samples": None,
            "teacher": {"model": str(tiny_teacher_dir), "max_seq_length": 32, "training": TINY_TRAINING},
            "student": {"num_layers": 2, "training": {**TINY_TRAINING, "aux_learning_rate": 1e-3}},
            "runtime": {"progress_bar": False, "checkpoint_every_steps": 0},
        }
        runtime.update(params)
        import mlflow

        # MLflow keeps process-wide state (URI, active experiment) that outlives a test's database.
        while mlflow.active_run() is not None:
            mlflow.end_run()
        mlflow.set_tracking_uri(tracking_uri)
        mlflow.tracking.fluent._active_experiment_id = None
        with KedroSession.create(project_path=tmp_path, runtime_params=runtime) as session:
            outputs = session.run(pipeline_names=[name])
        return outputs, tmp_path, tracking_uri

    return run


def mlflow_runs(tracking_uri: str):
    """All runs of the project's experiment as a DataFrame."""
    import mlflow

    mlflow.set_tracking_uri(tracking_uri)
    return mlflow.search_runs(experiment_names=["bert_kd"])


def latest_version(path):
    """The newest version of a versioned Kedro dataset stored at ``path``."""
    versions = sorted(p for p in path.iterdir() if p.is_dir())
    assert versions, f"no version under {path}"
    return versions[-1] / path.name
