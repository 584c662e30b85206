"""MkDocs hook: ``--strict`` fails on every warning, with ``--quiet`` as without it.

MkDocs' ``--quiet`` raises the ``mkdocs`` logger to ERROR, so a warning (an unresolved cross-reference,
a broken link) is never emitted and the strict counter never sees it: the same site built ``--strict``
fails and built ``--strict --quiet`` passes (mkdocs/mkdocs#4126). In a strict build this hook puts the
logger back at WARNING: ``--quiet`` still hides the INFO lines, and every warning is shown and fails
the build.
"""

from __future__ import annotations

import logging


def on_config(config):
    log = logging.getLogger("mkdocs")
    if config.strict and log.getEffectiveLevel() > logging.WARNING:
        log.setLevel(logging.WARNING)
    return config
