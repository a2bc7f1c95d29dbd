"""Session files whose shell calls the reader cannot read: never silent (issue 26, C12).

A CLI release that changes how its session log writes a shell call does not make the reader
fail loudly: Codex 0.98-0.114 end a shell call with a ``function_call_output`` line, which the
reader written for Codex 0.171.0 skipped, so their rollouts read as turns with shell calls
that start and never end, and no command at all. Nothing counted an error; the C12 safeguard,
the session-log route and ``repeat-failure replay`` were blind there without a word.
:class:`ShellRecognition` watches one session file for that and says so once.

A file is **unrecognised** when no shell call of it has been recognised (no ``shell_end``) and
it shows the shell tool being called all the same, at a turn's end (``turn_end``; for
``repeat-failure replay``, also at the end of the file: :meth:`ShellRecognition.finish`):

- ``unread_call``: a line the reader rejected (a :class:`~repeat_failure.backends.ReaderFormatError`
  or an unknown line type) names a call of one of the reader's
  :attr:`~repeat_failure.backends.SessionLogReader.shell_tools` (:func:`names_shell_call`), or
  the reader gave a ``tool`` event named as a shell tool (a call it could not read as one), or
  a line it took but gave no shell event for names one while the file has no shell call started
  either (a reader that skips a block type it does not know; once a shell call started, such a
  line is the CLI's own second account of a call, like Copilot CLI 1.0.102's
  ``assistant.message`` ``toolRequests`` before its ``tool.execution_start``);
- ``no_end``: :data:`MIN_OPEN` or more shell calls started and none ended. One is not enough:
  a CLI killed during its first call leaves exactly that (the harness's ``verdict/killed``
  captures of Claude Code 2.1.332 end the turn with the call open).

Without a turn's end the file is flagged once :data:`OPEN_LIMIT` such calls (unread or never
ended) add up: a format whose turn lines changed too ends no turn. Once a shell call of the
file is recognised (a ``shell_end`` with its command, or after a recognised ``shell_start``:
Claude Code's reader gives a result whose call it never saw a ``shell_end`` with no command,
and with its ``tool_use`` blocks unread that is all a file would give), it is never flagged.
The tracker keeps counts only, never text.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repeat_failure.backends import SHELL_END, SHELL_START, TOOL, TURN_END, SessionEvent

UNREAD_CALL = "unread_call"
NO_END = "no_end"
#: Why a file is unrecognised (the ``reason`` label of
#: ``hive_repeat_failure_session_files_unrecognized_total``).
REASONS = (UNREAD_CALL, NO_END)
#: Shell calls started and never ended, with none ended in the file, that flag it at a turn's end.
MIN_OPEN = 2
#: Calls unread or never ended that flag a file without a turn's end.
OPEN_LIMIT = 8
#: A line is searched this many levels down, the line itself the first (a call is an object 1
#: to 3 levels below the line in every CLI's log, e.g. Claude Code's ``message.content[i]``;
#: the tool schemas some logs carry go much deeper) and over at most this many objects and
#: lists (lines run to 8 MiB). In a Claude Code 2.1.332 session without shell calls, whose
#: tool-list lines are all searched, that is 10 % of the tail's CPU time.
MAX_DEPTH = 6
MAX_NODES = 20_000
#: Keys of an object that is a tool *call* (its arguments, its id), as each CLI writes one:
#: Claude Code ``{"type": "tool_use", "name", "input", "id"}``, Codex ``{"name", "arguments",
#: "call_id"}``, Gemini CLI ``{"name", "args", "id"}``, Copilot CLI ``{"name", "arguments",
#: "toolCallId"}``, pi ``{"name", "arguments", "id"}``. A tool *definition* (the tool lists
#: Claude Code 2.1.332 logs in ``api-request-shape`` and ``attachment`` lines, pi's
#: ``toolsAdded``) has a name and a schema, none of these.
CALL_KEYS = frozenset({"input", "arguments", "args", "argv", "command", "cmd", "id", "call_id",
                       "callId", "callID", "toolCallId", "tool_call_id", "tool_use_id"})


def names_shell_call(obj: Any, names: frozenset[str]) -> bool:
    """True when the decoded line ``obj`` holds an object that names one of ``names`` (a string
    value equal to it) beside a key of :data:`CALL_KEYS`: a call of the shell tool. Walks at
    most :data:`MAX_DEPTH` levels and :data:`MAX_NODES` values; never raises."""
    if not names:
        return False
    level: list[Any] = [obj]
    seen = 0
    for _ in range(MAX_DEPTH):
        below: list[Any] = []
        for value in level:
            if type(value) is dict:
                children = value.values()
                if not CALL_KEYS.isdisjoint(value) and not names.isdisjoint(
                        v for v in children if type(v) is str):
                    return True
            else:
                children = value
            below += [v for v in children if type(v) is dict or type(v) is list]
        seen += len(below)
        if not below or seen > MAX_NODES:
            return False
        level = below
    return False


@dataclass(frozen=True)
class Unrecognized:
    """A session file found unrecognised (:mod:`repeat_failure.sessions.unrecognized`):
    its ``source`` (the events' key), ``path``, ``reason`` and the flagging event's ``ts``."""

    source: str
    path: Path
    reason: str
    ts: float


@dataclass
class ShellRecognition:
    """One session file's shell calls as far as the reader could read them: ``open`` calls
    started with none ended, ``unread`` calls it could not read, ``quiet`` lines it took that
    name a shell call without giving one, ``ended`` once a shell call ended (the file is
    read), ``reason`` once flagged (:data:`REASONS`; ``""`` before).
    JSON-serialisable through :meth:`to_dict` (the sidecar's state file keeps it per file)."""

    open: int = 0
    unread: int = 0
    quiet: int = 0  # lines taken without a shell event that name a shell call
    ended: bool = False
    reason: str = ""

    def _verdict(self, at_end: bool) -> str:
        if self.ended or self.reason:
            return ""
        unread = self.unread + (self.quiet if not self.open else 0)
        if (at_end and (unread or self.open >= MIN_OPEN)) or unread + self.open >= OPEN_LIMIT:
            self.reason = UNREAD_CALL if unread else NO_END
        return self.reason

    def on_line(self, raw: bytes, obj: Any, events: list[SessionEvent] | None,
                names: frozenset[str]) -> tuple[str, float | None] | None:
        """Take one decoded line (``raw``: its bytes, ``obj``: decoded) and what the reader
        made of it: its events (stamped), or None when it rejected the line. ``(reason, ts)``
        when this flags the file (``ts`` None for a rejected line: the caller's clock), else
        None. A line is searched (:func:`names_shell_call`) only when its bytes hold a shell
        tool's name as a JSON string (``"bash"``: prose that mentions bash is not searched),
        and a line taken only while the file has no shell call yet."""
        if self.ended or self.reason:
            return None
        shell = events is not None and any(e.kind in (SHELL_START, SHELL_END) for e in events)
        if (not shell and (events is None or not self.open)
                and any(b'"%s"' % name.encode() in raw for name in names)
                and names_shell_call(obj, names)):
            if events is None:
                self.unread += 1
            else:
                self.quiet += 1
            if events is None:
                return (self.reason, None) if self._verdict(False) else None
        return self.on_events(events or [], names)

    def on_events(self, events: Iterable[SessionEvent],
                  names: frozenset[str]) -> tuple[str, float | None] | None:
        """Take one line's (or poll's) events in order; ``(reason, ts)`` when they flag the
        file (``ts``: the flagging event's), else None. ``names``: the reader's shell tools."""
        for event in events:
            if event.kind == SHELL_END and (event.command or self.open):
                self.ended = True  # a result with no command and no start is no call read
            elif event.kind == SHELL_START:
                self.open += 1
            elif event.kind == TOOL and event.tool in names:
                self.unread += 1
            elif event.kind != TURN_END:
                continue
            if self._verdict(event.kind == TURN_END):
                return self.reason, event.ts
        return None

    def finish(self) -> str:
        """The file has ended (``repeat-failure replay``): its reason if it is unrecognised,
        ``""`` otherwise."""
        return self._verdict(True) or self.reason

    def to_dict(self) -> dict[str, Any]:
        """The counts, for the state file."""
        return {"open": self.open, "unread": self.unread, "quiet": self.quiet,
                "ended": self.ended, "reason": self.reason}

    @classmethod
    def from_dict(cls, data: Any) -> ShellRecognition:
        """:meth:`to_dict`'s output back; anything malformed gives a fresh tracker."""
        out = cls()
        if isinstance(data, dict):
            for name in ("open", "unread", "quiet"):
                value = data.get(name)
                if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                    setattr(out, name, value)
            out.ended = data.get("ended") is True
            out.reason = data.get("reason") if data.get("reason") in REASONS else ""  # type: ignore[assignment]
        return out
