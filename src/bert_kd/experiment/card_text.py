"""Free text in a model card, made safe: one line, a code span or escaped Markdown, and links only to plain http(s)
addresses (an edited store entry's commit line, link or ``<img onerror=…>`` shows as text). Shared by the student
and teacher cards (`model_card`) and the general student's (`general_card`)."""

from __future__ import annotations

import re
from typing import Any

#: Characters that start Markdown or HTML markup in running text (a backslash before any of them shows it as is).
_MARKUP = re.compile(r"([\\`*_\[\]<>&!|~#])")


def one_line(value: Any) -> str:
    """``value`` as text on one line (a newline in a value would start a heading, a list or a fence)."""
    return " ".join(str(value).split())


def literal(value: Any) -> str:
    """``value`` as a Markdown code span: shown exactly as it is, never read as a link, an image, emphasis or
    HTML (an ``<img onerror=…>`` in an edited entry is text). The fence is one backtick longer than the longest
    run of backticks inside, so none can close it early."""
    text = one_line(value)
    if not text:
        return "(empty)"
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if "`" in text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def escaped(value: Any) -> str:
    """``value`` as running Markdown text with every character that would start markup backslash-escaped
    (CommonMark shows an escaped character as itself)."""
    return _MARKUP.sub(r"\\\1", one_line(value))


def link_target(url: str | None) -> str | None:
    """``url`` when it is a plain http(s) address a Markdown link can hold as it is, else None."""
    return url if url and re.fullmatch(r"https?://[^\s()<>\[\]`\\]+", url) else None
