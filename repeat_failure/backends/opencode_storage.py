"""opencode before 1.2: its sessions as JSON files under ``~/.local/share/opencode/storage/``.

Seen in the harness's real runs of opencode 1.0.152 and 1.1.65 (captures under
``harness/evidence/versions/opencode/``): these releases keep no SQLite database. Each session
is a tree of small JSON files under ``$XDG_DATA_HOME/opencode/storage/``:

- ``session/<project id>/<session id>.json``: the session (``id``, ``version``, ``directory``,
  ``time.created`` / ``time.updated`` in ms; ``parentID`` for a sub-agent's child session);
- ``message/<session id>/<message id>.json``: one per message, the same object the SQLite store
  of 1.2+ keeps in ``message.data`` plus its ``id`` and ``sessionID`` (a user prompt
  ``{"role": "user", "time": {"created"}}``; each model step ``{"role": "assistant",
  "parentID": <prompt id>, "time": {"created", "completed"}, "finish": "tool-calls" | "stop"}``);
- ``part/<message id>/<part id>.json``: one per part, the object of ``part.data`` plus ``id``,
  ``sessionID`` and ``messageID`` (``text``, ``step-start``, ``step-finish``, ``tool`` with
  ``tool: "bash"``, ``callID`` and ``state`` ``{"status", "input": {"command"}, "output",
  "metadata": {"exit": 2, "output"}, "time": {"start", "end"}}``).

opencode rewrites a message or part file whole as it changes (a tool part goes ``pending`` →
``running`` → ``completed``; the harness's ``running`` snapshot of 1.1.65 holds the part
``running`` with its command). Message and part ids grow with time, so sorted by name the files
are in time order.

The session file is what the reader's glob finds; :func:`read_storage` gathers the session's
message and part files into one document (``{"opencode_storage": 1, "session": {...},
"messages": [{"info": {...}, "parts": [{...}, ...]}, ...]}``), and :func:`parse_storage` reads it
with the row rules of :class:`~repeat_failure.backends.opencode.OpencodeReader` (the objects are
the rows' ``data``), giving each message and part only once it has nothing more to give.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from repeat_failure.backends import ReaderFormatError, SessionEvent, remember, str_or_empty
from repeat_failure.backends.opencode_rows import NOT_JSON, Poll
from repeat_failure.sessions.stores import UNCHANGED, Document, read_document

#: The newest messages of a session read each time (older ones were read before; opencode
#: keeps every message of a long session).
MAX_MESSAGES = 512
#: Message and part ids remembered as given, per session (the oldest forgotten first).
MAX_DONE = 8192
#: ``doc["opencode_storage"]``: the layout of the gathered document.
LAYOUT = 1
#: After a first read, the newest messages always looked at again (with their parts).
ACTIVE = 4
#: A message file written up to this long before the last read's newest file is looked at again
#: (file times of one machine; opencode may write a file just before the newest one).
SLACK_NS = 2_000_000_000


def storage_root(path: Path) -> Path | None:
    """The ``storage`` directory of a session file ``storage/session/<project>/<id>.json``, or
    ``None`` when ``path`` is not laid out so."""
    if path.suffix != ".json" or path.parent.parent.name != "session":
        return None
    return path.parent.parent.parent


def _json_files(directory: Path) -> list[tuple[str, Path, os.stat_result]]:
    """``(name, path, lstat)`` of the regular ``*.json`` files in ``directory``, by name;
    ``[]`` when it does not exist (a message with no part yet)."""
    out = []
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if not entry.name.endswith(".json"):
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    out.append((entry.name, Path(entry.path), st))
    except (FileNotFoundError, NotADirectoryError):
        return []
    out.sort(key=lambda item: item[0])
    return out


def read_storage(path: Path, last: tuple[int, int] | tuple[()] | None,
                 limit: int) -> Document:
    """The session at ``path`` (``storage/session/<project>/<id>.json``) gathered with its
    messages and their parts into one document (see the module docstring), when any of those
    files changed since the stamp ``last``.

    Which messages: on a first read (``last`` None or empty) the newest :data:`MAX_MESSAGES`;
    after that only those that can have changed since ``last`` (whose stamp's first number is
    the newest ``mtime_ns`` seen then): the :data:`ACTIVE` newest, and any whose message file
    was written since then (less :data:`SLACK_NS`). opencode writes a message's parts while the
    message is the newest, and writes the message file again when its step completes, so an
    older message's parts are not looked at again: a session of hundreds of messages costs a
    directory listing and a ``stat`` per message, not a listing per message. The stamp is
    ``(newest mtime_ns, total size + file count × 2**40)`` over the session file, every message
    file and the parts of the messages looked at; messages are taken newest first while their
    files add up to at most ``limit`` bytes. A message or part file that is not JSON (caught
    while opencode wrote it) stands as ``None``; the session file's own errors are
    :func:`repeat_failure.sessions.stores.read_document`'s. Never raises for what the files
    hold."""
    root = storage_root(path)
    if root is None:
        return read_document(path, last, limit)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return Document(UNCHANGED, None, 0, "")
    except OSError:
        return Document(None, None, 0, "unreadable")
    messages = _json_files(root / "message" / path.stem)[-MAX_MESSAGES:]
    since = last[0] - SLACK_NS if last else None
    newest = max([st.st_mtime_ns, *(m[2].st_mtime_ns for m in messages)])
    total = st.st_size + sum(m[2].st_size for m in messages)
    count = 1 + len(messages)
    chosen: list[tuple[Path, list[Path]]] = []
    size, full = 0, False
    for age, (_name, msg_path, msg_st) in enumerate(reversed(messages)):
        if since is not None and age >= ACTIVE and msg_st.st_mtime_ns < since:
            continue
        parts = _json_files(root / "part" / msg_path.stem)
        grown = msg_st.st_size + sum(p[2].st_size for p in parts)
        newest = max([newest, *(p[2].st_mtime_ns for p in parts)])
        total, count = total + sum(p[2].st_size for p in parts), count + len(parts)
        full = full or bool(chosen and size + grown > limit)
        if not full:  # the newest that fit; older history past the limit is left out
            chosen.append((msg_path, [p[1] for p in parts]))
            size += grown
    stamp = (newest, total + (count << 40))
    if stamp == last:
        return Document(UNCHANGED, stamp, 0, "")
    session = read_document(path, None, limit)
    if session.error or session.doc is UNCHANGED:
        return session
    out = []
    for msg_path, part_paths in reversed(chosen):
        info = _object(msg_path, limit)
        out.append({"info": info, "parts": [_object(p, limit) for p in part_paths]})
    return Document({"opencode_storage": LAYOUT, "session": session.doc, "messages": out},
                    stamp, size + st.st_size, "")


def _object(path: Path, limit: int) -> Any:
    """The decoded JSON of a message or part file, or ``None`` when it cannot be read or is not
    JSON (it vanished: ``{}``, which gives nothing)."""
    got = read_document(path, None, limit)
    if got.doc is UNCHANGED:
        return {}
    return None if got.error else got.doc


def is_storage(doc: Any) -> bool:
    """True when ``doc`` is a document :func:`read_storage` gathered."""
    return isinstance(doc, dict) and doc.get("opencode_storage") == LAYOUT


def _dict(value: Any) -> dict[str, Any]:
    """``value`` when it is a dict (a part of the state), else a new empty one."""
    return value if isinstance(value, dict) else {}


def parse_storage(reader: Any, doc: dict[str, Any],
                  state: dict[str, Any]) -> list[SessionEvent]:
    """The events of a gathered session document (:func:`read_storage`) not given before, by
    the rules of :class:`~repeat_failure.backends.opencode.OpencodeReader` (its class
    docstring: ``turn_start``, ``turn_end``, ``shell_start`` / ``shell_end``, ``tool``,
    ``text``). ``state`` (JSON-serialisable, bounded) keeps ``done`` (message and part ids
    that have nothing more to give: a user prompt, a completed assistant step, a finished or
    non-shell part), ``open_parts`` (shell calls seen pending or running) and ``errors`` (bad
    files by reason). A bad message or part file (not JSON, an unknown shape, a non-number
    exit) is skipped and counted; when nothing else gave an event its reason is raised as
    :class:`ReaderFormatError` (when something did, the events are returned and the count
    kept: raising would drop them)."""
    done: dict[str, Any] = _dict(state.get("done"))
    opened: dict[str, Any] = _dict(state.get("open_parts"))
    errors: dict[str, Any] = _dict(state.get("errors"))
    session = doc.get("session")
    messages = doc.get("messages")
    if not isinstance(session, dict) or not isinstance(messages, list):
        raise ReaderFormatError("unknown_shape")
    parent = session.get("parentID") or None  # a sub-agent's session
    poll = Poll(reader, {"open_parts": opened, "open_messages": []})
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("parts"), list):
            raise ReaderFormatError("unknown_shape")
        info = message.get("info")
        if info is None:
            poll.bad.append(NOT_JSON)
            continue
        if not isinstance(info, dict) or not isinstance(info.get("id"), str):
            poll.bad.append("unknown_shape")
            continue
        msg_id = info["id"]
        if msg_id not in done:
            poll._guard(poll._message, (0, msg_id, None, None, info, parent), True)
            times = info.get("time")
            if info.get("role") != "assistant" or (isinstance(times, dict)
                                                   and times.get("completed") is not None):
                remember(done, msg_id, 1, MAX_DONE)
        for part in message["parts"]:
            if part is None:
                poll.bad.append(NOT_JSON)
                continue
            part_id = str_or_empty(part.get("id")) if isinstance(part, dict) else ""
            if not part_id:
                if part != {}:  # {}: the file vanished while it was read
                    poll.bad.append("unknown_shape")
                continue
            if part_id in done:
                continue
            before = len(poll.bad)
            poll._guard(poll._part, (0, part_id, None, None, part, msg_id, info), True)
            if part_id not in opened or len(poll.bad) > before:
                opened.pop(part_id, None)
                remember(done, part_id, 1, MAX_DONE)
    events = poll.events()
    for reason in poll.bad:
        errors[reason] = errors.get(reason, 0) + 1
    while len(opened) > MAX_DONE:
        del opened[next(iter(opened))]
    state.clear()
    state.update({"done": done, "open_parts": opened, "errors": errors})
    if poll.bad and not events:
        raise ReaderFormatError(poll.bad[0], f"{len(poll.bad)} bad file(s)")
    return events
