"""Factory Droid: the session-log reader of its ``~/.factory/sessions`` files.

Droid runs each ``Execute`` command as ``bash -c '<supervisor script>' factory-execute-supervisor
<owner pid> /bin/bash <cmd>``; the hook records the inner command (``hooks/bash_env.slow.bash``),
so records need no stripper. Its session log (seen in the harness's real runs of Droid 0.215.0,
``harness/evidence/droid/``) is ``~/.factory/sessions/<cwd-slug>/<session id>.jsonl``, one JSON
object per line with a ``type``:

- ``session_start`` (``id``, ``title``, ``cwd``, ``version``);
- ``message`` (``id``, ``parentId``, ``timestamp``, ``message``: ``role``, Anthropic-style
  ``content`` blocks, and ``visibility``: ``llm_only`` for the CLI's system reminders to the
  model, ``user_only`` for its notices to the person, such as ``BYOK Error: 400 ...`` or "The
  model produced several consecutive responses with no visible output ..."). A shell call is an
  assistant ``tool_use`` named ``Execute`` (``input.command``), ended by a user ``tool_result``
  (``tool_use_id``, ``is_error``, ``content``: the output, then ``[Process exited with code
  N]``; a failure starts ``Error: Command failed (exit code: N)``; a killed command is ``Error:
  Command terminated by signal: SIGTERM``);
- ``agent_turn_outcome`` (``turnId``: the prompt message's ``id``, ``reason``: ``completed``,
  ``model_request_rejected`` for the provider's error, ...), written when the turn ends.
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
    JsonLinesReader,
    ReaderFormatError,
    SessionEvent,
    UnusedLine,
    command_arg,
    log_timestamp,
    register_reader,
    remember_call,
    require_object,
    str_or_empty,
)

_SHELL_TOOLS = frozenset({"Execute"})
_MAX_CALLS = 1024
#: The last line of a finished command's result (0.215.0).
_PROCESS_EXIT = re.compile(r"\s*\[Process exited with code (-?\d{1,10})\]\s*\Z")
#: The first line of a failed command's result (0.215.0).
_FAILED = re.compile(r"\AError: Command failed \(exit code: (-?\d{1,10})\)\n?")


def _content(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A message's content blocks (a string is one text block); else ``unknown_shape``."""
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise ReaderFormatError("unknown_shape")
    return [require_object(block) for block in content]


def _block_text(content: Any) -> str:
    """A ``tool_result``'s content as text (a string, or its text blocks joined)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b["text"] for b in content
                       if isinstance(b, dict) and isinstance(b.get("text"), str))
    raise ReaderFormatError("unknown_shape")


def execute_result(text: str, is_error: Any) -> tuple[int | None, bool, str]:
    """``(exit, failed, output)`` of an ``Execute`` result (Droid 0.215.0): the exit from its
    last line ``[Process exited with code N]``, else from a first line ``Error: Command failed
    (exit code: N)``; with neither, no number, failed when ``is_error`` is true (``Error:
    Command terminated by signal: SIGTERM``), else exit 0. The output is the text without
    those two lines. Raises ``unknown_shape`` when ``is_error`` is neither a boolean nor
    absent."""
    if not isinstance(is_error, (bool, type(None))):
        raise ReaderFormatError("unknown_shape")
    code: int | None = None
    output = text
    tail = _PROCESS_EXIT.search(output)
    if tail:
        code = int(tail.group(1))
        output = output[:tail.start()]
    head = _FAILED.match(output)
    if head:
        code = int(head.group(1)) if code is None else code
        output = output[head.end():]
    if code is not None:
        return code, code != 0, output
    return (None, True, output) if is_error else (0, False, output)


class DroidReader(JsonLinesReader):
    """Droid's session log → :class:`~repeat_failure.backends.SessionEvent` values.

    Rules, each seen in Droid 0.215.0's real files (the shell run, the ``read`` / ``running`` /
    ``midturn`` snapshots, the ``ok`` / ``empty`` / ``error`` / ``killed`` verdict runs):

    - ``session_start`` → ``[]``;
    - a ``user`` message with text and no ``visibility`` → ``turn_start`` (``turn_id`` = its
      ``id``, which ``agent_turn_outcome`` names); ``llm_only`` messages (reminders to the
      model) → ``[]``; a ``user_only`` message (a notice to the person) is kept as the turn's
      error text in case the turn ends on an error;
    - a user message's ``tool_result`` of an ``Execute`` call this file started (or, after a
      restart, any ``tool_result`` whose text ends like one) → ``shell_end`` (exit, failed and
      output from :func:`execute_result`); other results → ``[]``;
    - an ``assistant`` message: ``text`` when it has text; each ``tool_use`` →
      ``shell_start`` (``Execute``: ``command`` = ``input.command``) or ``tool``;
    - ``agent_turn_outcome`` → ``turn_end``; a ``reason`` other than ``completed`` is first an
      ``error`` (``detail``: the turn's last notice, else the reason);
    - other line types → :class:`~repeat_failure.backends.UnusedLine`.

    Raises :class:`ReaderFormatError` (``not_object``, ``no_type``, ``unknown_shape``,
    ``bad_ts``) for a line it cannot read.
    """

    backend: ClassVar[str] = "droid"
    globs: ClassVar[tuple[str, ...]] = (".factory/sessions/*/*.jsonl",)
    route_records: ClassVar[bool] = False
    signal: ClassVar[str] = (
        "~/.factory/sessions/*/*.jsonl: an assistant tool_use Execute starts a call, its "
        "tool_result ends it ('[Process exited with code N]')")
    #: Droid 0.215.0's file-writing tools.
    edit_tools: ClassVar[frozenset[str]] = frozenset({"Create", "Edit", "ApplyPatch"})

    def new_file_state(self) -> dict[str, Any]:
        """``{"turn": <prompt id>, "notice": <last notice text, raw>, "calls": {call_id:
        [tool, command]}, "ts": <the last message's time>}`` (at most 1024 calls, the oldest
        dropped first). The notice is text the CLI showed the person (an error message), kept
        only until the turn ends; ``ts`` times ``agent_turn_outcome``, which has none."""
        return {"turn": "", "notice": "", "calls": {}, "ts": None}

    def parse_typed(self, kind: str, obj: dict[str, Any],
                    state: dict[str, Any]) -> list[SessionEvent]:
        """The events of one line of type ``kind`` (see the class docstring)."""
        if kind == "session_start":
            return []
        if kind == "agent_turn_outcome":
            return self._outcome(obj, state)
        if kind != "message":
            raise UnusedLine()
        ts = log_timestamp(obj.get("timestamp"))
        state["ts"] = ts
        message = require_object(obj.get("message"))
        blocks = _content(message)
        role, visibility = message.get("role"), message.get("visibility")
        turn = str_or_empty(state.get("turn"))
        if visibility == "llm_only":
            return []
        if visibility == "user_only":
            state["notice"] = "".join(b.get("text") for b in blocks  # type: ignore[misc]
                                      if isinstance(b.get("text"), str))[:2000]
            return []
        if role == "user":
            return self._user(obj, ts, blocks, state)
        if role != "assistant":
            return []
        events: list[SessionEvent] = []
        if any(b.get("type") == "text" and isinstance(b.get("text"), str) and b["text"].strip()
               for b in blocks):
            events.append(SessionEvent(TEXT, ts, turn_id=turn))
        for block in blocks:
            if block.get("type") != "tool_use":
                continue
            call_id, name = block.get("id"), block.get("name")
            if not isinstance(call_id, str) or not isinstance(name, str):
                raise ReaderFormatError("unknown_shape")
            if name in _SHELL_TOOLS:
                command = command_arg(block.get("input"))
                remember_call(state, call_id, [name, command], _MAX_CALLS)
                events.append(SessionEvent(SHELL_START, ts, call_id=call_id, command=command,
                                           tool=name, turn_id=turn))
            else:
                events.append(SessionEvent(TOOL, ts, call_id=call_id, tool=name, turn_id=turn))
        return events

    def _user(self, obj: dict[str, Any], ts: float | None, blocks: list[dict[str, Any]],
              state: dict[str, Any]) -> list[SessionEvent]:
        results = [b for b in blocks if b.get("type") == "tool_result"]
        if not results:
            if not any(b.get("type") == "text" for b in blocks):
                return []
            turn = str_or_empty(obj.get("id"))
            state["turn"], state["notice"] = turn, ""
            return [SessionEvent(TURN_START, ts, turn_id=turn)]
        calls = state.get("calls")
        if not isinstance(calls, dict):
            calls = state["calls"] = {}
        events = []
        for block in results:
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str):
                raise ReaderFormatError("unknown_shape")
            kept = calls.pop(call_id, None)
            text = _block_text(block.get("content"))
            if isinstance(kept, list) and len(kept) == 2 and all(isinstance(v, str) for v in kept):
                name, command = kept
            elif _PROCESS_EXIT.search(text):
                name, command = "Execute", ""  # its start came before the sidecar read the file
            else:
                continue
            if name not in _SHELL_TOOLS:
                continue
            exit_code, failed, output = execute_result(text, block.get("is_error"))
            events.append(SessionEvent(SHELL_END, ts, call_id=call_id, command=command,
                                       exit=exit_code, failed=failed, tool=name,
                                       turn_id=str_or_empty(state.get("turn")), output=output))
        return events

    @staticmethod
    def _outcome(obj: dict[str, Any], state: dict[str, Any]) -> list[SessionEvent]:
        reason = obj.get("reason")
        if not isinstance(reason, str):
            raise ReaderFormatError("unknown_shape")
        turn = str_or_empty(obj.get("turnId")) or str_or_empty(state.get("turn"))
        # The line has no time: the time of the message before it.
        ts = state.get("ts") if isinstance(state.get("ts"), float) else None
        events = []
        if reason != "completed":
            events.append(SessionEvent(ERROR, ts, turn_id=turn,
                                       detail=str_or_empty(state.get("notice")) or reason))
        state["notice"] = ""
        return events + [SessionEvent(TURN_END, ts, turn_id=turn)]


register_reader(DroidReader())
