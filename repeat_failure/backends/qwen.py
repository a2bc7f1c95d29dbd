"""Qwen Code: the session-log reader of its chat recording (a Gemini CLI fork).

Qwen Code 0.24.4 runs its ``run_shell_command`` commands as a plain ``bash -c <cmd>`` in a pty
(no wrapper: ``harness/evidence/qwen.json``), so the neutral route records them as they are.
Older releases (0.5.0 to 0.10.1, ``harness/evidence/versions/qwen/``) wrap the
command the way Gemini CLI once did; :func:`strip` (registered as the ``qwen`` stripper) takes
that wrapper off and leaves any other text unchanged. Releases before 0.24.3 write the shell
result differently (below, and :func:`shell_exit`, :func:`_output`, :func:`_terminal_api_error`).

Its session log (seen in the harness's real runs of Qwen Code 0.24.4,
``harness/evidence/qwen/``) is ``~/.qwen/projects/<cwd-slug>/chats/<session id>.jsonl``:
one JSON object per line, appended, each with ``uuid``, ``parentUuid``, ``sessionId``,
``timestamp`` (ISO-8601), ``type``, ``cwd`` and ``version``:

- ``user``: the prompt, ``message.parts`` with ``text`` parts;
- ``assistant``: the model's reply, ``message.parts`` with ``text`` parts (``thought: true`` for
  reasoning) and ``functionCall`` parts (``id``, ``name``, ``args``), written once the reply has
  streamed and before its calls run (the ``running`` and ``midturn`` snapshots hold the running
  command's call and no result);
- ``tool_result``: one finished call, ``message.parts`` with its ``functionResponse`` (``id``,
  ``name``, ``response.output`` or ``response.error``: ``Command: ...`` / ``Output: ...`` /
  ``Exit Code: N`` lines for the shell tool) and ``toolCallResult`` (``callId``, ``status``
  ``success`` / ``error`` / ``cancelled``, and for the shell tool a ``resultDisplay`` of
  ``type: "shell_result"`` with ``exitCode`` and the command's own ``output``);
- ``system``: ``attribution_snapshot`` and ``ui_telemetry`` (``systemPayload.uiEvent``: the
  CLI's telemetry events, ``qwen-code.api_response``, ``qwen-code.tool_call``,
  ``qwen-code.api_error`` with ``status_code`` and ``error_message``).

The log has no end-of-turn line: a reply with text and no call is the turn's answer. Its loop
guard (on by default) stops a turn at the fifth identical call without writing that call or any
answer (the harness's repeated run: four calls, then nothing).
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
    exit_number,
    log_timestamp,
    register_reader,
    register_stripper,
    remember,
    remember_call,
    require_object,
    str_or_empty,
)

_SHELL_TOOLS = frozenset({"run_shell_command"})
#: Calls kept per file between their start and their result (oldest dropped first).
_MAX_CALLS = 1024
#: The shell tool's ``Exit Code: N`` line in a result text (0.24.4 writes it for every exit,
#: ``(none)`` when the command was killed by a signal).
_EXIT_LINE = re.compile(r"^Exit Code: (.*)$", re.M)
#: HTTP statuses Qwen Code retries (its ``retryWithBackoff``, inherited from Gemini CLI: 429
#: and every 5xx); an ``api_error`` with any other status ended the turn.
_RETRIED = frozenset({429})


#: The wrapper of Qwen Code 0.5.0 to 0.10.1: ``{ <cmd>; }; __code=$?; pgrep -g 0
#: ><tmp>/shell_pgrep_<hex>.tmp 2>&1; exit $__code;`` (the command trimmed, with ``;`` added
#: unless it ends with ``&``; the temporary file's path is not quoted).
_WRAPPER = re.compile(r"\{ (?P<cmd>.*) \}; __code=\$\?; pgrep -g 0 >\S*shell_pgrep_[0-9a-f]+\.tmp "
                      r"2>&1; exit \$__code;\Z", re.S)


def strip(command: str) -> str:
    """The command Qwen Code's agent asked for, from the recorded ``bash -c`` text: the inner
    command of the older releases' ``{ <cmd>; }; __code=$?; pgrep -g 0 >... 2>&1; exit
    $__code;`` wrapper (seen in 0.5.0 to 0.10.1), without the ``;`` the CLI added;
    any other text (0.24.4's plain commands, a record cut before the wrapper's tail) unchanged.
    Never raises."""
    try:
        found = _WRAPPER.match(command)
        if found is None:
            return command
        inner = found["cmd"]
        return inner[:-1] if inner.endswith(";") else inner
    except Exception:  # noqa: BLE001 - a stripper must never raise
        return command


def _parts(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """``message.parts`` of a line: a list of objects; anything else raises ``unknown_shape``."""
    message = require_object(obj.get("message"))
    parts = message.get("parts")
    if not isinstance(parts, list):
        raise ReaderFormatError("unknown_shape")
    return [require_object(part) for part in parts]


def _visible_text(parts: list[dict[str, Any]]) -> bool:
    """True when a part is model text (not a ``thought``) with something besides whitespace."""
    return any(isinstance(p.get("text"), str) and p["text"].strip() and p.get("thought") is not True
               for p in parts)


#: The HTTP status leading an older release's ``error`` text (0.5.0: ``"400 <message>"``).
_ERROR_STATUS = re.compile(r"([1-5][0-9][0-9]) ")


def _terminal_api_error(event: dict[str, Any]) -> bool:
    """A ``qwen-code.api_error`` telemetry event the CLI did not retry past: its
    ``status_code`` is an HTTP status Qwen Code does not retry (not 429, not 5xx). Qwen Code
    0.5.0 writes ``status_code: null`` and the status only at the start of its ``error`` text
    (``"400 ..."``; 0.8.2 on fill ``status_code``; 0.21.2 on write ``error_message`` instead of
    ``error``), so a null status with such an ``error`` text takes the status from there. An
    error with no status (a network failure) may be retried, so it is not terminal here."""
    status = event.get("status_code")
    if status is None and isinstance(event.get("error"), str):
        found = _ERROR_STATUS.match(event["error"])
        status = int(found[1]) if found else None
    if isinstance(status, bool) or not isinstance(status, int):
        return False
    return 400 <= status < 500 and status not in _RETRIED


def shell_exit(result: dict[str, Any], text: str) -> tuple[int | None, bool]:
    """``(exit, failed)`` of a finished ``run_shell_command`` call from its ``toolCallResult``
    (``result``) and its response text (``text``), by Qwen Code's shapes (0.24.3 on: a
    ``shell_result`` display; 0.5.0 to 0.24.2: a display string and ``status: "success"`` even
    for a failing command, so the text's line decides):

    - ``resultDisplay.exitCode`` when the display is a ``shell_result`` whose ``exitCode`` is a
      number (``None`` there: killed by a signal → no number, failed);
    - else the text's ``Exit Code: N`` line (``(none)``: no number, failed);
    - else no number; failed unless ``status`` is ``success``.

    Raises :class:`ReaderFormatError` ``bad_exit`` for an exit that is neither a whole number
    nor absent."""
    status = result.get("status")
    display = result.get("resultDisplay")
    if isinstance(display, dict) and display.get("type") == "shell_result" \
            and "exitCode" in display:
        if display["exitCode"] is None:
            return None, True
        code = exit_number(display["exitCode"])
        return code, code != 0
    found = _EXIT_LINE.findall(text)
    if found:
        value = found[-1].strip()
        if value == "(none)":
            return None, True
        if not re.fullmatch(r"-?\d{1,10}", value):
            raise ReaderFormatError("bad_exit")
        code = int(value)
        return code, code != 0
    return None, status != "success"


#: The command's output in an older release's result text (0.5.0 to 0.24.2: ``Command:`` /
#: ``Directory:`` / ``Output: <output>`` / ``Error: ...`` / ``Exit Code: N`` lines, ``(empty)``
#: for no output), when its ``resultDisplay`` is a display string rather than a
#: ``shell_result``.
_OUTPUT_LINES = re.compile(r"^Output: (.*?)\nError: ", re.M | re.S)


def _output(result: dict[str, Any], text: str) -> str | None:
    """The command's own output: ``resultDisplay.output`` of a ``shell_result`` (0.24.4; without
    the tool's ``Command:`` / ``Directory:`` / ``Exit Code:`` lines); else, when the display is
    not such an object (0.5.0 to 0.24.2 write a display string there), the ``Output:``
    section of the response text (``(empty)`` read as ``""``); ``None`` when neither is
    there."""
    display = result.get("resultDisplay")
    if isinstance(display, dict):
        return display["output"] if isinstance(display.get("output"), str) else None
    found = _OUTPUT_LINES.search(text)
    if found is None:
        return None
    return "" if found[1] == "(empty)" else found[1]


class QwenReader(JsonLinesReader):
    """Qwen Code's chat recording → :class:`~repeat_failure.backends.SessionEvent` values.

    Rules, each seen in Qwen Code 0.24.4's real files (``harness/evidence/qwen/``: the shell
    run, the ``read`` / ``running`` / ``midturn`` snapshots, the ``ok`` / ``empty`` / ``error`` /
    ``killed`` verdict runs):

    - ``user`` with text parts → ``turn_start`` (``turn_id`` = the line's ``uuid``), once per
      ``uuid``.
    - ``assistant``: ``text`` when a part is visible text (a ``thought`` is not); each
      ``functionCall`` part → ``shell_start`` (``run_shell_command``: ``command`` =
      ``args.command``) or ``tool`` (any other tool), once per call ``id``; a reply with text
      and no call → ``turn_end`` (the answer; the log has no end line).
    - ``tool_result`` of a shell call (its ``functionResponse.name``, or the call this file
      started) → ``shell_end`` (exit from :func:`shell_exit`, ``output`` = the command's own
      output); other tools' results → ``[]`` (their ``tool`` event came with the call).
    - ``system`` ``ui_telemetry`` whose event is ``qwen-code.api_error`` with a status Qwen
      Code does not retry (a 4xx other than 429; :func:`_terminal_api_error`) → ``error``
      (``detail`` = ``error_message``, or ``error`` in 0.5.0 to 0.12.0)
      and ``turn_end`` when a turn is open (the ``error`` verdict run: HTTP 400, one request,
      the CLI exits 1); other ``system`` lines → ``[]``.
    - Other line types → :class:`~repeat_failure.backends.UnusedLine`.

    An empty reply (the ``empty`` run: five requests, no reply, no error written) and a killed
    run (a ``cancelled`` result, nothing after) leave the turn without an end.

    Raises :class:`ReaderFormatError` (``not_object``, ``no_type``, ``unknown_shape``,
    ``bad_ts``, ``bad_exit``) for a line it cannot read; never anything else.
    """

    backend: ClassVar[str] = "qwen"
    globs: ClassVar[tuple[str, ...]] = (".qwen/projects/*/chats/*.jsonl",)
    route_records: ClassVar[bool] = False
    signal: ClassVar[str] = (
        "~/.qwen/projects/*/chats/*.jsonl: an assistant functionCall run_shell_command starts a "
        "call, its tool_result (toolCallResult.resultDisplay.exitCode) ends it")
    #: Qwen Code's tools that write or edit files.
    edit_tools: ClassVar[frozenset[str]] = frozenset({"write_file", "edit", "replace"})

    def new_file_state(self) -> dict[str, Any]:
        """``{"turn": <prompt uuid>, "open": bool, "calls": {call_id: [tool, command]},
        "seen": {call_id: 1}, "prompts": {uuid: 1}}`` (JSON-serialisable, each map bounded to
        1024 ids, the oldest dropped first)."""
        return {"turn": "", "open": False, "calls": {}, "seen": {}, "prompts": {}}

    def parse_typed(self, kind: str, obj: dict[str, Any],
                    state: dict[str, Any]) -> list[SessionEvent]:
        """The events of one line of type ``kind`` (see the class docstring)."""
        ts = log_timestamp(obj.get("timestamp"))
        for key in ("calls", "seen", "prompts"):
            if not isinstance(state.get(key), dict):
                state[key] = {}
        if kind == "user":
            return self._user(obj, ts, state)
        if kind == "assistant":
            return self._assistant(obj, ts, state)
        if kind == "tool_result":
            return self._tool_result(obj, ts, state)
        if kind == "system":
            return self._system(obj, ts, state)
        raise UnusedLine()

    def _user(self, obj: dict[str, Any], ts: float | None,
              state: dict[str, Any]) -> list[SessionEvent]:
        parts = _parts(obj)
        if not any(isinstance(p.get("text"), str) for p in parts):
            return []
        uuid = str_or_empty(obj.get("uuid"))
        if uuid and uuid in state["prompts"]:
            return []
        if uuid:
            remember(state["prompts"], uuid, 1, _MAX_CALLS)
        state["turn"], state["open"] = uuid, True
        return [SessionEvent(TURN_START, ts, turn_id=uuid)]

    def _assistant(self, obj: dict[str, Any], ts: float | None,
                   state: dict[str, Any]) -> list[SessionEvent]:
        parts = _parts(obj)
        turn = str_or_empty(state.get("turn"))
        events: list[SessionEvent] = []
        text = _visible_text(parts)
        if text:
            events.append(SessionEvent(TEXT, ts, turn_id=turn))
        calls = 0
        for part in parts:
            if "functionCall" not in part:
                continue
            calls += 1
            call = require_object(part["functionCall"])
            call_id, name = call.get("id"), call.get("name")
            if not isinstance(call_id, str) or not isinstance(name, str):
                raise ReaderFormatError("unknown_shape")
            if call_id in state["seen"]:
                continue
            remember(state["seen"], call_id, 1, _MAX_CALLS)
            if name in _SHELL_TOOLS:
                command = command_arg(call.get("args"))
                remember_call(state, call_id, [name, command], _MAX_CALLS)
                events.append(SessionEvent(SHELL_START, ts, call_id=call_id, command=command,
                                           tool=name, turn_id=turn))
            else:
                events.append(SessionEvent(TOOL, ts, call_id=call_id, tool=name, turn_id=turn))
        if text and not calls and state.get("open") is True:
            state["open"] = False
            events.append(SessionEvent(TURN_END, ts, turn_id=turn))
        return events

    def _tool_result(self, obj: dict[str, Any], ts: float | None,
                     state: dict[str, Any]) -> list[SessionEvent]:
        result = require_object(obj.get("toolCallResult"))
        call_id = result.get("callId")
        if not isinstance(call_id, str):
            raise ReaderFormatError("unknown_shape")
        status = result.get("status")
        if status is not None and not isinstance(status, str):
            raise ReaderFormatError("unknown_shape")
        name, text = "", []
        for part in _parts(obj):
            response = part.get("functionResponse")
            if response is None:
                continue
            response = require_object(response)
            if response.get("id") not in (None, call_id):
                continue
            name = str_or_empty(response.get("name")) or name
            body = response.get("response")
            if isinstance(body, dict):
                text += [body[k] for k in ("output", "error") if isinstance(body.get(k), str)]
        kept = state["calls"].pop(call_id, None)
        command = ""
        if isinstance(kept, list) and len(kept) == 2 and all(isinstance(v, str) for v in kept):
            name, command = name or kept[0], kept[1]
        if name not in _SHELL_TOOLS:
            return []
        exit_code, failed = shell_exit(result, "\n".join(text))
        return [SessionEvent(SHELL_END, ts, call_id=call_id, command=command, exit=exit_code,
                             failed=failed, tool=name, turn_id=str_or_empty(state.get("turn")),
                             output=_output(result, "\n".join(text)))]

    def _system(self, obj: dict[str, Any], ts: float | None,
                state: dict[str, Any]) -> list[SessionEvent]:
        if obj.get("subtype") != "ui_telemetry":
            return []
        payload = obj.get("systemPayload")
        event = payload.get("uiEvent") if isinstance(payload, dict) else None
        if not isinstance(event, dict) or event.get("event.name") != "qwen-code.api_error":
            return []
        if not _terminal_api_error(event) or state.get("open") is not True:
            return []
        turn = str_or_empty(state.get("turn"))
        state["open"] = False
        return [SessionEvent(ERROR, ts, turn_id=turn,
                             detail=(str_or_empty(event.get("error_message"))
                                     or str_or_empty(event.get("error")) or "API error")),
                SessionEvent(TURN_END, ts, turn_id=turn)]


register_reader(QwenReader())
register_stripper("qwen", strip)
