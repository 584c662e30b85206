"""Writing files and folders all at once: a temporary sibling is filled, fsynced and renamed over
the target, so a reader never sees half of a result (Kedro-free). A folder is listed, with each
file's size and sha256, in its ``manifest.json``, written last; a full disk or a forbidden folder
becomes the project's [`StorageError`][config.errors.StorageError].
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Callable, Mapping

from bert_kd.config.errors import storage_error

#: The file listing a folder written by [`write_atomically`][] (written last).
MANIFEST = "manifest.json"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_entries(directory: Path) -> dict[str, dict]:
    return {
        str(f.relative_to(directory)): {"size": f.stat().st_size, "sha256": file_sha256(f)}
        for f in sorted(directory.rglob("*"))
        if f.is_file() and f.name != MANIFEST
    }


def _fsync(path: Path) -> None:
    """Flush one file or directory entry to disk (best effort where the platform refuses)."""
    flags = os.O_RDONLY | (os.O_DIRECTORY if path.is_dir() and hasattr(os, "O_DIRECTORY") else 0)
    try:
        fd = os.open(path, flags)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _fsync_tree(directory: Path) -> None:
    for path in [*sorted(directory.rglob("*")), directory] if directory.is_dir() else [directory]:
        _fsync(path)


def write_atomically(
    target: str | os.PathLike[str], write: Callable[[Path], None], manifest: Mapping | None = None
) -> Path:
    """Create directory ``target`` all at once: ``write(tmp)`` fills a temporary directory next to
    it, its files are fsynced and listed in ``manifest.json`` (written last, with ``manifest``'s
    extra fields), then it is renamed to ``target`` (an older ``target`` is replaced)."""
    target = Path(target)
    with storage_errors(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        tmp.mkdir()
    try:
        with storage_errors(target):
            _write_tree(tmp, target, write, manifest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def _write_tree(tmp: Path, target: Path, write: Callable[[Path], None], manifest: Mapping | None) -> None:
    """[`write_atomically`][]'s body: fill ``tmp``, list it in the manifest, rename to ``target``."""
    write(tmp)
    _give_umask_mode(tmp)
    payload = {**(manifest or {}), "files": file_entries(tmp)}
    (tmp / MANIFEST).write_text(json.dumps(payload, indent=2, default=str))
    _fsync_tree(tmp)
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.old-{uuid.uuid4().hex[:8]}")
        os.replace(target, old)
    os.replace(tmp, target)
    _fsync(target.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def storage_errors(path: Path):
    """Turn a full disk or a read-only / forbidden folder while writing ``path`` into a
    [`StorageError`][config.errors.StorageError] (one block naming ``path`` and the fix)."""
    try:
        yield
    except Exception as exc:
        error = storage_error(exc, path)
        if error is None:
            raise
        raise error from exc


def _default_file_mode() -> int:
    """The mode ``open(path, "w")`` would give a new file under the current umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _give_umask_mode(directory: Path) -> None:
    """Every file under ``directory`` gets the mode a new file gets under the umask (0644 under
    022): a writer that makes its files private (transformers' safetensors weights: 0600) would
    leave a shared store's weights unreadable to the other users its configs are readable to."""
    mode = _default_file_mode()
    for path in directory.rglob("*"):
        if path.is_file() and not path.is_symlink():
            path.chmod(mode)


def write_file_atomically(path: str | os.PathLike[str], write: Callable[[Path], None]) -> Path:
    """Create file ``path`` all at once: ``write(tmp)`` fills a temporary file next to it, which is
    fsynced and renamed over ``path``; on any error the temporary file is removed and ``path`` is
    left as it was (the single-file sibling of [`write_atomically`][])."""
    path = Path(path)
    with storage_errors(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial")
    os.close(fd)
    tmp = Path(name)
    tmp.chmod(_default_file_mode())  # mkstemp makes 0600; the result should be as readable as any file
    try:
        with storage_errors(path):
            write(tmp)
            _fsync_tree(tmp)
            os.replace(tmp, path)
            _fsync(path.parent)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
