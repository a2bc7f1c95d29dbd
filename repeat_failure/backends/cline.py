"""Cline CLI: the session-log reader of its ``messages.json`` session files.

Cline CLI runs each command of its ``run_commands`` tool with ``/bin/bash -c <cmd>``, no wrapper
(``harness/evidence/cline.json``), so the neutral route records them as they are and this module
registers no stripper. Its session (seen in the harness's real runs of Cline CLI 3.0.65,
``harness/evidence/cline/``) is kept in ``~/.cline/data/sessions/<id>/``: ``<id>.json`` (the
session's metadata: ``status``, ``exit_code``, times) and ``<id>.messages.json``, one JSON
document the CLI rewrites whole as the turn goes on::

    {"version": 1, "updated_at": ..., "sessionId": ..., "origin": {...}, "system_prompt": ...,
     "messages": [{"id", "role": "user" | "assistant", "content": [blocks], "ts": <epoch ms>}]}

Blocks are Anthropic-style: ``text``; ``tool_use`` (``id``, ``name``, ``input``; ``run_commands``
takes ``input.commands``, a list of whole commands); ``tool_result`` in a user message
(``tool_use_id``, ``name``, ``content``: for ``run_commands`` one item per command, ``{"query":
<command>, "result": <text>, "error"?: <text>, "success": bool}``; a failing command's result
starts ``[Command exited with code N]``). A call is in the file as soon as the model asked for it
(the ``running`` and ``midturn`` snapshots hold the running command's ``tool_use`` and no
result). An error that ended the turn is an assistant message with ``metadata.displayRole:
"error"`` and the error's text (the ``error`` run: the provider's message; the ``empty`` run:
``Model returned empty response``). Cline's loop tracker aborts the fifth identical call in a row
before it runs: its result is ``"error": "Command failed: Command was aborted"`` with an empty
result, and nothing follows. The SQLite index ``~/.cline/data/db/sessions.db`` holds only the
sessions' metadata (no calls), so it is not read.
"""

from __future__ import annotations

import re
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
    log_timestamp,
    register_reader,
    remember,
    require_object,
    str_or_empty,
)
from repeat_failure.backends.cline_tasks import parse_ui_messages

_SHELL_TOOLS = frozenset({"run_commands"})
#: Ids remembered per file and map (oldest dropped first).
_MAX_IDS = 2048
#: ``[Command exited with code N]`` (the result's first line) or ``Command exited with code N``
#: (the item's ``error``), 3.0.65.
_EXITED = re.compile(r"\A\[?Command exited with code (-?\d{1,10})\]?")


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A message's ``content`` as a list of block objects (a string is one text block);
    anything else raises ``unknown_shape``."""
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise ReaderFormatError("unknown_shape")
    return [require_object(block) for block in content]


def _call_ids(tool_use_id: str, count: int) -> list[str]:
    """One call id per command of a ``run_commands`` call: the tool call's id for its first
    command, ``<id>#<n>`` for the n-th after it (a list of several commands runs several
    shells)."""
    return [tool_use_id if n == 0 else f"{tool_use_id}#{n}" for n in range(count)]


def command_result(item: dict[str, Any]) -> tuple[int | None, bool, str | None]:
    """``(exit, failed, output)`` of one ``run_commands`` result item (Cline CLI 3.0.65):

    - ``[Command exited with code N]`` first in ``result`` (or ``Command exited with code N``
      as its ``error``) → ``N``, failed when not 0; the output is the rest of ``result``;
    - else ``success: true`` → exit 0, the output is ``result``;
    - else (an ``error`` such as ``Command failed: Command was aborted``, or a timeout) → no
      number, failed, the output is ``result`` when there is one.

    Raises :class:`ReaderFormatError` ``unknown_shape`` when ``success`` is not a boolean or
    ``result`` / ``error`` is neither a string nor absent."""
    result, error, success = item.get("result"), item.get("error"), item.get("success")
    if not isinstance(success, bool) or not isinstance(result, (str, type(None))) \
            or not isinstance(error, (str, type(None))):
        raise ReaderFormatError("unknown_shape")
    for text in (result, error):
        found = _EXITED.match(text or "")
        if found:
            code = int(found.group(1))
            output = result[found.end():].lstrip("\n") if text is result else result  # type: ignore[index]
            return code, code != 0, output
    if success:
        return 0, False, result
    return None, True, result or None


class ClineReader(SessionLogReader):
    """Cline CLI's ``<id>.messages.json`` → :class:`~repeat_failure.backends.SessionEvent`
    values, each version of the document giving only what the earlier ones did not.

    Rules, each seen in Cline CLI 3.0.65's real files (the shell run, the ``running`` and
    ``midturn`` snapshots, the ``ok`` / ``empty`` / ``error`` / ``killed`` verdict runs):

    - a ``user`` message with text and no ``tool_result`` → ``turn_start`` (``turn_id`` = its
      ``id``; ``ts`` = its ``ts``, epoch milliseconds);
    - an ``assistant`` message with ``metadata.displayRole`` ``error`` → ``error`` (``detail``
      = its text) and ``turn_end``;
    - another ``assistant`` message: ``text`` when a text block has something besides
      whitespace; each ``tool_use`` → one ``shell_start`` per command of ``run_commands``
      (call ids from :func:`_call_ids`), ``tool`` for any other tool; a message with text and
      no ``tool_use`` → ``turn_end`` (its answer);
    - a ``tool_result`` of ``run_commands`` → one ``shell_end`` per result item (``command``
      = its ``query``; exit, failed and output from :func:`command_result`; ``ts`` = the
      message's); other tools' results → ``[]``.

    Each message, call and result is given once, by its id, however often the file is
    rewritten. Raises :class:`ReaderFormatError` (``unknown_shape``, ``bad_ts``) for a
    document it cannot read.
    """

    backend: ClassVar[str] = "cline"
    kind: ClassVar[str] = "json"
    globs: ClassVar[tuple[str, ...]] = (".cline/data/sessions/*/*.messages.json",
                                        ".cline/data/tasks/*/ui_messages.json")
    route_records: ClassVar[bool] = False
    signal: ClassVar[str] = (
        "~/.cline/data/sessions/*/*.messages.json: an assistant tool_use run_commands starts a "
        "call per command, its tool_result item ends it ('[Command exited with code N]'); "
        "2.x: ~/.cline/data/tasks/*/ui_messages.json (say command, then the execute_command "
        "result's exit code)")
    #: Cline CLI 3.0.65's file-writing tool; and the names 2.x's ``say tool`` messages give a file
    #: written (the extension engine's ``editedExistingFile``, ``newFileCreated``: from its
    #: source, not seen in the captures, whose only tool besides the shell is ``readFile``).
    edit_tools: ClassVar[frozenset[str]] = frozenset({"editor", "editedExistingFile",
                                                      "newFileCreated"})

    def new_file_state(self) -> dict[str, Any]:
        """``{"turn": <prompt id>, "open": bool, "done": {message or call id: 1}}``: what was
        given already (JSON-serialisable; at most 2048 ids, the oldest dropped first)."""
        return {"turn": "", "open": False, "done": {}}

    def parse_document(self, doc: Any, state: dict[str, Any]) -> list[SessionEvent]:
        """The events of this version of the document not given before (see the class
        docstring); a JSON list is a Cline CLI 2.x task's ``ui_messages.json``
        (:func:`repeat_failure.backends.cline_tasks.parse_ui_messages`)."""
        try:
            if isinstance(doc, list):
                return parse_ui_messages(doc, state)
            return self._document(doc, state)
        except ReaderFormatError:
            raise
        except Exception:  # noqa: BLE001 - a shape no check foresaw: still only a reader error
            raise ReaderFormatError("unknown_shape") from None

    def _document(self, doc: Any, state: dict[str, Any]) -> list[SessionEvent]:
        messages = require_object(doc).get("messages")
        if not isinstance(messages, list):
            raise ReaderFormatError("unknown_shape")
        if not isinstance(state.get("done"), dict):
            state["done"] = {}
        events: list[SessionEvent] = []
        for index, message in enumerate(messages):
            message = require_object(message)
            role = message.get("role")
            message_id = str_or_empty(message.get("id")) or f"#{index}"
            ts = log_timestamp(message.get("ts"), epoch_ms=True)
            blocks = _blocks(message)
            if role == "user":
                events += self._user(message_id, ts, blocks, state)
            elif role == "assistant":
                events += self._assistant(message, message_id, ts, blocks, state)
        return events

    @staticmethod
    def _once(state: dict[str, Any], key: str) -> bool:
        """True the first time ``key`` is seen in this file (and note it)."""
        if key in state["done"]:
            return False
        remember(state["done"], key, 1, _MAX_IDS)
        return True

    def _user(self, message_id: str, ts: float | None, blocks: list[dict[str, Any]],
              state: dict[str, Any]) -> list[SessionEvent]:
        results = [b for b in blocks if b.get("type") == "tool_result"]
        turn = str_or_empty(state.get("turn"))
        if not results:
            if not any(b.get("type") == "text" for b in blocks) \
                    or not self._once(state, message_id):
                return []
            state["turn"], state["open"] = message_id, True
            return [SessionEvent(TURN_START, ts, turn_id=message_id)]
        events = []
        for block in results:
            name, call_id = block.get("name"), block.get("tool_use_id")
            if not isinstance(call_id, str):
                raise ReaderFormatError("unknown_shape")
            if name not in _SHELL_TOOLS:
                continue
            items = block.get("content")
            if not isinstance(items, list):
                raise ReaderFormatError("unknown_shape")
            for item_id, item in zip(_call_ids(call_id, len(items)), items):
                item = require_object(item)
                exit_code, failed, output = command_result(item)
                if self._once(state, f"end:{item_id}"):
                    events.append(SessionEvent(
                        SHELL_END, ts, call_id=item_id, command=str_or_empty(item.get("query")),
                        exit=exit_code, failed=failed, tool=name, turn_id=turn, output=output))
        return events

    def _assistant(self, message: dict[str, Any], message_id: str, ts: float | None,
                   blocks: list[dict[str, Any]], state: dict[str, Any]) -> list[SessionEvent]:
        turn = str_or_empty(state.get("turn"))
        text = "".join(b["text"] for b in blocks
                       if b.get("type") == "text" and isinstance(b.get("text"), str))
        metadata = message.get("metadata")
        if isinstance(metadata, dict) and metadata.get("displayRole") == "error":
            if not self._once(state, message_id):
                return []
            state["open"] = False
            return [SessionEvent(ERROR, ts, turn_id=turn, detail=text or "error"),
                    SessionEvent(TURN_END, ts, turn_id=turn)]
        events = []
        first = self._once(state, message_id)
        if first and text.strip():
            events.append(SessionEvent(TEXT, ts, turn_id=turn))
        calls = [b for b in blocks if b.get("type") == "tool_use"]
        for block in calls:
            call_id, name = block.get("id"), block.get("name")
            if not isinstance(call_id, str) or not isinstance(name, str):
                raise ReaderFormatError("unknown_shape")
            if not self._once(state, f"call:{call_id}"):
                continue
            if name not in _SHELL_TOOLS:
                events.append(SessionEvent(TOOL, ts, call_id=call_id, tool=name, turn_id=turn))
                continue
            commands = require_object(block.get("input")).get("commands")
            if isinstance(commands, str):
                commands = [commands]
            if not isinstance(commands, list):
                raise ReaderFormatError("unknown_shape")
            for item_id, command in zip(_call_ids(call_id, len(commands)), commands):
                events.append(SessionEvent(SHELL_START, ts, call_id=item_id,
                                           command=str_or_empty(command), tool=name,
                                           turn_id=turn))
        if first and text.strip() and not calls and state.get("open") is True:
            state["open"] = False
            events.append(SessionEvent(TURN_END, ts, turn_id=turn))
        return events


register_reader(ClineReader())
