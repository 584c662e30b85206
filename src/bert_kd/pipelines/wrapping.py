"""Node wrappers that keep the wrapped function's code location (kedro-viz's "File Path", tracebacks);
Kedro-free, so the registration policy may use it."""

from __future__ import annotations

import inspect


def located_at(wrapper, func):
    """``wrapper`` (a one-line node wrapper) with the code location of the function it wraps.

    kedro-viz's "File Path" is ``inspect.getfile(node.func)``, the file of the function's code object,
    which for a wrapper is this module. The wrapper's code object is given ``func``'s file, first line
    and name (``CodeType.replace``), so the node points at the file holding ``func``, and a traceback's
    wrapper frame reads ``nodes.py, line <def>, in <func>`` followed by the frames that did the work.
    """
    code = getattr(inspect.unwrap(func), "__code__", None)
    if code is None:  # a callable object: no code location to give
        return wrapper
    wrapper.__code__ = wrapper.__code__.replace(
        co_filename=code.co_filename,
        co_firstlineno=max(code.co_firstlineno - 1, 1),  # the one-line body then maps to func's first line
        co_name=code.co_name,
        co_qualname=code.co_qualname,
    )
    return wrapper
