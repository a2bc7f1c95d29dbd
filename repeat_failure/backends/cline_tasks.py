"""Cline CLI 2.x: its task log ``~/.cline/data/tasks/<id>/ui_messages.json`` (issue 26 item 3).

Seen in the harness's real runs of Cline CLI 2.18.0 (``harness/evidence/versions/cline/2.18.0/``):
before 3.0 the CLI is the VS Code extension's engine run from a terminal, and keeps each task in
``~/.cline/data/tasks/<task id>/`` as the extension does: ``api_conversation_history.json``
(what was sent to the model), ``task_metadata.json`` and ``ui_messages.json``, a JSON list the
CLI rewrites whole as the task goes on, one object per message::

    {"ts": <epoch ms>, "type": "say" | "ask", "say" | "ask": <kind>, "text": ..., "partial"?: bool}

The kinds that matter (each seen in the 2.18.0 captures): ``say task`` (the prompt), ``say
command`` (a shell call's command, as the model asked for it; ``commandCompleted`` once it ran),
``ask command_output`` (its output, one message per chunk; none for a command that printed
nothing), ``say api_req_started`` (the next model request; its ``text`` is a JSON object whose
``request`` starts with the tool's result: ``[execute_command for '<cmd>'] Result:`` then
``Command failed with exit code N.`` or ``Command executed successfully (exit code 0).``),
``say text`` (model output), ``say completion_result`` (the task's answer), ``ask
api_req_failed`` (a provider error the CLI gave up retrying, then ``ask resume_task``) and ``say
error``
(2.18.0 in ``--yolo`` mode ends a task whose model answered three times without a tool with
``[YOLO MODE] Task failed: Too many consecutive mistakes (3)``, then ``ask resume_task``). Only
``api_conversation_history.json`` holds the calls' ids; it has no errors, so ``ui_messages.json``
is the file read.
"""

from __future__ import annotations

import json
import re
from typing import Any

from repeat_failure.backends import (ERROR, SHELL_END, SHELL_START, TEXT, TOOL, TURN_END,
                                     TURN_START,
                                     ReaderFormatError, SessionEvent, log_timestamp,
                                     require_object, str_or_empty)

#: The shell tool's name in the request text (``[execute_command for '<cmd>'] Result:``).
SHELL_TOOL = "execute_command"
_RESULT = re.compile(r"\[execute_command for '.*?'\] Result:\n", re.S)
_EXIT = re.compile(r"\A[^\n]*?exit code (-?\d{1,10})")
#: Messages that start a turn (the task's prompt; a follow-up message of the user).
_PROMPTS = frozenset({"task", "user_feedback"})
#: Messages that end the turn with the answer.
_ANSWERS = frozenset({"completion_result"})
#: Open calls remembered per task (the oldest dropped first).
MAX_OPEN = 256


def _kind(message: dict[str, Any]) -> str:
    """``say:<kind>`` or ``ask:<kind>`` of a message (``""`` kinds when missing)."""
    kind = message.get("type")
    if kind not in ("say", "ask"):
        raise ReaderFormatError("unknown_shape")
    return f"{kind}:{str_or_empty(message.get(kind))}"


def command_end(result: str) -> tuple[int | None, bool] | None:
    """``(exit, failed)`` of a shell call from the text of the tool result (what follows
    ``Result:\\n``): ``exit code N`` on its first line → ``(N, N != 0)``; ``Command
    executed`` without a number → ``(None, False)`` (Cline CLI 1.0.10 writes that for a failing
    command too, so its calls would read as successes: 1.0.x is not claimed,
    docs/backend-support.md); ``Command is still running`` → ``None``
    (no end yet); anything else (a refused or failed call) → ``(None, True)``."""
    found = _EXIT.match(result)
    if found:
        code = int(found.group(1))
        return code, code != 0
    if result.startswith("Command is still running"):
        return None
    if result.startswith("Command executed"):
        return None, False
    return None, True


def _request(message: dict[str, Any]) -> str:
    """The ``request`` text of an ``api_req_started`` message (``""`` when there is none)."""
    text = message.get("text")
    if not isinstance(text, str):
        return ""
    try:
        body = json.loads(text)
    except ValueError:
        return ""
    return str_or_empty(body.get("request")) if isinstance(body, dict) else ""


def _tool_name(text: str) -> str:
    """The ``tool`` of a ``say tool`` message's JSON text (2.18.0's file read: ``readFile``);
    ``""`` when there is none."""
    try:
        body = json.loads(text)
    except ValueError:
        return ""
    return str_or_empty(body.get("tool")) if isinstance(body, dict) else ""


def _error_text(text: str) -> str:
    """An error message's text: an ``api_req_failed`` message's is a JSON object whose
    ``message`` is the provider's (2.18.0: ``400 harness: stub refused the request``)."""
    try:
        body = json.loads(text)
    except ValueError:
        return text or "error"
    message = body.get("message") if isinstance(body, dict) else None
    return message if isinstance(message, str) and message else text or "error"


def parse_ui_messages(doc: list[Any], state: dict[str, Any]) -> list[SessionEvent]:
    """The events of this version of a 2.x task's ``ui_messages.json`` not given before.

    - ``say task`` / ``say user_feedback`` → ``turn_start`` (``turn_id`` its ``ts``);
    - ``say command`` / ``ask command`` → ``shell_start`` (``call_id`` its ``ts``, ``command``
      its ``text``, tool ``execute_command``);
    - ``say api_req_started`` whose request starts with an ``execute_command`` result →
      ``shell_end`` of the oldest open call (:func:`command_end`; ``output`` the
      ``command_output`` messages between the command and the result, joined; ``ts`` the
      request's);
    - ``say tool`` / ``ask tool`` (another tool: its ``text`` is a JSON object naming the
      ``tool``, ``readFile`` in 2.18.0's read run) → ``tool`` (``call_id`` its ``ts``);
    - ``say text`` with something besides whitespace → ``text``;
    - ``say completion_result`` → ``text`` and ``turn_end``;
    - ``say error`` or ``ask api_req_failed`` (the provider's error after the CLI's retries)
      followed by ``ask resume_task`` (the task stopped) → ``error`` (``detail`` its text, or
      the provider's message) and ``turn_end``; an error the task went on after gives nothing.

    Messages are read in order, once each (``state["next"]``: the index of the first not
    read); reading stops at a ``partial`` message (still being written) and at an error with
    nothing after it yet. ``state`` keeps indexes and call ids only. Raises
    :class:`ReaderFormatError` (``unknown_shape``, ``bad_ts``) for a list it cannot read."""
    start = state.get("next")
    start = start if type(start) is int and 0 <= start <= len(doc) else 0
    found = state.get("open")
    opened: list[Any] = found if isinstance(found, list) else []
    turn = str_or_empty(state.get("turn"))
    events: list[SessionEvent] = []
    index = start
    while index < len(doc):
        message = require_object(doc[index])
        if message.get("partial") is True:
            break
        kind = _kind(message)
        ts = log_timestamp(message.get("ts"), epoch_ms=True)
        text = str_or_empty(message.get("text"))
        if kind.startswith("say:") and kind[4:] in _PROMPTS:
            turn = str(message.get("ts"))
            events.append(SessionEvent(TURN_START, ts, turn_id=turn))
        elif kind in ("say:command", "ask:command"):
            call_id = str(message.get("ts"))
            opened.append([call_id, index])
            events.append(SessionEvent(SHELL_START, ts, call_id=call_id, command=text,
                                       tool=SHELL_TOOL, turn_id=turn))
        elif kind == "say:api_req_started" and opened:
            result = _RESULT.match(_request(message))
            end = command_end(_request(message)[result.end():]) if result else None
            if end is not None:
                call_id, at = opened.pop(0)
                command = doc[at] if 0 <= at < len(doc) and isinstance(doc[at], dict) else {}
                chunks: list[str] = [
                    m["text"] for m in doc[at + 1:index]
                    if isinstance(m, dict) and m.get("ask", m.get("say")) == "command_output"
                    and isinstance(m.get("text"), str)]
                events.append(SessionEvent(
                    SHELL_END, ts, call_id=call_id, command=str_or_empty(command.get("text")),
                    exit=end[0], failed=end[1], tool=SHELL_TOOL, turn_id=turn,
                    output="".join(chunks) if chunks else None))
        elif kind in ("say:tool", "ask:tool"):
            name = _tool_name(text)
            if name:
                events.append(SessionEvent(TOOL, ts, call_id=str(message.get("ts")), tool=name,
                                           turn_id=turn))
        elif kind == "say:text" and text.strip():
            events.append(SessionEvent(TEXT, ts, turn_id=turn))
        elif kind.startswith("say:") and kind[4:] in _ANSWERS:
            events += [SessionEvent(TEXT, ts, turn_id=turn), SessionEvent(TURN_END, ts,
                                                                         turn_id=turn)]
        elif kind in ("say:error", "ask:api_req_failed"):
            if index + 1 >= len(doc):
                break  # whether the task stopped is not known yet
            after = doc[index + 1]
            if isinstance(after, dict) and after.get("ask") == "resume_task":
                events += [SessionEvent(ERROR, ts, turn_id=turn, detail=_error_text(text)),
                           SessionEvent(TURN_END, ts, turn_id=turn)]
        index += 1
    state.clear()
    state.update({"next": index, "open": opened[-MAX_OPEN:], "turn": turn})
    return events
