"""Shared fixtures: tiny local models and tokenizers (never the hub), tiny GLUE folders."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("KEDRO_DISABLE_TELEMETRY", "1")

#: Under pytest-xdist every worker is one of ``PYTEST_XDIST_WORKER_COUNT`` processes sharing the cores: each
#: gets its share of them as torch's (OpenMP's) threads, set before torch is imported and inherited by the
#: processes a test starts, so that N workers do not run N × cores threads (docs/decisions.md, "The test
#: suite's time"). A caller's ``OMP_NUM_THREADS`` wins.
WORKER_THREADS: int | None = None  # the share set here; None without xdist or with the caller's OMP_NUM_THREADS
if os.environ.get("PYTEST_XDIST_WORKER_COUNT", "").isdigit() and "OMP_NUM_THREADS" not in os.environ:
    _cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    WORKER_THREADS = max(1, _cores // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    os.environ["OMP_NUM_THREADS"] = str(WORKER_THREADS)

#: Hermetic tests: nothing from the caller's shell decides what a test reads or where it logs.
#: ``GLUE_DIR`` would replace the tiny fixtures' GLUE folder, ``MLFLOW_TRACKING_URI`` would send
#: runs to the caller's store or server, ``HF_HOME`` would let a test use (or fill) the caller's
#: hub cache. A test that needs one sets it itself (monkeypatch); subprocesses inherit these.
HERMETIC_ROOT = Path(tempfile.mkdtemp(prefix="bert_kd_tests_"))
os.environ.pop("GLUE_DIR", None)
os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{HERMETIC_ROOT / 'mlflow.db'}"
os.environ["HF_HOME"] = str(HERMETIC_ROOT / "hf_home")
for _name in ("HF_DATASETS_CACHE", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_CACHE"):
    os.environ.pop(_name, None)
atexit.register(shutil.rmtree, HERMETIC_ROOT, ignore_errors=True)

# The test process tracks (most tests run the job path with the schema's default, tracking on), so it
# installs MLflow's tracker where it starts, as Kedro's settings.py does (loads neither MLflow nor Kedro).
from bert_kd.tracking import use_mlflow  # noqa: E402

use_mlflow()

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_GLUE = REPO_ROOT.parent / "shared" / "glue"

WORDS = [
    "the",
    "a",
    "movie",
    "film",
    "was",
    "is",
    "great",
    "good",
    "bad",
    "terrible",
    "awful",
    "fine",
    "plot",
    "actor",
    "story",
    "boring",
    "fun",
    "not",
    "very",
    "really",
    "i",
    "it",
    "this",
    "that",
    "he",
    "she",
    "they",
    "said",
    "and",
    "but",
    "or",
    "man",
    "woman",
    "dog",
    "cat",
    "runs",
    "sat",
    "on",
    "mat",
    "question",
    "answer",
    "entailment",
    "sentence",
    "true",
    "false",
    "yes",
    "no",
    "why",
    "what",
    "who",
    "where",
]


def make_wordpiece_tokenizer(directory: Path, lowercase: bool = True):
    """A tiny WordPiece vocabulary trained on :data:`WORDS`, saved as a BERT tokenizer in ``directory``."""
    from bert_kd.core.tiny_models import wordpiece_tokenizer

    fast = wordpiece_tokenizer([" ".join(WORDS)] * 20, lowercase=lowercase)
    fast.save_pretrained(directory)
    return fast


def make_tiny_bert(
    directory: Path, num_layers: int = 4, hidden: int = 32, heads: int = 4, num_labels: int = 2, seed: int = 0
) -> Path:
    """A randomly initialised BERT classifier + tokenizer saved as an HF directory."""
    from bert_kd.core.tiny_models import tiny_bert, wordpiece_tokenizer

    tokenizer = wordpiece_tokenizer([" ".join(WORDS)] * 20)
    return tiny_bert(
        directory, tokenizer, num_layers=num_layers, hidden=hidden, heads=heads, num_labels=num_labels, seed=seed
    )


def write_tiny_glue(root: Path, task_dir: str = "RTE", n_train: int = 48, n_dev: int = 24) -> Path:
    """A small RTE- or SST-2-layout GLUE folder with a learnable signal."""
    import random

    rng = random.Random(0)
    folder = root / task_dir
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", n_train), ("dev", n_dev)):
        if task_dir == "SST-2":
            lines = ["sentence\tlabel"]
            for _ in range(n):
                label = rng.randint(0, 1)
                word = rng.choice(["great", "good", "fun"] if label else ["bad", "terrible", "boring"])
                lines.append(f"the movie was {word} and {rng.choice(WORDS)}\t{label}")
        else:
            lines = ["index\tsentence1\tsentence2\tlabel"]
            for i in range(n):
                entail = rng.randint(0, 1)
                s1 = f"the {rng.choice(['man', 'woman', 'dog'])} sat on the mat"
                s2 = "yes true" if entail else "no false"
                lines.append(f"{i}\t{s1}\t{s2}\t{'entailment' if entail else 'not_entailment'}")
        (folder / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    return root


def make_damaged_sqlite(path: Path) -> Path:
    """A real SQLite database cut in half (a copy interrupted, a full disk): SQLite says "malformed"."""
    import sqlite3

    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, payload TEXT)")
        connection.executemany("INSERT INTO runs (payload) VALUES (?)", [("x" * 500,)] * 400)
    connection.close()
    size = path.stat().st_size
    with open(path, "r+b") as handle:
        handle.truncate(size // 2)
    return path


#: SQLite stores migrated once per test session (MLflow's migrations take seconds, a file copy
#: milliseconds); :func:`migrated_mlflow_db` copies them.
STORE_TEMPLATES = HERMETIC_ROOT / "store_templates"


def _template(name: str, create) -> Path:
    template = STORE_TEMPLATES / name
    if not template.exists():
        STORE_TEMPLATES.mkdir(parents=True, exist_ok=True)
        partial = template.with_name(f".{name}.partial")
        partial.unlink(missing_ok=True)
        create(partial)
        partial.rename(template)
    return template


def _copy_template(template: Path, path: Path) -> str:
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(template, path)
    return f"sqlite:///{path}"


def _create_mlflow_template(path: Path) -> None:
    """MLflow's tables at their newest migration, without experiments: MLflow adds its Default
    experiment (artifact root: the one of the process that first opens the copy) as for a new file."""
    import sqlite3

    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    store = SqlAlchemyStore(f"sqlite:///{path}", str(path.parent / "mlruns"))
    store.engine.dispose()
    with sqlite3.connect(path) as connection:
        connection.execute("DELETE FROM experiments")
    connection.close()


def migrated_mlflow_db(path: Path) -> str:
    """The tracking URI of an MLflow SQLite store at ``path``: one already there as it is, else a copy
    of the session's migrated store (what MLflow would create there, without the wait)."""
    return _copy_template(_template("mlflow.db", _create_mlflow_template), path)


def _reset_mlflow_process_state(saved_env: dict[str, str], saved_tracking_uri) -> None:
    """End runs left active, forget the fluent API's active experiment and tracking URI, and put
    the ``MLFLOW_*`` environment back (``mlflow.set_experiment`` writes ``MLFLOW_EXPERIMENT_ID``
    into ``os.environ``; later subprocesses would inherit an experiment id of another store)."""
    mlflow = sys.modules.get("mlflow")
    if mlflow is not None:
        while mlflow.active_run() is not None:
            mlflow.end_run()
        mlflow.tracking.fluent._active_experiment_id = None
        mlflow.tracking._tracking_service.utils._tracking_uri = saved_tracking_uri
    for key in [key for key in os.environ if key.startswith("MLFLOW_")]:
        if key not in saved_env:
            del os.environ[key]
    os.environ.update(saved_env)


def _mlflow_process_state() -> tuple[dict[str, str], str | None]:
    mlflow = sys.modules.get("mlflow")
    tracking_uri = mlflow.tracking._tracking_service.utils._tracking_uri if mlflow is not None else None
    return {key: value for key, value in os.environ.items() if key.startswith("MLFLOW_")}, tracking_uri


@pytest.fixture(autouse=True, scope="module")
def isolated_mlflow_state_per_module():
    """A test module's fixtures may set an MLflow store for its tests (``set_experiment`` writes
    ``MLFLOW_EXPERIMENT_ID``); the next module starts without it."""
    saved = _mlflow_process_state()
    yield
    _reset_mlflow_process_state(*saved)


@pytest.fixture(autouse=True)
def isolated_mlflow_state():
    """Every test ends with the process's MLflow state as it began (in-process Kedro sessions run
    kedro-mlflow, which sets the tracking URI, the experiment and runs process-wide)."""
    saved = _mlflow_process_state()
    yield
    _reset_mlflow_process_state(*saved)


@pytest.fixture(scope="session")
def tiny_teacher_dir(tmp_path_factory) -> Path:
    return make_tiny_bert(tmp_path_factory.mktemp("tiny_teacher"))


@pytest.fixture(scope="session")
def tiny_glue_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("glue")
    write_tiny_glue(root, "RTE")
    write_tiny_glue(root, "SST-2")
    return root


@pytest.fixture(scope="module")
def rte(tiny_teacher_dir, tiny_glue_dir):
    """The tiny 4-layer teacher, tokenized tiny RTE and its collator (distillation and job tests)."""
    from bert_kd.core.data.glue import load_glue_task
    from bert_kd.core.data.tokenize import tokenize_splits
    from bert_kd.core.models import load_classifier, load_tokenizer
    from bert_kd.core.training import Collator

    tokenizer = load_tokenizer(str(tiny_teacher_dir))
    datasets = tokenize_splits(load_glue_task("rte", tiny_glue_dir, allow_download=False), tokenizer, 32)
    teacher = load_classifier(str(tiny_teacher_dir), 2)  # 4 layers, width 32
    return teacher, datasets, Collator({"": tokenizer.pad_token_id})
