"""What a trial's identity says about its data: the fingerprint of the GLUE files it reads.

A trial's content key (`bert_kd.sweeps.trial_identity.TrialIdentity.content_key`) covers the trial
spec, the data sizes, the code's schema version and — through [`keyed_source`][] — the GLUE
source folder: the sha256 of each file of the task (train + dev). Files identical to the GLUE
release ([`GLUE_RELEASE_SHA256`][], the hashes listed in ``../shared/glue/MANIFEST.md``) add
nothing to the key, so results made on the release keep the keys they were committed under;
any other files (a sample, an edited copy, a re-export) enter the key and get their own results.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Mapping

from bert_kd.core.data.glue import get_task, resolve_glue_dir

#: sha256 of the original GLUE TSVs (``../shared/glue/MANIFEST.md``), by ``<task dir>/<file>``.
GLUE_RELEASE_SHA256 = {
    "SST-2/train.tsv": "48eac26399f8456935f81dd9e3a745c1430adb6c62e233ccfe22db4a0d15d1d1",
    "SST-2/dev.tsv": "54a9c12c77e402fc14d6a66a506f24d999f596b0176eb777c972cccc2f9cc4b0",
    "MRPC/train.tsv": "69abcedee3cf738c6ce58d772e43e1b7cdf5b4edee4aceda459c0d9f4e5599f3",
    "MRPC/dev.tsv": "9e8f284788040f7c9ecde2e1b3c07237c756f926bd9ef8548ef5d34b56f69f17",
    "RTE/train.tsv": "41e3a9b063433392343fad9e962cf2f58b681c78d8f71592f4186f0837246c5c",
    "RTE/dev.tsv": "80230dfa1347282e7b532b06a1004a76a710087541189bf874223ddf0e3819fb",
    "QNLI/dev.tsv": "ac19409dcb04631eaaa094bdebdcf621086bc352503dfb6a1a648b614986f4fd",
}

_file_hashes: dict[tuple[str, int, int], str] = {}


def _sha256(path: Path) -> str:
    """sha256 of a file, remembered while its size and modification time stay the same."""
    stat = path.stat()
    signature = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if signature not in _file_hashes:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        _file_hashes[signature] = digest.hexdigest()
    return _file_hashes[signature]


def source_fingerprint(task: str, glue_dir: str | os.PathLike | None) -> dict[str, str] | None:
    """``{"RTE/train.tsv": sha256, "RTE/dev.tsv": sha256}`` of the files the task reads from the GLUE
    folder the data loader would use (``GLUE_DIR`` / ``glue_dir`` / the default); ``None`` while
    any of them is absent (not downloaded yet)."""
    spec = get_task(task)
    root, _ = resolve_glue_dir(glue_dir)
    names = [f"{spec.dir_name}/{name}" for name in (spec.train_file, *spec.dev_splits.values())]
    paths = {name: root / name for name in names}
    if not all(path.is_file() for path in paths.values()):
        return None
    return {name: _sha256(path) for name, path in paths.items()}


def is_release(fingerprint: Mapping[str, str]) -> bool:
    """Every file is byte-identical to the GLUE release's."""
    return all(GLUE_RELEASE_SHA256.get(name) == digest for name, digest in fingerprint.items())


def keyed_source(task: str, glue_dir: str | os.PathLike | None) -> dict[str, str] | None:
    """The source part of a trial's key: ``None`` for the GLUE release (and while the files are
    absent: nothing can be compared yet), else the files' fingerprint."""
    fingerprint = source_fingerprint(task, glue_dir)
    if fingerprint is None or is_release(fingerprint):
        return None
    return fingerprint


def short_hash(value) -> str:
    """8 hex digits naming a mapping (for file names)."""
    import json

    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:8]
