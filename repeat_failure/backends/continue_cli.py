"""Continue CLI (``cn``): the session-log reader of its session files.

Continue CLI runs its ``Bash`` tool's commands as ``$SHELL -l -c <cmd>``, no wrapper
(``harness/evidence/continue.json``), so the neutral route records them as they are and this
module registers no stripper. (The module is not named ``continue``: that is a Python keyword.)

Its sessions (seen in the harness's real runs of Continue CLI 1.5.47,
``harness/evidence/continue/``) are ``~/.continue/sessions/<session id>.json`` (the directory
moves with ``CONTINUE_GLOBAL_DIR``), one JSON document per session that the CLI writes whole,
plus ``sessions.json``, a list of the sessions (id, title, date, message count)::

    {"sessionId", "title", "workspaceDirectory", "usage": {...},
     "history": [{"message": {"role": "user" | "assistant", "content": <text or parts>,
                              "toolCalls"?: [{"id", "function": {"name", "arguments"}}]},
                  "contextItems": [...],
                  "toolCallStates"?: [{"toolCallId", "toolCall", "status", "parsedArgs",
                                       "output": [{"content": <text>, ...}]}]}]}

The history has no times and no message ids. A finished call's ``status`` is ``done`` or
``errored``; a failing ``Bash`` command's output text starts ``Error executing tool Bash: Error
(exit code N): `` followed by the command's output. 1.5.47 did not write the file while a
command ran (the harness's ``running`` and ``midturn`` snapshots found no session file 1.5 s
into the command), and wrote nothing about an empty reply but the prompt, nor any file for a
provider error or a killed run.
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from repeat_failure.backends import (
    SHELL_END,
    SHELL_START,
    TEXT,
    TOOL,
    TURN_END,
    TURN_START,
    ReaderFormatError,
    SessionEvent,
    SessionLogReader,
    register_reader,
    remember,
    require_object,
    str_or_empty,
)

_SHELL_TOOLS = frozenset({"Bash"})
_MAX_IDS = 2048
#: Statuses of a call that has finished (1.5.47's tool-call states; ``canceled`` from its
#: status list, not seen in a capture).
_FINISHED = frozenset({"done", "errored", "canceled"})
#: The text of a failing ``Bash`` call's output, 1.5.47.
_FAILED = re.compile(r"\AError executing tool \w+: Error \(exit code (-?\d{1,10})\): ?")


def _text(content: Any) -> str:
    """A message's text: a string as it is, or the ``text`` of its text parts joined; ``""``
    for anything else."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content
                       if isinstance(p, dict) and p.get("type") == "text"
                       and isinstance(p.get("text"), str))
    return ""


def _command(state: dict[str, Any]) -> str:
    """The ``command`` of a tool-call state: ``parsedArgs.command``, else the JSON
    ``toolCall.function.arguments``' ``command``; ``""`` when neither has one."""
    args = state.get("parsedArgs")
    if isinstance(args, dict) and isinstance(args.get("command"), str):
        return args["command"]
    call = state.get("toolCall")
    function = call.get("function") if isinstance(call, dict) else None
    raw = function.get("arguments") if isinstance(function, dict) else None
    try:
        parsed = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return ""
    command = parsed.get("command") if isinstance(parsed, dict) else None
    return command if isinstance(command, str) else ""


def _name(call_state: dict[str, Any]) -> str:
    call = call_state.get("toolCall")
    function = call.get("function") if isinstance(call, dict) else None
    return str_or_empty(function.get("name")) if isinstance(function, dict) else ""


def call_result(status: str, output: Any) -> tuple[int | None, bool, str | None]:
    """``(exit, failed, output)`` of a finished ``Bash`` call (Continue CLI 1.5.47): the text
    of its ``output`` items joined; ``Error executing tool Bash: Error (exit code N): `` first →
    ``N`` (failed unless 0) and the rest is the command's output; else ``done`` → exit 0 with
    the text; else (``errored`` without an exit, ``canceled``) → no number, failed. Raises
    ``unknown_shape`` when ``output`` is neither a list nor absent."""
    if output is None:
        output = []
    if not isinstance(output, list):
        raise ReaderFormatError("unknown_shape")
    text = "".join(item["content"] for item in output
                   if isinstance(item, dict) and isinstance(item.get("content"), str))
    found = _FAILED.match(text)
    if found:
        code = int(found.group(1))
        return code, code != 0, text[found.end():]
    if status == "done":
        return 0, False, text
    return None, True, text or None


class ContinueReader(SessionLogReader):
    """Continue CLI's session documents → :class:`~repeat_failure.backends.SessionEvent` values,
    each version of a document giving only what the earlier ones did not.

    Rules, each seen in Continue CLI 1.5.47's real files (the shell run, the ``ok`` and
    ``empty`` verdict runs):

    - ``sessions.json`` (a list; the glob leaves it out, but a path given to ``replay`` may name
      it) gives ``[]``; a session document must be an object with a ``history`` list;
    - a ``user`` history item → ``turn_start`` (``turn_id`` = ``<sessionId>#<index>``: the
      history has no ids, so an item is known by its place);
    - an ``assistant`` item: ``text`` when its ``content`` has text; each ``toolCallStates``
      entry (else each ``message.toolCalls`` entry) → ``shell_start`` for ``Bash``
      (``command`` = ``parsedArgs.command``) or ``tool``; and, once its ``status`` is
      finished (``done``, ``errored``, ``canceled``), ``shell_end`` (:func:`call_result`);
      an item with text and no tool call → ``turn_end``;
    - other items give ``[]``.

    The history has no times: every event's ``ts`` is ``None`` (the tail stamps the time it
    read the file). Each item and call is given once. Raises :class:`ReaderFormatError`
    ``unknown_shape`` for a document it cannot read.
    """

    backend: ClassVar[str] = "continue"
    kind: ClassVar[str] = "json"
    #: Session files are named by their UUID (``*-*.json``), which leaves ``sessions.json`` out.
    globs: ClassVar[tuple[str, ...]] = ("$CONTINUE_GLOBAL_DIR/sessions/*-*.json",)
    env_defaults: ClassVar[dict[str, str]] = {"CONTINUE_GLOBAL_DIR": ".continue"}
    route_records: ClassVar[bool] = False
    signal: ClassVar[str] = (
        "~/.continue/sessions/*-*.json: a history item's Bash toolCallStates entry starts a call "
        "and ends it once done or errored ('Error (exit code N)' in its output); written when "
        "the turn's steps finish, not while a command runs")
    #: Continue CLI 1.5.47's file-writing tools.
    edit_tools: ClassVar[frozenset[str]] = frozenset({"Edit", "Write"})

    def new_file_state(self) -> dict[str, Any]:
        """``{"turn": <turn id>, "open": bool, "done": {key: 1}}``: what was given already
        (keys ``item:<index>``, ``start:<call id>``, ``end:<call id>``; JSON-serialisable, at
        most 2048, the oldest dropped first)."""
        return {"turn": "", "open": False, "done": {}}

    def parse_document(self, doc: Any, state: dict[str, Any]) -> list[SessionEvent]:
        """The events of this version of the document not given before (see the class
        docstring)."""
        try:
            if isinstance(doc, list):
                return []  # sessions.json: the list of sessions
            return self._document(require_object(doc), state)
        except ReaderFormatError:
            raise
        except Exception:  # noqa: BLE001 - a shape no check foresaw: still only a reader error
            raise ReaderFormatError("unknown_shape") from None

    @staticmethod
    def _once(state: dict[str, Any], key: str) -> bool:
        if key in state["done"]:
            return False
        remember(state["done"], key, 1, _MAX_IDS)
        return True

    def _document(self, doc: dict[str, Any], state: dict[str, Any]) -> list[SessionEvent]:
        history = doc.get("history")
        if not isinstance(history, list):
            raise ReaderFormatError("unknown_shape")
        if not isinstance(state.get("done"), dict):
            state["done"] = {}
        session = str_or_empty(doc.get("sessionId"))
        events: list[SessionEvent] = []
        for index, item in enumerate(history):
            message = require_object(require_object(item).get("message"))
            role = message.get("role")
            if role == "user":
                if self._once(state, f"item:{index}"):
                    state["turn"], state["open"] = f"{session}#{index}", True
                    events.append(SessionEvent(TURN_START, turn_id=state["turn"]))
            elif role == "assistant":
                events += self._assistant(item, message, index, state)
        return events

    def _assistant(self, item: dict[str, Any], message: dict[str, Any], index: int,
                   state: dict[str, Any]) -> list[SessionEvent]:
        turn = str_or_empty(state.get("turn"))
        events: list[SessionEvent] = []
        text = _text(message.get("content")).strip()
        first = self._once(state, f"item:{index}")
        if first and text:
            events.append(SessionEvent(TEXT, turn_id=turn))
        calls = item.get("toolCallStates")
        if calls is None:
            calls = [{"toolCallId": c.get("id"), "toolCall": c}
                     for c in message.get("toolCalls") or [] if isinstance(c, dict)]
        if not isinstance(calls, list):
            raise ReaderFormatError("unknown_shape")
        for call in calls:
            call = require_object(call)
            call_id, status = call.get("toolCallId"), call.get("status")
            if not isinstance(call_id, str) or not isinstance(status, (str, type(None))):
                raise ReaderFormatError("unknown_shape")
            name = _name(call)
            if name not in _SHELL_TOOLS:
                if self._once(state, f"start:{call_id}"):
                    events.append(SessionEvent(TOOL, call_id=call_id, tool=name, turn_id=turn))
                continue
            command = _command(call)
            if self._once(state, f"start:{call_id}"):
                events.append(SessionEvent(SHELL_START, call_id=call_id, command=command,
                                           tool=name, turn_id=turn))
            if status in _FINISHED and self._once(state, f"end:{call_id}"):
                exit_code, failed, output = call_result(status, call.get("output"))
                events.append(SessionEvent(SHELL_END, call_id=call_id, command=command,
                                           exit=exit_code, failed=failed, tool=name,
                                           turn_id=turn, output=output))
        if first and text and not calls and state.get("open") is True:
            state["open"] = False
            events.append(SessionEvent(TURN_END, turn_id=turn))
        return events


register_reader(ContinueReader())
