import logging
import warnings

import pytest

from bert_kd.kedro_project.quiet import KnownNoiseFilter, silence_known_warnings


def _record(message: str) -> logging.LogRecord:
    return logging.LogRecord("py.warnings", logging.WARNING, __file__, 1, message, None, None)


def test_filter_drops_known_noise_and_keeps_the_rest():
    noise = KnownNoiseFilter()
    assert not noise.filter(_record("x.py:1: UserWarning: \x1b[33mAdd type hints to the `predict` method to enable"))
    assert not noise.filter(_record("y.py:2: UserWarning: register_new_resolver() is deprecated and will be removed"))
    assert noise.filter(_record("z.py:3: UserWarning: the teacher was trained on another task"))


def test_known_warnings_are_ignored_but_others_still_raise():
    silence_known_warnings()
    with warnings.catch_warnings(record=True) as caught:
        warnings.filterwarnings("always", message="keep me")
        warnings.warn("One or more dataset names contain '.' characters, which is not recommended", UserWarning)
        warnings.warn("keep me", UserWarning)
    assert [str(w.message) for w in caught] == ["keep me"]


def _catalog_record(message: str, level: int = logging.INFO) -> logging.LogRecord:
    return logging.LogRecord(
        "kedro.io.data_catalog", level, __file__, 1, message, ("alp_kd.alp.student", "MemoryDataset"), None
    )


def test_kedros_per_dataset_lines_are_quiet_unless_asked_for(monkeypatch):
    from bert_kd.kedro_project.quiet import LOG_DATASETS_ENV, DatasetIOFilter

    quiet = DatasetIOFilter()
    monkeypatch.delenv(LOG_DATASETS_ENV, raising=False)
    assert not quiet.filter(_catalog_record("Loading data from %s (%s)..."))
    assert not quiet.filter(_catalog_record("Saving data to %s (%s)..."))
    assert quiet.filter(_catalog_record("Loading data from %s (%s)...", logging.WARNING))  # never a warning
    assert quiet.filter(_catalog_record("Dataset %s not found"))
    monkeypatch.setenv(LOG_DATASETS_ENV, "1")
    assert quiet.filter(_catalog_record("Loading data from %s (%s)..."))


def test_the_filter_is_on_kedros_catalog_logger_once_the_project_settings_are_imported():
    import bert_kd.settings  # noqa: F401 - what Kedro imports first, for every command
    from bert_kd.kedro_project.quiet import CATALOG_LOGGER, DatasetIOFilter, quiet_dataset_io

    quiet_dataset_io()
    assert sum(isinstance(f, DatasetIOFilter) for f in logging.getLogger(CATALOG_LOGGER).filters) == 1


def test_a_log_line_quoting_a_url_shows_no_password_whichever_logger_writes_it(caplog):
    import bert_kd.settings  # noqa: F401 - installs the masking record factory, as for every Kedro command
    from bert_kd.kedro_project.quiet import mask_passwords_in_logs

    mask_passwords_in_logs()  # idempotent: a second call wraps nothing twice
    assert getattr(logging.getLogRecordFactory(), "masks_passwords", False)
    with caplog.at_level(logging.INFO):
        logging.getLogger("some.library").info("connecting to %s", "postgresql+psycopg://u:s3cret@db:5433/x")
        logging.getLogger("bert_kd.sweeps").warning("plain line with 100% and no URL")
    assert [r.getMessage() for r in caplog.records] == [
        "connecting to postgresql+psycopg://u:***@db:5433/x",
        "plain line with 100% and no URL",
    ]


#: What the libraries print at INFO (or as bars) in a `kedro run`: none of it at the default verbosity.
THIRD_PARTY_LINES = (
    "Using '",  # Kedro: its logging configuration
    "Kedro project",
    "No typed parameter requirements found",
    "Using synchronous mode",
    "Running node",
    "Completed node",
    "Pipeline execution completed",
    "Registering new custom resolver",  # kedro-mlflow
    "Mlflow run '",
    "Creating initial MLflow database tables",  # MLflow
    "LOAD REPORT",  # transformers
    "Loading weights",
    "Writing model shards",
)


def _kedro_run(project, pipeline: str, params: str, *flags: str):
    import os
    import subprocess
    import sys

    env = {**os.environ, "KEDRO_DISABLE_TELEMETRY": "1", "HF_HUB_OFFLINE": "1", "COLUMNS": "250"}
    env["MLFLOW_TRACKING_URI"] = f"sqlite:///{project / 'mlflow.db'}"
    for name in (
        "GLUE_DIR",
        "KEDRO_LOGGING_CONFIG",
        "BERT_KD_VERBOSE",
        "MLFLOW_LOGGING_LEVEL",
        "TRANSFORMERS_VERBOSITY",
    ):
        env.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-m", "kedro", "run", f"--pipelines={pipeline}", "--params", params, *flags],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout + done.stderr


@pytest.mark.slow  # two `kedro run`s in their own processes: about two minutes on 2 busy cores
def test_a_kedro_run_shows_the_projects_lines_and_the_libraries_only_with_v(tmp_path, tiny_teacher_dir, tiny_glue_dir):
    """The terminal of a real `kedro run` with the project's logging configuration: bert-kd's own lines, its bars
    and the closing summary; no third-party INFO line or bar, the parent run's name whole (no Rich markup), each
    epoch's metrics rounded on a line of their own. ``-v`` brings Kedro's node lines back."""
    import re
    import shutil

    from tests.conftest import REPO_ROOT

    project = tmp_path / "project"
    shutil.copytree(REPO_ROOT / "conf" / "base", project / "conf" / "base")
    shutil.copy(REPO_ROOT / "conf" / "logging.yml", project / "conf" / "logging.yml")
    shutil.copy(REPO_ROOT / "pyproject.toml", project / "pyproject.toml")
    (project / "conf" / "local").mkdir()
    (project / "src").mkdir()
    params = (
        f"glue_dir={tiny_glue_dir},teacher.model={tiny_teacher_dir},teacher.max_seq_length=32,max_train_samples=null,"
        "teacher.training.epochs=1,tang_student.bilstm.hidden_size=8,tang_student.bilstm.classifier_size=8,"
        "tang_student.training.epochs=1,task=rte"
    )
    out = _kedro_run(project, "distill_bilstm", params)
    assert not [line for line in THIRD_PARTY_LINES if line in out], out[-5000:]
    assert "MLflow run 'distill_bilstm:rte [kedro run]'" in out
    epochs = re.findall(r"(?m)^(.*)teacher rte epoch 1: (\{.*?\})", out)
    assert epochs and all(re.fullmatch(r"\{'accuracy': \d\.\d{1,4}\}", metrics) for _, metrics in epochs), epochs
    assert all("it/s" not in before for before, _ in epochs)  # not glued to the end of a bar's line
    assert "── distill_bilstm finished ──" in out and "bilstm: dev accuracy" in out
    loud = _kedro_run(project, "data_processing", params, "-v")
    assert "Running node" in loud and "Completed node" in loud
