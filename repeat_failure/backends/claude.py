"""Claude Code: its wrapper around each agent command, its helper shells and its session log.

Seen in the harness's real runs (``harness/evidence/claude.json``, Claude Code 2.1.332, and
``harness/evidence/versions/claude/2.1.197/``): the ``Bash`` tool runs ``bash -c`` of ::

    source <snapshot> 2>/dev/null || true && shopt -u extglob 2>/dev/null || true
      && eval <shell-quoted command> < /dev/null && pwd -P >| /tmp/claude-XXXX-cwd

(one line; 2.1.197). 2.1.332 writes ``\builtin shopt`` and adds, before the ``eval``, one
``{ \builtin unalias -- 'which'; \builtin unset -f -- 'which'; } >/dev/null 2>&1 || true``
block for ``which`` and one for ``unsetenv``. Each session also starts helper shells that are not agent commands (spec C8): an
``env`` probe and the script that writes the shell snapshot (``SNAPSHOT_FILE=...``). Those
normalize to the empty command, which never counts.

Its session log (same run): ``~/.claude/projects/<cwd-slug>/<session id>.jsonl`` (the
``.claude`` directory moves with ``CLAUDE_CONFIG_DIR``), one JSON object per line with a
``type``. ``user`` and ``assistant`` lines carry an Anthropic Messages ``message``; a ``Bash``
call is a ``tool_use`` block of an assistant line and ends with the ``tool_result`` block of a
later user line (``is_error``, text ``Exit code N`` first on a failure). An API error that ended the turn is an
assistant line with ``isApiErrorMessage: true`` (and ``error``), its text ``API Error: <status>
<message>``; an empty reply is not logged at all (Claude Code asks again with an ``isMeta`` user
line, and logs nothing if the reply is empty again). The CLI's exit record ends a turn still
open: ``cost-state`` in 2.1.332 (written once as it exits, also on SIGTERM), ``last-prompt`` in
2.1.197 (2.1.332 writes that one mid-turn too; :func:`_last_prompt_at_exit`). Other line types
(``queue-operation``, ``attachment``, ``system``, 2.1.332's ``api-request``, ...) carry nothing
we need; a type never seen is skipped and counted (:class:`~repeat_failure.backends.UnusedLine`).
:class:`ClaudeSessionReader` reads it.

``claude -p --output-format stream-json --verbose`` writes the same ``assistant`` and ``user``
lines to stdout, between a ``system``/``init`` line and a terminal ``result`` line
(``is_error``, ``api_error_status``, ``result``: the reply or the error's text);
:class:`ClaudeStreamReader` reads that transcript for ``repeat-failure verdict``. Qwen Code's
stream-json follows the same shape.
"""

from __future__ import annotations

import re
import shlex
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
    StreamReader,
    UnusedLine,
    command_arg,
    exit_notice,
    log_timestamp,
    open_calls,
    register_reader,
    register_stream_reader,
    register_stripper,
    remember,
    remember_call,
    require_object,
    str_or_empty,
    text_blocks,
)

#: The wrapper, anchored on what defines it rather than on every segment between: the head
#: that sources the shell snapshot, then any number of one-line ``... || true && `` setup
#: segments (2.1.197: ``shopt -u extglob 2>/dev/null || true``; 2.1.332 adds ``\builtin``
#: prefixes and ``{ \builtin unalias -- 'which'; \builtin unset -f -- 'which'; } >/dev/null
#: 2>&1 || true`` blocks, also for ``unsetenv``), then the tail that ``eval``s the quoted
#: command with stdin from /dev/null and writes ``pwd -P`` to a ``/tmp/claude-XXXX-cwd`` file.
#: Earlier releases (2.0.56, the oldest verified) write ``source <snapshot> && eval <quoted>
#: \< /dev/null && pwd -P >| <file>``: no ``2>/dev/null || true`` after the ``source``, no
#: setup segments, and the redirection passed to ``eval`` as the words ``<`` and ``/dev/null``
#: (``eval`` joins them into the command line it runs) instead of applied to ``eval``.
#: Matched by :func:`_unwrap` in one pass: a single regex with a repeated ``[^\n]*? \|\| true
#: && `` group backtracks exponentially on a record that starts like the wrapper and has no
#: tail (a cut record of a command with many ``|| true &&``: 20 of them took 7 s).
_HEAD = re.compile(r"source \S+(?: 2>/dev/null \|\| true)? && ")
_SETUP_END = " || true && "
_EVAL = "eval "
_TAILS = (" < /dev/null && pwd -P >| ", " \\< /dev/null && pwd -P >| ")
_CWD_FILE = re.compile(r"\S+")
#: The helper shells: the ``env`` probe, and the script that writes the shell snapshot, which
#: starts ``SNAPSHOT_FILE=<path>`` and a newline, or (2.1.0's real record, where the CLI's
#: substitution of the ripgrep path spliced script text in after the path) ``SNAPSHOT_FILE=<path>``
#: and text that appends to ``"$SNAPSHOT_FILE"``.
_HELPERS = (re.compile(r"\Aenv\Z"), re.compile(r"\ASNAPSHOT_FILE=\S+\n"),
            re.compile(r'\ASNAPSHOT_FILE=\S+(?=.*>> "\$SNAPSHOT_FILE")', re.S))


def _tail(command: str) -> tuple[int, int]:
    """Where the wrapper's tail starts in ``command`` and where its cwd file name starts: the
    last occurrence of either tail form (:data:`_TAILS`) followed by a file name and nothing
    else; ``(-1, -1)`` when there is none."""
    best = (-1, -1)
    for form in _TAILS:
        at = command.rfind(form)
        if at > best[0] and _CWD_FILE.fullmatch(command, at + len(form)):
            best = (at, at + len(form))
    return best


def _unwrap(command: str) -> str | None:
    """The quoted ``eval`` argument of a Claude Code wrapper, ``None`` when ``command`` is not
    one. The command starts at the first ``eval `` right after the head or after a
    `` || true && `` with no newline before it (a setup segment is one line and never holds
    an ``eval``); it ends at the last tail, which must be followed by a file name (no
    whitespace) and nothing else. Time linear in ``len(command)``. Source: the verified
    releases' real wrappers (``harness/evidence/claude.json``,
    ``harness/evidence/versions/claude/<version>/``)."""
    head = _HEAD.match(command)
    tail, _ = _tail(command)
    if head is None or tail < head.end():
        return None
    start, newline = head.end(), command.find("\n", head.end())
    end = min(tail, len(command) if newline < 0 else newline)
    at = command.find(_EVAL, start, end)
    while at >= 0:
        if at == start or command.endswith(_SETUP_END, start, at):
            return command[at + len(_EVAL):tail]
        at = command.find(_EVAL, at + 1, end)
    return None


def strip(command: str) -> str:
    """The agent's command inside Claude Code's wrapper; ``""`` for a helper shell; anything
    else unchanged. ``eval`` joins its arguments with spaces, so the quoted argument is split
    the way the shell would and joined back."""
    quoted = _unwrap(command)
    if quoted is None:
        return "" if any(h.match(command) for h in _HELPERS) else command
    try:
        return " ".join(shlex.split(quoted))
    except ValueError:  # unbalanced quotes (a cut record): keep what was recorded
        return quoted


#: Inference backends run through the Claude Code CLI (docs/backend-support.md "The table").
for _backend in ("claude", "vllm", "llm-d", "litellm", "watsonx"):
    register_stripper(_backend, strip)


# -- session-log reader ------------------------------------------------------------------------

#: Line types Claude Code 2.1.197 writes to a transcript (the type table of its transcript
#: writer, in the CLI binary) other than ``user`` and ``assistant``: nothing we need.
_QUIET_TYPES = frozenset({
    "attachment", "system", "progress", "summary", "custom-title", "ended-by-model", "ai-title",
    "tag", "relocated", "agent-name", "agent-color", "agent-setting", "pr-link",
    "frame-link", "bridge-session", "file-history-snapshot", "attribution-snapshot",
    "speculation-accept", "mode", "permission-mode", "isolation-latch", "worktree-state",
    "queue-operation", "marble-origami-commit", "marble-origami-snapshot",
    "marble-origami-reset", "content-replacement", "fork-context-ref"})
#: Added by 2.1.332 (its real session files): request bookkeeping and a tool list, nothing we
#: need. ``cost-state`` (2.1.332) is read: the CLI writes it once, as it exits.
_QUIET_TYPES |= {"atis-latch", "api-request-shape", "api-request-blob", "api-request",
                 "tools-used"}
#: The newest release whose ``last-prompt`` is written only as the CLI exits
#: (:func:`_last_prompt_at_exit`): 2.1.267, found by bisecting the releases (2.1.268 writes it
#: mid-turn; the oldest that writes it at all is 2.1.69).
LAST_PROMPT_AT_EXIT_UNTIL = (2, 1, 267)
_SHELL_TOOLS = frozenset({"Bash"})
#: A failed Bash result's text starts ``Exit code N`` (2.1.197: real file and the tool's code).
_EXIT_PREFIX = "Exit code "
#: User text that is not a prompt: a wrapper tag (slash-command echo, local command output,
#: caveats) or an interrupt notice; the same rule Claude Code 2.1.197 uses to find a
#: session's first prompt.
_TAGGED = re.compile(r"\A\s*<[a-z][\w-]*[\s>]")
_INTERRUPTED = "[Request interrupted by user"
#: Stop reasons after which the model goes on in the same turn.
_GOES_ON = frozenset({"tool_use", "pause_turn"})
#: The error of a turn the CLI left with a tool call unanswered (its exit record came first).
EXITED_MID_TURN = "the CLI exited mid-turn: a tool call never got its result"
#: The prompt of the warmup subagents Claude Code 2.0.x-2.1.x starts with each session (their
#: own ``agent-<id>.jsonl`` files, every line ``isSidechain``; real files of 2.0.56 to 2.1.0): the
#: CLI runs none of the tool calls a warmup reply asks for and answers each with the error
#: result ``Warmup`` (2.1.0's real file), so those calls are no shell activity.
_WARMUP = "Warmup"
#: Calls started and not yet finished that a file's state remembers (oldest forgotten first).
MAX_OPEN_CALLS = 256


def _result_text(content: Any) -> str:
    """A ``tool_result``'s text: ``""`` when it has none, a string, or its text blocks joined;
    raises ``unknown_shape``."""
    return "" if content is None else text_blocks(content)


def _exit_of(text: str) -> int | None:
    """``N`` from a failed result's leading ``Exit code N``; ``None`` without that line; raises
    ``bad_exit`` when ``N`` is not an integer."""
    return exit_notice(text.split("\n", 1)[0], _EXIT_PREFIX)


class ClaudeSessionReader(JsonLinesReader):
    """Claude Code's session log (Claude Code 2.1.332 and 2.1.197: their real files; 2.1.197's
    CLI binary for the line types, the Bash result text and the subagent files the run did not
    write).

    :meth:`parse_line` takes one decoded line and returns, in order:

    - ``user`` with a prompt (``message.content`` a string, or blocks without a
      ``tool_result``): ``turn_start``, ``turn_id`` = ``promptId`` (releases before 2.1.73
      write none: the line's ``uuid``). Not for ``isMeta`` /
      ``isCompactSummary`` lines, subagent (``isSidechain``) lines or text that starts with a
      tag (``<command-name>``, ``<local-command-stdout>``, ...); text starting
      ``[Request interrupted by user`` is ``turn_end`` instead (nothing when the exit record
      already ended the turn: 2.1.212 on may log a SIGTERM so after it);
    - ``user`` with ``tool_result`` blocks: for each result of a ``Bash`` call, ``shell_end``
      with ``command`` from the call (this file's state), ``failed`` = ``is_error`` and ``exit``
      from the leading ``Exit code N`` (written only on a failure; a success, including a
      non-zero exit Claude Code does not count as an error, such as grep's 1, leaves ``exit``
      ``None``). A result whose call this state never saw (a sidecar restart) is taken as a
      shell result when it reads like one (``is_error`` with ``Exit code N``, or a
      ``toolUseResult`` with Bash's ``stdout`` and ``interrupted``): ``command`` is ``""``;
    - ``assistant``: ``text`` per non-empty text block, ``shell_start`` (``call_id``,
      ``command`` = ``input.command``) per ``Bash`` ``tool_use``, ``tool`` per other
      ``tool_use``, then ``turn_end`` when the line has no ``tool_use`` and its ``stop_reason``
      ends the turn (anything but ``tool_use`` / ``pause_turn``; ``null`` is not an end, as
      Claude Code writes each block of a reply as its own line and may write a line before the
      reply's stop reason is known). Lines of one reply that repeat the end give one
      ``turn_end``. Subagent lines give no turn events;
    - ``assistant`` with ``isApiErrorMessage: true``: ``error`` (``detail``: its text), then
      ``turn_end``: the API error ended the turn (Claude Code writes it once its retries are
      spent);
    - the CLI's exit record, ``cost-state`` (2.1.332), or ``last-prompt`` from a writer that
      writes it only as it exits (2.1.197; :func:`_last_prompt_at_exit`), also on SIGTERM:
      ``turn_end`` when a turn is still open (one whose reply was empty has no other end),
      preceded by ``error`` (:data:`EXITED_MID_TURN`) when a tool call of the turn never got
      its result, else ``[]``;
    - every other line type Claude Code is known to write: ``[]``; a type not known raises
      :class:`~repeat_failure.backends.UnusedLine` (skipped, counted apart, not an error).

    ``ts`` is the line's ``timestamp``. Errors (:class:`ReaderFormatError` ``reason``):
    ``not_object``, ``no_type``, ``unknown_shape`` (a ``user`` /
    ``assistant`` line whose fields we read have the wrong type), ``bad_exit`` (``Exit code``
    followed by something other than an integer), ``bad_ts``.
    """

    backend: ClassVar[str] = "claude"
    shell_tools: ClassVar[frozenset[str]] = _SHELL_TOOLS
    #: Tools that write or edit files (Claude Code 2.1.197's file tools).
    edit_tools: ClassVar[frozenset[str]] = frozenset({"Write", "Edit", "MultiEdit",
                                                      "NotebookEdit"})
    globs: ClassVar[tuple[str, ...]] = ("$CLAUDE_CONFIG_DIR/projects/*/*.jsonl",
                                        "$CLAUDE_CONFIG_DIR/projects/*/*/subagents/*.jsonl")
    env_defaults: ClassVar[dict[str, str]] = {"CLAUDE_CONFIG_DIR": ".claude"}
    signal: ClassVar[str] = ("~/.claude/projects/*/*.jsonl: an assistant tool_use named Bash "
                             "starts a call, its tool_result (is_error, 'Exit code N') ends it")

    def new_file_state(self) -> dict[str, Any]:
        """``{"calls": {tool_use id: (tool name, command or None)}, "turn_id": str,
        "ended": message id, "open": bool, "unanswered": {tool_use id: None}}``: calls started
        and not yet finished (``None`` for a tool that is not a shell), the current prompt's id,
        the last reply that ended a turn, whether a turn is open and its tool calls with no
        result yet. Added as lines are read: ``"version"`` (the writer's release),
        ``"exited"`` (the exit record ended the current turn) and ``"warmup"`` (a warmup
        subagent's file)."""
        return {"calls": {}, "turn_id": "", "ended": None, "open": False, "unanswered": {}}

    def never_runs(self, obj: Any, state: dict[str, Any]) -> bool:
        """A warmup subagent's line (Claude Code 2.0.x-2.1.x): the calls it names are never run
        (:data:`_WARMUP`)."""
        return (isinstance(obj, dict) and obj.get("isSidechain") is True
                and state.get("warmup") is True)

    def parse_typed(self, kind: str, obj: dict[str, Any],
                    state: dict[str, Any]) -> list[SessionEvent]:
        """The events of one line of type ``kind`` (see the class docstring)."""
        if kind in ("user", "assistant"):
            message = require_object(obj.get("message"))
            if not isinstance(state, dict):
                state = self.new_file_state()
            if kind == "user":
                return self._user(obj, message, state)
            return self._assistant(obj, message, state)
        if kind == "cost-state":
            return self._exited(state)
        if kind == "last-prompt":
            return self._exited(state) if _last_prompt_at_exit(state) else []
        if kind in _QUIET_TYPES:
            return []
        raise UnusedLine()

    def _exited(self, state: dict[str, Any]) -> list[SessionEvent]:
        """The CLI's exit record: ends a turn still open (``[]`` when none is), with ``error``
        :data:`EXITED_MID_TURN` first when a tool call of the turn never got its result."""
        if not isinstance(state, dict) or state.get("open") is not True:
            return []
        state["open"] = False
        state["exited"] = True
        turn_id = str_or_empty(state.get("turn_id"))
        end = SessionEvent(TURN_END, None, turn_id=turn_id)
        if _unanswered(state):
            # The CLI exited with a tool call of the turn still unanswered (killed, or
            # stopped mid-turn): the turn did not finish.
            return [SessionEvent(ERROR, None, turn_id=turn_id, detail=EXITED_MID_TURN), end]
        return [end]

    def _user(self, line: dict[str, Any], message: dict[str, Any],
              state: dict[str, Any]) -> list[SessionEvent]:
        ts = log_timestamp(line.get("timestamp"), epoch_ms=True)
        _note_version(line, state)
        content = message.get("content")
        if isinstance(content, list):
            if not all(isinstance(block, dict) for block in content):
                raise ReaderFormatError("unknown_shape")
            results = [block for block in content if block.get("type") == "tool_result"]
            if results:
                return self._results(line, results, ts, state)
            text = next((b.get("text") for b in content if b.get("type") == "text"), "")
        elif isinstance(content, str):
            text = content
        else:
            raise ReaderFormatError("unknown_shape")
        if not isinstance(text, str):
            raise ReaderFormatError("unknown_shape")
        if line.get("isSidechain") is True and line.get("parentUuid") is None \
                and text == _WARMUP:
            state["warmup"] = True
        if line.get("isSidechain") is True or line.get("isMeta") is True \
                or line.get("isCompactSummary") is True:
            return []
        if text.startswith(_INTERRUPTED):
            if state.get("exited") is True:
                # 2.1.212 on may log a SIGTERM as an interrupt after their exit record (real
                # killed run of 2.1.218): the exit record has already ended the turn.
                return []
            state["open"] = False
            return [SessionEvent(TURN_END, ts, turn_id=str_or_empty(state.get("turn_id")))]
        if _TAGGED.match(text):
            return []
        # Before 2.1.73 prompt lines have no promptId (real files of 2.0.56): the line's uuid.
        turn_id = str_or_empty(line.get("promptId")) or str_or_empty(line.get("uuid"))
        state["turn_id"] = turn_id
        state["open"] = True
        state["exited"] = False
        state["unanswered"] = {}
        return [SessionEvent(TURN_START, ts, turn_id=turn_id)]

    def _results(self, line: dict[str, Any], results: list[dict[str, Any]], ts: float | None,
                 state: dict[str, Any]) -> list[SessionEvent]:
        if line.get("isSidechain") is True and state.get("warmup") is True:
            return []  # a warmup subagent's tool calls are never run
        calls = open_calls(state)
        turn_id = str_or_empty(line.get("promptId")) or str_or_empty(state.get("turn_id"))
        events = []
        for result in results:
            call_id, is_error = result.get("tool_use_id"), result.get("is_error")
            is_error = False if is_error is None else is_error  # absent on a success
            if not isinstance(call_id, str) or not isinstance(is_error, bool):
                raise ReaderFormatError("unknown_shape")
            _unanswered(state).pop(call_id, None)
            text = _result_text(result.get("content"))
            exit_code = _exit_of(text) if is_error else None
            if not is_error and _in_background(line) and calls.get(call_id, ("", None))[1]:
                # `run_in_background`: the result only says the command was started; it goes
                # on running (and the hook records it when its shell exits), so the call stays
                # open until the turn ends. Source: Claude Code 2.1.197's binary, whose Bash
                # result then reads "Command running in background with ID: <id>" and carries
                # toolUseResult.backgroundTaskId.
                continue
            known = calls.pop(call_id, None)
            if known is not None:
                tool, command = known
                if command is None:
                    continue  # not a shell call: its ``tool`` event came with the call
            elif exit_code is not None or (len(results) == 1 and _bash_output(line)):
                tool, command = "Bash", ""
            else:
                continue
            failed = is_error if exit_code is None else exit_code != 0
            events.append(SessionEvent(SHELL_END, ts, call_id=call_id, command=command,
                                       exit=exit_code, failed=failed, tool=tool,
                                       turn_id=turn_id, output=text))
        return events

    def _assistant(self, line: dict[str, Any], message: dict[str, Any],
                   state: dict[str, Any]) -> list[SessionEvent]:
        ts = log_timestamp(line.get("timestamp"), epoch_ms=True)
        _note_version(line, state)
        content, stop = message.get("content"), message.get("stop_reason")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list) or not (stop is None or isinstance(stop, str)):
            raise ReaderFormatError("unknown_shape")
        sidechain = line.get("isSidechain") is True
        if sidechain and state.get("warmup") is True:
            return []  # a warmup subagent's reply: nothing it asks for is run
        turn_id = "" if sidechain else str_or_empty(state.get("turn_id"))
        if line.get("isApiErrorMessage") is True and not sidechain:
            state["open"] = False
            return [SessionEvent(ERROR, ts, turn_id=turn_id, detail=text_blocks(content)),
                    SessionEvent(TURN_END, ts, turn_id=turn_id)]
        events: list[SessionEvent] = []
        calls = 0
        for block in content:
            if not isinstance(block, dict):
                raise ReaderFormatError("unknown_shape")
            kind = block.get("type")
            if kind == "text":
                if not isinstance(block.get("text"), str):
                    raise ReaderFormatError("unknown_shape")
                if block["text"].strip():
                    events.append(SessionEvent(TEXT, ts, turn_id=turn_id))
            elif kind == "tool_use":
                call_id, name = block.get("id"), block.get("name")
                if not isinstance(call_id, str) or not isinstance(name, str):
                    raise ReaderFormatError("unknown_shape")
                calls += 1
                if not sidechain:
                    remember(_unanswered(state), call_id, None, MAX_OPEN_CALLS)
                if name in _SHELL_TOOLS:
                    command = command_arg(block.get("input"))
                    remember_call(state, call_id, (name, command), MAX_OPEN_CALLS)
                    events.append(SessionEvent(SHELL_START, ts, call_id=call_id,
                                               command=command, tool=name, turn_id=turn_id))
                else:
                    remember_call(state, call_id, (name, None), MAX_OPEN_CALLS)
                    events.append(SessionEvent(TOOL, ts, call_id=call_id, tool=name,
                                               turn_id=turn_id))
            # thinking, server-tool and other blocks carry nothing we need
        reply = message.get("id")
        if calls == 0 and not sidechain and stop is not None and stop not in _GOES_ON \
                and (reply is None or reply != state.get("ended")):
            state["ended"] = reply
            state["open"] = False
            events.append(SessionEvent(TURN_END, ts, turn_id=turn_id))
        return events


def _note_version(line: dict[str, Any], state: dict[str, Any]) -> None:
    """Keep the writer's release (a ``user`` line's ``version``, e.g. ``"2.1.332"``) in
    ``state["version"]``; a line without one leaves what is known."""
    version = line.get("version")
    if isinstance(version, str) and version:
        state["version"] = version


def _last_prompt_at_exit(state: Any) -> bool:
    """Whether this file's ``last-prompt`` lines are the CLI's exit record.

    Claude Code 2.1.69 to 2.1.267 write ``last-prompt`` once, as they exit (also on SIGTERM):
    the only end an empty reply or a killed turn has. 2.1.268 on write it whenever the
    conversation's leaf moves (after the prompt, after each tool call, while the command still
    runs), and later releases (2.1.332) write ``cost-state`` once as they exit instead; taking
    such a ``last-prompt`` for the end made a turn that went on well ``agent_no_output``. So
    ``last-prompt`` ends a turn only for a writer at most :data:`LAST_PROMPT_AT_EXIT_UNTIL` (or
    one whose lines name no release); a later writer that writes no ``cost-state`` leaves such
    turns unclassified (no verdict rather than a wrong one). Sources: the harness's real
    sessions of the verified releases (``harness/evidence/versions/claude/<version>/``,
    ``harness/evidence/claude/``) and the bisection of the releases between (issue 26).
    """
    if not isinstance(state, dict):
        return True
    version = state.get("version")
    if not isinstance(version, str):
        return True
    parts = version.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return False
    return tuple(int(p) for p in parts) <= LAST_PROMPT_AT_EXIT_UNTIL


def _unanswered(state: dict[str, Any]) -> dict[str, Any]:
    """``state["unanswered"]``: the open turn's tool calls (main chain) with no result yet;
    a new ``{}`` when missing or damaged."""
    found = state.get("unanswered")
    if not isinstance(found, dict):
        found = state["unanswered"] = {}
    return found


def _in_background(line: dict[str, Any]) -> bool:
    """True when a tool result line says its Bash command went on in the background
    (``toolUseResult.backgroundTaskId``)."""
    result = line.get("toolUseResult")
    return isinstance(result, dict) and isinstance(result.get("backgroundTaskId"), str)


def _bash_output(line: dict[str, Any]) -> bool:
    """Whether the line's ``toolUseResult`` has the shape of Bash's output (2.1.197: ``stdout``,
    ``stderr`` and ``interrupted`` are required fields of that tool's output)."""
    out = line.get("toolUseResult")
    return isinstance(out, dict) and {"stdout", "stderr", "interrupted"} <= out.keys()


#: Inference backends run through the Claude Code CLI, so they read its session log too.
register_reader(ClaudeSessionReader(), "vllm", "llm-d", "litellm", "watsonx")


class ClaudeStreamReader(ClaudeSessionReader, StreamReader):
    """``claude -p --output-format stream-json --verbose`` (Claude Code 2.1.197, the harness's
    ``verdict`` captures; Qwen Code's stream-json has the same shape), for
    ``repeat-failure verdict``:

    - ``system``/``init`` (the first line): ``turn_start``; other ``system`` lines: ``[]``;
    - ``assistant`` and ``user`` lines: as in the session log (:class:`ClaudeSessionReader`);
      an assistant line with a top-level ``error`` (Claude Code's ``<synthetic>`` reply for an
      API error) gives ``[]``: the terminal ``result`` says whether the run ended on it, and
      repeats its text; a user line with ``isSynthetic`` (Claude Code asking again after an
      empty reply) is not a prompt: ``[]``;
    - ``result`` (the terminal line; sets ``state["terminal"]``): ``error`` when ``is_error`` is
      true or its ``subtype`` starts with ``error`` (``error_max_turns``,
      ``error_during_execution``), ``detail`` its ``result`` text, else its
      ``error.message`` (Qwen Code), else the subtype; then ``turn_end``;
    - ``stream_event`` (``--include-partial-messages``) and other types: ``[]``.
    """

    format: ClassVar[str] = "claude"
    cli: ClassVar[str] = "claude -p --output-format stream-json --verbose"

    def detects(self, obj: Any) -> bool:
        """The first line of a Claude Code stream: ``{"type": "system", "subtype": "init"}``."""
        return isinstance(obj, dict) and obj.get("type") == "system" \
            and obj.get("subtype") == "init"

    def parse_typed(self, kind: str, obj: dict[str, Any],
                    state: dict[str, Any]) -> list[SessionEvent]:
        """The events of one stream line (see the class docstring)."""
        if kind == "system":
            return [SessionEvent(TURN_START)] if obj.get("subtype") == "init" else []
        if kind == "result":
            state["terminal"] = True
            subtype = str_or_empty(obj.get("subtype"))
            events = []
            if obj.get("is_error") is True or subtype.startswith("error"):
                # Claude Code puts the error's text in `result`; Qwen Code 0.24.4 in
                # `error.message` (its subtype error_during_execution).
                result, error = obj.get("result"), obj.get("error")
                if not (isinstance(result, str) and result) and isinstance(error, dict):
                    result = error.get("message")
                events.append(SessionEvent(ERROR, detail=result if isinstance(result, str)
                                           and result else subtype or "error"))
            return events + [SessionEvent(TURN_END)]
        if kind == "assistant" and isinstance(obj.get("error"), str):
            # Claude Code's <synthetic> reply for an API error: the result line that follows
            # says whether the run ended on it (is_error); a killed run's transcript ends here,
            # which is an incomplete transcript either way.
            return []
        if kind == "user" and obj.get("isSynthetic") is True:
            return []
        if kind in ("user", "assistant"):
            return super().parse_typed(kind, obj, state)
        return []


register_stream_reader(ClaudeStreamReader())
