"""opencode: the session-log reader for its SQLite store.

Seen in the harness's real run (``harness/evidence/opencode.json``, opencode 1.18.33): opencode
keeps every session in ``~/.local/share/opencode/opencode.db`` (``$XDG_DATA_HOME/opencode``;
WAL mode: at exit the rows were still in ``opencode.db-wal``). Its tables have a ``text``
primary key ``id`` (so they are rowid tables, with an index on ``id``) and no index on
``time_updated``; opencode's ids grow with time (``msg_``/``prt_`` + a time-based hex prefix),
and in the real database rowid order and id order were the same. The tables that matter:

- ``message(id, session_id, time_created, time_updated, data)``: ``data`` is JSON. A user
  prompt is ``{"role": "user", "time": {"created": ms}, ...}``; each model step is an assistant
  message ``{"role": "assistant", "parentID": <the user message id>, "time": {"created": ms,
  "completed": ms}, "finish": "tool-calls" | "stop", ...}``. The row is inserted when the step
  starts (no ``time.completed``) and updated in place when it ends. In the real run the one
  prompt gave six assistant messages: five ``finish: "tool-calls"`` (one bash call each) and a
  last ``finish: "stop"`` holding the final answer.
- ``part(id, message_id, session_id, time_created, time_updated, data)``: ``data`` is JSON with
  a ``type``: ``text`` (the user's prompt in a user message; model output in an assistant
  message, ``time.start``/``time.end`` in ms), ``step-start`` / ``step-finish`` (ignored),
  ``tool``: ``{"tool": "bash", "callID": ..., "state": {"status": ..., "input": {"command":
  ...}, "metadata": {"exit": 2, ...}, "time": {"start": ms, "end": ms}}}``. A tool part is
  inserted ``pending`` (``input: {}``), becomes ``running`` (the command known,
  ``time.start``), then ``completed`` (``time.end``, ``metadata.exit``), each an UPDATE of the
  same row (the ``event`` table of the same database shows every intermediate state). The
  status says ``completed`` for a command that failed: only ``metadata.exit`` (2 for
  ``ls /nonexistent`` in the real run) tells. The harness's snapshots taken while a command ran
  (scenarios ``running`` and ``midturn``) show the part ``running`` with its command, and its
  assistant message without ``time.completed``; the ``read`` scenario's file read is a tool part
  with tool ``read``.

Rules taken from opencode's source, not seen in the captured data (no such rows there): a tool
part can also end ``error`` (a refused permission, an aborted or invalid call: the command may
not have run); ``metadata.exit`` is ``null`` when the process was killed (Node's
``exitCode`` after a signal or the tool's timeout); an assistant message whose ``finish`` is
``"tool-calls"`` or ``"unknown"`` lets the turn go on and any other completed one (``"stop"``,
``"length"``, an ``error``) ends it; a sub-agent (``task`` tool) runs in a child session
(``session.parent_id`` set), whose prompt and answer are not turns of the agent; rows are deleted
by an undo (revert) or a session delete, so SQLite can hand a new row a rowid seen before.

Kilo Code CLI (an opencode fork, :mod:`repeat_failure.backends.kilo`) reuses this reader.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

from repeat_failure.backends import (
    ERROR,
    SHELL_END,
    SHELL_START,
    TEXT,
    TOOL,
    TURN_END,
    TURN_START,
    ReaderFormatError,
    SessionEvent,
    SessionLogReader,
    register_reader,
    str_or_empty,
)
from repeat_failure.backends.opencode_storage import is_storage, parse_storage, read_storage
from repeat_failure.sessions.stores import Document

#: Version of the state layout kept in ``state["v"]``; a state of another version starts over.
STATE_VERSION = 1
#: Calls (and assistant steps) still open that the state remembers; beyond this the oldest are
#: forgotten (a call opencode never finishes, e.g. after a crash, must not grow the state).
MAX_OPEN = 256
#: A database seen for the first time (empty state) is read from this many rows before the end
#: of each table, not from its start: opencode keeps weeks of sessions in one file.
BACKFILL_ROWS = 5000

#: Reasons for :class:`ReaderFormatError` (``hive_repeat_failure_reader_errors_total{reason}``).
NOT_JSON, UNKNOWN_SHAPE, BAD_EXIT = "not_json", "unknown_shape", "bad_exit"

#: Assistant ``finish`` values after which opencode's prompt loop asks the model again (the
#: turn goes on); from opencode's source. The real run showed ``tool-calls`` and ``stop``.
_CONTINUES = frozenset({"tool-calls", "unknown"})
_TOOL_STATUSES = frozenset({"pending", "running", "completed", "error"})

_MESSAGE_SQL = ("SELECT m.rowid, m.id, m.time_created, m.time_updated, m.data, s.parent_id"
                " FROM message AS m LEFT JOIN session AS s ON s.id = m.session_id")
_PART_SQL = ("SELECT p.rowid, p.id, p.time_created, p.time_updated, p.data, p.message_id,"
             " m.data FROM part AS p LEFT JOIN message AS m ON m.id = p.message_id")


class OpencodeReader(SessionLogReader):
    """opencode's ``opencode.db`` → :class:`SessionEvent` values (opencode 1.18.33).

    Events (``ts`` in float seconds since the epoch, from the row's own millisecond times):

    - ``turn_start``: a user message row of a top-level session; ``ts`` its ``time.created``,
      ``turn_id`` its id.
    - ``turn_end``: an assistant message of a top-level session once it has ``time.completed``
      and a ``finish`` other than ``tool-calls``/``unknown`` (``stop`` in the real run); ``ts``
      its ``time.completed``, ``turn_id`` its ``parentID`` (the prompt's id).
    - ``shell_start`` / ``shell_end``: a tool part whose ``tool`` is in :attr:`shell_tools`
      (``bash``), once its status is ``running`` (the command is known) / ``completed`` or
      ``error``; ``ts`` its ``state.time.start`` / ``state.time.end``; ``call_id`` its
      ``callID``; ``command`` its ``state.input.command`` (raw); ``exit`` its
      ``state.metadata.exit`` when an int; ``failed`` is ``exit != 0``, and ``True`` for status
      ``error`` or a ``null`` exit (killed). A part first seen already finished gives both.
    - ``tool``: any other tool part, once, when first seen (``ts`` ``state.time.start`` or the
      row's ``time_created``).
    - ``text``: a ``text`` part of an assistant message, once, when first seen (``ts`` its
      ``time.start``); the user's own prompt text is not model output and gives nothing, nor is
      a ``synthetic`` part (Kilo 7.7.7 writes one, "Initializing snapshot…", into the
      assistant's message while it prepares a snapshot, and removes it afterwards; seen in a
      harness run on a loaded machine).

    ``turn_id`` on part events is the prompt's id (the message's ``parentID``).
    """

    backend: ClassVar[str] = "opencode"
    #: Tools that write or edit files (opencode's built-in file tools; Kilo inherits them).
    edit_tools: ClassVar[frozenset[str]] = frozenset({"write", "edit", "patch", "multiedit", "apply_patch"})
    globs: ClassVar[tuple[str, ...]] = ("$XDG_DATA_HOME/opencode/opencode.db",
                                        "$XDG_DATA_HOME/opencode/storage/session/*/*.json")
    env_defaults: ClassVar[dict[str, str]] = {"XDG_DATA_HOME": ".local/share"}
    kind: ClassVar[str] = "sqlite"
    #: opencode runs its bash tool as ``$SHELL -c <cmd>``: the neutral route records it.
    route_records: ClassVar[bool] = False
    signal: ClassVar[str] = (
        "~/.local/share/opencode/opencode.db: part rows of tool bash (state.status running → "
        "completed or error; exit status in state.metadata.exit); before 1.2 the same parts as "
        "JSON files under ~/.local/share/opencode/storage/")
    #: Tool names that are the backend's shell tool (``bash`` in opencode 1.18.33's real run).
    shell_tools: ClassVar[frozenset[str]] = frozenset({"bash"})

    def new_file_state(self) -> dict[str, Any]:
        """A fresh state: ``{}`` (the first :meth:`poll_db` or :meth:`parse_document` fills it
        in)."""
        return {}

    def file_kind(self, path: str | os.PathLike[str]) -> str:
        """``"json"`` for a session file of opencode before 1.2
        (``storage/session/<project>/<id>.json``, read with its message and part files:
        :mod:`repeat_failure.backends.opencode_storage`), else ``"sqlite"``."""
        return "json" if os.fspath(path).endswith(".json") else "sqlite"

    def read_document(self, path: Path, last: tuple[int, int] | tuple[()] | None,
                      limit: int) -> Document:
        """A session of opencode before 1.2 gathered with its message and part files
        (:func:`repeat_failure.backends.opencode_storage.read_storage`)."""
        return read_storage(Path(path), last, limit)

    def parse_document(self, doc: Any, state: dict[str, Any]) -> list[SessionEvent]:
        """The events of a gathered session of opencode before 1.2 not given before
        (:func:`repeat_failure.backends.opencode_storage.parse_storage`); a document of another
        shape raises :class:`ReaderFormatError` ``unknown_shape``."""
        if not is_storage(doc):
            raise ReaderFormatError(UNKNOWN_SHAPE, "not a gathered opencode session")
        return parse_storage(self, doc, state)

    def history_state(self) -> dict[str, Any]:
        """A state whose watermarks are before the first row: the whole store is read, not
        only its last :data:`BACKFILL_ROWS` rows (``repeat-failure replay``)."""
        return {"v": STATE_VERSION, "message": [0, ""], "part": [0, ""]}

    def poll_db(self, conn: sqlite3.Connection, state: dict[str, Any]) -> list[SessionEvent]:
        """The events added or changed since the last call, in time order (see the class
        docstring for what each row gives).

        ``state`` (updated in place, JSON-serialisable, bounded; no text of the database, only
        ids and counters)::

            {"v": 1,
             "message": [rowid, id], "part": [rowid, id],  # the last row read per table
             "open_parts": {part_id: "pending" | "started"},  # shell calls not finished yet
             "open_messages": [message_id, ...],           # assistant steps not completed yet
             "errors": {reason: count},                    # bad rows seen, all time
             "pending_error": reason | None}               # a bad row not yet raised

        Cheap on a database that grows for weeks: new rows are ``rowid >`` the last one read
        (opencode updates a row in place, keeping its rowid), and the open calls and steps
        are looked up by primary key. If the last row read is gone (opencode deleted it: an
        undo or a session delete, after which SQLite may reuse its rowid) the reader goes back
        to the newest surviving row it had read, found by id (opencode's ids grow with time).
        A new state starts :data:`BACKFILL_ROWS` rows before the end of each table. All reads
        run in one read transaction (one snapshot), begun here unless ``conn`` is already in
        one.

        Bad rows: a row whose ``data`` does not parse (``not_json``), has a shape this reader
        does not know (``unknown_shape``) or a non-number exit (``bad_exit``) is skipped and
        counted in ``state["errors"]``; the other rows are read and their events returned, and
        the watermark moves past the bad row (it is never read again). Because the caller
        drops the events of a call that raises, a poll that produced events keeps the first
        bad row's reason in ``state["pending_error"]`` and raises it as
        :class:`ReaderFormatError` at the start of the next call, before reading anything (so
        nothing is lost: that call's rows are read by the call after); a poll that produced
        no events raises at once. At most one error is raised per poll that met bad rows;
        ``state["errors"]`` keeps the exact counts.

        Raises :class:`ReaderFormatError` as above and ``sqlite3.Error`` when the database
        cannot be read now (``state`` is then unchanged, and the next call reads the same
        rows); nothing else.
        """
        st = _load_state(state)
        pending = st.get("pending_error")
        if pending:
            st["pending_error"] = None
            _store(state, st)
            raise ReaderFormatError(pending, "a bad row in an earlier poll")
        own = not conn.in_transaction
        if own:
            conn.execute("BEGIN")
        try:
            poll = _Poll(self, st)
            poll.read_messages(conn)
            poll.read_parts(conn)
        finally:
            if own:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
        events = poll.events()
        if poll.bad:
            for reason in poll.bad:
                st["errors"][reason] = st["errors"].get(reason, 0) + 1
            if events:
                st["pending_error"] = poll.bad[0]
        _store(state, st)
        if poll.bad and not events:
            raise ReaderFormatError(poll.bad[0], f"{len(poll.bad)} bad row(s)")
        return events


# -- state ---------------------------------------------------------------------------------------


def _load_state(state: Any) -> dict[str, Any]:
    """A checked copy of ``state``: anything missing or malformed (a state file from another
    version, an edited file) is replaced by its fresh value, never trusted."""
    src = state if isinstance(state, dict) and state.get("v") == STATE_VERSION else {}
    st: dict[str, Any] = {"v": STATE_VERSION}
    for table in ("message", "part"):
        mark = src.get(table)
        ok = (isinstance(mark, list) and len(mark) == 2 and type(mark[0]) is int
              and mark[0] >= 0 and isinstance(mark[1], str))
        st[table] = list(mark) if ok else None  # type: ignore[arg-type]  # None: not read yet (backfill)
    parts = src.get("open_parts")
    st["open_parts"] = ({k: v for k, v in parts.items()
                         if isinstance(k, str) and v in ("pending", "started")}
                        if isinstance(parts, dict) else {})
    msgs = src.get("open_messages")
    st["open_messages"] = ([m for m in msgs if isinstance(m, str)]
                           if isinstance(msgs, list) else [])
    errors = src.get("errors")
    st["errors"] = ({k: v for k, v in errors.items()
                     if isinstance(k, str) and type(v) is int and v >= 0}
                    if isinstance(errors, dict) else {})
    pending = src.get("pending_error")
    st["pending_error"] = pending if isinstance(pending, str) and pending else None
    return st


def _store(state: dict[str, Any], st: dict[str, Any]) -> None:
    """Write ``st`` into the caller's ``state`` dict (in place), open lists cut to
    :data:`MAX_OPEN` (oldest dropped)."""
    parts = st["open_parts"]
    if len(parts) > MAX_OPEN:
        parts = dict(list(parts.items())[-MAX_OPEN:])
    st["open_parts"] = parts
    st["open_messages"] = st["open_messages"][-MAX_OPEN:]
    state.clear()
    state.update(st)


# -- one poll ------------------------------------------------------------------------------------


class _Poll:
    """The work of one :meth:`OpencodeReader.poll_db` call: reads rows, updates ``st`` (the
    checked state copy), collects events and the reasons of bad rows."""

    def __init__(self, reader: OpencodeReader, st: dict[str, Any]) -> None:
        self.reader = reader
        self.st = st
        self.bad: list[str] = []
        self._events: list[tuple[float, int, SessionEvent]] = []
        self._messages: dict[str, tuple[str, str]] = {}  # message id -> (role, turn id)

    def events(self) -> list[SessionEvent]:
        """The events in time order (rows' own times; ties keep reading order)."""
        self._events.sort(key=lambda e: (e[0], e[1]))
        return [e[2] for e in self._events]

    def _emit(self, event: SessionEvent) -> None:
        ts = event.ts if event.ts is not None else float("inf")
        self._events.append((ts, len(self._events), event))

    def _guard(self, handler: Any, row: tuple, first: bool) -> None:
        """Run ``handler`` on one row; a bad row is remembered, never stops the others."""
        try:
            handler(row, first)
        except ReaderFormatError as exc:
            self.bad.append(exc.reason)
        except (TypeError, ValueError, AttributeError, KeyError, RecursionError):
            self.bad.append(UNKNOWN_SHAPE)

    # messages: turns

    def read_messages(self, conn: sqlite3.Connection) -> None:
        """New message rows, then the assistant steps that were open (looked up by id)."""
        before = self.st["open_messages"]
        self.st["open_messages"] = []
        seen: set[str] = set()
        for row in _new_rows(conn, "message", _MESSAGE_SQL, "m", self.st):
            seen.add(row[1])
            self._guard(self._message, row, True)
        for row in _by_ids(conn, _MESSAGE_SQL, "m", [m for m in before if m not in seen]):
            self._guard(self._message, row, False)
        # ids grow with time: sorted, the oldest come first (and are dropped first)
        self.st["open_messages"] = sorted(set(self.st["open_messages"]))

    def _message(self, row: tuple, first: bool) -> None:
        _rowid, msg_id, created, updated, raw, parent_session = row
        data = _json(raw)
        role = data.get("role")
        times = data.get("time", {})
        if not isinstance(times, dict):
            raise ReaderFormatError(UNKNOWN_SHAPE, "message time")
        top = parent_session is None
        if role == "user":
            if first and top:
                self._emit(SessionEvent(TURN_START, _ts(times.get("created"), created),
                                        turn_id=msg_id))
            return
        if role != "assistant":
            raise ReaderFormatError(UNKNOWN_SHAPE, "message role")
        done = times.get("completed")
        if done is None:
            self.st["open_messages"].append(msg_id)
            return
        if data.get("finish") in _CONTINUES or not top:
            return
        turn = data.get("parentID")
        error = data.get("error")
        if isinstance(error, dict):
            # opencode 1.18.33 (and Kilo) store the provider's refusal on the assistant message
            # that ended the turn: {"name": "APIError", "data": {"message", "statusCode", ...}}.
            detail = error.get("data") if isinstance(error.get("data"), dict) else {}
            message = detail.get("message")  # type: ignore[union-attr]
            self._emit(SessionEvent(ERROR, _ts(done, updated), turn_id=str_or_empty(turn),
                                    detail=message if isinstance(message, str)
                                    else str_or_empty(error.get("name"))))
        self._emit(SessionEvent(TURN_END, _ts(done, updated),
                                turn_id=str_or_empty(turn)))

    # parts: shell calls, other tools, text

    def read_parts(self, conn: sqlite3.Connection) -> None:
        """New part rows, then the shell calls that were open (looked up by id)."""
        opened = self.st["open_parts"]
        before = list(opened)
        seen: set[str] = set()
        for row in _new_rows(conn, "part", _PART_SQL, "p", self.st):
            seen.add(row[1])
            self._guard(self._part, row, True)
        again = [p for p in before if p not in seen]
        found: set[str] = set()
        for row in _by_ids(conn, _PART_SQL, "p", again):
            found.add(row[1])
            self._guard(self._part, row, False)
        for gone in set(again) - found:  # deleted (undo, session delete): nothing will come
            opened.pop(gone, None)
        self.st["open_parts"] = {k: opened[k] for k in sorted(opened)}

    def _part(self, row: tuple, first: bool) -> None:
        _rowid, part_id, created, updated, raw, message_id, message_raw = row
        data = _json(raw)
        kind = data.get("type")
        if not isinstance(kind, str):
            raise ReaderFormatError(UNKNOWN_SHAPE, "part type")
        if kind == "tool":
            self._tool(part_id, created, updated, data, self._message_of(message_id, message_raw),
                       first)
        elif kind == "text" and first and data.get("synthetic") is not True:
            role, turn = self._message_of(message_id, message_raw)
            if role == "assistant":
                times = data.get("time")
                start = times.get("start") if isinstance(times, dict) else None
                self._emit(SessionEvent(TEXT, _ts(start, created), turn_id=turn))

    def _tool(self, part_id: str, created: Any, updated: Any, data: dict,
              message: tuple[str, str], first: bool) -> None:
        tool, call_id, tstate = data.get("tool"), data.get("callID"), data.get("state")
        if not (isinstance(tool, str) and isinstance(call_id, str) and isinstance(tstate, dict)
                and tstate.get("status") in _TOOL_STATUSES):
            raise ReaderFormatError(UNKNOWN_SHAPE, "tool part")
        status = tstate["status"]
        times = tstate.get("time", {})
        if not isinstance(times, dict):
            raise ReaderFormatError(UNKNOWN_SHAPE, "tool time")
        turn = message[1]
        if tool not in self.reader.shell_tools:
            if first:
                self._emit(SessionEvent(TOOL, _ts(times.get("start"), created), call_id=call_id,
                                        tool=tool, turn_id=turn))
            return
        opened = self.st["open_parts"]
        if status == "pending":  # input still {}: the command is not known yet
            opened.setdefault(part_id, "pending")
            return
        tinput = tstate.get("input", {})
        if not isinstance(tinput, dict):
            raise ReaderFormatError(UNKNOWN_SHAPE, "tool input")
        if status != "error" and "command" not in tinput:
            raise ReaderFormatError(UNKNOWN_SHAPE, "shell command")
        command = tinput.get("command", "")
        if not isinstance(command, str):
            raise ReaderFormatError(UNKNOWN_SHAPE, "shell command")
        meta = tstate.get("metadata")
        exit_code: int | None = None
        if status == "completed":
            if not isinstance(meta, dict) or "exit" not in meta:
                raise ReaderFormatError(BAD_EXIT, "no exit")
            exit_code = _exit(meta["exit"])
        elif status == "error" and isinstance(meta, dict):
            exit_code = _exit(meta.get("exit"))
        if opened.get(part_id) != "started":
            self._emit(SessionEvent(SHELL_START, _ts(times.get("start"), created),
                                    call_id=call_id, command=command, tool=tool, turn_id=turn))
        if status == "running":
            opened[part_id] = "started"
            return
        opened.pop(part_id, None)
        failed = status == "error" or exit_code != 0
        output = tstate.get("output")
        if not isinstance(output, str) and isinstance(meta, dict):
            output = meta.get("output")
        if not isinstance(output, str):  # an error's text stands for its output
            output = tstate.get("error")
        self._emit(SessionEvent(SHELL_END, _ts(times.get("end"), updated), call_id=call_id,
                                command=command, exit=exit_code, failed=failed, tool=tool,
                                turn_id=turn, output=output if isinstance(output, str) else None))

    def _message_of(self, message_id: Any, raw: Any) -> tuple[str, str]:
        """(role, turn id) of a part's message, from its ``data`` column; ``("", "")`` when the
        message is missing or unreadable (its own row is counted as bad when read)."""
        if not isinstance(message_id, str) or not isinstance(raw, (str, bytes, dict)):
            return "", ""
        hit = self._messages.get(message_id)
        if hit is None:
            try:
                data = _json(raw)
            except ReaderFormatError:
                data = {}
            role, parent = data.get("role"), data.get("parentID")
            hit = (str_or_empty(role), str_or_empty(parent))
            self._messages[message_id] = hit
        return hit


# -- reading -------------------------------------------------------------------------------------


def _new_rows(conn: sqlite3.Connection, table: str, select: str, alias: str,
              st: dict[str, Any]) -> Iterator[tuple]:
    """The rows of ``table`` added since the watermark ``st[table]`` (``[rowid, id]`` of the
    last row read), in rowid order, one at a time (a backfill may hold large tool outputs);
    moves the watermark to the last row yielded."""
    mark = st[table]
    if mark is None:
        top = conn.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0] or 0
        after = max(0, top - BACKFILL_ROWS)
    else:
        after, last_id = mark
        row = conn.execute(f"SELECT id FROM {table} WHERE rowid = ?", (after,)).fetchone()
        if after and (row is None or row[0] != last_id):
            # The last row read was deleted (its rowid may now be reused): new rows are those
            # above the newest surviving row already read. ``+id`` keeps SQLite on the rowid
            # order (the id index would visit every older row).
            back = conn.execute(f"SELECT rowid FROM {table} WHERE rowid <= ? AND +id <= ?"
                                f" ORDER BY rowid DESC LIMIT 1", (after, last_id)).fetchone()
            after = back[0] if back else 0
    last: tuple | None = None
    for row in conn.execute(f"{select} WHERE {alias}.rowid > ? ORDER BY {alias}.rowid",
                            (after,)):
        last = row
        yield row
    if last is not None:
        st[table] = [last[0], last[1]]
    elif mark is None or after != mark[0]:
        found = conn.execute(f"SELECT rowid, id FROM {table} WHERE rowid <= ?"
                             f" ORDER BY rowid DESC LIMIT 1", (after,)).fetchone()
        st[table] = [found[0], found[1]] if found else [0, ""]


def _by_ids(conn: sqlite3.Connection, select: str, alias: str, ids: list[str]) -> list[tuple]:
    """The rows whose primary key is in ``ids`` (looked up by primary key)."""
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    return conn.execute(f"{select} WHERE {alias}.id IN ({marks}) ORDER BY {alias}.rowid",
                        ids).fetchall()


def _json(raw: Any) -> dict[str, Any]:
    """A ``data`` column as a dict; :class:`ReaderFormatError` ``not_json`` when it does not
    parse, ``unknown_shape`` when it is not a JSON object."""
    if isinstance(raw, dict):  # a storage file's object (opencode before 1.2), decoded already
        return raw
    if not isinstance(raw, (str, bytes)):
        raise ReaderFormatError(UNKNOWN_SHAPE, "data column")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        raise ReaderFormatError(NOT_JSON) from None
    if not isinstance(data, dict):
        raise ReaderFormatError(UNKNOWN_SHAPE, "data not an object")
    return data


def _ts(ms: Any, fallback_ms: Any = None) -> float | None:
    """Milliseconds since the epoch → float seconds; ``fallback_ms`` (the row's column) when
    ``ms`` is not a number; ``None`` when neither is."""
    for value in (ms, fallback_ms):
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return value / 1000.0
    return None


def _exit(value: Any) -> int | None:
    """``state.metadata.exit``: an int, or ``None`` for ``null`` (killed by a signal);
    :class:`ReaderFormatError` ``bad_exit`` for anything else."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ReaderFormatError(BAD_EXIT)
    return value


register_reader(OpencodeReader())
