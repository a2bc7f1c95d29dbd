"""Backend plug-ins: what each agent CLI adds around a command, and how to read its session log.

One module per backend lives in this package (docs/layout.md names each, and the few that are
not a backend: ``coverage``, the coverage table; ``trajectory``, ``repeat-failure replay``'s
reader of benchmark trajectories; ``opencode_rows``, ``opencode_storage`` and ``cline_tasks``,
parts of one backend's reader). It may register:

- a **wrapper stripper** (:func:`register_stripper`): :func:`repeat_failure.rules.normalize.normalize` calls
  it before anything else. A backend without one gets its command unchanged (the ``bash``
  pseudo-backend runs commands with a plain ``bash -c``, so it has none);
- a **session-log reader** (:func:`register_reader`): turns the lines (or rows) of the
  backend's own session log into :class:`SessionEvent` values. :mod:`repeat_failure.sessions.tail` tails
  the files; the sidecar (:mod:`repeat_failure.sidecar.session_feed`) feeds the events to
  :mod:`repeat_failure.sessions.activity` (the C12 "not receiving data" safeguard), to the turn
  verdicts and, for a reader with ``route_records``, to the detector as records of the route
  ``<backend>_session_log`` (C3);
- a **stream-json reader** (:func:`register_stream_reader`): the same events from the
  transcript a CLI prints in its batch mode, for ``repeat-failure verdict``.

Readers see raw text (commands, outputs) and must never log or keep it: they return events, and
the caller scrubs an event's ``command`` before it is stored anywhere.
"""

from __future__ import annotations

import math
import os
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ClassVar

from repeat_failure.sessions.stores import Document, read_document

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
ERROR = "error"
EVENT_KINDS = (TURN_START, TURN_END, SHELL_START, SHELL_END, TOOL, TEXT, ERROR)


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """One thing a backend's session log says happened.

    - ``kind``: one of :data:`EVENT_KINDS`. ``shell_start``/``shell_end`` are the backend's
      shell tool (the activity C12 watches); ``tool`` is any other tool call (reads, edits,
      searches: never shell activity); ``text`` is model text output (only text with something
      other than whitespace in it); ``turn_start`` / ``turn_end`` bound one turn (a user
      prompt until the agent's final answer); ``error`` is an error the CLI or the model
      provider reported that ended the turn (an API error logged as the reply, a failed
      terminal result), not one the CLI retried past (:mod:`repeat_failure.turns.verdict`).
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
    - ``detail``: for ``error`` events, the error's text as the log has it (RAW: may hold a
      secret; scrub before keeping it), ``""`` when it gives none.
    - ``source``: set by :mod:`repeat_failure.sessions.tail`, not by readers: which session file the
      event came from (a digest of its path). The tail also prefixes ``call_id`` with it, so
      ids are unique across sessions.
    - ``output``: for ``shell_end``, the command's output as the log has it (RAW: may hold a
      secret; never stored, logged or shown: only a keyed digest of it after
      :func:`repeat_failure.rules.normalize.normalize_output` is kept, issue 19), ``None`` when the log gives
      none (``""`` is an empty output).
    """

    kind: str
    ts: float | None = None
    call_id: str = ""
    command: str = ""
    exit: int | None = None
    failed: bool | None = None
    tool: str = ""
    turn_id: str = ""
    source: str = ""
    detail: str = ""
    output: str | None = None


class ReaderFormatError(ValueError):
    """A session-log line (or row) the reader does not recognise. ``reason`` is a short,
    fixed label for ``hive_repeat_failure_reader_errors_total{reason}`` (for example
    ``not_json``, ``unknown_shape``, ``bad_exit``); the message never quotes the line."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


class UnusedLine(ReaderFormatError):
    """A session-log line of a type the reader does not know: not an error. CLIs add line
    types in minor releases that carry nothing a reader needs (Claude Code 2.1.332 added
    ``atis-latch``, ``api-request``, ``cost-state``, ...; issue 15), so such a line is skipped and
    counted apart (``hive_repeat_failure_reader_lines_ignored_total``), never in
    ``reader_errors_total``. A line of a type the reader relies on with a changed shape is still
    a :class:`ReaderFormatError`. It subclasses that class so a reader's contract ("raises only
    :class:`ReaderFormatError`") holds; :class:`~repeat_failure.sessions.tail.SessionTail` tells the two
    apart. ``reason`` is ``unknown_type``."""

    def __init__(self) -> None:
        super().__init__("unknown_type")


def log_timestamp(value: Any, epoch_ms: bool = False) -> float | None:
    """Seconds since the epoch for a session-log line's timestamp: an ISO-8601 string (``Z`` or
    an offset; no offset is read as UTC), or, with ``epoch_ms``, a number of milliseconds since
    the epoch (Claude Code and pi write both forms). ``None`` when ``value`` is ``None`` (the
    line has no time). Raises :class:`ReaderFormatError` ``bad_ts`` for anything else."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            when = datetime.fromisoformat(value)
            return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()
        except (ValueError, OverflowError, OSError):
            raise ReaderFormatError("bad_ts") from None
    if epoch_ms and isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            seconds = value / 1000
        except OverflowError:
            raise ReaderFormatError("bad_ts") from None
        if math.isfinite(seconds):
            return float(seconds)
    raise ReaderFormatError("bad_ts")


class SessionLogReader:
    """How to read one backend's session log. Subclass it, set the class attributes, and
    implement :meth:`parse_line` (JSON Lines logs; :class:`JsonLinesReader` implements what
    every reader of typed JSON lines does, subclass that), :meth:`poll_db` (SQLite logs) or
    :meth:`parse_document` (a JSON document the CLI rewrites whole).

    - ``backend``: the backend name (``claude``, ``codex``, …).
    - ``globs``: where the session files are, as ``Path.glob`` patterns relative to the agent's
      home (``.claude/projects/*/*.jsonl``). A pattern may start with ``$VAR/`` to name a
      directory an environment variable of the agent can move (``$CODEX_HOME/sessions/...``);
      the tailer expands it from the agent's environment when known and otherwise uses the
      default given in ``env_defaults`` (``{"CODEX_HOME": ".codex"}``, relative to the home).
    - ``kind``: ``"jsonl"`` (the tailer reads whole lines, appended), ``"sqlite"`` (the
      tailer opens the database read-only and calls :meth:`poll_db`) or ``"json"`` (one JSON
      document per file that the CLI rewrites whole, Cline's and Continue CLI's sessions: the
      tailer reads the whole file each time it changed and calls :meth:`parse_document`).
      The kind of one file is :meth:`file_kind` (``kind`` unless a reader reads files of two
      forms: Gemini CLI's chats are ``.json`` documents before 0.39.0, JSON Lines since).
    - ``route_records``: True when the backend's commands never reach a fresh non-interactive
      bash, so the reader's finished shell calls are the backend's records (C3).
    - ``signal``: the coverage table's text for the shell-activity signal this reader gives.
    - ``edit_tools``: the names of the backend's tools that write or edit files (its ``tool``
      events with these names touched the dev surface: :mod:`repeat_failure.turns.verdict`, the preview
      probe). Shell commands that write files are not counted: what a command does is not
      known from its text.
    - ``shell_tools``: the names the backend's log gives its shell tool (``Bash``,
      ``exec_command``, ``run_shell_command``, ``bash``). A session file that names a call of
      one of them where the reader could not read a shell call, or whose shell calls start and
      never end, while no shell call of it was recognised, is reported as unrecognised
      (:mod:`repeat_failure.sessions.unrecognized`, issue 26): the next log format a CLI
      release brings is never read as "no commands" in silence. Empty: only the calls that
      never end are looked for.
    """

    backend: ClassVar[str] = ""
    globs: ClassVar[tuple[str, ...]] = ()
    env_defaults: ClassVar[dict[str, str]] = {}
    kind: ClassVar[str] = "jsonl"
    route_records: ClassVar[bool] = False
    signal: ClassVar[str] = ""
    edit_tools: ClassVar[frozenset[str]] = frozenset()
    shell_tools: ClassVar[frozenset[str]] = frozenset()

    def never_runs(self, obj: Any, state: dict[str, Any]) -> bool:
        """Whether the line ``obj`` (with the file's ``state`` after :meth:`parse_line` took
        it) names tool calls the CLI never runs, which the reader leaves out on purpose (Claude
        Code's warmup subagents): such a line is no sign of an unread shell call
        (:mod:`repeat_failure.sessions.unrecognized`). False unless a reader says so."""
        return False

    def new_file_state(self) -> dict[str, Any]:
        """Fresh per-file state (what :meth:`parse_line` keeps between the lines of one file,
        such as tool-call id → command). Lost on a sidecar restart: a reader must cope with a
        finished call whose start it never saw (emit ``shell_end`` with ``command=""``)."""
        return {}

    def history_state(self) -> dict[str, Any]:
        """The per-file state to read a whole file from its start with, history included
        (``repeat-failure replay``, issue 19). The default is :meth:`new_file_state`; a reader
        whose fresh state skips old history (a SQLite store read from near its end) returns
        one that does not."""
        return self.new_file_state()

    def file_kind(self, path: str | os.PathLike[str]) -> str:
        """The kind (``"jsonl"``, ``"sqlite"`` or ``"json"``, see the class docstring) of the
        session file at ``path``, which one of :attr:`globs` found: how the tailer and replay
        read it. The default is :attr:`kind` for every file; a reader whose CLI wrote its log in
        two forms over its releases decides by the file's name (it must not open the file)."""
        return self.kind

    def parse_line(self, obj: Any, state: dict[str, Any]) -> list[SessionEvent]:
        """The events one decoded JSON line gives (often none). ``obj`` is whatever
        ``orjson.loads`` returned for the line. Raises :class:`ReaderFormatError` for a line the
        reader does not recognise; must raise nothing else."""
        raise NotImplementedError

    def read_document(self, path: Path, last: tuple[int, int] | tuple[()] | None,
                      limit: int) -> Document:
        """JSON-document readers: the document of the session file at ``path`` when it changed
        since the stamp ``last`` (:func:`repeat_failure.sessions.stores.read_document`: the
        file's ``(mtime_ns, size)``; ``limit`` bytes at most). The tailer and ``repeat-failure
        replay`` read a ``"json"`` file through it. A reader whose CLI spreads one session over
        several files (opencode before 1.2) gathers them here into one document."""
        return read_document(path, last, limit)

    def parse_document(self, doc: Any, state: dict[str, Any]) -> list[SessionEvent]:
        """JSON-document readers: the events of the file's whole document ``doc`` (what
        ``orjson.loads`` returned) that were not given for an earlier version of it. ``state``
        is the file's state (what was already given, by id); it must stay JSON-serialisable
        (it is saved in the sidecar's state file). Raises :class:`ReaderFormatError` for a
        document it does not recognise; must raise nothing else."""
        raise NotImplementedError

    def poll_db(self, conn: sqlite3.Connection, state: dict[str, Any]) -> list[SessionEvent]:
        """SQLite readers: the events added or changed since the last call, read through
        ``conn`` (opened read-only, ``query_only``). ``state`` is this database's state (for
        example the last row seen and the calls still running); it must stay JSON-serialisable
        (it is saved in the sidecar's state file). Raises :class:`ReaderFormatError` for rows
        it does not recognise and ``sqlite3.Error`` when the database cannot be read now."""
        raise NotImplementedError


class JsonLinesReader(SessionLogReader):
    """A reader of a JSON Lines session log whose lines are objects with a string ``type``.

    :meth:`parse_line` is written once here. A line that is not an object raises
    ``not_object``; an object goes to :meth:`parse_object`, which raises ``no_type`` unless its
    ``type`` is a string and hands it to :meth:`parse_typed`, the method a subclass implements.
    Any exception other than :class:`ReaderFormatError` that a line's unforeseen shape causes
    in the subclass's code is raised as ``unknown_shape``, so the interface's "raises only
    :class:`ReaderFormatError`" holds whatever the file holds. A log that also has untyped lines
    (Gemini CLI's header and ``$set`` lines) overrides :meth:`parse_object` and calls up for the
    typed ones.
    """

    kind: ClassVar[str] = "jsonl"

    def parse_line(self, obj: Any, state: dict[str, Any]) -> list[SessionEvent]:
        """The events of one decoded line (see the subclass's docstring); raises only
        :class:`ReaderFormatError`."""
        try:
            if not isinstance(obj, dict):
                raise ReaderFormatError("not_object")
            return self.parse_object(obj, state)
        except ReaderFormatError:
            raise
        except Exception:  # noqa: BLE001 - a shape no check foresaw: still only a reader error
            raise ReaderFormatError("unknown_shape") from None

    def parse_object(self, obj: dict[str, Any], state: dict[str, Any]) -> list[SessionEvent]:
        """The events of a line that is an object: ``no_type`` unless its ``type`` is a string,
        else :meth:`parse_typed`."""
        kind = obj.get("type")
        if not isinstance(kind, str):
            raise ReaderFormatError("no_type")
        return self.parse_typed(kind, obj, state)

    def parse_typed(self, kind: str, obj: dict[str, Any],
                    state: dict[str, Any]) -> list[SessionEvent]:
        """The events of a line whose ``type`` is the string ``kind``; raises
        :class:`ReaderFormatError` for a line the reader does not recognise. Subclasses
        implement it."""
        raise NotImplementedError


# -- small rules several readers share -----------------------------------------------------------

_INT = re.compile(r"-?[0-9]+")


def str_or_empty(value: Any) -> str:
    """``value`` when it is a string, else ``""`` (an optional id or text field)."""
    return value if isinstance(value, str) else ""


def require_object(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object (a dict); anything else raises
    :class:`ReaderFormatError` ``unknown_shape``."""
    if not isinstance(value, dict):
        raise ReaderFormatError("unknown_shape")
    return value


def command_arg(args: Any) -> str:
    """The ``command`` of a shell tool call's arguments object (Claude Code's ``input``, pi's
    and Copilot CLI's ``arguments``, Gemini CLI's ``args``); ``""`` when ``args`` is not an
    object or its ``command`` is not a string."""
    command = args.get("command") if isinstance(args, dict) else None
    return command if isinstance(command, str) else ""


def text_blocks(content: Any) -> str:
    """The text of a message's ``content``: a string as it is, or the ``text`` of its
    ``{"type": "text"}`` blocks joined as they are (other blocks skipped). Raises
    ``unknown_shape`` for anything else: ``content`` neither a string nor a list, a block that
    is not an object, a text block whose ``text`` is not a string."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ReaderFormatError("unknown_shape")
    parts = []
    for block in content:
        if not isinstance(block, dict):
            raise ReaderFormatError("unknown_shape")
        if block.get("type") == "text":
            text = block.get("text")
            if not isinstance(text, str):
                raise ReaderFormatError("unknown_shape")
            parts.append(text)
    return "".join(parts)


def exit_number(value: Any) -> int:
    """An exit status written as a JSON number: an int, or a float with a whole value (``2.0``
    is 2). Anything else (a fraction, a boolean, a string, ``None``, ...) raises
    :class:`ReaderFormatError` ``bad_exit``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ReaderFormatError("bad_exit")
    if isinstance(value, float):
        if not value.is_integer():
            raise ReaderFormatError("bad_exit")
        value = int(value)
    return value


def exit_notice(line: str, prefix: str) -> int | None:
    """``N`` from a result text's line that starts ``<prefix>N`` (whitespace around ``N``
    ignored; Claude Code's ``Exit code N``, pi's ``Command exited with code N``); ``None`` when
    ``line`` does not start with ``prefix``. Raises :class:`ReaderFormatError` ``bad_exit``
    when what follows the prefix is not an integer."""
    if not line.startswith(prefix):
        return None
    code = line[len(prefix):].strip()
    if not _INT.fullmatch(code):
        raise ReaderFormatError("bad_exit")
    return int(code)


def open_calls(state: dict[str, Any]) -> dict[str, Any]:
    """``state["calls"]``, the per-file map of calls started and not yet finished (call id →
    what the reader keeps of the call); set to a new ``{}`` first when it is not a dict (a
    fresh or damaged state)."""
    calls = state.get("calls")
    if not isinstance(calls, dict):
        calls = state["calls"] = {}
    return calls


def remember(table: dict[str, Any], key: str, value: Any, limit: int) -> None:
    """Set ``table[key] = value`` in a per-file map of a reader's state and keep the map within
    ``limit`` keys by forgetting the oldest (first inserted) first: a file that never finishes
    what it starts (a broken or hostile log) must not grow the state. A key already in the map
    keeps its place."""
    table[key] = value
    while len(table) > limit:
        del table[next(iter(table))]


def remember_call(state: Any, call_id: str, value: Any, limit: int) -> None:
    """Keep ``value`` for ``call_id`` in :func:`open_calls` until the call's result, as the
    newest call (a call id seen again moves to the end), within ``limit`` calls. Does nothing
    when ``state`` is not a dict."""
    if not isinstance(state, dict):
        return
    calls = open_calls(state)
    calls.pop(call_id, None)
    remember(calls, call_id, value, limit)


class StreamReader(JsonLinesReader):
    """A reader of a CLI's machine-readable output stream (``--output-format stream-json``,
    ``exec --json``): the transcript a CI job captures, read by ``repeat-failure verdict``
    (:mod:`repeat_failure.turns.verdict`). It gives the same events as a session-log reader; besides, it
    sets ``state["terminal"] = True`` when it reads the stream's terminal line (the run's
    result), so a transcript cut short can be told from a finished one.

    - ``format``: the name ``repeat-failure verdict --format`` takes.
    - ``cli``: the CLI (and its flag) that writes the format, for help texts.
    """

    format: ClassVar[str] = ""
    cli: ClassVar[str] = ""

    def detects(self, obj: Any) -> bool:
        """True when ``obj``, the first JSON line of a transcript, is this format's first
        line."""
        raise NotImplementedError

    def finish(self, state: dict[str, Any]) -> list[SessionEvent]:
        """The events the end of the transcript gives (after its last line; by default none):
        a format whose fatal error is a line that may also be a passing notice decides here,
        once it knows no terminal line followed."""
        return []


_STREAM_READERS: dict[str, StreamReader] = {}


def register_stream_reader(reader: StreamReader) -> None:
    """Register ``reader`` under its ``format``; raises ValueError on a second registration."""
    if reader.format in _STREAM_READERS:
        raise ValueError(f"a stream reader for format {reader.format!r} is already registered")
    _STREAM_READERS[reader.format] = reader


def stream_readers() -> dict[str, StreamReader]:
    """Every registered stream reader by format name (a copy)."""
    return dict(_STREAM_READERS)


_READERS: dict[str, SessionLogReader] = {}


def register_reader(reader: SessionLogReader, *backends: str) -> None:
    """Register ``reader`` for its backend (and any ``backends`` that run through the same CLI,
    such as the inference backends through Claude Code); raises ValueError on a second
    registration for a backend."""
    for backend in (reader.backend, *backends):
        if backend in _READERS:
            raise ValueError(f"a session-log reader for backend {backend!r} is already registered")
        _READERS[backend] = reader


def session_readers() -> dict[str, SessionLogReader]:
    """Every registered session-log reader by backend name (a copy; a reader shared by several
    backends appears under each)."""
    return dict(_READERS)


def session_reader(backend: str) -> SessionLogReader | None:
    """The session-log reader registered for ``backend``, or ``None`` (no safeguard signal)."""
    return _READERS.get(backend)


# Backend modules register their strippers and readers when imported; keep these lines sorted.
from repeat_failure.backends import claude  # noqa: E402,F401
from repeat_failure.backends import cline  # noqa: E402,F401
from repeat_failure.backends import codex  # noqa: E402,F401
from repeat_failure.backends import continue_cli  # noqa: E402,F401
from repeat_failure.backends import copilot  # noqa: E402,F401
from repeat_failure.backends import droid  # noqa: E402,F401
from repeat_failure.backends import gemini  # noqa: E402,F401
from repeat_failure.backends import kilo  # noqa: E402,F401
from repeat_failure.backends import omp  # noqa: E402,F401
from repeat_failure.backends import opencode  # noqa: E402,F401
from repeat_failure.backends import pi  # noqa: E402,F401
from repeat_failure.backends import qwen  # noqa: E402,F401
