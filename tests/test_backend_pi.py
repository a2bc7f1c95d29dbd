"""pi's session-log reader (issue 5), on the harness's real session files only.

The files are found through ``harness/evidence/pi.json`` (``session_files``, and
``scenario_sessions`` when the harness kept them), never named here: a harness re-run replaces
them with new ids and times. Every id and time a test expects is read from the file itself. Error
handling is tested on real lines broken on purpose (each test says how). pi's wrapper facts
(none: it runs ``/bin/bash -c``) are in ``tests/test_backend_bare.py``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

import orjson
import pytest

from sidecar.backends import (
    EVENT_KINDS,
    SHELL_END,
    SHELL_START,
    TEXT,
    TOOL,
    TURN_END,
    TURN_START,
    ReaderFormatError,
    SessionEvent,
    session_reader,
)
from sidecar.backends.pi import PiSessionReader

EVIDENCE_DIR = Path(__file__).resolve().parent.parent / "harness" / "evidence"
READER = session_reader("pi")


def _evidence() -> dict[str, Any]:
    return json.loads((EVIDENCE_DIR / "pi.json").read_text())


def _session() -> Path:
    """The 5-repeat shell run's session file, as the evidence lists it."""
    (session,) = _evidence()["session_files"]
    return EVIDENCE_DIR / "pi" / session


def _lines(path: Path) -> list[Any]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def _read(lines: list[Any]) -> list[tuple[int, SessionEvent]]:
    """Every event of ``lines`` read in order with one file state, with its line's index."""
    state = READER.new_file_state()
    return [(i, event) for i, line in enumerate(lines) for event in READER.parse_line(line, state)]


def _iso(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def _messages(lines: list[Any], role: str) -> list[int]:
    """Indexes of the ``message`` lines whose message has ``role``."""
    return [i for i, line in enumerate(lines)
            if line.get("type") == "message" and line["message"].get("role") == role]


def _scenario(name: str) -> list[Path]:
    """The session files of scenario ``name`` (``scenario_sessions``, paths under HOME copied to
    ``harness/evidence/pi/<name>/``); skips when the harness has not kept them yet."""
    rels = (_evidence().get("scenario_sessions") or {}).get(name) or []
    paths = [base / rel for rel in ([rels] if isinstance(rels, str) else rels)
             for base in (EVIDENCE_DIR / "pi" / name, EVIDENCE_DIR / "pi")
             if (base / rel).is_file()]
    if not paths:
        pytest.skip(f"no {name!r} scenario session kept yet")
    return paths


def _all_files() -> list[Path]:
    listed = _evidence().get("scenario_sessions") or {}
    scenario_files = []
    for name, rels in listed.items():
        for rel in [rels] if isinstance(rels, str) else rels or []:
            scenario_files += [base / rel for base in (EVIDENCE_DIR / "pi" / name,)
                               if (base / rel).is_file()]
    return [_session(), *scenario_files]


def test_reader_is_registered_and_finds_the_real_file() -> None:
    """pi's reader is registered, is not pi's record route (pi's commands reach bash, the
    neutral route records them) and its glob, with the default agent directory, matches where
    pi 0.73.1 really wrote the session."""
    assert isinstance(READER, PiSessionReader) and READER.backend == "pi"
    assert READER.kind == "jsonl" and READER.route_records is False
    (session,) = _evidence()["session_files"]
    globs = [g.replace("$PI_CODING_AGENT_DIR", READER.env_defaults["PI_CODING_AGENT_DIR"])
             for g in READER.globs]
    assert any(PurePosixPath(session).match(g) for g in globs)
    assert READER.signal.startswith("~/.pi/agent/sessions/*/*.jsonl: ")


def test_every_line_of_the_real_files_is_recognised() -> None:
    """No line of any real pi session file raises (every entry type and role present is known),
    and every event is well formed."""
    for path in _all_files():
        lines = _lines(path)
        types = {line["type"] for line in lines}
        assert {"session", "message"} <= types
        for _, event in _read(lines):
            _check_event(event)


def test_shell_session_gives_the_exact_events() -> None:
    """The stub asked for `ls /nonexistent` 5 times in one turn: the turn starts, each call
    starts and ends, the final answer is text and ends the turn. Nothing else."""
    run = _evidence()["runs"][-1]
    assert (run["command"], run["repeat"]) == ("ls /nonexistent", 5)
    lines = _lines(_session())
    kinds = [event.kind for _, event in _read(lines)]
    assert kinds == [TURN_START, *[SHELL_START, SHELL_END] * 5, TEXT, TURN_END]
    # The tail starts each file with an empty dict rather than new_file_state(): same events.
    empty: dict[str, Any] = {}
    assert [e for line in lines for e in READER.parse_line(line, empty)] == \
        [event for _, event in _read(lines)]


def test_shell_calls_carry_id_command_and_exit() -> None:
    """Each ``shell_end`` pairs with its ``shell_start`` by the file's toolCall id, has the
    command (kept from the call: pi's toolResult does not repeat it) and exit 2 from the
    result's ``Command exited with code 2`` line."""
    lines = _lines(_session())
    call_ids = [block["id"] for i in _messages(lines, "assistant")
                for block in lines[i]["message"]["content"] if block["type"] == "toolCall"]
    assert len(call_ids) == 5 and len(set(call_ids)) == 5
    events = [event for _, event in _read(lines)]
    starts = [(e.call_id, e.command, e.tool) for e in events if e.kind == SHELL_START]
    ends = [(e.call_id, e.command, e.exit, e.failed, e.tool) for e in events
            if e.kind == SHELL_END]
    assert starts == [(c, "ls /nonexistent", "bash") for c in call_ids]
    assert ends == [(c, "ls /nonexistent", 2, True, "bash") for c in call_ids]
    assert all(e.turn_id == "" for e in events)  # pi names no turn


def test_timestamps_are_the_lines_own() -> None:
    """Every event's ``ts`` is its own line's ``timestamp``; the turn starts at the user message
    and ends at the last assistant message; starts and ends sit on their own lines."""
    lines = _lines(_session())
    read = _read(lines)
    for i, event in read:
        assert event.ts == _iso(lines[i]["timestamp"])
    by_kind = {kind: [i for i, e in read if e.kind == kind] for kind in EVENT_KINDS}
    assert by_kind[TURN_START] == _messages(lines, "user")
    assert by_kind[TURN_END] == [_messages(lines, "assistant")[-1]]
    assert by_kind[SHELL_END] == _messages(lines, "toolResult")
    assert by_kind[SHELL_START] == _messages(lines, "assistant")[:-1]


def test_result_without_its_call_still_ends_a_shell_call() -> None:
    """After a sidecar restart the state is fresh: the real toolResult line alone still gives a
    ``shell_end`` with its exit, and an empty command."""
    lines = _lines(_session())
    line = lines[_messages(lines, "toolResult")[0]]
    (event,) = READER.parse_line(line, READER.new_file_state())
    assert (event.kind, event.call_id, event.command, event.exit, event.failed) == \
        (SHELL_END, line["message"]["toolCallId"], "", 2, True)


def _first(role: str) -> dict[str, Any]:
    lines = _lines(_session())
    return copy.deepcopy(lines[_messages(lines, role)[0]])


def _set(line: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    node = line
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return line


def _drop(line: dict[str, Any], path: tuple[Any, ...]) -> dict[str, Any]:
    node = line
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return line


@pytest.mark.parametrize(("how", "broken", "reason"), [
    ("the real user line inside a list", lambda: [_first("user")], "not_object"),
    ("the real user line's JSON as a string", lambda: json.dumps(_first("user")), "not_object"),
    ("the real user line without its type", lambda: _drop(_first("user"), ("type",)), "no_type"),
    ("the real user line with a number as type", lambda: _set(_first("user"), ("type",), 3),
     "no_type"),
    ("the real user line with an unknown type",
     lambda: _set(_first("user"), ("type",), "message_v2"), "unknown_type"),
    ("the real user line with a list as message", lambda: _set(_first("user"), ("message",), []),
     "unknown_shape"),
    ("the real user line with an unknown role",
     lambda: _set(_first("user"), ("message", "role"), "narrator"), "unknown_shape"),
    ("the real call line with its content as a string",
     lambda: _set(_first("assistant"), ("message", "content"), "ls"), "unknown_shape"),
    ("the real call line without its stopReason",
     lambda: _drop(_first("assistant"), ("message", "stopReason")), "unknown_shape"),
    ("the real call line with a number as the call's id",
     lambda: _set(_first("assistant"), ("message", "content", 0, "id"), 55), "unknown_shape"),
    ("the real result line with isError as a string",
     lambda: _set(_first("toolResult"), ("message", "isError"), "true"), "unknown_shape"),
    ("the real result line with a number as toolCallId",
     lambda: _set(_first("toolResult"), ("message", "toolCallId"), 55), "unknown_shape"),
    ("the real result line's exit notice with a word for the code",
     lambda: _set(_first("toolResult"), ("message", "content", 0, "text"),
                  _first("toolResult")["message"]["content"][0]["text"]
                  .replace("code 2", "code two")), "bad_exit"),
    ("the real result line with a timestamp that is not a time",
     lambda: _set(_first("toolResult"), ("timestamp",), "yesterday"), "bad_ts"),
    ("the real result line with a list as timestamp",
     lambda: _set(_first("toolResult"), ("timestamp",), []), "bad_ts"),
])
def test_broken_real_lines_raise_reader_format_error(how: str, broken: Any, reason: str) -> None:
    """A real line broken as described raises ReaderFormatError with a fixed reason label that
    never quotes the line."""
    line = broken()
    with pytest.raises(ReaderFormatError) as caught:
        READER.parse_line(line, READER.new_file_state())
    assert caught.value.reason == reason, how
    assert "nonexistent" not in str(caught.value)


def test_calls_of_a_failed_or_aborted_reply_never_start() -> None:
    """The real call line with ``stopReason`` changed to ``error`` or ``aborted``: pi 0.73.1
    ends the run without running its calls, so no shell call starts and the turn ends."""
    for stop in ("error", "aborted"):
        line = _set(_first("assistant"), ("message", "stopReason"), stop)
        assert [e.kind for e in READER.parse_line(line, READER.new_file_state())] == [TURN_END]


def test_the_users_own_bang_command_is_not_agent_activity() -> None:
    """The real result line with its role changed to ``bashExecution`` (the message pi 0.73.1
    writes for the user's own ``!`` command, ``messages.d.ts``) gives no event: it is not an
    agent tool call."""
    line = _set(_first("toolResult"), ("message", "role"), "bashExecution")
    assert READER.parse_line(line, READER.new_file_state()) == []


_JUNK = (None, True, 0, -1, 2.5, float("inf"), "", "x", [], {}, [None], {"type": "text"})


def _paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield (*path, key)
            yield from _paths(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield (*path, index)
            yield from _paths(value, (*path, index))


def test_junk_in_any_field_of_a_real_line_never_raises_anything_else() -> None:
    """Every field of every real line, in turn deleted or replaced by a value of another type:
    the reader returns well-formed events or raises ReaderFormatError, nothing else. Each broken
    line is read with the state the real lines before it built."""
    lines = _lines(_session())
    state = READER.new_file_state()
    for line in lines:
        for path in _paths(line):
            for value in (_DELETE, *_JUNK):
                broken = copy.deepcopy(line)
                node = broken
                for key in path[:-1]:
                    node = node[key]
                if value is _DELETE:
                    del node[path[-1]]
                else:
                    node[path[-1]] = value
                try:
                    events = READER.parse_line(broken, copy.deepcopy(state))
                except ReaderFormatError:
                    continue
                for event in events:
                    _check_event(event)
        READER.parse_line(line, state)


_DELETE = object()


def _check_event(event: SessionEvent) -> None:
    assert isinstance(event, SessionEvent) and event.kind in EVENT_KINDS
    assert event.ts is None or isinstance(event.ts, float)
    assert all(isinstance(v, str) for v in (event.call_id, event.command, event.tool,
                                            event.turn_id))
    assert event.exit is None or (isinstance(event.exit, int) and not isinstance(event.exit, bool))
    assert event.failed is None or isinstance(event.failed, bool)
    if event.kind == SHELL_END:
        assert isinstance(event.failed, bool)


# -- scenario snapshots (read / running / midturn), when the harness has kept them -------------

def _scenario_events(name: str) -> list[SessionEvent]:
    events: list[SessionEvent] = []
    for path in _scenario(name):
        events += [event for _, event in _read(_lines(path))]
    return events


def _running_command(name: str) -> str:
    run = (_evidence().get("scenarios") or {}).get(name) or {}
    if not (run.get("snapshot") or {}).get("running_command_logged"):
        pytest.skip(f"pi had not logged the running call when the {name!r} snapshot was taken")
    return [step["arg"] for step in run["steps"] if step["kind"] == "shell"][-1]


def test_read_scenario_is_tool_activity_only() -> None:
    """A file-tool call is a ``tool`` event, never shell activity; the turn starts and ends."""
    kinds = [e.kind for e in _scenario_events("read")]
    assert TOOL in kinds and SHELL_START not in kinds and SHELL_END not in kinds
    assert kinds[0] == TURN_START and kinds[-1] == TURN_END


def test_running_scenario_has_an_open_shell_call() -> None:
    """Snapshot while the command runs: its ``shell_start`` has no ``shell_end`` and the turn
    has not ended."""
    events = _scenario_events("running")
    command = _running_command("running")
    starts = [e for e in events if e.kind == SHELL_START]
    assert [e.command for e in starts] == [command]
    assert not [e for e in events if e.kind == SHELL_END]
    assert [e.kind for e in events][0] == TURN_START and TURN_END not in [e.kind for e in events]


def test_midturn_scenario_has_a_failed_call_then_an_open_one() -> None:
    """Snapshot after a failing call finished and while the next one runs."""
    events = _scenario_events("midturn")
    command = _running_command("midturn")
    shell = [(e.kind, e.command, e.exit, e.failed) for e in events
             if e.kind in (SHELL_START, SHELL_END)]
    assert shell == [(SHELL_START, "ls /nonexistent", None, None),
                     (SHELL_END, "ls /nonexistent", 2, True),
                     (SHELL_START, command, None, None)]
    assert TURN_END not in [e.kind for e in events]
