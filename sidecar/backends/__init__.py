"""Backend plug-ins: what each agent CLI adds around a command, and (later) its session log.

One module per backend lives in this package. A module that knows its backend's wrapper text
registers a stripper with :func:`register_stripper`; :func:`sidecar.normalize.normalize` calls
the stripper before anything else. A backend without a registered stripper gets its command
unchanged (the ``bash`` pseudo-backend runs commands with a plain ``bash -c``, so it has none).
"""

from __future__ import annotations

from collections.abc import Callable

#: Takes the command text exactly as the route recorded it (scrubbed) and returns the command
#: the agent asked for. Must never raise; text it does not recognise is returned unchanged.
WrapperStripper = Callable[[str], str]

_STRIPPERS: dict[str, WrapperStripper] = {}


def register_stripper(backend: str, stripper: WrapperStripper) -> None:
    """Register ``stripper`` for ``backend``; raises ValueError if one is already registered."""
    if backend in _STRIPPERS:
        raise ValueError(f"a wrapper stripper for backend {backend!r} is already registered")
    _STRIPPERS[backend] = stripper


def wrapper_stripper(backend: str) -> WrapperStripper | None:
    """The stripper registered for ``backend``, or ``None`` when it adds no wrapper."""
    return _STRIPPERS.get(backend)


# Backend modules register their strippers when imported; keep these lines sorted.
from sidecar.backends import claude  # noqa: E402,F401
from sidecar.backends import codex  # noqa: E402,F401
from sidecar.backends import gemini  # noqa: E402,F401
