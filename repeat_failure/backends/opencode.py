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

import os
import sqlite3
from pathlib import Path
from typing import Any, ClassVar

from repeat_failure.backends import (
    ReaderFormatError,
    SessionEvent,
    SessionLogReader,
    register_reader,
)
from repeat_failure.backends.opencode_rows import UNKNOWN_SHAPE, Poll
from repeat_failure.backends.opencode_storage import is_storage, parse_storage, read_storage
from repeat_failure.sessions.stores import Document

#: Version of the state layout kept in ``state["v"]``; a state of another version starts over.
STATE_VERSION = 1
#: Calls (and assistant steps) still open that the state remembers; beyond this the oldest are
#: forgotten (a call opencode never finishes, e.g. after a crash, must not grow the state).
MAX_OPEN = 256


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
        only its last :data:`~repeat_failure.backends.opencode_rows.BACKFILL_ROWS` rows (``repeat-failure replay``)."""
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
        A new state starts :data:`~repeat_failure.backends.opencode_rows.BACKFILL_ROWS` rows before the end of each table. All reads
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
            poll = Poll(self, st)
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

register_reader(OpencodeReader())
