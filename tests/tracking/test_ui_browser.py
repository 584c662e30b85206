"""bert_kd.tracking.ui in a browser: the MLflow UI's first screen, as the printed link opens it, on a laptop's
screen (headless Chromium over the DevTools protocol; skipped without Chromium)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from tests.pipelines.conftest import _scratch_project, _session_runner
from tests.pipelines.test_viz import BROWSERS, WINDOW, DevTools

#: The columns a reader needs on the first screen: the score, and what tells the runs apart.
FIRST_SCREEN = ("final/score", "method", "task")

#: What the runs table shows: each header's text and box, each run name's box, the Assistant panel's box.
TABLE_STATE = """JSON.stringify({
  headers: [...document.querySelectorAll('.ag-header-cell')].map(h => {
    const r = h.getBoundingClientRect();
    const x = r.left + Math.min(r.width / 2, 20), y = r.top + r.height / 2;
    const top = document.elementFromPoint(x, y);
    return {text: h.innerText.trim(), left: r.left, right: r.right, top: r.top, bottom: r.bottom,
            on_top: !!top && h.contains(top)};
  }),
  runs: [...document.querySelectorAll('.ag-root a[href*="/runs/"]')].map(link => {
    const r = link.getBoundingClientRect();
    return {text: link.innerText.trim(), top: r.top, bottom: r.bottom};
  }),
})"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_server(port: int, ui: subprocess.Popen, deadline: float) -> None:
    while time.monotonic() < deadline:
        if ui.poll() is not None:
            raise AssertionError(f"the MLflow UI exited: {ui.stdout.read() if ui.stdout else ''}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
            return
        except OSError:
            time.sleep(0.5)
    raise AssertionError("the MLflow UI did not answer in time")


#: The charts page: its sections' titles, top to bottom.
CHART_SECTIONS = """JSON.stringify({
  sections: [...document.querySelectorAll('div')]
    .filter(e => e.children.length == 0)
    .map(e => e.textContent.trim())
    .filter(t => ['Dev score and curves', 'grad_share', 'final', 'time', 'train', 'eval', 'alp'].includes(t)),
})"""


def first_screen(browser: str, url: str, screenshot: Path, expression: str = TABLE_STATE, ready=None) -> dict:
    """The page at ``url`` in a fresh profile on a [`WINDOW`][] screen, once what ``expression`` reads of it is
    ``ready`` (default: three runs and the table's headers) and stayed put for 1.5 s (MLflow loads the view,
    then the runs); the screenshot to ``screenshot``."""
    ready = ready or (lambda state: len(state["runs"]) >= 3 and state["headers"])
    client = pytest.importorskip("websockets.sync.client")
    profile = tempfile.TemporaryDirectory()
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-port=0"]
    chrome = subprocess.Popen(
        [*command, f"--user-data-dir={profile.name}", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    import re

    try:
        port = next(m.group(1) for line in chrome.stderr if (m := re.search(r"ws://[^:]+:(\d+)/", line)))
        pages = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30))
        with client.connect(next(p["webSocketDebuggerUrl"] for p in pages if p["type"] == "page")) as page:
            devtools = DevTools(page)
            devtools.call(
                "Emulation.setDeviceMetricsOverride",
                width=WINDOW[0],
                height=WINDOW[1],
                deviceScaleFactor=1,
                mobile=False,
            )
            devtools.call("Page.navigate", url=url)
            deadline, last, steady, state = time.monotonic() + 120, None, 0, None
            while time.monotonic() < deadline and steady < 3:
                time.sleep(0.5)
                answer = devtools.call("Runtime.evaluate", expression=expression, returnByValue=True)
                state = json.loads(answer["result"]["value"])
                shape = json.dumps(state, sort_keys=True)
                settled = bool(ready(state))
                steady = steady + 1 if settled and shape == last else 0
                last = shape if settled else None
            screenshot.write_bytes(base64.b64decode(devtools.call("Page.captureScreenshot", format="png")["data"]))
            assert steady >= 3, f"the runs table did not settle: {state}"
            return state
    finally:
        chrome.terminate()
        chrome.wait(timeout=30)
        profile.cleanup()


@pytest.fixture
def tiny_run(tmp_path, monkeypatch, tiny_teacher_dir, tiny_glue_dir):
    """``tiny_run(pipeline, **params)``: a real ``kedro run`` in a scratch project with its own MLflow store, on
    the tiny teacher and tiny GLUE (tests/pipelines/conftest.py's runner, its store empty)."""
    return _session_runner(tmp_path, _scratch_project(tmp_path, monkeypatch), tiny_teacher_dir, tiny_glue_dir)


@pytest.mark.slow
def test_the_printed_link_shows_score_method_and_task_on_a_laptop_s_first_screen(tiny_run, tmp_path):
    """A tiny ``distill_alp`` run (a teacher and an ALP student under the run's parent), the UI started as
    ``scripts/mlflow_ui.sh`` starts it, the link it prints opened in a fresh browser at 1400×900: the headers
    ``final/score``, ``method`` and ``task`` lie inside the screen and nothing covers them (MLflow's Assistant
    panel opens by itself on a local server's first visit), and the training jobs' rows show beside their parent;
    the charts link opens on the dev score's section. The screenshots are ``mlflow_first_screen.png`` and
    ``mlflow_charts.png`` under ``tmp_path`` (``MLFLOW_SCREENSHOT``: the first also copied there)."""
    browser = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
    if browser is None:
        pytest.skip("no headless Chromium on this machine (Debian: apt-get install chromium)")
    _, root, uri = tiny_run("distill_alp", tracking={"enabled": True, "log_models": False})
    port = free_port()
    ui = subprocess.Popen(
        [sys.executable, "-m", "bert_kd.tracking", "ui", "--backend-store-uri", uri, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=root,
    )
    try:
        url = ui.stdout.readline().split(": ", 1)[1].strip()
        printed = [ui.stdout.readline() for _ in range(3)]
        charts = next(line.split(": ", 1)[1].strip() for line in printed if "charts" in line)
        wait_for_server(port, ui, time.monotonic() + 120)
        screenshot = tmp_path / "mlflow_first_screen.png"
        state = first_screen(browser, url, screenshot)
        sections = first_screen(
            browser, charts, tmp_path / "mlflow_charts.png", CHART_SECTIONS, lambda s: len(s["sections"]) >= 2
        )["sections"]
    finally:
        ui.terminate()
        ui.wait(timeout=30)
        if os.environ.get("MLFLOW_SCREENSHOT") and (tmp_path / "mlflow_first_screen.png").exists():
            shutil.copy(tmp_path / "mlflow_first_screen.png", os.environ["MLFLOW_SCREENSHOT"])
    headers = {h["text"]: h for h in state["headers"]}
    for name in FIRST_SCREEN:
        assert name in headers, f"no column {name!r}: {sorted(headers)}"
        box = headers[name]
        inside = box["left"] >= 0 and box["right"] <= WINDOW[0] and box["top"] >= 0 and box["bottom"] <= WINDOW[1]
        assert inside and box["on_top"], f"{name!r} is off the first screen or covered: {box}"
    runs = {r["text"] for r in state["runs"] if r["bottom"] <= WINDOW[1]}
    assert {"distill_alp:rte [kedro run]", "distill_alp:rte", "train_teacher:rte"} <= runs, runs
    assert sections[0].startswith("Dev score and curves"), sections  # the charts link opens on the dev score
