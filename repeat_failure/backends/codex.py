"""Codex CLI (``codex``): what its shells look like to the neutral route, and how to undo it.

Seen with Codex 0.171.0 under the harness (``harness/evidence/codex.json``); every shell Codex
starts is ``/bin/bash`` whatever ``$SHELL`` says. Per session:

* a *snapshot writer*, ``/bin/bash -lc`` of a fixed script (``if [ -z "${BASH_ENV-}" ] ...``,
  ``echo '# Snapshot file'``, a ``__codex_snapshot_command`` function, ``declare -f``,
  ``compgen -e`` ...) that prints the shell state into ``$CODEX_HOME/shell_snapshots/``;
* a *snapshot check*, ``/bin/bash -c 'set -e; . "<CODEX_HOME>/shell_snapshots/<id>.tmp-<n>"'``.

Neither is an agent command: both normalize to ``""`` so they never reach the detector (a
failing snapshot check would otherwise look like the same failing command in every session).

An agent command (the ``exec_command`` tool's ``cmd``) runs either as plain
``/bin/bash -lc <cmd>`` (snapshot not ready yet, or snapshots off), or as ``/bin/bash -c`` of a
wrapper of about 38,000 characters: ``__CODEX_SNAPSHOT_OVERRIDE_*`` / ``__CODEX_SNAPSHOT_PROXY_*``
assignments, ``if . '<snapshot>.<n>.sh' >/dev/null 2>&1; then :; fi``, restore blocks, a
``PATH`` line, a blank line and finally ``exec '/bin/bash' -c '<cmd>'`` with ``<cmd>`` single-quoted
(each ``'`` written ``'"'"'``). The ``exec`` keeps the PID, so the wrapper's EXIT trap never fires
and the exec'd shell records ``<cmd>`` itself: in both cases the record holds the bare command,
which this stripper returns unchanged.

Should the wrapper text itself ever reach a record, the command is taken back out of its
``exec`` line; a wrapper cut to fit a record (the hook keeps the first ~4 KB, which never reach
the ``exec`` line) gives ``""`` rather than the wrapper's head, which is the same for every
command and would merge them all into one "repeating" command.

The session log (:class:`CodexReader`): ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl``
(``CODEX_HOME`` defaults to ``~/.codex``). Every line of every rollout kept with the evidence
is ``{"timestamp": ISO-8601, "type": ..., "payload": {...}}``; the lines the reader uses, in
0.171.0 (``harness/evidence/codex/``):

* ``event_msg`` ``task_started`` / ``task_complete`` (with ``turn_id``): the turn's bounds;
* ``response_item`` ``function_call`` named ``exec_command`` (``arguments`` a JSON string
  ``{"cmd": ...}``, ``call_id``): a shell call starts; any other function (``apply_patch``,
  ``update_plan``, ...) or ``custom_tool_call`` is a non-shell tool;
* ``event_msg`` ``item_completed`` with an ``item`` of type ``CommandExecution`` (``id`` = the
  call id, ``exit_code``, ``status`` ``completed``/``failed``, ``command`` = the argv Codex ran,
  ``["/bin/bash", "-lc", <cmd>]``): the call ends. The ``function_call_output`` after it
  repeats the exit only inside its text, so it is not used;
* ``response_item`` ``message`` with role ``assistant``: model text;
* ``event_msg`` ``task_complete`` with ``error`` (``{"message": <the provider's error body>}``):
  the provider refused and the turn ended on that error (once Codex's retries are spent).

Earlier releases (issue 26; captures under ``harness/evidence/versions/codex/``) write less:
before 0.148.0 no ``item_completed`` (the call's ``function_call_output`` text states the
exit: ``Process exited with code N``), before 0.145.0 no ``error`` on ``task_complete``, before
0.100.0 no ``task_started`` / ``task_complete`` (the ``user_message`` prompt starts a turn),
and before 0.96.0 the shell function is ``shell_command`` (``Exit code: N``) or ``shell`` (JSON
``metadata.exit_code``). Before 0.99.0 Codex takes no shell snapshot; 0.99.0 to 0.148.0 write
a shorter snapshot script than 0.171.0 (no ``__codex_snapshot_command``), dropped the same way.

An empty reply is a turn with neither text nor a tool call: ``task_started``, ``task_complete``.

``codex exec --json`` prints a different stream (the transcript, :class:`CodexExecReader`):
``thread.started``, ``turn.started``, ``item.started`` / ``item.completed`` (items
``agent_message``, ``command_execution``, ``file_change``, ``mcp_tool_call``, ``web_search``,
``todo_list``, ``reasoning`` and ``error``, the last a notice such as a missing model
description), ``turn.completed`` or ``turn.failed`` (``error.message``), and a top-level
``error`` line before ``turn.failed``.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from repeat_failure.backends import (ERROR, SHELL_END, SHELL_START, TEXT, TOOL, TURN_END, TURN_START,
                              JsonLinesReader, ReaderFormatError, SessionEvent, StreamReader,
                              exit_notice, exit_number, log_timestamp, open_calls, register_reader,
                              register_stream_reader, register_stripper, remember,
                              require_object, str_or_empty)

# The snapshot writer: two lines no agent command carries together, in every writer seen
# (0.99.0 to 0.148.0 wrote a shorter script without ``__codex_snapshot_command``; 0.171.0's has
# it; both print these two headers).
_WRITER_MARKS = ("echo '# Snapshot file'", 'echo "# setopts $bash_opt_count"')
# The snapshot check: `set -e; . "<dir>/shell_snapshots/<file>"`.
_CHECK = re.compile(r'\s*set -e; \. "[^"\n]*/shell_snapshots/[^"/\n]+"\s*')
# The head of the tool wrapper: its first assignment, or (no override variables) the line that
# sources the snapshot.
_WRAPPER_HEAD = re.compile(
    r"\s*(?:__CODEX_SNAPSHOT_[A-Z_]*\d*=|if \. '[^'\n]*/shell_snapshots/[^'\n]*' )")
# The wrapper's last line starts `exec '<shell>' -c ` at the start of a line; the single-quoted
# command after it cannot contain that text unescaped (its quotes become '"'"').
_EXEC = re.compile(r"(?:^|\n)exec '/[^'\n]*' -c ")
# One shell word made of single-quoted parts and quoted single quotes ("'" or \').
_WORD = re.compile(r"(?:'[^']*'|\"'\"|\\')+")
_PART = re.compile(r"'([^']*)'|\"'\"|\\'")


def _unquote(word: str) -> str:
    return "".join(m.group(1) if m.group(1) is not None else "'" for m in _PART.finditer(word))


def _from_wrapper(text: str) -> str:
    """The command in a tool wrapper's ``exec`` line, or ``""`` when there is none (cut)."""
    for match in _EXEC.finditer(text):
        rest = text[match.end():].rstrip()
        if _WORD.fullmatch(rest):
            return _unquote(rest)
    last = None
    for last in _EXEC.finditer(text):
        pass
    if last is None:
        return ""
    # An exec line whose word does not parse (altered text): best effort, still per command.
    rest = text[last.end():].rstrip()
    if rest.startswith("'"):
        rest = rest[1:]
    if rest.endswith("'"):
        rest = rest[:-1]
    return rest.replace("'\"'\"'", "'")


def strip(command: str) -> str:
    """The agent's command in ``command`` as the neutral route recorded it under Codex.

    Codex's own helper shells give ``""``; the tool wrapper gives the command from its ``exec``
    line; anything else (the usual case: the bare command) is returned unchanged. Never raises.
    """
    try:
        if all(mark in command for mark in _WRITER_MARKS):
            return ""
        if _CHECK.fullmatch(command):
            return ""
        if _WRAPPER_HEAD.match(command):
            return _from_wrapper(command)
    except Exception:  # noqa: BLE001 - a stripper must never raise
        return command
    return command


register_stripper("codex", strip)


# -- session-log reader ----------------------------------------------------------------------------

#: Function names whose call runs a shell command, with the argument holding the command:
#: ``exec_command`` (``cmd``, a string; every model from 0.96.0), ``shell_command`` (``command``, a
#: string; OpenAI's models before 0.96.0) and ``shell`` (``command``, an argv list; other models
#: before 0.96.0).
_SHELL_FUNCTIONS = {"exec_command": "cmd", "shell_command": "command", "shell": "command"}
#: The tool that feeds a still-running ``exec_command`` session (``session_id``) and reads on.
_POLL_FUNCTION = "write_stdin"
#: At most this many started-but-unfinished calls are remembered per file (oldest dropped).
_MAX_OPEN_CALLS = 512
#: ``exec_command``'s result text (0.96.0 on): ``Process exited with code N`` once the command
#: ended, ``Process running with session ID S`` while it still runs (``write_stdin`` polls it).
_EXITED = "Process exited with code "
_RUNNING = re.compile(r"Process running with session ID (\S+)")
#: ``shell_command``'s result text (before 0.96.0) starts ``Exit code: N``.
_EXIT_CODE = "Exit code: "
#: Both texts put the command's output after an ``Output:`` line.
_OUTPUT = "\nOutput:\n"


def _text_exit(text: str) -> int | None:
    """The exit status a result's header (the text before its ``Output:`` line) states on a
    line of its own (``Process exited with code N`` or ``Exit code: N``), or ``None``;
    ``bad_exit`` when that line's number is not an integer."""
    for line in text.splitlines():
        for prefix in (_EXITED, _EXIT_CODE):
            code = exit_notice(line, prefix)
            if code is not None:
                return code
    return None


def _parse_output(output: Any) -> tuple[str, int | None, str | None, str | None]:
    """What a shell call's ``function_call_output`` says: ``(state, exit, output, session)``.

    ``state`` is ``"exited"`` (the call ended; ``exit`` the number it states, ``None`` when the
    text states none, e.g. Codex's ``execution error: ...`` when the command could not start)
    or ``"running"`` (``exec_command`` yielded with the command still running; ``session`` is
    the id ``write_stdin`` polls it by). ``output`` is the command's output: the text after the
    ``Output:`` line, the ``output`` member of ``shell``'s JSON result
    (``{"output": ..., "metadata": {"exit_code": N, ...}}``), else the whole text.
    """
    if not isinstance(output, str):
        raise ReaderFormatError("unknown_shape")
    if output.startswith("{"):
        try:
            parsed = json.loads(output)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and isinstance(parsed.get("metadata"), dict):
            code = parsed["metadata"].get("exit_code")
            text = parsed.get("output")
            return ("exited", _exit(code), text if isinstance(text, str) else None, None)
    # The header (before the ``Output:`` line) states the exit: the command's own output may
    # hold any text.
    header, found, after = output.partition(_OUTPUT)
    text = after if found else output
    exit_code = _text_exit(header)
    running = _RUNNING.search(header) if exit_code is None else None
    if running:
        return ("running", None, text, running.group(1))
    return ("exited", exit_code, text, None)


def _exit(value: Any) -> int | None:
    """``exit_code`` as an int (``None`` stays ``None``); anything but a whole number raises
    ReaderFormatError("bad_exit")."""
    return None if value is None else exit_number(value)


def _argv_command(argv: Any) -> str:
    """The command inside the argv Codex ran (``["/bin/bash", "-lc", <cmd>]``), or ``""``."""
    if isinstance(argv, str):
        return argv
    if (isinstance(argv, list) and len(argv) == 3 and isinstance(argv[2], str)
            and argv[1] in ("-lc", "-c")):
        return argv[2]
    return ""


def _call_command(name: str, arguments: Any) -> str | None:
    """The command of a shell function call ``name`` (a key of :data:`_SHELL_FUNCTIONS`) from
    its ``arguments`` (a JSON string), or ``None`` when they are not a JSON object holding one
    (Codex does not run such a call). ``shell``'s argv ``["bash", "-lc", <cmd>]`` gives
    ``<cmd>``; another argv is joined as a shell would read it."""
    if not isinstance(arguments, str):
        raise ReaderFormatError("unknown_shape")
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return None
    value = parsed.get(_SHELL_FUNCTIONS[name]) if isinstance(parsed, dict) else None
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(part, str) for part in value):
        return _argv_command(value) or shlex.join(value)
    return None


class CodexReader(JsonLinesReader):
    """Reads Codex CLI rollout files (JSON Lines, one object per line) of every release from
    0.64.0 (December 2025) to 0.171.0, each rule seen in the real rollouts the harness kept
    (``harness/evidence/codex.json`` → ``session_files`` for 0.171.0, and under
    ``harness/evidence/versions/codex/<release>/`` for 0.148.0, 0.145.0, 0.100.0, 0.96.0 and
    0.64.0, the first release of each format below):

    - ``event_msg``/``task_started`` → ``turn_start``; ``event_msg``/``task_complete`` →
      ``turn_end`` (``turn_id`` from the payload). Releases before 0.100.0 write neither: there
      the turn starts at ``event_msg``/``user_message`` (the prompt) and no line ends it (the
      next prompt starts the next turn). From 0.100.0 ``user_message`` follows
      ``task_started`` and is not an event of its own.
    - ``response_item``/``function_call`` of a shell function → ``shell_start`` (``call_id``,
      ``command``): ``exec_command`` (``arguments.cmd``; every model from 0.96.0),
      ``shell_command`` (``arguments.command``, a string; OpenAI's models before 0.96.0) or
      ``shell`` (``arguments.command``, an argv such as ``["bash", "-lc", <cmd>]``; other
      models before 0.96.0). The command is kept in the per-file state until the call ends.
      Arguments that are not a JSON object with the command (Codex does not run such a call)
      give a ``tool`` event instead. Any other ``function_call`` and any ``custom_tool_call``
      (``apply_patch``, an edit) → ``tool``.
    - The call ends (``shell_end``; ``failed`` = ``exit != 0``):

      * from 0.148.0 at ``event_msg``/``item_completed`` of a ``CommandExecution`` item
        (``call_id`` = item ``id``; ``exit`` = ``exit_code``; ``failed`` from ``status !=
        "completed"`` when there is no exit code; ``command`` from the state, else the
        ``<cmd>`` of the item's ``["/bin/bash", "-lc", <cmd>]``; ``output`` =
        ``aggregated_output``). The ``function_call_output`` after it repeats the call and is
        not used;
      * before 0.148.0 at the call's ``response_item``/``function_call_output`` (same
        ``call_id``), whose ``output`` text states the exit: ``Process exited with code N``
        (``exec_command``), ``Exit code: N`` on its first line (``shell_command``), or a JSON
        object ``{"output", "metadata": {"exit_code"}}`` (``shell``); ``output`` is the text
        after its ``Output:`` line (or the JSON's ``output``). A text with no exit line (an
        ``execution error: ...``) ends the call with no exit, ``failed``. ``Process running with
        session ID S`` keeps the call open: the ``write_stdin`` call that polls session ``S``
        and whose output states the exit ends it.
    - ``response_item``/``message`` of role ``assistant`` with ``output_text`` → ``text``.
    - ``event_msg``/``task_complete`` with ``error`` (``{"message": <the provider's error
      body>}``, from 0.145.0): ``error``, then ``turn_end``. Earlier releases keep no trace of
      a refused request in the rollout (only ``codex exec --json`` shows it).
    - ``ts``: the line's ``timestamp``.

    Every line must be an object with a string ``type`` and an object ``payload``; a line of
    another ``type``, or a payload type the reader does not use, is recognised and gives ``[]``
    (``session_meta``, ``turn_context``, ``ghost_snapshot``, ``world_state``,
    ``token_usage_record`` ..., and new versions add kinds). Raises :class:`ReaderFormatError`
    with ``not_object``, ``no_type``, ``unknown_shape`` (a used kind with a wrong shape),
    ``bad_ts`` or ``bad_exit``; never anything else.
    """

    backend = "codex"
    shell_tools = _SHELL_FUNCTIONS  # type: ignore[assignment]
    #: Tools that write or edit files (Codex's one edit tool, a freeform patch).
    edit_tools: frozenset[str] = frozenset({"apply_patch"})  # type: ignore[misc]
    globs = ("$CODEX_HOME/sessions/*/*/*/rollout-*.jsonl",)
    env_defaults = {"CODEX_HOME": ".codex"}
    route_records = False
    signal = ("$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl (default ~/.codex): a "
              "function_call exec_command (shell_command or shell before 0.96.0) starts a call, "
              "the item_completed CommandExecution ends it (exit_code, status; before 0.148.0 "
              "its function_call_output: 'Process exited with code N', 'Exit code: N' or "
              "metadata.exit_code)")

    def new_file_state(self) -> dict[str, Any]:
        """``{"turn": <current turn id>, "tasks": <task_started seen>, "calls": {call_id:
        command}, "sessions": {exec session id: call_id}, "polls": {write_stdin call_id:
        exec session id}}`` (JSON-serialisable; each map keeps at most 512 entries, the oldest
        dropped first)."""
        return {"turn": "", "tasks": False, "calls": {}, "sessions": {}, "polls": {}}

    def parse_typed(self, kind: str, obj: dict[str, Any],
                    state: dict[str, Any]) -> list[SessionEvent]:
        """The events of one rollout line of type ``kind`` (see the class docstring). ``state``
        comes from :meth:`new_file_state`."""
        payload = require_object(obj.get("payload"))
        ts = log_timestamp(obj.get("timestamp"))
        open_calls(state)  # ``state["calls"]`` is a dict from here on
        for key in ("sessions", "polls"):
            if not isinstance(state.get(key), dict):
                state[key] = {}
        if kind == "event_msg":
            return self._event_msg(payload, ts, state)
        if kind == "response_item":
            return self._response_item(payload, ts, state)
        return []

    @staticmethod
    def _turn(payload: dict[str, Any], state: dict[str, Any]) -> str:
        turn = payload.get("turn_id")
        if not isinstance(turn, str):
            meta = payload.get("internal_chat_message_metadata_passthrough")
            turn = meta.get("turn_id") if isinstance(meta, dict) else None
        return turn if isinstance(turn, str) else str_or_empty(state.get("turn"))

    def _event_msg(self, payload: dict[str, Any], ts: float | None,
                   state: dict[str, Any]) -> list[SessionEvent]:
        sub = payload.get("type")
        if not isinstance(sub, str):
            raise ReaderFormatError("unknown_shape")
        if sub == "task_started":
            turn = str_or_empty(payload.get("turn_id"))
            state["turn"], state["tasks"] = turn, True
            return [SessionEvent(TURN_START, ts, turn_id=turn)]
        if sub == "user_message":
            if state.get("tasks") is True:
                return []  # 0.100.0 on: task_started already started the turn
            # Before 0.100.0 the prompt is the only mark of a new turn (no turn ids).
            state["turn"] = ""
            return [SessionEvent(TURN_START, ts)]
        if sub == "task_complete":
            turn = self._turn(payload, state)
            end = SessionEvent(TURN_END, ts, turn_id=turn)
            error = payload.get("error")
            if isinstance(error, dict):
                # Codex 0.145.0 on ends a turn the provider refused with task_complete carrying
                # error.message (the provider's error body) once its retries are spent.
                message = error.get("message")
                return [SessionEvent(ERROR, ts, turn_id=turn,
                                     detail=message if isinstance(message, str) else ""), end]
            return [end]
        if sub != "item_completed":
            return []
        item = require_object(payload.get("item"))
        item_type = item.get("type")
        if not isinstance(item_type, str):
            raise ReaderFormatError("unknown_shape")
        if item_type != "CommandExecution":
            return []
        call_id = item.get("id")
        if not isinstance(call_id, str):
            raise ReaderFormatError("unknown_shape")
        exit_code = _exit(item.get("exit_code"))
        failed = exit_code != 0 if exit_code is not None else item.get("status") != "completed"
        call = state["calls"].pop(call_id, None)
        command = call[0] if isinstance(call, list) and call and isinstance(call[0], str) \
            else _argv_command(item.get("command"))
        output = item.get("aggregated_output")
        return [SessionEvent(SHELL_END, ts, call_id=call_id, command=command, exit=exit_code,
                             failed=failed, tool="exec_command",
                             turn_id=self._turn(payload, state),
                             output=output if isinstance(output, str) else None)]

    def _response_item(self, payload: dict[str, Any], ts: float | None,
                       state: dict[str, Any]) -> list[SessionEvent]:
        sub = payload.get("type")
        if not isinstance(sub, str):
            raise ReaderFormatError("unknown_shape")
        turn = self._turn(payload, state)
        if sub in ("function_call", "custom_tool_call"):
            name, call_id = payload.get("name"), payload.get("call_id")
            if not isinstance(name, str) or not isinstance(call_id, str):
                raise ReaderFormatError("unknown_shape")
            if sub == "function_call" and name in _SHELL_FUNCTIONS:
                command = _call_command(name, payload.get("arguments"))
                if command is not None:
                    remember(state["calls"], call_id, [command, name], _MAX_OPEN_CALLS)
                    return [SessionEvent(SHELL_START, ts, call_id=call_id, command=command,
                                         tool=name, turn_id=turn)]
            if sub == "function_call" and name == _POLL_FUNCTION:
                self._poll(payload.get("arguments"), call_id, state)
            return [SessionEvent(TOOL, ts, call_id=call_id, tool=name, turn_id=turn)]
        if sub == "function_call_output":
            return self._call_output(payload, ts, turn, state)
        if sub == "message" and payload.get("role") == "assistant":
            content = payload.get("content")
            if not isinstance(content, list):
                raise ReaderFormatError("unknown_shape")
            if any(isinstance(part, dict) and part.get("type") == "output_text"
                   and isinstance(part.get("text"), str) and part["text"] for part in content):
                return [SessionEvent(TEXT, ts, turn_id=turn)]
        return []

    @staticmethod
    def _poll(arguments: Any, call_id: str, state: dict[str, Any]) -> None:
        """A ``write_stdin`` call polling a running ``exec_command`` session: remember which
        session its output belongs to."""
        try:
            parsed = json.loads(arguments) if isinstance(arguments, str) else None
        except ValueError:
            parsed = None
        session = parsed.get("session_id") if isinstance(parsed, dict) else None
        if isinstance(session, (int, str)) and not isinstance(session, bool) \
                and str(session) in state["sessions"]:
            remember(state["polls"], call_id, str(session), _MAX_OPEN_CALLS)

    def _call_output(self, payload: dict[str, Any], ts: float | None, turn: str,
                     state: dict[str, Any]) -> list[SessionEvent]:
        """A ``function_call_output``: the end of an open shell call (before 0.148.0), directly
        or through the ``write_stdin`` poll of its session; ``[]`` for any other call's (a
        non-shell tool, a call 0.148.0's ``item_completed`` already ended)."""
        call_id = payload.get("call_id")
        if not isinstance(call_id, str):
            raise ReaderFormatError("unknown_shape")
        session = state["polls"].pop(call_id, None)
        if isinstance(session, str):
            shell_id = state["sessions"].get(session)
            if not isinstance(shell_id, str):
                return []
        else:
            session, shell_id = None, call_id
        call = state["calls"].get(shell_id)
        if not (isinstance(call, list) and len(call) == 2
                and all(isinstance(part, str) for part in call)):
            return []
        how, exit_code, output, running = _parse_output(payload.get("output"))
        if how == "running":
            if session is None and running is not None:
                remember(state["sessions"], running, shell_id, _MAX_OPEN_CALLS)
            return []
        del state["calls"][shell_id]
        if session is not None:
            state["sessions"].pop(session, None)
        return [SessionEvent(SHELL_END, ts, call_id=shell_id, command=call[0], exit=exit_code,
                             failed=exit_code != 0, tool=call[1], turn_id=turn, output=output)]


register_reader(CodexReader())


#: ``codex exec --json`` item types that are tool calls (a shell call is ``command_execution``).
_EXEC_TOOL_ITEMS = {"file_change": "apply_patch", "mcp_tool_call": "mcp", "web_search":
                    "web_search", "todo_list": "update_plan"}
#: Item ids remembered per transcript, so an item seen started and completed counts once.
_MAX_EXEC_ITEMS = 4096


class CodexExecReader(StreamReader):
    """``codex exec --json`` (Codex 0.171.0, the harness's ``verdict`` captures), for
    ``repeat-failure verdict``:

    - ``thread.started`` (the first line): ``[]``; ``turn.started``: ``turn_start``;
    - ``item.started`` / ``item.completed``, each item id once: ``agent_message`` with text is
      ``text``; ``command_execution`` is ``shell_start`` (``command`` as Codex ran it);
      ``file_change``, ``mcp_tool_call``, ``web_search`` and ``todo_list`` are ``tool``;
      ``reasoning`` and ``error`` items (notices Codex goes on after) are ``[]``;
    - ``turn.completed`` (terminal): ``turn_end``; ``turn.failed`` (terminal): ``error`` with
      ``error.message``, then ``turn_end``;
    - a top-level ``error`` line is remembered: with no terminal line after it (Codex gave up
      before a turn could fail), the end of the transcript is that ``error``.
    """

    backend = "codex"
    format = "codex"
    cli = "codex exec --json"

    def new_file_state(self) -> dict[str, Any]:
        """``{"items": {item id: None}, "error": str}``."""
        return {"items": {}, "error": ""}

    def detects(self, obj: Any) -> bool:
        """The first line of ``codex exec --json``: ``{"type": "thread.started"}``."""
        return isinstance(obj, dict) and obj.get("type") == "thread.started"

    def parse_typed(self, kind: str, obj: dict[str, Any],
                    state: dict[str, Any]) -> list[SessionEvent]:
        """The events of one line (see the class docstring)."""
        if kind == "turn.started":
            return [SessionEvent(TURN_START)]
        if kind in ("turn.completed", "turn.failed"):
            state["terminal"] = True
            if kind == "turn.completed":
                return [SessionEvent(TURN_END)]
            error = obj.get("error")
            message = error.get("message") if isinstance(error, dict) else None
            return [SessionEvent(ERROR, detail=message if isinstance(message, str) else
                                 state.get("error") or "turn.failed"), SessionEvent(TURN_END)]
        if kind == "error":
            message = obj.get("message")
            state["error"] = message if isinstance(message, str) and message else "error"
            return []
        if kind not in ("item.started", "item.updated", "item.completed"):
            return []
        item = require_object(obj.get("item"))
        item_id, item_type = item.get("id"), item.get("type")
        if not isinstance(item_id, str) or not isinstance(item_type, str):
            raise ReaderFormatError("unknown_shape")
        items = state.setdefault("items", {})
        if item_id in items:
            return []
        if item_type == "agent_message":
            text = item.get("text")
            if not isinstance(text, str) or not text.strip():
                return []  # streamed in pieces: counted once it has text
            event = SessionEvent(TEXT)
        elif item_type == "command_execution":
            event = SessionEvent(SHELL_START, call_id=item_id, command=str_or_empty(
                item.get("command")), tool="exec_command")
        elif item_type in _EXEC_TOOL_ITEMS:
            event = SessionEvent(TOOL, call_id=item_id, tool=_EXEC_TOOL_ITEMS[item_type])
        else:
            return []
        remember(items, item_id, None, _MAX_EXEC_ITEMS)
        return [event]

    def finish(self, state: dict[str, Any]) -> list[SessionEvent]:
        """An ``error`` line no terminal line followed is the run's error."""
        if state.get("terminal") is not True and state.get("error"):
            return [SessionEvent(ERROR, detail=state["error"])]
        return []


register_stream_reader(CodexExecReader())
