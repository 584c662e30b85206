"""Run pipelines through a real Kedro session in a scratch folder, on tiny local models."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, _mlflow_process_state, _reset_mlflow_process_state, migrated_mlflow_db

TINY_TRAINING = {"epochs": 1, "batch_size": 8, "eval_batch_size": 16}

#: Where a scratch project keeps its teachers (the project's ``STORE_ROOT``/teacher).
TEACHER_STORE = Path("data/06_models/store/teacher")


def _scratch_project(root: Path, monkeypatch) -> str:
    """A scratch copy of the project's configuration in ``root`` (catalog paths resolve inside it), made
    the working folder with its own MLflow store; returns that store's tracking URI."""
    from kedro.framework.startup import bootstrap_project

    tracking_uri = migrated_mlflow_db(root / "mlflow.db")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking_uri)
    monkeypatch.delenv("GLUE_DIR", raising=False)
    shutil.copy(REPO_ROOT / "pyproject.toml", root / "pyproject.toml")
    shutil.copytree(REPO_ROOT / "conf" / "base", root / "conf" / "base")
    (root / "conf" / "local").mkdir()
    (root / "src").mkdir()  # bert_kd itself is imported from the installed package
    monkeypatch.chdir(root)
    bootstrap_project(root)
    return tracking_uri


def _session_runner(root: Path, tracking_uri: str, teacher_dir: Path, glue_dir: Path):
    """``run(name, **params)`` → (catalog outputs, ``root``, tracking URI): one Kedro session per call."""
    from kedro.framework.session import KedroSession

    def run(name: str, **params):
        runtime = {
            "task": "rte",
            "glue_dir": str(glue_dir),
            "max_train_samples": None,
            "teacher": {"model": str(teacher_dir), "max_seq_length": 32, "training": TINY_TRAINING},
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
        with KedroSession.create(project_path=root, runtime_params=runtime) as session:
            outputs = session.run(pipeline_names=[name])
        return outputs, root, tracking_uri

    return run


@pytest.fixture(scope="session")
def trained_tiny_teacher(tmp_path_factory, tiny_teacher_dir, tiny_glue_dir) -> Path:
    """The store entry ``<store>/teacher/<key>`` of the tiny teacher as ``run_pipeline`` configures it,
    trained once per test session through the ``train_teacher`` pipeline (so its key is the one the
    nodes compute)."""
    root = tmp_path_factory.mktemp("trained_tiny_teacher")
    saved = _mlflow_process_state()
    try:
        with pytest.MonkeyPatch.context() as monkeypatch:
            tracking_uri = _scratch_project(root, monkeypatch)
            _session_runner(root, tracking_uri, tiny_teacher_dir, tiny_glue_dir)("train_teacher")
    finally:
        _reset_mlflow_process_state(*saved)
    (entry,) = (root / TEACHER_STORE).iterdir()
    return entry


@pytest.fixture
def run_pipeline(tmp_path, monkeypatch, tiny_teacher_dir, tiny_glue_dir, trained_tiny_teacher):
    """``run_pipeline(name, **params)`` → (catalog outputs, scratch dir, tracking URI). The project's
    store starts with the session's tiny teacher (a copy: a test may damage its own store), so a
    pipeline with the default teacher reuses it by its key instead of training it again."""
    tracking_uri = _scratch_project(tmp_path, monkeypatch)
    shutil.copytree(trained_tiny_teacher, tmp_path / TEACHER_STORE / trained_tiny_teacher.name)
    return _session_runner(tmp_path, tracking_uri, tiny_teacher_dir, tiny_glue_dir)


@pytest.fixture
def run_pipeline_training_the_teacher(tmp_path, monkeypatch, tiny_teacher_dir, tiny_glue_dir):
    """``run_pipeline`` from an empty store: the run trains its teacher (tests of what a trained
    teacher's run and LoggedModel hold)."""
    tracking_uri = _scratch_project(tmp_path, monkeypatch)
    return _session_runner(tmp_path, tracking_uri, tiny_teacher_dir, tiny_glue_dir)


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
