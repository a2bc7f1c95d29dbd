"""Gemini CLI: strip the wrapper its ``run_shell_command`` tool puts around a command.

Gemini CLI 0.61.0 runs each tool command as ``bash -c <wrapper>`` (``harness/evidence/gemini.json``
holds the exact strings the neutral route recorded)::

    shopt -u promptvars nullglob extglob nocaseglob dotglob; _bgpids_file=/tmp/gemini-shell-AbC123/bgpids.tmp
    (
      trap 'jobs -p > "$_bgpids_file"' EXIT
    <command>
    )
    __code=$?
    exit $__code

The ``shopt -u`` guard is prepended to every bash command the CLI runs; the ``_bgpids_file`` value
is the temporary file quoted the way the ``shell-quote`` package quotes (bare when it has no
special characters, else in single or double quotes); the command is the agent's, trimmed of
surrounding whitespace, with one space added after a trailing backslash (which is taken off again
here). The CLI's other bash forms are stripped too: the guard alone (``!{...}`` injections of
custom commands) and the interactive ``!`` shell mode's ``{ <command> }`` + ``pwd`` wrapper.

Earlier releases (their real records, issue 26): 0.19.1 to 0.36.0 run ``{ <command>; }; __code=$?;
pgrep -g 0 ><file> 2>&1; exit $__code;`` after the guard, 0.37.2 to 0.39.1 ``(``, the command on
lines of its own, then ``); __code=$?; pgrep ...``, 0.40.0 to 0.43.0 the same with the ``pgrep`` on
its own line and its file quoted; 0.44.0 has the 0.61.0 form with ``trap '' HUP;`` before the
guard (dropped in 0.45.2). All are stripped.

Gemini CLI starts no helper bash shells of its own (no records besides the tool commands in the
harness runs); a guard with no command after it, which is what an empty command would leave, is
``""``. Text in none of these forms is returned unchanged.

The session log (:class:`GeminiReader`): ``~/.gemini/tmp/<project>/chats/session-*.jsonl``
(``<project>`` was the work directory's name, ``work``, in the 0.61.0 harness run; 0.39.0 is the
first release that writes it; 0.19.1 to 0.38.2 write one ``session-*.json`` document, rewritten
whole, whose ``messages`` are the same messages: :meth:`GeminiReader.parse_document` reads it,
issue 26). Gemini CLI 0.61.0 appends one
JSON object per line: a header (``sessionId``, ``startTime``, ``kind``), ``{"$set": {...}}``
metadata updates, and messages ``{"id", "timestamp", "type": "user"|"gemini"|..., "content"}``.
A message is appended again, whole and with the same ``id``, each time it changes: the model's
message is written when its reply has streamed (``toolCalls`` absent) and written again with
``toolCalls`` once the calls have *finished* (the CLI records tool calls only on completion, so a
running command is not in the log).

An API error or an empty reply leaves almost no trace in that log (0.61.0): the prompt is
written, then a ``$set`` of ``messages`` without it (the CLI rolls the turn back); no reply, no
error text. The reader takes that rollback as the turn's error.

``gemini --output-format stream-json`` (the transcript, :class:`GeminiStreamReader`) says it:
``init``, ``message`` (``role``, ``content``, ``delta``), ``tool_use`` (``tool_name``,
``tool_id``, ``parameters``), ``tool_result``, ``error`` (``severity``, ``message``; 0.61.0
writes ``The model returned an empty response ...`` for an empty reply), and the terminal
``result`` (``status`` ``success`` or ``error``, ``error.message``).
"""

from __future__ import annotations

import os
import re
from typing import Any

from repeat_failure.backends import (ERROR, SHELL_END, SHELL_START, TEXT, TOOL, TURN_END, TURN_START,
                              JsonLinesReader, ReaderFormatError, SessionEvent, StreamReader,
                              command_arg, log_timestamp, register_reader,
                              register_stream_reader, register_stripper, remember, str_or_empty)

# ``shopt -u promptvars nullglob extglob nocaseglob dotglob;`` and the one space after it (the
# options after promptvars are matched loosely, so a version that guards one more still strips).
_GUARD = re.compile(r"shopt -u promptvars(?: [a-z_]+)*;(?: |\Z)")
# The value shell-quote's quote() gives a path: '...', "..." with backslash escapes, or bare with
# backslash escapes.
_QUOTED = r"""(?:'[^'\n]*'|"(?:[^"\\]|\\.)*"|(?:[^\s'"\\]|\\.)+)"""
_BG_HEAD = re.compile(
    r"_bgpids_file=" + _QUOTED + r"\n\(\n  trap 'jobs -p > \"\$_bgpids_file\"' EXIT\n", re.S)
_BG_TAIL = "\n)\n__code=$?\nexit $__code"
# Interactive shell mode (``!`` in the prompt): ``{\n<command>\n}\n__code=$?; pwd > <file>; exit
# $__code`` (the file is ``gemini-shell-*/pwd.tmp`` in the temporary directory).
_PWD_TAIL = re.compile(r"\n\}\n__code=\$\?; pwd > " + _QUOTED + r"; exit \$__code\Z", re.S)


# The earlier wrappers, which write the process group's PIDs to a ``shell_pgrep_<hex>.tmp`` file
# in the temporary directory (each release's ``tools/shell.js`` or bundle; the harness's runs):
# ``{ <command>; }; __code=$?; pgrep -g 0 ><file> 2>&1; exit $__code;`` (0.19.1 to 0.36.0; the
# command gets ``;`` unless it ends with ``&``), ``(\n<command>\n); __code=$?; pgrep ...`` (0.37.2
# to 0.39.1) and ``(\n<command>\n)\n__code=$?; pgrep ...`` with the file quoted (0.40.0 to 0.43.0).
_PGREP_END = r"__code=\$\?; pgrep -g 0 >" + _QUOTED + r" 2>&1; exit \$__code;\Z"
_PGREP_BRACE_TAIL = re.compile(r" \}; " + _PGREP_END, re.S)
_PGREP_PAREN_TAIL = re.compile(r"\n\)(?:; |\n)" + _PGREP_END, re.S)
# ``trap '' HUP;`` and a space, put before the ``shopt`` guard by 0.44.0 (its BASH_HUP_GUARD).
_HUP_GUARD = "trap '' HUP; "


def _drop_added_space(command: str) -> str:
    # The CLI trims the command, then adds a space after a trailing backslash.
    return command[:-1] if command.endswith("\\ ") else command


def _strip_bgpids(text: str) -> str | None:
    head = _BG_HEAD.match(text)
    if head is None:
        return None
    inner = text[head.end():]
    if inner.endswith(_BG_TAIL):
        inner = inner[: -len(_BG_TAIL)]
    # else: a record cut to fit its line lost the tail; the command's start is still the command.
    return _drop_added_space(inner)


def _strip_pgrep(text: str) -> str | None:
    """The command inside one of the earlier ``pgrep`` wrappers (above); ``None`` when ``text``
    is in neither form or has lost its tail."""
    if text.startswith("{ "):
        tail = _PGREP_BRACE_TAIL.search(text, 2)
        if tail is None:
            return None
        inner = text[2:tail.start()]
        return inner[:-1] if inner.endswith(";") else inner
    if text.startswith("(\n"):
        tail = _PGREP_PAREN_TAIL.search(text, 2)
        return None if tail is None else _drop_added_space(text[2:tail.start()])
    return None


def _strip_pwd(text: str) -> str | None:
    if not text.startswith("{\n"):
        return None
    tail = _PWD_TAIL.search(text, 2)
    if tail is None:
        return None
    return _drop_added_space(text[2:tail.start()])


def strip(command: str) -> str:
    """The command Gemini CLI's agent (or user) asked for, from the recorded ``bash -c`` text."""
    try:
        rest = command.removeprefix(_HUP_GUARD)
        guard = _GUARD.match(rest)
        rest = rest[guard.end():] if guard else rest
        for form in (_strip_bgpids, _strip_pgrep, _strip_pwd):
            inner = form(rest)
            if inner is not None:
                return inner
        return rest
    except Exception:  # noqa: BLE001 - a stripper must never raise
        return command


register_stripper("gemini", strip)


# -- session-log reader ----------------------------------------------------------------------------

_SHELL_TOOLS = frozenset({"run_shell_command"})
#: Tool-call statuses of a finished call (0.61.0 records calls only once they have one).
_FINISHED = frozenset({"success", "error", "cancelled"})
#: At most this many call / message ids are remembered per file (oldest dropped).
_MAX_IDS = 2048
# The shell tool's result text (0.61.0, ``run_shell_command``): ``Output: ...``, an optional
# ``Error: ...``, then the trailing lines ``Exit Code: N`` (only when non-zero), ``Signal: S``,
# ``Background PIDs: ...``, ``Process Group PGID: N``, the whole inside ``<untrusted_context>``
# tags. Only the block of trailing lines at the very end is read, so a command whose own output
# prints "Exit Code: 5" or "Signal: x" in the middle is not misread.
_TAIL = re.compile(
    r"(?:^|\n)((?:(?:Exit Code|Signal|Background PIDs|Process Group PGID): [^\n]*(?:\n|\Z))+)"
    r"(?:</untrusted_context>\s*)?\Z")
_TAIL_LINE = re.compile(r"^(Exit Code|Signal): ([^\n]*)$", re.M)
_OUTPUT_LINE = re.compile(r"(?:^|\n)Output: ")
_CANCELLED = re.compile(r"(?:^|\n)Command was (?:automatically )?cancelled")


def _parts(content: Any) -> list[Any]:
    """A message's ``content`` (a string, one part or a list of parts) as a list of parts;
    anything else raises ReaderFormatError("unknown_shape")."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"text": content}]
    if isinstance(content, dict):
        return [content]
    if isinstance(content, list):
        return content
    raise ReaderFormatError("unknown_shape")


#: The texts Gemini CLI sends on its own within a turn, logged as ``user`` messages (0.39.0's
#: ``sendMessageStream``, seen in its real file after an empty reply: the text with the user's
#: prompt as ``displayContent``): the retry after an invalid (empty) reply, and the next-speaker
#: check's "the model should go on".
_CONTINUATIONS = frozenset({"System: Please continue.", "Please continue."})


def _continuation(parts: list[Any]) -> bool:
    """Whether a ``user`` message's parts are exactly one of :data:`_CONTINUATIONS`."""
    return len(parts) == 1 and isinstance(parts[0], dict) \
        and parts[0].get("text") in _CONTINUATIONS


def _has_text(parts: list[Any]) -> bool:
    return any(isinstance(p, dict) and isinstance(p.get("text"), str) and p["text"].strip()
               for p in parts)


def _result_text(result: Any) -> str:
    """The shell tool's text in a tool call's ``result`` (its ``functionResponse.response``
    ``output``, else ``error``); ``""`` when there is none."""
    texts = []
    for part in result if isinstance(result, list) else [result]:
        response = part.get("functionResponse") if isinstance(part, dict) else None
        response = response.get("response") if isinstance(response, dict) else None
        if isinstance(response, dict):
            for key in ("output", "error"):
                if isinstance(response.get(key), str):
                    texts.append(response[key])
                    break
    return "\n".join(texts)


def _exit_status(status: str, text: str) -> tuple[int | None, bool]:
    """``(exit, failed)`` of a finished ``run_shell_command`` call, by the rules of Gemini CLI
    0.61.0's shell tool (its source; its description to the model says "Exit Code: Only
    included if non-zero"; the evidence file shows the ``Exit Code: 2`` form):

    - an ``Exit Code: N`` trailing line → ``N`` (``(none)`` → no number, failed; anything else
      that is not an integer raises ReaderFormatError("bad_exit"));
    - a call whose status is not ``success`` (``error``: the shell could not start;
      ``cancelled``), a ``Signal:`` trailing line, or a cancellation text → ``(None, True)``;
    - a normal result (an ``Output:`` line, no exit line) → ``(0, False)``;
    - any other text of a successful call (a command moved to the background) →
      ``(None, False)``.
    """
    tail = _TAIL.search(text)
    lines = dict(m.groups() for m in _TAIL_LINE.finditer(tail.group(1))) if tail else {}  # type: ignore[arg-type, var-annotated]
    if "Exit Code" in lines:
        value = lines["Exit Code"].strip()
        if value == "(none)":
            return None, True
        if not re.fullmatch(r"-?\d{1,10}", value):
            raise ReaderFormatError("bad_exit")
        code = int(value)
        return code, code != 0
    if status != "success" or "Signal" in lines or _CANCELLED.search(text):
        return None, True
    if _OUTPUT_LINE.search(text):
        return 0, False
    return None, False


def _command_output(text: str) -> str:
    """The command's own output in a shell result text (issue 19: its digest tells same from
    changing output): without the tool's ``<untrusted_context>`` tags, its ``Output:`` label
    and its trailing ``Exit Code`` / ``Signal`` / ``Background PIDs`` / ``Process Group PGID``
    lines (the PGID differs at every call: the real run's five results differ only there)."""
    tail = _TAIL.search(text)
    if tail is not None:
        text = text[:tail.start()]
    text = text.removeprefix("<untrusted_context>").lstrip("\n")
    return text.removeprefix("Output: ")


def _remember(ids: dict[str, Any], key: str) -> None:
    """Note ``key`` as reported in one of the state's id maps (within :data:`_MAX_IDS`)."""
    remember(ids, key, 1, _MAX_IDS)


#: The error of a turn Gemini CLI rolled back (its log says nothing more).
ROLLED_BACK = ("Gemini CLI rolled the turn back (its prompt was removed from the session): the "
               "model's reply failed or was empty")


class GeminiReader(JsonLinesReader):
    """Reads Gemini CLI chat files: JSON Lines (0.39.0 on, :meth:`parse_line`) and the
    ``session-*.json`` documents of 0.19.1 to 0.38.2 (:meth:`parse_document`, the same
    messages; :meth:`file_kind` tells them apart by name).

    Rules, each seen in the Gemini CLI 0.61.0 session file kept with the evidence
    (``harness/evidence/gemini.json`` → ``session_files``) or, where said, in its source:

    - The header line (``sessionId``, no ``type``) and ``$set`` lines (metadata, and once the
      CLI's own ``<session_context>`` setup message) give ``[]``.
    - A ``user`` message whose parts are text → ``turn_start`` (``turn_id`` = the message
      ``id``); a ``user`` message carrying ``functionResponse`` parts is the tool results sent
      back to the model → ``[]``; one that is the CLI's own "go on" text
      (:data:`_CONTINUATIONS`, 0.39.0's real file) is still the open turn → ``[]``. Once per
      message id.
    - A ``gemini`` message: ``text`` once per message id when its ``content`` has text; each
      entry of ``toolCalls`` (``id``, ``name``, ``args``, ``status``, ``result``,
      ``timestamp``) gives, once per call id however often the message is rewritten:
      ``run_shell_command`` → ``shell_start`` (``ts`` = the message's ``timestamp``,
      ``command`` = ``args.command``) and, when its ``status`` is finished (``success``,
      ``error``, ``cancelled``), ``shell_end`` (``ts`` = the call's own ``timestamp``, when it
      was recorded as finished; ``exit``/``failed`` from the result text, see
      :func:`_exit_status`; ``status`` is ``success`` even for a non-zero exit); any other
      tool → ``tool``.
    - A ``gemini`` message with text and no ``toolCalls`` → ``turn_end`` (once per message id).
      The 0.61.0 file shows no explicit end marker, and the CLI writes a model message before
      its tool calls finish: a message with text *and* tool calls therefore ends the turn early
      (``turn_end``, then the calls) when the calls are written; a message with no text and no
      calls (the usual first write of a tool-calling message) gives nothing.
    - Other message types (``info``, ``error``, ``warning``) give ``[]``.
    - A ``$set`` whose ``messages`` leave out the open turn's prompt → ``error``
      (:data:`ROLLED_BACK`), ``turn_end``: the CLI rolled the turn back because its reply
      failed (the harness's ``verdict`` captures: an API error and an empty reply both end so,
      and nothing else about them is written).

    Raises :class:`ReaderFormatError` with ``not_object``, ``no_type``, ``unknown_shape``,
    ``bad_ts`` or ``bad_exit``; never anything else.
    """

    backend = "gemini"
    shell_tools = _SHELL_TOOLS
    #: Tools that write or edit files (Gemini CLI's write-file and edit tools).
    edit_tools: frozenset[str] = frozenset({"write_file", "replace"})  # type: ignore[misc]
    globs = (".gemini/tmp/*/chats/session-*.jsonl", ".gemini/tmp/*/chats/session-*.json")
    route_records = False
    signal = ("~/.gemini/tmp/*/chats/session-*.jsonl (0.39.0 on; *.json documents before): a "
              "gemini message's run_shell_command toolCalls entry, written when the call has "
              "finished, starts and ends it ('Exit Code: N' in its result, absent when 0)")

    def file_kind(self, path: str | os.PathLike[str]) -> str:
        """``"json"`` for a ``session-*.json`` chat document (Gemini CLI 0.19.1 to 0.38.2, read
        by :meth:`parse_document`), else ``"jsonl"`` (0.39.0 on, :meth:`parse_line`)."""
        return "json" if os.fspath(path).endswith(".json") else "jsonl"

    def parse_document(self, doc: Any, state: dict[str, Any]) -> list[SessionEvent]:
        """The events of one version of a ``session-*.json`` chat document (Gemini CLI 0.19.1
        to 0.38.2) not given for an earlier version of it.

        The document (the releases' ``ConversationRecord``, seen in the 0.38.2 and 0.20.2 real
        files) is ``{"sessionId", "projectHash", "startTime", "lastUpdated", "messages": [...]}``
        and each of its ``messages`` is a message of the JSON Lines form (``id``,
        ``timestamp``, ``type``, ``content``, ``toolCalls``), read by the same rules (the class
        docstring), each message, call and end once by its id however often the CLI rewrites
        the file. The tool results sent back to the model are not among them (the calls'
        ``result`` holds them). These releases neither roll a failed turn back nor log its
        error (the 0.38.2 API-error and empty-reply documents hold the prompt alone), so such
        a turn has no end. Raises :class:`ReaderFormatError`: ``not_object`` (the document or
        a message is not an object), ``unknown_shape`` (no ``messages`` list, or a message the
        line rules reject so), ``no_type``, ``bad_ts``, ``bad_exit``; never anything else."""
        try:
            if not isinstance(doc, dict):
                raise ReaderFormatError("not_object")
            messages = doc.get("messages")
            if not isinstance(messages, list):
                raise ReaderFormatError("unknown_shape")
            events: list[SessionEvent] = []
            for message in messages:
                events += self.parse_line(message, state)
            return events
        except ReaderFormatError:
            raise
        except Exception:  # noqa: BLE001 - a shape no check foresaw: still only a reader error
            raise ReaderFormatError("unknown_shape") from None

    def new_file_state(self) -> dict[str, Any]:
        """``{"turn": <user message id>, "open": bool, "prompts": {message_id: 1}, "started":
        {call_id: 1}, "ended": {call_id: 1}, "texted": {message_id: 1}, "closed": {message_id:
        1}}``: the current prompt and whether its turn is open, and what was already reported,
        so a rewritten message reports nothing twice (JSON-serialisable; at most 2048 ids per
        map, the oldest dropped first)."""
        return {"turn": "", "open": False, "prompts": {}, "started": {}, "ended": {},
                "texted": {}, "closed": {}}

    def parse_object(self, obj: dict[str, Any], state: dict[str, Any]) -> list[SessionEvent]:
        """The untyped lines: a ``$set`` line (its value must be an object) and the header give
        ``[]``; every other line must have a string ``type`` (:meth:`parse_typed`)."""
        if "$set" in obj:
            if not isinstance(obj["$set"], dict):
                raise ReaderFormatError("unknown_shape")
            return self._rolled_back(obj["$set"].get("messages"), state)
        if obj.get("type") is None and isinstance(obj.get("sessionId"), str) \
                and "startTime" in obj:
            return []  # the header line
        return super().parse_object(obj, state)

    def parse_typed(self, kind: str, obj: dict[str, Any],
                    state: dict[str, Any]) -> list[SessionEvent]:
        """The events of one chat-file message of type ``kind`` (see the class docstring).
        ``state`` comes from :meth:`new_file_state`."""
        message_id = obj.get("id")
        if not isinstance(message_id, str):
            raise ReaderFormatError("unknown_shape")
        ts = log_timestamp(obj.get("timestamp"))
        for key in ("prompts", "started", "ended", "texted", "closed"):
            if not isinstance(state.get(key), dict):
                state[key] = {}
        if kind == "user":
            parts = _parts(obj.get("content"))
            if any(isinstance(p, dict) and "functionResponse" in p for p in parts):
                return []
            if message_id in state["prompts"]:
                return []  # the same prompt written again
            if _continuation(parts):
                return []  # the CLI asking the model to go on: still the open turn
            _remember(state["prompts"], message_id)
            state["turn"] = message_id
            state["open"] = True
            return [SessionEvent(TURN_START, ts, turn_id=message_id)]
        if kind == "gemini":
            return self._model_message(obj, message_id, ts, state)
        return []

    def _rolled_back(self, messages: Any, state: dict[str, Any]) -> list[SessionEvent]:
        """A ``$set`` of ``messages`` that leaves out the open turn's prompt: Gemini CLI 0.61.0
        rolls a turn back so when the reply failed (an API error, or an empty reply after its
        retries), and writes nothing else about it: ``error`` then ``turn_end``."""
        turn = state.get("turn")
        if not isinstance(messages, list) or state.get("open") is not True \
                or not isinstance(turn, str) or not turn:
            return []
        if any(isinstance(m, dict) and m.get("id") == turn for m in messages):
            return []
        state["open"] = False
        return [SessionEvent(ERROR, turn_id=turn, detail=ROLLED_BACK),
                SessionEvent(TURN_END, turn_id=turn)]

    def _model_message(self, obj: dict[str, Any], message_id: str, ts: float | None,
                       state: dict[str, Any]) -> list[SessionEvent]:
        turn = str_or_empty(state.get("turn"))
        calls = obj.get("toolCalls")
        if calls is None:
            calls = []
        if not isinstance(calls, list):
            raise ReaderFormatError("unknown_shape")
        events: list[SessionEvent] = []
        has_text = _has_text(_parts(obj.get("content")))
        if has_text and message_id not in state["texted"]:
            _remember(state["texted"], message_id)
            events.append(SessionEvent(TEXT, ts, turn_id=turn))
        for call in calls:
            events.extend(self._tool_call(call, ts, turn, state))
        if has_text and not calls and message_id not in state["closed"]:
            _remember(state["closed"], message_id)
            state["open"] = False
            events.append(SessionEvent(TURN_END, ts, turn_id=turn))
        return events

    @staticmethod
    def _tool_call(call: Any, message_ts: float | None, turn: str,
                   state: dict[str, Any]) -> list[SessionEvent]:
        if not isinstance(call, dict):
            raise ReaderFormatError("unknown_shape")
        call_id, name, status = call.get("id"), call.get("name"), call.get("status")
        if not isinstance(call_id, str) or not isinstance(name, str):
            raise ReaderFormatError("unknown_shape")
        if status is not None and not isinstance(status, str):
            raise ReaderFormatError("unknown_shape")
        events: list[SessionEvent] = []
        if name not in _SHELL_TOOLS:
            if call_id not in state["started"]:
                _remember(state["started"], call_id)
                events.append(SessionEvent(TOOL, message_ts, call_id=call_id, tool=name,
                                           turn_id=turn))
            return events
        command = command_arg(call.get("args"))
        if call_id not in state["started"]:
            _remember(state["started"], call_id)
            events.append(SessionEvent(SHELL_START, message_ts, call_id=call_id,
                                       command=command, tool=name, turn_id=turn))
        if status in _FINISHED and call_id not in state["ended"]:
            text = _result_text(call.get("result"))
            exit_code, failed = _exit_status(status, text)
            end_ts = log_timestamp(call.get("timestamp"))
            _remember(state["ended"], call_id)
            events.append(SessionEvent(SHELL_END, message_ts if end_ts is None else end_ts,
                                       call_id=call_id, command=command, exit=exit_code,
                                       failed=failed, tool=name, turn_id=turn,
                                       output=_command_output(text)
                                       if "result" in call else None))
        return events


register_reader(GeminiReader())


class GeminiStreamReader(StreamReader):
    """``gemini --output-format stream-json`` (Gemini CLI 0.61.0, the harness's ``verdict``
    captures), for ``repeat-failure verdict``:

    - ``init`` (the first line): ``turn_start``;
    - ``message`` with ``role`` ``assistant`` and text: ``text`` (each streamed piece);
    - ``tool_use``: ``shell_start`` for ``run_shell_command`` (``parameters.command``), else
      ``tool``;
    - ``error`` with ``severity`` ``error``: remembered as the turn's error text (a warning is
      not);
    - ``result`` (terminal): ``status`` ``error`` is ``error`` (``detail``: ``error.message``,
      else the remembered error); then ``turn_end``;
    - ``tool_result`` and other lines: ``[]``.
    """

    backend = "gemini"
    format = "gemini"
    cli = "gemini --output-format stream-json"

    def detects(self, obj: Any) -> bool:
        """The first line of a Gemini CLI stream: ``{"type": "init", "session_id": ...}``."""
        return isinstance(obj, dict) and obj.get("type") == "init" and "session_id" in obj

    def parse_typed(self, kind: str, obj: dict[str, Any],
                    state: dict[str, Any]) -> list[SessionEvent]:
        """The events of one line (see the class docstring)."""
        ts = log_timestamp(obj.get("timestamp"))
        if kind == "init":
            return [SessionEvent(TURN_START, ts)]
        if kind == "message":
            content = obj.get("content")
            if obj.get("role") == "assistant" and isinstance(content, str) and content.strip():
                return [SessionEvent(TEXT, ts)]
            return []
        if kind == "tool_use":
            name = obj.get("tool_name")
            if not isinstance(name, str):
                raise ReaderFormatError("unknown_shape")
            call_id = str_or_empty(obj.get("tool_id"))
            if name in _SHELL_TOOLS:
                return [SessionEvent(SHELL_START, ts, call_id=call_id, tool=name,
                                     command=command_arg(obj.get("parameters")))]
            return [SessionEvent(TOOL, ts, call_id=call_id, tool=name)]
        if kind == "error":
            message = obj.get("message")
            if obj.get("severity") == "error" and isinstance(message, str):
                state["error"] = message
            return []
        if kind == "result":
            state["terminal"] = True
            events = []
            if obj.get("status") == "error":
                error = obj.get("error")
                message = error.get("message") if isinstance(error, dict) else None
                events.append(SessionEvent(ERROR, ts, detail=message if isinstance(message, str)
                                           else str_or_empty(state.get("error")) or "error"))
            return events + [SessionEvent(TURN_END, ts)]
        return []


register_stream_reader(GeminiStreamReader())
