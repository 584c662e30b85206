"""The documentation site: docstrings cross-reference in the form mkdocstrings links, the API reference has a
page per module, and the built site works offline (no script, style or font from a CDN; every picture it
shows is a committed file)."""

from __future__ import annotations

import html.parser
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "bert_kd"
IMAGES = ROOT / "docs" / "images"
#: The most a committed picture may weigh (the site is cloned with the repository).
MAX_IMAGE_BYTES = 300_000


def load_reference_hook():
    spec = importlib.util.spec_from_file_location("reference_hook", ROOT / "docs" / "hooks" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_has_a_page_per_module_and_the_nav_lists_them():
    hook = load_reference_hook()
    config = SimpleNamespace(config_file_path=str(ROOT / "mkdocs.yml"), nav=[{"API reference": "x.md"}])
    hook.on_config(config)
    modules = {
        ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        for path in PACKAGE.rglob("*.py")
        if not any(part.startswith("_") and part != "__init__.py" for part in path.relative_to(PACKAGE).parts)
    }
    pages = {
        uri.removeprefix("reference/").removesuffix(".md").removesuffix("/index").replace("/", ".")
        for uri in hook._pages
    }
    assert pages == modules
    listed = re.findall(r"'(reference/[^']+\.md)'", repr(config.nav))
    assert set(listed) == set(hook._pages) | {hook.INDEX}


class Resources(html.parser.HTMLParser):
    """What a page loads by itself: scripts, style sheets, fonts and icons (``<link>``), images."""

    def __init__(self):
        super().__init__()
        self.loaded: list[tuple[str, str]] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in ("script", "img") and attrs.get("src"):
            self.loaded.append((tag, attrs["src"]))
        if tag == "link" and attrs.get("href") and attrs.get("rel") != "canonical":
            self.loaded.append((tag, attrs["href"]))


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT / "src")}
    mkdocs = [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(folder)]
    built = subprocess.run(mkdocs, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return folder


def page_resources(site: Path) -> dict[Path, list[tuple[str, str]]]:
    pages = {}
    for page in site.rglob("*.html"):
        parser = Resources()
        parser.feed(page.read_text(encoding="utf-8"))
        pages[page] = parser.loaded
    return pages


@pytest.mark.slow  # a strict site build, ~20 s (CI builds the site again after the tests)
def test_the_built_site_loads_nothing_from_another_host(site):
    remote = {
        (str(page.relative_to(site)), url)
        for page, loaded in page_resources(site).items()
        for _, url in loaded
        if urlsplit(url).scheme or url.startswith("//")
    }
    assert not remote, f"fetched from another host (a CDN?): {sorted(remote)[:5]}"


@pytest.mark.slow  # a strict site build, ~20 s (CI builds the site again after the tests)
def test_the_maths_is_typeset_by_the_sites_own_mathjax(site):
    methods = dict.fromkeys(
        src for tag, src in page_resources(site)[site / "methods" / "index.html"] if tag == "script"
    )
    mathjax = [src for src in methods if src.endswith("tex-chtml.js")]
    assert mathjax and (site / "methods" / mathjax[0]).resolve().is_file()
    assert (site / "javascripts/mathjax/output/chtml/fonts/woff-v2/MathJax_Main-Regular.woff").is_file()


@pytest.mark.slow  # a strict site build, ~20 s (CI builds the site again after the tests)
def test_every_picture_a_page_shows_is_a_committed_file_of_reasonable_size(site):
    shown = {
        (page.parent / src).resolve()
        for page, loaded in page_resources(site).items()
        for tag, src in loaded
        if tag == "img"
    }
    missing = [str(path) for path in shown if not path.is_file()]
    assert shown and not missing, missing
    committed = {path.name: path.stat().st_size for path in IMAGES.iterdir()}
    assert {"architecture.png", "distill_baselines.png", "alp_attention.png", "distill_baselines_dag.png"} <= set(
        committed
    )
    assert set(committed) <= {path.name for path in shown}, "a picture in docs/images/ that no page shows"
    assert not {name: size for name, size in committed.items() if size > MAX_IMAGE_BYTES}


def test_kedro_run_is_spelled_with_pipelines_everywhere():
    """``kedro run --pipelines=X`` in docs, conf, scripts, code and tests: one spelling (Kedro takes both;
    ``kedro viz run --pipeline`` is kedro-viz's own option and stays). Records of runs made (``results/``) keep
    the command as it was typed."""
    single = re.compile(r"--pipeline(?![s\w-])")
    folders = ["docs", "src", "tests", "conf", "scripts", "benchmarks", "notebooks"]
    files = [ROOT / "README.md", *(p for f in folders for p in (ROOT / f).rglob("*") if p.is_file())]
    found = []
    for path in files:
        if path.suffix not in {".md", ".py", ".sh", ".yml", ".yaml", ".sbatch", ".ipynb"}:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        # a kedro-viz command may wrap onto the next line: judge a hit with the line before it
        lines = text.splitlines()
        for n, line in enumerate(lines):
            if single.search(line) and "viz" not in lines[max(n - 1, 0)] + line and path.name != "test_docs.py":
                found.append(f"{path.relative_to(ROOT)}:{n + 1}")
    assert not found, f"write --pipelines (kedro run's spelling in these docs): {found}"


def test_a_strict_quiet_build_still_counts_warnings():
    """``--quiet`` raises the ``mkdocs`` logger to ERROR, so no warning would reach the strict counter; the hook
    puts it back at WARNING in a strict build (and leaves a build that is not strict alone)."""
    import logging

    spec = importlib.util.spec_from_file_location("strict_hook", ROOT / "docs" / "hooks" / "strict.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    log = logging.getLogger("mkdocs")
    before = log.level
    try:
        log.setLevel(logging.ERROR)
        hook.on_config(SimpleNamespace(strict=False))
        assert not log.isEnabledFor(logging.WARNING)
        hook.on_config(SimpleNamespace(strict=True))
        assert logging.getLogger("mkdocs.plugins.mkdocs_autorefs").isEnabledFor(logging.WARNING)
    finally:
        log.setLevel(before)


def test_the_dag_picture_fits_the_page_so_its_labels_stay_legible():
    """``docs/images/distill_baselines_dag.png`` (``scripts/docs_figures.py --dag``) is at most the docs' content
    width (688 px, MkDocs Material), so the page shows it at its own size, labels of 13 px; drawn 1,663 px wide,
    the page shrank it to 4 px labels."""
    import struct

    header = (IMAGES / "distill_baselines_dag.png").read_bytes()[16:24]
    width, _ = struct.unpack(">II", header)
    assert width <= 688, width
