"""A test double of any interface of ``bert_kd.experiment.tracker`` (`JobTracker`, `KedroRunReporter`,
`JobRun`): it records each call with its arguments bound by name and returns what the interface's no-op
returns, or what ``answers`` computes from the call; no method is written out again."""

from __future__ import annotations

import inspect
from typing import Any, Callable, Mapping


class Recorder:
    """Records ``(method, arguments)`` for every call of a method of ``interface``; a name that is not
    one of its methods is an AttributeError, as on the real thing."""

    def __init__(self, interface: type, answers: Mapping[str, Callable[..., Any]] | None = None):
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._interface, self._answers = interface, dict(answers or {})
        self._quiet = interface()

    def __getattr__(self, name: str):
        method = getattr(self._interface, name)  # AttributeError when the interface has no such method
        if not callable(method):
            return method

        def record(*args, **kwargs):
            bound = inspect.signature(method).bind(self._quiet, *args, **kwargs)
            bound.apply_defaults()
            arguments = dict(list(bound.arguments.items())[1:])  # without self
            self.calls.append((name, arguments))
            answer = self._answers.get(name)
            return answer(**arguments) if answer else getattr(self._quiet, name)(*args, **kwargs)

        return record

    def called(self, name: str) -> list[dict[str, Any]]:
        """The arguments of each call of ``name``, in order."""
        return [arguments for method, arguments in self.calls if method == name]
