"""GitHub Copilot CLI (``copilot``): how to read its session log.

Copilot CLI 1.0.102 runs its ``bash`` tool as ``/bin/bash --norc --noprofile -c <cmd>`` with the
agent's command as is (``harness/evidence/copilot.json``), so it needs no wrapper stripper.

The session log (:class:`CopilotReader`): ``~/.copilot/session-state/<session-id>/events.jsonl``,
one event per line: ``{"type": "<namespace>.<name>", "data": {...}, "id", "timestamp"
(ISO-8601), "parentId"}``. The CLI's schema
(``schemas/session-events.schema.json`` in the 1.0.102 package) lists some 200 event types; the
reader uses these, all seen in the 1.0.102 file kept with the evidence:

* ``user.message`` (``interactionId``): the user's prompt, a turn starts;
* ``assistant.turn_start`` / ``assistant.turn_end`` (``turnId``): the bounds of *one model
  request* of the agent loop (the evidence's one prompt has six), not of the user's turn;
* ``assistant.message`` (``content``, ``toolRequests``): the model's reply in that request;
* ``tool.execution_start`` (``toolCallId``, ``toolName`` ``bash``, ``arguments.command``) and
  ``tool.execution_complete`` (``toolCallId``, ``success``, ``shellExecution.exitCode``,
  ``result.content`` ending ``<shellId: N completed with exit code N>``). ``success`` is the
  tool's own success: ``true`` for a command that exited 2.

Earlier releases (issue 26 item 3; real captures of each under
``harness/evidence/versions/copilot/``, found by running every installable release between
1.0.11 and 1.0.102 that the bisection needed) write the same event types, but the exit code only
in the result text:

* 1.0.85 and later: ``shellExecution.exitCode`` (1.0.83, the release before it here, has none);
* 1.0.60 to 1.0.83: ``result.content`` ends ``<shellId: N completed with exit code N>``;
* 1.0.11 to 1.0.59: ``result.content`` ends ``<exited with exit code N>`` (a pseudo-terminal shell
  session per call; BASH_ENV-recorded commands start at 1.0.62, when the CLI's changelog says
  "Shell commands run via lightweight process spawning instead of a pseudo-terminal").
"""

from __future__ import annotations

import re
from typing import Any

from repeat_failure.backends import (ERROR, SHELL_END, SHELL_START, TEXT, TOOL, TURN_END, TURN_START,
                              JsonLinesReader, ReaderFormatError, SessionEvent, command_arg,
                              exit_number, log_timestamp, open_calls, register_reader, remember,
                              require_object, str_or_empty)

_SHELL_TOOLS = frozenset({"bash"})
#: At most this many started-but-unfinished shell calls are remembered per file (oldest dropped).
_MAX_OPEN_CALLS = 512
# The last line of a shell result: ``<shellId: N completed with exit code N>`` as the 1.0.102
# CLI's own renderer matches it (written from 1.0.60 on), or ``<exited with exit code N>``, the
# line of 1.0.11 to 1.0.59 (their pseudo-terminal shell sessions; real 1.0.11 capture).
_EXIT_TEXT = re.compile(
    r"^<(?:(?:detached command with )?shellId: [^\r\n]+ completed|exited) with exit code "
    r"(-?\d+)>[ \t]*$", re.M)


def _exit(data: dict[str, Any]) -> int | None:
    """The exit code of a finished ``bash`` call: ``shellExecution.exitCode`` (a whole number,
    else ReaderFormatError("bad_exit"); 1.0.85+), else the last ``<shellId: N completed with
    exit code N>`` (1.0.60 to 1.0.83) or ``<exited with exit code N>`` (1.0.11 to 1.0.59) line
    of ``result.content``, else ``None``."""
    shell = data.get("shellExecution")
    if shell is not None:
        return exit_number(require_object(shell).get("exitCode"))
    result = data.get("result")
    content = result.get("content") if isinstance(result, dict) else None
    if isinstance(content, str):
        matches = _EXIT_TEXT.findall(content)
        if matches:
            return int(matches[-1])
    return None


#: The trailing notice of Copilot CLI's shell tool result: ``<shellId: ...>`` (1.0.60 to
#: 1.0.102's real runs) or ``<exited with exit code N>`` (1.0.11 to 1.0.59).
_SHELL_NOTICE = re.compile(r"\n?<(?:shellId: [^<>\n]*|exited with exit code -?\d+)>\s*\Z")

class CopilotReader(JsonLinesReader):
    """Reads GitHub Copilot CLI ``events.jsonl`` session logs.

    Rules, each seen in the Copilot CLI 1.0.102 file kept with the evidence
    (``harness/evidence/copilot.json`` → ``session_files``) or, where said, in the CLI's
    event schema of the same version:

    - ``user.message`` → ``turn_start`` (``turn_id`` = its ``interactionId``, kept in the state
      for the turn's later events).
    - ``assistant.message`` with non-empty ``content`` → ``text``.
    - ``assistant.turn_end`` ending a model request whose ``assistant.message`` asked for no
      tool (``toolRequests`` empty) → ``turn_end``: the agent answered and stopped. The file
      has no per-prompt end marker (``session.idle`` is ephemeral, never written, per the
      schema); the request markers alone would end the user's turn after every tool call.
      Events of a sub-agent (``agentId``, or ``data.parentToolCallId``; schema) never end the
      user's turn.
    - ``tool.execution_start`` of ``bash`` → ``shell_start`` (``call_id`` = ``toolCallId``,
      ``command`` = ``arguments.command``); of any other tool → ``tool``.
    - ``tool.execution_complete`` of a ``bash`` call (started in this file, or carrying
      ``shellExecution``) → ``shell_end``: ``exit`` from :func:`_exit`; ``failed`` = ``exit !=
      0``, or ``not success`` when no exit is given; ``command`` from the state (the complete
      event does not repeat it; ``""`` when the start was not seen). Completions of other
      tools give ``[]``.
    - ``ts``: the event's ``timestamp``.

    Every line must be an object with a string ``type`` and an object ``data``; other event
    types (``session.start``, ``system.message``, ``session.usage_record``,
    ``session.shutdown``, ...) are recognised and give ``[]``. Raises
    :class:`ReaderFormatError` with ``not_object``, ``no_type``, ``unknown_shape`` (a used event
    with a wrong shape), ``bad_ts`` or ``bad_exit``; never anything else.
    """

    backend = "copilot"
    shell_tools = _SHELL_TOOLS
    #: Tools that write or edit files (tool names in the Copilot CLI 1.0.102 bundle).
    edit_tools: frozenset[str] = frozenset({"create", "edit", "str_replace_editor", "apply_patch"})  # type: ignore[misc]
    globs = (".copilot/session-state/*/events.jsonl",)
    route_records = False
    signal = ("~/.copilot/session-state/*/events.jsonl: tool.execution_start of bash starts a "
              "call, its tool.execution_complete ends it (shellExecution.exitCode, or before "
              "1.0.85 the result's 'exit code N' line)")

    def new_file_state(self) -> dict[str, Any]:
        """``{"turn": <interactionId>, "calls": {call_id: command}, "step": {"message": bool,
        "tools": bool}}``: the open shell calls (at most 512, oldest dropped) and what the
        current model request's messages held (JSON-serialisable)."""
        return {"turn": "", "calls": {}, "step": {"message": False, "tools": False},
                "open": False}

    def parse_typed(self, kind: str, obj: dict[str, Any],
                    state: dict[str, Any]) -> list[SessionEvent]:
        """The events of one ``events.jsonl`` line of type ``kind`` (see the class docstring).
        ``state`` comes from :meth:`new_file_state`."""
        data = require_object(obj.get("data"))
        ts = log_timestamp(obj.get("timestamp"))
        open_calls(state)  # ``state["calls"]`` is a dict from here on
        if not isinstance(state.get("step"), dict):
            state["step"] = {"message": False, "tools": False}
        turn = str_or_empty(state.get("turn"))
        sub_agent = obj.get("agentId") is not None or data.get("parentToolCallId") is not None

        if kind == "user.message":
            if sub_agent:
                return []
            interaction = data.get("interactionId")
            state["turn"] = str_or_empty(interaction)
            state["step"] = {"message": False, "tools": False}
            state["open"] = True
            return [SessionEvent(TURN_START, ts, turn_id=state["turn"])]
        if kind == "assistant.turn_start":
            if not sub_agent:
                state["step"] = {"message": False, "tools": False}
            return []
        if kind == "assistant.message":
            content, requests = data.get("content"), data.get("toolRequests")
            if content is not None and not isinstance(content, str):
                raise ReaderFormatError("unknown_shape")
            if requests is not None and not isinstance(requests, list):
                raise ReaderFormatError("unknown_shape")
            if not sub_agent and ((content and content.strip()) or requests):
                # An empty reply (no text, no tool request) does not end the turn here: Copilot
                # CLI 1.0.102 follows it with session.error ("No response was returned"), which
                # does, so the turn is counted once.
                step = state["step"]
                step["message"] = True
                step["tools"] = bool(step.get("tools")) or bool(requests)
            return [SessionEvent(TEXT, ts, turn_id=turn)] if content and content.strip() else []
        if kind == "assistant.turn_end":
            step = state["step"]
            if sub_agent or not step.get("message") or step.get("tools"):
                return []
            state["step"] = {"message": False, "tools": False}
            state["open"] = False
            return [SessionEvent(TURN_END, ts, turn_id=turn)]
        if kind == "session.error":
            # Copilot CLI 1.0.102 writes the provider's refusal after the turn's
            # assistant.turn_end, once its retries are spent: {"errorType": "query", "message",
            # "statusCode"}. It ends the turn (the CLI exits 1).
            if sub_agent or state.get("open") is not True:
                return []  # an error outside a turn (at start-up, say) ends no turn
            message = data.get("message")
            state["open"] = False
            state["step"] = {"message": False, "tools": False}
            return [SessionEvent(ERROR, ts, turn_id=turn,
                                 detail=message if isinstance(message, str) else ""),
                    SessionEvent(TURN_END, ts, turn_id=turn)]
        if kind == "tool.execution_start":
            call_id, name = data.get("toolCallId"), data.get("toolName")
            if not isinstance(call_id, str) or not isinstance(name, str):
                raise ReaderFormatError("unknown_shape")
            if name not in _SHELL_TOOLS:
                return [SessionEvent(TOOL, ts, call_id=call_id, tool=name, turn_id=turn)]
            command = command_arg(data.get("arguments"))
            remember(state["calls"], call_id, command, _MAX_OPEN_CALLS)
            return [SessionEvent(SHELL_START, ts, call_id=call_id, command=command, tool=name,
                                 turn_id=turn)]
        if kind == "tool.execution_complete":
            call_id, success = data.get("toolCallId"), data.get("success")
            if not isinstance(call_id, str) or not isinstance(success, bool):
                raise ReaderFormatError("unknown_shape")
            if call_id not in state["calls"] and "shellExecution" not in data:
                return []
            exit_code = _exit(data)
            command = state["calls"].pop(call_id, "")
            failed = exit_code != 0 if exit_code is not None else not success
            result = data.get("result")
            output = result.get("content") if isinstance(result, dict) else None
            if isinstance(output, str):
                # The tool's own last line names its shell (``<shellId: 0 completed with exit
                # code 2>``); the id differs between shells, the exit is known: not output.
                output = _SHELL_NOTICE.sub("", output)
            return [SessionEvent(SHELL_END, ts, call_id=call_id,
                                 command=str_or_empty(command),
                                 exit=exit_code, failed=failed, tool="bash", turn_id=turn,
                                 output=output if isinstance(output, str) else None)]
        return []


register_reader(CopilotReader())
