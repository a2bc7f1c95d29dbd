"""opencode's rows: the rules that turn its messages and parts into :class:`SessionEvent` values,
whatever store they came from.

opencode 1.2 and later keep them as rows of ``opencode.db``'s ``message`` and ``part`` tables
(:mod:`repeat_failure.backends.opencode`, whose module docstring gives what the harness saw);
opencode 1.0 and 1.1 as one JSON file per message and per part under ``storage/``
(:mod:`repeat_failure.backends.opencode_storage`). Both readers run the same :class:`Poll` on
them, so a store's form never changes what a shell call becomes. This module imports neither
reader: both import it (issue 30: no import circle).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from typing import Any

from repeat_failure.backends import (ERROR, SHELL_END, SHELL_START, TEXT, TOOL, TURN_END, TURN_START,
                                     ReaderFormatError, SessionEvent, SessionLogReader, str_or_empty)

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


# -- one poll ------------------------------------------------------------------------------------


class Poll:
    """The work of one poll of an opencode store: reads rows, updates ``st`` (the reader's
    checked state copy: ``message``/``part`` watermarks, ``open_parts``, ``open_messages``),
    collects events and the reasons of bad rows (:attr:`bad`).

    ``reader`` gives :attr:`~repeat_failure.backends.SessionLogReader.shell_tools` (the tool
    names that are shell calls: ``bash``). The SQLite reader
    (:meth:`repeat_failure.backends.opencode.OpencodeReader.poll_db`) calls
    :meth:`read_messages` and :meth:`read_parts`; the storage reader
    (:func:`repeat_failure.backends.opencode_storage.parse_storage`) hands it decoded rows one at
    a time. A bad row never stops the others: its reason (:data:`NOT_JSON`,
    :data:`UNKNOWN_SHAPE`, :data:`BAD_EXIT`) is appended to :attr:`bad`."""

    def __init__(self, reader: SessionLogReader, st: dict[str, Any]) -> None:
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
