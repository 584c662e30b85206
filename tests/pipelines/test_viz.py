"""kedro-viz opens on the main job alone and builds the whole DAG (pipeline ``all``) grouped by paper,
with data layers and filter tags (its exit code is 0 even on failure: check the files)."""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading

import pytest

from tests.conftest import REPO_ROOT

PAPERS = {"alp_kd", "ted", "multi_teacher"}
#: kedro-viz's first screen: ``distill_alp`` has 42 nodes (12 tasks); the whole DAG has 308 (112 tasks)
MAX_FIRST_SCREEN_NODES = 50


@pytest.fixture(scope="module")
def viz_graph(tmp_path_factory):
    """(the ``all`` pipeline's graph, the command's output, ``build/``) of ``kedro viz build`` over a
    scratch copy of the project's configuration."""
    root = tmp_path_factory.mktemp("viz")
    shutil.copy(REPO_ROOT / "pyproject.toml", root / "pyproject.toml")
    shutil.copytree(REPO_ROOT / "conf" / "base", root / "conf" / "base")
    (root / "conf" / "local").mkdir()
    (root / "src").mkdir()
    env = {**os.environ, "KEDRO_DISABLE_TELEMETRY": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "kedro", "viz", "build"], cwd=root, env=env, capture_output=True, text=True, timeout=600
    )
    main = root / "build" / "api" / "main"
    assert main.exists(), f"kedro viz build wrote no build/api/main:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return json.loads((root / "build/api/pipelines/all").read_text()), done.stdout + done.stderr, root / "build"


def test_the_first_screen_is_the_main_job_and_small(viz_graph):
    """``build/api/main`` (what ``kedro viz run`` opens) is ``distill_alp``, not every pipeline at once."""
    first = json.loads((viz_graph[2] / "api" / "main").read_text())
    assert first["selected_pipeline"] == "__default__"
    default = json.loads((viz_graph[2] / "api/pipelines/distill_alp").read_text())
    assert {n["id"] for n in first["nodes"]} == {n["id"] for n in default["nodes"]}
    assert len(first["nodes"]) <= MAX_FIRST_SCREEN_NODES < len(viz_graph[0]["nodes"])
    assert set(first["modular_pipelines"]) == {"__root__", "data", "teacher", "alp_kd", "alp_kd.alp"}


def test_kedro_viz_build_writes_the_dag(viz_graph):
    graph, _, _ = viz_graph
    names = {n["name"] for n in graph["nodes"]}
    assert {"train_teacher", "build_run_settings"} <= names
    assert {"compare_distill_baselines", "register_distill_baselines"} <= {n.rsplit(".", 1)[-1] for n in names}
    pipelines = {p["id"] for p in graph["pipelines"]}
    assert {"distill_alp", "distill_ted", "distill_multi_teacher", "train_teacher", "distill_baselines"} <= pipelines
    assert {f"distill_{row}" for row in ("ckd_po", "alp_no", "alp_po")} <= pipelines


def test_three_paper_groups_hold_the_methods(viz_graph):
    graph, _, _ = viz_graph
    groups = set(graph["modular_pipelines"])
    assert groups >= PAPERS
    top_level = {g for g in groups if "." not in g} - {"__root__"}
    shared_start = {"data", "teacher"}  # run settings, GLUE rows, the teacher and its cache
    assert top_level == PAPERS | {"compare"} | shared_start, (
        "every method block under its paper, comparisons in compare"
    )
    assert {
        "alp_kd.alp",
        "alp_kd.pkd",
        "alp_kd.ckd_po",
        "alp_kd.alp_no",
        "alp_kd.alp_po",
        "ted.ted",
        "ted.kd",
        "multi_teacher.okd",
        "multi_teacher.teacher_0",
    } <= groups
    assert "alp_kd.alp" in graph["modular_pipelines"]["alp_kd"]["children"][0]["id"] or any(
        child["id"] == "alp_kd.alp" for child in graph["modular_pipelines"]["alp_kd"]["children"]
    )


def test_every_dataset_has_a_data_layer_in_order(viz_graph):
    graph, log, _ = viz_graph
    datasets = [n for n in graph["nodes"] if n["type"] == "data"]
    assert datasets and not [n["name"] for n in datasets if not n.get("layer")]
    assert graph["layers"] == ["raw", "model_input", "models", "reporting"]
    assert "circular dependency" not in log  # kedro-viz switches the layer view off on a cycle
    layer = {n["name"]: n["layer"] for n in datasets}
    assert (
        layer["glue_train"],
        layer["teacher_model"],
        layer["alp_kd.alp.student_model"],
        layer["distill_baselines_table"],
    ) == ("raw", "models", "models", "reporting")


def test_nodes_carry_paper_method_and_role_tags(viz_graph):
    graph, _, _ = viz_graph
    tags = {t["id"] for t in graph["tags"]}
    assert {
        "paper_alp_kd",
        "paper_ted",
        "paper_multi_teacher",
        "method_alp",
        "method_ted",
        "role_teacher",
        "role_student",
        "role_report",
    } <= tags
    distil = next(
        n for n in graph["nodes"] if n["type"] == "task" and n.get("full_name", n["name"]) == "alp_kd.alp.distill"
    )
    assert {"paper_alp_kd", "method_alp", "role_student"} <= set(distil["tags"])


def test_tag_names_read_the_same_after_kedro_vizs_formatting(viz_graph):
    """kedro-viz turns ``_``/``-`` into spaces and capitalises each word; a ``.`` would stay
    ("Method.alp No"): every tag is words joined by ``_``, so it reads "Method Alp No"."""
    graph, _, _ = viz_graph
    tags = {t["id"] for t in graph["tags"]}
    assert tags and not [t for t in tags if "." in t or t.split("_", 1)[0] not in ("paper", "method", "role")]


def test_run_parameters_reach_the_nodes_through_one_input(viz_graph):
    """``task``/``seed``/``tracking``/``runtime`` feed only ``build_run_settings``, not every node."""
    graph, _, _ = viz_graph
    by_id = {n["id"]: n for n in graph["nodes"]}
    readers = {
        by_id[e["target"]]["name"]
        for e in graph["edges"]
        if by_id[e["source"]]["name"] in ("params:task", "params:seed", "params:tracking", "params:runtime")
        and by_id[e["target"]]["type"] == "task"
    }
    assert readers == {"build_run_settings"}


BROWSERS = ("chromium", "chromium-browser", "google-chrome", "headless_shell")


def render(browser: str, build, query: str, *options: str) -> str:
    """The DOM of the built kedro-viz site at ``query``, rendered by headless ``browser``."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(build))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        return subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--virtual-time-budget=20000",
                *options,
                "--dump-dom",
                f"http://127.0.0.1:{server.server_address[1]}/{query}",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
    finally:
        server.shutdown()


def test_built_site_shows_the_three_paper_groups_in_a_browser(viz_graph):
    """The static site of ``kedro viz build`` rendered by headless Chromium on pipeline ``all``
    (``?pid=all``) lists the paper groups."""
    browser = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
    if browser is None:
        pytest.skip("no headless Chromium on this machine (Debian: apt-get install chromium)")
    dom = render(browser, viz_graph[2], "?pid=all")
    text = dom.lower().replace(" ", "_")  # kedro-viz may show pretty names ("Alp Kd")
    for group in PAPERS:
        assert group in text, f"{group} not in the rendered page (not verified on a machine with Chromium)"


def test_every_node_points_at_the_file_that_holds_its_function(viz_graph):
    """A node's "File Path" in kedro-viz is the module of its function: the nodes are wrapped (run settings,
    a bound recipe row) and the wrappers carry the wrapped function's code location."""
    graph, _, build = viz_graph
    shared = {"gather_data_source", "build_run_settings"}  # the run-settings nodes live in pipelines/common.py
    wrong = {}
    for node in graph["nodes"]:
        if node["type"] != "task":
            continue
        path = json.loads((build / "api" / "nodes" / node["id"]).read_text()).get("filepath") or ""
        name = node["name"].rsplit(".", 1)[-1]
        if not path.endswith(".py") or (path.endswith("pipelines/common.py") and name not in shared):
            wrong[node["name"]] = path
    assert not wrong, wrong


#: The browser window of the views below (a laptop's screen): kedro-viz fits the graph into what the
#: sidebar leaves of it (about 930 × 900 px).
WINDOW = (1400, 900)
#: Readable: kedro-viz draws node labels at 14 px at 100% zoom; a view is readable when it opens at 50% or
#: more (labels of 7 px or more on the screen).
MIN_READABLE_ZOOM = 50


def shown_names(build, pipeline: str) -> set[str]:
    """The top-level tasks and groups of ``pipeline`` (what its view shows, datasets aside)."""
    graph = json.loads((build / "api" / "pipelines" / pipeline).read_text())
    by_id = {n["id"]: n["name"] for n in graph["nodes"]}
    return {
        by_id.get(child["id"], child["id"])
        for child in graph["modular_pipelines"]["__root__"]["children"]
        if child["type"] in ("task", "modularPipeline")
    }


def open_view(browser: str, build, pipeline: str, query: str = "", screenshot=None) -> dict:
    """Open ``?pid=<pipeline><query>`` of the built site in headless ``browser`` (a [`WINDOW`][] screen,
    driven over the DevTools protocol) and wait until the graph shown is ``pipeline``'s and its zoom has
    settled (kedro-viz first draws the main job, then lays out the one asked for: a DOM dumped at a fixed
    time can hold either). → ``zoom`` (%), ``labels`` (shown node labels) and ``label_px`` (their height
    on the screen); ``screenshot``: a PNG path to write."""
    import base64
    import tempfile
    import time
    import urllib.request

    client = pytest.importorskip("websockets.sync.client")
    handler = functools.partial(QuietHandler, directory=str(build))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    profile = tempfile.TemporaryDirectory()
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-port=0"]
    chrome = subprocess.Popen(
        [*command, f"--user-data-dir={profile.name}", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        port = next(m.group(1) for line in chrome.stderr if (m := re.search(r"ws://[^:]+:(\d+)/", line)))
        pages = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30))
        with client.connect(next(p["webSocketDebuggerUrl"] for p in pages if p["type"] == "page")) as socket:
            devtools = DevTools(socket)
            devtools.call(
                "Emulation.setDeviceMetricsOverride",
                width=WINDOW[0],
                height=WINDOW[1],
                deviceScaleFactor=1,
                mobile=False,
            )
            devtools.call("Page.navigate", url=f"http://127.0.0.1:{server.server_address[1]}/?pid={pipeline}{query}")
            view = devtools.settled_view(shown_names(build, pipeline), deadline=time.monotonic() + 90)
            if screenshot:
                screenshot.write_bytes(base64.b64decode(devtools.call("Page.captureScreenshot", format="png")["data"]))
            return view
    finally:
        chrome.terminate()
        chrome.wait(timeout=30)
        server.shutdown()
        profile.cleanup()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # one line per request otherwise
        pass


#: The zoom, the shown labels and their height on the screen, read from kedro-viz's page.
VIEW_STATE = """JSON.stringify({
  zoom: (document.querySelector('[title="Zoom level"]') || {}).textContent || null,
  labels: [...document.querySelectorAll('.pipeline-node__text')].map(n => [n.textContent, n.getBoundingClientRect().height])
})"""


class DevTools:
    """Chromium's DevTools protocol over one page's websocket: a command and its answer."""

    def __init__(self, socket):
        self.socket, self.sent = socket, 0

    def call(self, method: str, **params) -> dict:
        self.sent += 1
        self.socket.send(json.dumps({"id": self.sent, "method": method, "params": params}))
        while True:
            answer = json.loads(self.socket.recv(timeout=60))
            if answer.get("id") == self.sent:
                return answer.get("result", answer)

    def settled_view(self, names: set[str], deadline: float) -> dict:
        """The page's state once every name of ``names`` is shown and the zoom stayed put for 1.5 s."""
        import time

        last, steady = None, 0
        while time.monotonic() < deadline:
            time.sleep(0.5)
            state = json.loads(
                self.call("Runtime.evaluate", expression=VIEW_STATE, returnByValue=True)["result"]["value"]
            )
            shown = {label for label, _ in state["labels"]}
            ready = state["zoom"] and names <= shown
            steady = steady + 1 if ready and (state["zoom"], len(shown)) == last else 0
            last = (state["zoom"], len(shown)) if ready else None
            if steady >= 3:
                heights = [height for _, height in state["labels"]]
                return {"zoom": int(state["zoom"].rstrip("%")), "labels": shown, "label_px": min(heights)}
        raise AssertionError(f"kedro-viz did not settle on the view showing {sorted(names)}: last state {last}")


@pytest.mark.parametrize("pipeline", ["distill_baselines", "distill_ted_baselines", "distill_multi_teacher_baselines"])
def test_the_documented_view_of_a_comparison_opens_readable(viz_graph, pipeline):
    """``?pid=<pipeline>&types=nodes`` (docs/mlflow-and-viz.md: datasets hidden) opens at a readable zoom."""
    browser = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
    if browser is None:
        pytest.skip("no headless Chromium on this machine (Debian: apt-get install chromium)")
    view = open_view(browser, viz_graph[2], pipeline, "&types=nodes")
    assert view["zoom"] >= MIN_READABLE_ZOOM, view["zoom"]


@pytest.mark.slow
def test_distill_baselines_default_view_shows_one_gathered_input(viz_graph, tmp_path):
    """The default view of ``distill_baselines`` (every element type shown, groups collapsed) opens readable
    ([`MIN_READABLE_ZOOM`][]; 52% when measured): the rows' evaluations stay inside the collapsed ``alp_kd``
    group, which hands ``compare`` one dataset (``distill_baselines_evaluations``); the shared start sits in
    the groups ``data`` and ``teacher``; each ALP-KD figure is one dataset (its plot and table). It opened at
    16% while compare read one input per row, at 35% with the shared start ungrouped. The screenshot is
    ``distill_baselines.png`` under ``tmp_path``."""
    browser = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
    if browser is None:
        pytest.skip("no headless Chromium on this machine (Debian: apt-get install chromium)")
    view = open_view(browser, viz_graph[2], "distill_baselines", screenshot=tmp_path / "distill_baselines.png")
    assert "distill_baselines_evaluations" in view["labels"]
    assert not [label for label in view["labels"] if label.endswith(".student_metrics")]
    assert {"data", "teacher", "alp_kd_figure4"} <= set(view["labels"])
    assert view["zoom"] >= MIN_READABLE_ZOOM, (view["zoom"], tmp_path / "distill_baselines.png")
    assert view["label_px"] >= 14 * MIN_READABLE_ZOOM / 100 - 0.5


#: Pipelines outside ``all`` (which the build above draws) that kedro-viz shows on their own.
OUTSIDE_ALL = (
    "augment_glue",
    "distill_bilstm",
    "distill_bilstm_transfer",
    "distill_alp_transfer",
    "distill_general",
    "tinybert_general",
)


def test_the_pipelines_outside_all_read_as_well_in_kedro_viz(tmp_path, monkeypatch):
    """Every dataset of the transfer-set and general-distillation pipelines has a data layer, every node a role
    tag, and no node is named as a dataset (kedro-viz would show two boxes of one name)."""
    from kedro.framework.session import KedroSession
    from kedro.framework.startup import bootstrap_project

    shutil.copy(REPO_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(REPO_ROOT / "conf" / "base", tmp_path / "conf" / "base")
    (tmp_path / "conf" / "local").mkdir()
    (tmp_path / "src").mkdir()
    monkeypatch.chdir(tmp_path)
    bootstrap_project(tmp_path)
    from bert_kd.pipeline_registry import register_pipelines

    with KedroSession.create(project_path=tmp_path) as session:
        catalog = session.load_context().catalog
    pipelines = register_pipelines()
    problems = []
    for name in OUTSIDE_ALL:
        pipeline = pipelines[name]
        for dataset in sorted(pipeline.datasets()):
            if dataset.startswith("params:") or dataset == "parameters":
                continue
            metadata = getattr(catalog.get(dataset), "metadata", None) or {}
            if not (metadata.get("kedro-viz") or {}).get("layer"):
                problems.append(f"{name}: dataset {dataset} has no layer")
        for node in pipeline.nodes:
            if not any(tag.startswith("role_") for tag in node.tags):
                problems.append(f"{name}: node {node.name} has no role tag")
            if node.name in pipeline.datasets():
                problems.append(f"{name}: node {node.name} is named as a dataset")
    assert not problems, problems
