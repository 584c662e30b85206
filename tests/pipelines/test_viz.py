"""kedro-viz can build the whole DAG (its exit code is 0 even on failure: check the files)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT


def test_kedro_viz_build_writes_the_dag(tmp_path):
    shutil.copy(REPO_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(REPO_ROOT / "conf" / "base", tmp_path / "conf" / "base")
    (tmp_path / "conf" / "local").mkdir()
    (tmp_path / "src").mkdir()
    kedro = Path(sys.executable).with_name("kedro")
    env = {**os.environ, "KEDRO_DISABLE_TELEMETRY": "1"}
    subprocess.run([str(kedro), "viz", "build"], cwd=tmp_path, env=env, check=True, capture_output=True, timeout=600)
    main = tmp_path / "build" / "api" / "main"
    assert main.exists(), "kedro viz build wrote no build/api/main"
    graph = json.loads(main.read_text())
    names = {n["name"] for n in graph["nodes"]}
    assert {"train_teacher", "train_ted_filters", "compare_distill_baselines"} <= names
    pipelines = {p["id"] for p in graph["pipelines"]}
    assert {"distill_alp", "distill_ted", "distill_multi_teacher", "train_teacher"} <= pipelines
