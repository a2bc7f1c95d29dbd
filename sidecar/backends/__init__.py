"""Backend plug-ins: what each agent CLI adds around a command, and how to read its session log.

One module per backend lives in this package. It may register:

- a **wrapper stripper** (:func:`register_stripper`): :func:`sidecar.normalize.normalize` calls
  it before anything else. A backend without one gets its command unchanged (the ``bash``
  pseudo-backend runs commands with a plain ``bash -c``, so it has none);
- a **session-log reader** (:func:`register_reader`): turns the lines (or rows) of the
  backend's own session log into :class:`SessionEvent` values. :mod:`sidecar.sessionlog` tails
  the files and feeds the events to :mod:`sidecar.activity` (the C12 "not receiving data"
  safeguard) and, for a reader with ``route_records``, to the detector as records of the
  route ``<backend>_session_log`` (C3).

Readers see raw text (commands, outputs) and must never log or keep it: they return events, and
the caller scrubs an event's ``command`` before it is stored anywhere.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

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




# -- session-log readers -------------------------------------------------------------------------

TURN_START = "turn_start"
TURN_END = "turn_end"
SHELL_START = "shell_start"
SHELL_END = "shell_end"
TOOL = "tool"
TEXT = "text"
EVENT_KINDS = (TURN_START, TURN_END, SHELL_START, SHELL_END, TOOL, TEXT)


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """One thing a backend's session log says happened.

    - ``kind``: one of :data:`EVENT_KINDS`. ``shell_start``/``shell_end`` are the backend's
      shell tool (the activity C12 watches); ``tool`` is any other tool call (reads, edits,
      searches: never shell activity); ``text`` is model text output; ``turn_start`` /
      ``turn_end`` bound one turn (a user prompt until the agent's final answer).
    - ``ts``: seconds since the epoch, from the log itself; ``None`` when the log gives no time
      (the tailer then uses the time it read the line).
    - ``call_id``: the tool call's id, pairing a ``shell_end`` with its ``shell_start``
      (``""`` when the log has none).
    - ``command``: for shell events, the command exactly as the log has it (RAW: may hold a
      secret; scrub before keeping it). ``""`` when unknown.
    - ``exit``: the exit status of a finished shell call when the log gives a number, else
      ``None``; ``failed`` is ``True``/``False`` for a finished shell call (``exit != 0`` when
      the exit is known), ``None`` otherwise.
    - ``tool``: the tool's name for ``tool``, ``shell_start`` and ``shell_end`` events.
    - ``turn_id``: the turn's id where the log names one (``""`` otherwise).
    """

    kind: str
    ts: float | None = None
    call_id: str = ""
    command: str = ""
    exit: int | None = None
    failed: bool | None = None
    tool: str = ""
    turn_id: str = ""


class ReaderFormatError(ValueError):
    """A session-log line (or row) the reader does not recognise. ``reason`` is a short,
    fixed label for ``hive_repeat_failure_reader_errors_total{reason}`` (for example
    ``not_json``, ``unknown_shape``, ``bad_exit``); the message never quotes the line."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


class SessionLogReader:
    """How to read one backend's session log. Subclass it, set the class attributes, and
    implement :meth:`parse_line` (JSON Lines logs) or :meth:`poll_db` (SQLite logs).

    - ``backend``: the backend name (``claude``, ``codex``, …).
    - ``globs``: where the session files are, as ``Path.glob`` patterns relative to the agent's
      home (``.claude/projects/*/*.jsonl``). A pattern may start with ``$VAR/`` to name a
      directory an environment variable of the agent can move (``$CODEX_HOME/sessions/...``);
      the tailer expands it from the agent's environment when known and otherwise uses the
      default given in ``env_defaults`` (``{"CODEX_HOME": ".codex"}``, relative to the home).
    - ``kind``: ``"jsonl"`` (the tailer reads whole lines, appended) or ``"sqlite"`` (the
      tailer opens the database read-only and calls :meth:`poll_db`).
    - ``route_records``: True when the backend's commands never reach a fresh non-interactive
      bash, so the reader's finished shell calls are the backend's records (C3).
    - ``signal``: the coverage table's text for the shell-activity signal this reader gives.
    """

    backend: ClassVar[str] = ""
    globs: ClassVar[tuple[str, ...]] = ()
    env_defaults: ClassVar[dict[str, str]] = {}
    kind: ClassVar[str] = "jsonl"
    route_records: ClassVar[bool] = False
    signal: ClassVar[str] = ""

    def new_file_state(self) -> dict[str, Any]:
        """Fresh per-file state (what :meth:`parse_line` keeps between the lines of one file,
        such as tool-call id → command). Lost on a sidecar restart: a reader must cope with a
        finished call whose start it never saw (emit ``shell_end`` with ``command=""``)."""
        return {}

    def parse_line(self, obj: Any, state: dict[str, Any]) -> list[SessionEvent]:
        """The events one decoded JSON line gives (often none). ``obj`` is whatever
        ``orjson.loads`` returned for the line. Raises :class:`ReaderFormatError` for a line the
        reader does not recognise; must raise nothing else."""
        raise NotImplementedError

    def poll_db(self, conn: sqlite3.Connection, state: dict[str, Any]) -> list[SessionEvent]:
        """SQLite readers: the events added or changed since the last call, read through
        ``conn`` (opened read-only, ``query_only``). ``state`` is this database's state (for
        example the last row seen and the calls still running); it must stay JSON-serialisable
        (it is saved in the sidecar's state file). Raises :class:`ReaderFormatError` for rows
        it does not recognise and ``sqlite3.Error`` when the database cannot be read now."""
        raise NotImplementedError


_READERS: dict[str, SessionLogReader] = {}


def register_reader(reader: SessionLogReader, *backends: str) -> None:
    """Register ``reader`` for its backend (and any ``backends`` that run through the same CLI,
    such as the inference backends through Claude Code); raises ValueError on a second
    registration for a backend."""
    for backend in (reader.backend, *backends):
        if backend in _READERS:
            raise ValueError(f"a session-log reader for backend {backend!r} is already registered")
        _READERS[backend] = reader


def session_reader(backend: str) -> SessionLogReader | None:
    """The session-log reader registered for ``backend``, or ``None`` (no safeguard signal)."""
    return _READERS.get(backend)


# Backend modules register their strippers and readers when imported; keep these lines sorted.
from sidecar.backends import claude  # noqa: E402,F401
from sidecar.backends import codex  # noqa: E402,F401
from sidecar.backends import copilot  # noqa: E402,F401
from sidecar.backends import gemini  # noqa: E402,F401
from sidecar.backends import kilo  # noqa: E402,F401
from sidecar.backends import omp  # noqa: E402,F401
from sidecar.backends import opencode  # noqa: E402,F401
from sidecar.backends import pi  # noqa: E402,F401
