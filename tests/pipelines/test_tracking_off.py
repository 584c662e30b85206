"""With ``tracking.enabled: false`` the report and evaluation nodes load no mlflow (nodes report
through ``bert_kd.experiment.tracker``; only its MLflow implementation imports mlflow)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests import fresh_interpreter


def test_evaluation_comparison_and_export_nodes_with_tracking_off_import_no_mlflow(
    tmp_path, tiny_teacher_dir, tiny_glue_dir
):
    script = textwrap.dedent(f"""
        import os, sys
        os.chdir({str(tmp_path)!r})
        from bert_kd.core.models import load_bundle
        from bert_kd.config.schema import Tracking
        from bert_kd.pipelines.evaluate.nodes import evaluate_model_source
        from bert_kd.pipelines.evaluate_teacher.nodes import evaluate_model
        from bert_kd.pipelines.export_student.nodes import PIPELINE_STUDENT, chosen_student
        off = {{"enabled": False}}
        settings = {{"model": {str(tiny_teacher_dir)!r}, "max_seq_length": 32}}
        evaluation = evaluate_model_source(settings, "rte", {str(tiny_glue_dir)!r}, 10, 0, off)
        bundle = load_bundle({str(tiny_teacher_dir)!r})
        bundle.info["mlflow_run_id"] = "a-run-of-another-store"
        from bert_kd.core.data.glue import load_glue_task
        from bert_kd.core.data.tokenize import tokenize_splits
        tokenized = tokenize_splits(load_glue_task("rte", {str(tiny_glue_dir)!r}, allow_download=False), bundle.tokenizer, 32)
        again = evaluate_model(bundle, tokenized, "rte", off)
        _, source = chosen_student(bundle, None, Tracking(enabled=False), "rte")
        sys.path.insert(0, {str(Path(__file__).parents[2])!r})
        from tests.pipelines.test_comparison_verdict import evaluation as scored
        from bert_kd.pipelines.distill.nodes import compare_methods
        frame, _, _ = compare_methods(scored(None, 0.8), scored("nkd", 0.65), scored("alp", 0.72))  # a report node
        print(evaluation["examples"]["validation"], source == PIPELINE_STUDENT, len(frame), "mlflow" in sys.modules)
    """)
    done = fresh_interpreter.run(script, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-4:] == ["10", "True", "4", "False"]


@pytest.mark.slow  # a Kedro session: 20-40 s on 2 busy cores
def test_a_run_with_tracking_off_creates_no_mlflow_run(tmp_path, monkeypatch, tiny_teacher_dir, tiny_glue_dir):
    from tests.pipelines.conftest import _scratch_project, _session_runner, mlflow_runs

    uri = _scratch_project(tmp_path, monkeypatch)
    run = _session_runner(tmp_path, uri, tiny_teacher_dir, tiny_glue_dir)
    outputs, _, _ = run("data_processing", tracking={"enabled": False})
    assert "teacher_tokenized" in outputs and mlflow_runs(uri).empty  # the store kedro-mlflow would use: no run


@pytest.mark.slow  # a `kedro run` in its own process: about a minute on 2 busy cores
def test_tracking_off_with_a_dead_tracking_server_neither_waits_nor_tracebacks(
    tmp_path, tiny_teacher_dir, tiny_glue_dir
):
    """What the unreachable-server block recommends (``--params tracking.enabled=false``) runs at once: nothing
    asks the server (MLflow would retry a refused connection for minutes)."""
    import os
    import shutil
    import socket
    import subprocess
    import sys
    import time

    from tests.conftest import REPO_ROOT

    with socket.socket() as sock:  # a local port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    project = tmp_path / "project"
    shutil.copytree(REPO_ROOT / "conf" / "base", project / "conf" / "base")
    shutil.copy(REPO_ROOT / "pyproject.toml", project / "pyproject.toml")
    (project / "conf" / "local").mkdir()
    (project / "src").mkdir()
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"http://127.0.0.1:{port}", "KEDRO_DISABLE_TELEMETRY": "1"}
    env.pop("GLUE_DIR", None)
    params = f"tracking.enabled=false,glue_dir={tiny_glue_dir},teacher.model={tiny_teacher_dir},max_train_samples=null"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "kedro", "run", "--pipelines=data_processing", "--params", params],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr + done.stdout
    assert seconds < 150, seconds  # MLflow's retries on a refused connection take about 255 s
