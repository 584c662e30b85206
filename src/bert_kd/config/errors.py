"""Errors a person can act on: what is wrong, where, how to fix it.

A [`UserError`][] is a mistake in the user's input (parameters, data files, model names,
offline hub access). The ``kedro run`` wrapper in [`bert_kd.cli`][] prints it as one block
without a traceback and exits with status 2; every other exception keeps its traceback.
"""

from __future__ import annotations

import errno
import math
import os
import re
from contextvars import ContextVar
from pathlib import Path

#: Exit status of a user error (click uses 2 for usage errors too).
USER_ERROR_EXIT = 2

#: Set to 1 to also print the traceback of user errors on the terminal.
DEBUG_ENV = "BERT_KD_DEBUG"
#: Where the full traceback of a user error is appended (relative to the project root).
ERROR_LOG_ENV = "BERT_KD_ERROR_LOG"
DEFAULT_ERROR_LOG = "logs/bert_kd_errors.log"


class UserError(Exception):
    """A problem with the user's input; ``what`` is wrong at ``where``, ``fix`` says what to do."""

    kind = "error"

    def __init__(self, what: str, where: str | None = None, fix: str | None = None) -> None:
        self.what, self.where, self.fix = what, where, fix
        super().__init__(self.one_line())

    def one_line(self) -> str:
        text = f"{self.where}: {self.what}" if self.where else self.what
        return f"{text} ({self.fix})" if self.fix else text

    def block(self) -> str:
        """The text printed on the terminal (no traceback)."""
        lines = [f"bert-kd: {self.kind}: {self.what}"]
        if self.where:
            lines.append(f"  where: {self.where}")
        if self.fix:
            lines.append(f"  fix:   {self.fix}")
        return "\n".join(lines)


class ParameterError(UserError):
    """One or more parameters are invalid; ``problems`` lists ``(dotted key, message)``."""

    kind = "invalid parameters"

    def __init__(self, problems: list[tuple[str, str]], fix: str | None = None) -> None:
        self.problems = list(problems)
        where = ", ".join(dict.fromkeys(key for key, _ in self.problems))
        what = "; ".join(f"{key}: {message}" if key else message for key, message in self.problems)
        super().__init__(what, where, fix or "correct the parameter in conf/ or in --params key=value")

    def block(self) -> str:
        lines = [f"bert-kd: {self.kind} ({len(self.problems)}):"]
        lines += [f"  - {key}: {message}" if key else f"  - {message}" for key, message in self.problems]
        lines.append(f"  fix:   {self.fix}")
        return "\n".join(lines)


class DataFileError(UserError):
    """A data file cannot be read (missing, binary, wrong encoding, malformed)."""

    kind = "bad data file"


class ModelNotFoundError(UserError):
    """A model parameter names neither a local directory nor a reachable hub model."""

    kind = "model not found"


class DamagedModelError(UserError):
    """A stored model's files do not match its manifest, or its manifest names another job."""

    kind = "damaged model"


class TaskMismatchError(UserError):
    """A model records another task than the one it is asked to evaluate or predict."""

    kind = "model trained for another task"


class StorageError(UserError):
    """A file or folder cannot be written (disk full, read-only, no permission) or a database
    file on disk is damaged; ``where`` names it."""

    kind = "storage problem"


class TrackingUnreachableError(UserError):
    """The MLflow tracking server does not answer."""

    kind = "tracking server unreachable"


#: errno values (and their Rust/safetensors spelling ``os error <n>``) of a full or read-only disk.
_STORAGE_ERRNOS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
}


def mount_point(path) -> Path:
    """The mount point of the disk ``path`` is (or would be) on: its nearest existing folder, walked up to a mount
    (a store on its own disk is named, not the project's)."""
    folder = Path(os.path.abspath(path))
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    while not os.path.ismount(folder) and folder != folder.parent:
        folder = folder.parent
    return folder


def nearly_full(path) -> bool:
    """Whether the disk ``path`` is on has less than 64 MiB or 0.5 % of its size free."""
    import shutil

    usage = shutil.disk_usage(mount_point(path))
    return usage.free < max(64 << 20, usage.total // 200)


def full_disk_folder(candidates) -> Path | None:
    """The first of ``candidates`` (folders a run writes to) whose disk is [`nearly_full`][]: where a write that
    named no file (``ENOSPC`` without a path) most likely failed; None when none is."""
    for candidate in candidates:
        try:
            if Path(candidate).exists() and nearly_full(candidate):
                return Path(candidate)
        except OSError:
            continue
    return None


def storage_error(exc: BaseException, path, writing: bool = True) -> StorageError | None:
    """A [`StorageError`][] naming ``path`` when ``exc`` (or its cause) is a full disk or a
    read-only / forbidden folder; None for other errors. ``writing=False``: ``exc`` may come
    from reading too (a permission error then says "cannot access")."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        code = getattr(exc, "errno", None)
        if code is None:  # safetensors and tokenizers raise their own errors: "… (os error 28)"
            match = re.search(r"os error (\d+)", str(exc))
            code = int(match.group(1)) if match else None
        if code in _STORAGE_ERRNOS:
            full = code in (errno.ENOSPC, errno.EDQUOT)
            # a copy (shutil's sendfile) names its source first and its destination, the file being written, second
            written = getattr(exc, "filename2", None) if full or code == errno.EROFS else None
            where = written or getattr(exc, "filename", None) or path
            disk = mount_point(where)
            fix = (
                f"free space on the disk mounted at {disk}, which holds {where} (df -h {disk}; old store entries "
                "and data/08_reporting/history/ can go) and run again"
                if full
                else f"make {path} writable (ls -ld; chmod u+w), or run from a folder you can write to"
            )
            verb = "write" if writing or full or code == errno.EROFS else "access"
            return StorageError(f"cannot {verb} {path}: {_STORAGE_ERRNOS[code]}", str(where), fix)
        exc = exc.__cause__ or exc.__context__
    return None


def debug_enabled() -> bool:
    return os.environ.get(DEBUG_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


def error_log_path() -> str:
    return os.environ.get(ERROR_LOG_ENV) or DEFAULT_ERROR_LOG


def find_user_error(exc: BaseException | None) -> UserError | None:
    """``exc`` itself or the first [`UserError`][] in its cause/context chain."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, UserError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


class TrainingDivergedError(UserError):
    """A training job's loss became non-finite or rose far above its first step's (the rule is
    [`bert_kd.core.training.loop.diverged`][]): a learning rate too high for the job, not a result."""

    kind = "training diverged"

    def __init__(self, what: str, where: str | None, fix: str, *, step: int, learning_rate: float) -> None:
        self.step, self.learning_rate = step, learning_rate
        super().__init__(what, where, fix)


#: The training blocks of the node that runs now, ``{parameter path: learning rate}`` (e.g.
#: ``{"teacher.training": 1e-4}``), set by the parameter hook before each node: what a
#: [`TrainingDivergedError`][] names as the parameter to change.
RUNNING_TRAINING_BLOCKS: ContextVar[dict[str, float] | None] = ContextVar("running_training_blocks", default=None)


def learning_rate_parameters(learning_rate: float) -> list[str]:
    """The ``<block>.learning_rate`` parameters of the running node whose value is ``learning_rate``."""
    blocks = RUNNING_TRAINING_BLOCKS.get() or {}
    return [
        f"{path}.learning_rate"
        for path, value in blocks.items()
        if value is not None and math.isclose(float(value), float(learning_rate), rel_tol=1e-12)
    ]
