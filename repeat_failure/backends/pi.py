"""pi: its session-log reader (pi runs commands with a plain ``/bin/bash -c``, so it has no
wrapper stripper: see ``tests/test_backend_bare.py``).

Seen in the harness's real runs of both verified releases (``harness/evidence/pi.json``, pi 1.6.0
of ``@earendil-works/pi-coding-agent``, and ``harness/evidence/versions/pi/0.73.1/``, the last
release of ``@mariozechner/pi-coding-agent``): every session is one JSON Lines file
``~/.pi/agent/sessions/<cwd-slug>/<ISO time>_<session id>.jsonl`` (the agent directory moves with
``PI_CODING_AGENT_DIR``). Each line is an entry ``{"type", "id", "parentId", "timestamp":
ISO-8601, ...}``; the first is the ``session`` header. A ``message`` entry carries one chat
message::

    {"role": "system", "content": "", "sections": {...}, "toolsAdded": [...]}  system prompt
    {"role": "user", "content": [{"type": "text", ...}]}                     the prompt
    {"role": "assistant", "content": [{"type": "toolCall", "id", "name": "bash",
     "arguments": {"command": "ls /nonexistent"}}], "stopReason": "toolUse"}  a call starts
    {"role": "toolResult", "toolCallId", "toolName": "bash", "isError": true,
     "content": [{"type": "text", "text": "...\\n\\nCommand exited with code 2"}]}  it ends
    {"role": "assistant", "content": [{"type": "text", ...}], "stopReason": "stop"}  the answer

pi 1.6.0 writes the system prompt as a leading ``system`` message (0.73.1 did not log it), and a
run killed mid-command (SIGTERM: ``dist/modes/print-mode.js`` disposes the session, which aborts
the run) ends with the running call's ``toolResult`` ``Command aborted`` (``isError``,
``dist/core/tools/bash.js``) and an assistant message with ``stopReason: "aborted"`` and
``errorMessage`` (``pi-agent-core`` ``agent.js`` ``handleRunFailure``); 0.73.1 wrote neither.

There is no turn-end marker: the turn ends with an assistant message that runs no tool call.
:class:`PiSessionReader` is also the base of the Oh My Pi reader (:mod:`repeat_failure.backends.omp`),
whose format is pi's with more entry types and the exit code in ``details.exitCode``.
"""

from __future__ import annotations

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
    exit_notice,
    log_timestamp,
    register_reader,
    remember_call,
    text_blocks,
)

#: pi 0.73.1 and 1.6.0 ``tools/bash.js`` append this as the last line of a failed call's result
#: text.
_EXIT_NOTICE = "Command exited with code "
#: The ``error`` detail of an aborted reply that gives no ``errorMessage`` (1.6.0 gives one:
#: ``"This operation was aborted"``, the abort signal's message).
ABORTED = "the run was aborted mid-turn (stopReason aborted)"

#: Calls started and not yet finished that a file's state remembers; a file that starts more
#: without finishing them (a broken or hostile log) forgets the oldest first.
MAX_OPEN_CALLS = 256


class PiSessionReader(JsonLinesReader):
    """pi's session log (pi 1.6.0 and 0.73.1; entry and message types from their real files
    and their ``session-manager.d.ts`` / ``messages.d.ts``).

    :meth:`parse_line` takes one decoded line and returns, in order:

    - ``message`` / ``user``: ``turn_start`` (pi does not mark a message typed while the agent
      works, so one also reads as a turn start);
    - ``message`` / ``assistant``: ``text`` for each non-empty text block, ``shell_start``
      (``call_id``, ``command`` = ``arguments.command``, ``tool``) for a ``bash`` tool call,
      ``tool`` for any other tool call, then ``turn_end`` when the message runs no tool call
      (pi's agent loop ends the run then). An assistant message that stopped with ``error`` or
      ``aborted`` ends the run without running its tool calls, so those give no event; it is
      the turn's terminal ``error`` (``detail`` = its ``errorMessage``, for ``aborted`` without
      one :data:`ABORTED`) before its ``turn_end``. ``aborted`` is what pi 1.6.0 writes when it
      is killed mid-turn (SIGTERM) or the user aborts the run: the turn did not finish, as a
      Claude Code turn whose CLI exited with a tool call unanswered (turn verdicts,
      docs/metrics.md: ``agent_error``);
    - ``message`` / ``toolResult`` of ``bash``: ``shell_end`` with the ``command`` this file's
      state kept from the call (``""`` when the call was not seen), ``failed`` = ``isError`` and
      ``exit`` from the result's last line ``Command exited with code N`` (pi writes it only for a
      non-zero exit; a success, a timeout or an abort leaves ``exit`` ``None``: 1.6.0's killed
      run writes ``Command aborted``, failed, exit ``None``);
    - every other known entry type or message role: ``[]`` (``bashExecution`` is the user's own
      ``!`` command, not an agent tool call; ``system`` is 1.6.0's logged system prompt).

    ``ts`` is the entry's ``timestamp``. Errors (:class:`ReaderFormatError` ``reason``):
    ``not_object``, ``no_type`` (no string ``type``), ``unknown_shape`` (a ``message`` entry
    whose fields we read have the wrong type: no object ``message`` or no string ``role``, an
    assistant or tool result of another shape),
    ``bad_exit`` (an exit notice whose code is not an integer), ``bad_ts``. A line of a kind
    this reader does not know (an entry ``type``, or a ``message`` role) is a line it does not
    use, not an error (issue 15, tolerant readers): it raises
    :class:`~repeat_failure.backends.UnusedLine` (reason ``unknown_type``), which the tail counts in
    ``reader_lines_ignored_total``, not in ``reader_errors_total``.
    """

    backend: ClassVar[str] = "pi"
    #: Tools that write or edit files (tool names in the pi 0.73.1 and 1.6.0 bundles; omp
    #: inherits them).
    edit_tools: ClassVar[frozenset[str]] = frozenset({"write", "edit"})
    globs: ClassVar[tuple[str, ...]] = ("$PI_CODING_AGENT_DIR/sessions/*/*.jsonl",)
    env_defaults: ClassVar[dict[str, str]] = {"PI_CODING_AGENT_DIR": ".pi/agent"}
    signal: ClassVar[str] = ("~/.pi/agent/sessions/*/*.jsonl: an assistant toolCall named bash "
                             "starts a call, its toolResult (isError, 'Command exited with code "
                             "N') ends it")

    #: Tool names whose calls are shell activity.
    shell_tools: ClassVar[frozenset[str]] = frozenset({"bash"})
    #: Entry types that carry nothing we need (pi 0.73.1 and 1.6.0 ``SessionEntry`` and the
    #: header; 1.6.0's also lists ``usage``, a usage notice, and ``context_edit``, which changes
    #: what an earlier entry contributes to the model's context, not what happened).
    quiet_types: ClassVar[frozenset[str]] = frozenset({
        "session", "thinking_level_change", "model_change", "compaction", "branch_summary",
        "custom", "custom_message", "label", "session_info", "usage", "context_edit"})
    #: Message roles that carry nothing we need. ``bashExecution`` is the user's own ``!``
    #: command, not an agent tool call; ``system`` is the system prompt pi 1.6.0 logs first.
    quiet_roles: ClassVar[frozenset[str]] = frozenset({
        "bashExecution", "custom", "branchSummary", "compactionSummary", "system"})
    #: ``stopReason`` values of an assistant message that end the turn on an error: the
    #: provider's error, and (pi 1.6.0) the run aborted mid-turn.
    error_stops: ClassVar[frozenset[str]] = frozenset({"error", "aborted"})

    def new_file_state(self) -> dict[str, Any]:
        """``{"calls": {call id: command}}``: the shell calls started and not yet finished."""
        return {"calls": {}}

    def parse_typed(self, kind: str, obj: dict[str, Any],
                    state: dict[str, Any]) -> list[SessionEvent]:
        """The events of one entry of type ``kind`` (see the class docstring)."""
        if kind == "message":
            return self._message(obj, state)
        if kind in self.quiet_types:
            return []
        raise UnusedLine()

    # -- one message entry ------------------------------------------------------------------

    def _message(self, entry: dict[str, Any], state: dict[str, Any]) -> list[SessionEvent]:
        message = entry.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ReaderFormatError("unknown_shape")
        ts = log_timestamp(entry.get("timestamp"), epoch_ms=True)
        role = message["role"]
        if role == "user":
            return self._user(message, ts)
        if role == "assistant":
            return self._assistant(message, ts, state)
        if role == "toolResult":
            return self._tool_result(message, ts, state)
        if role in self.quiet_roles:
            return []
        return self._other_role(role, message, ts)

    def _other_role(self, role: str, message: dict[str, Any],
                    ts: float | None) -> list[SessionEvent]:
        """A message role this reader does not know: a message it does not use
        (:class:`~repeat_failure.backends.UnusedLine`)."""
        raise UnusedLine()

    def _user(self, message: dict[str, Any], ts: float | None) -> list[SessionEvent]:
        """A user message starts a turn."""
        return [SessionEvent(TURN_START, ts)]

    def _assistant(self, message: dict[str, Any], ts: float | None,
                   state: dict[str, Any]) -> list[SessionEvent]:
        content = message.get("content")
        stop = message.get("stopReason")
        if not isinstance(content, list) or not isinstance(stop, str):
            raise ReaderFormatError("unknown_shape")
        runs_tools = self._runs_calls(message)
        events: list[SessionEvent] = []
        has_calls = False
        for block in content:
            if not isinstance(block, dict):
                raise ReaderFormatError("unknown_shape")
            kind = block.get("type")
            if kind == "text":
                text = block.get("text")
                if not isinstance(text, str):
                    raise ReaderFormatError("unknown_shape")
                if text.strip():
                    events.append(SessionEvent(TEXT, ts))
            elif kind == "toolCall":
                call_id, name = block.get("id"), block.get("name")
                if not isinstance(call_id, str) or not isinstance(name, str):
                    raise ReaderFormatError("unknown_shape")
                has_calls = True
                if not runs_tools:
                    continue
                if name in self.shell_tools:
                    command = command_arg(block.get("arguments"))
                    remember_call(state, call_id, command, MAX_OPEN_CALLS)
                    events.append(SessionEvent(SHELL_START, ts, call_id=call_id, command=command,
                                               tool=name))
                else:
                    events.append(SessionEvent(TOOL, ts, call_id=call_id, tool=name))
            # thinking and other blocks carry nothing we need
        if stop in self.error_stops:
            # The provider's error ended the run (pi 0.73.1, 1.6.0 and omp 18.2.3 write the
            # reply with stopReason "error" and the error's text in errorMessage once retries
            # are spent), or (pi 1.6.0) the run was aborted mid-turn: stopReason "aborted" and
            # the abort's message in errorMessage.
            error = message.get("errorMessage")
            detail = error if isinstance(error, str) else ""
            if stop == "aborted" and not detail.strip():
                detail = ABORTED
            events.append(SessionEvent(ERROR, ts, detail=detail))
        if self._ends_turn(message, has_calls):
            events.append(SessionEvent(TURN_END, ts))
        return events

    def _runs_calls(self, message: dict[str, Any]) -> bool:
        """Whether the tool calls of an assistant message run: pi 0.73.1 and 1.6.0
        ``agent-loop.js`` end the run without running them when the reply stopped with ``error`` or
        ``aborted``."""
        return message.get("stopReason") not in ("error", "aborted")

    def _ends_turn(self, message: dict[str, Any], has_calls: bool) -> bool:
        """Whether an assistant message ends the turn: it has no tool call to run (pi's
        loop stops asking the model then)."""
        return not has_calls or not self._runs_calls(message)

    def _tool_result(self, message: dict[str, Any], ts: float | None,
                     state: dict[str, Any]) -> list[SessionEvent]:
        call_id, name = message.get("toolCallId"), message.get("toolName")
        is_error = message.get("isError")
        if not isinstance(call_id, str) or not isinstance(name, str) \
                or not isinstance(is_error, bool):
            raise ReaderFormatError("unknown_shape")
        if name not in self.shell_tools:
            return []  # its ``tool`` event came with the call
        calls = state.setdefault("calls", {}) if isinstance(state, dict) else {}
        command = calls.pop(call_id, "") if isinstance(calls, dict) else ""
        if not self._ran(message):
            return []
        exit_code = self._exit(message)
        failed = is_error if exit_code is None else exit_code != 0
        content = message.get("content")
        output = text_blocks(content) if isinstance(content, (str, list)) else None
        return [SessionEvent(SHELL_END, ts, call_id=call_id, command=command, exit=exit_code,
                             failed=failed, tool=name, output=output)]

    def _ran(self, message: dict[str, Any]) -> bool:
        """Whether the command of this tool result ran (pi writes results only for calls it
        ran)."""
        return True

    def _exit(self, message: dict[str, Any]) -> int | None:
        """The exit code of a failed call from the result text's last line
        ``Command exited with code N`` (pi 0.73.1 and 1.6.0); ``None`` when the call did not
        fail with an exit code. Raises ``bad_exit`` when that line's code is not an integer."""
        if message.get("isError") is not True:
            return None
        last = text_blocks(message.get("content")).rstrip("\n").rpartition("\n")[2]
        return exit_notice(last, _EXIT_NOTICE)


register_reader(PiSessionReader())
