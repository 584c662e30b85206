"""Passwords in database URLs: masked wherever a URL is written or printed, and kept out of the parameters.

A sweep on many machines names its Optuna study by a SQLAlchemy URL (``reproduce.storage``), and the URL may
carry a password (``postgresql+psycopg://user:secret@host/db``). Parameters are logged to MLflow, recorded in
each trial's JSON and in a table's "Made by" line, so a password there would be published with the results.
[`move_password_to_environment`][] takes it out of a
PostgreSQL URL into ``PGPASSWORD`` (which libpq, and so psycopg, reads), and
[`mask`][] replaces any other password in a text by ``***``, and [`scrub`][] does so in every string of a nested
value: every writer of a tag, parameter, log line, committed file or card goes through one of the two (MLflow's
writers in ``tracking/``, the ``kedro run``'s own parameters before kedro-mlflow tags its run with them).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, MutableMapping
from typing import Any

from bert_kd.config.errors import UserError

#: ``scheme://user:password@``: the user part is kept, the password is what a mask replaces.
URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^:/@\s'\"]*):(?P<password>[^@\s'\"]+)@")
MASK = "***"
#: The environment variable libpq reads a password from when the URL has none.
PASSWORD_VARIABLE = "PGPASSWORD"


def mask(text: str) -> str:
    """``text`` with the password of every URL in it replaced by ``***`` (the user and host kept)."""
    return URL_PASSWORD.sub(lambda m: f"{m['head']}:{MASK}@", text)


def scrub(value: Any) -> Any:
    """``value`` with [`mask`][] applied to every string in it, keys included (mappings, lists and tuples are
    rebuilt; other values are returned as they are)."""
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, Mapping):
        return {scrub(key): scrub(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(scrub(item) for item in value)
    return value


def split_password(url: str) -> tuple[str, str | None]:
    """(``url`` without its password, the password or None)."""
    found = URL_PASSWORD.search(url)
    if found is None or found["password"] == MASK:
        return url, None
    return url[: found.start()] + found["head"] + "@" + url[found.end() :], found["password"]


def move_password_to_environment(params: MutableMapping, path: tuple[str, ...] = ("reproduce", "storage")) -> None:
    """Take the password out of the PostgreSQL URL at ``path`` of ``params`` (in place) into ``PGPASSWORD`` of this
    process and the processes it starts; a different ``PGPASSWORD`` already set is a user error (which one is
    meant?). Other schemes keep their password (their drivers read no such variable); they are masked when
    written."""
    *parents, last = path
    node = params
    for part in parents:
        node = node.get(part) if isinstance(node, MutableMapping) else None
        if node is None:
            return
    url = node.get(last) if isinstance(node, MutableMapping) else None
    if not isinstance(url, str) or not url.lower().startswith("postgresql"):
        return
    bare, password = split_password(url)
    if password is None:
        return
    set_before = os.environ.get(PASSWORD_VARIABLE)
    if set_before is not None and set_before != password:
        raise UserError(
            f"{'.'.join(path)} carries a password and {PASSWORD_VARIABLE} holds another one",
            ".".join(path),
            f"give the password once: in {PASSWORD_VARIABLE} (or ~/.pgpass) and a URL without it, e.g. {bare}",
        )
    os.environ[PASSWORD_VARIABLE] = password
    node[last] = bare
