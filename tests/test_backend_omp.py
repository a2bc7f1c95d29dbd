"""Oh My Pi on the neutral route (spec C4, C5), on the harness's real run: nothing is recorded;
and omp's session-log reader (issue 5), its record route, on the harness's real session files.

omp 18.2.3 runs its ``bash`` tool's commands in an embedded shell (brush-core, in-process), never
in a ``/bin/bash``, so ``BASH_ENV`` is never read and the route writes no record; omp is not
covered by it. Its own session log does carry each command and exit status, which is what the
session-log reader turns into omp's records. These tests pin both facts, so a version that starts
recording (or stops logging) shows up here.

The session files are found through ``harness/evidence/omp.json`` (``session_files``, and
``scenario_sessions`` when the harness kept them), never named here: a harness re-run replaces
them with new ids and times, and every id and time a test expects is read from the file itself.
Error handling is tested on real lines broken on purpose (each test says how).
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
from sidecar.backends.omp import OmpSessionReader
from sidecar.backends.pi import PiSessionReader

REPO = Path(__file__).resolve().parent.parent
EVIDENCE = json.loads((REPO / "harness" / "evidence" / "omp.json").read_text())


def test_evidence_is_a_real_omp_run() -> None:
    """The evidence comes from the pinned CLI, whose own --version output it keeps."""
    assert (EVIDENCE["package"], EVIDENCE["version"]) == ("@oh-my-pi/pi-coding-agent", "18.2.3")
    assert EVIDENCE["version_output"] == "omp/18.2.3"


def test_the_cli_ran_the_turns_but_the_route_recorded_nothing() -> None:
    """Each run asked the stub for the tool call(s) and the final answer (one request per tool
    result plus one), finished normally, and the neutral route wrote no record."""
    for run in EVIDENCE["runs"]:
        assert run["cli_exit"] == 0
        assert run["stub_requests"] == ["POST /v1/chat/completions"] * (run["repeat"] + 1)
        assert run["records"] == []
    assert EVIDENCE["runs"][-1]["note"] == ""


def test_session_log_has_the_commands_and_exit_codes() -> None:
    """omp's session log (``~/.omp/agent/sessions/<cwd-slug>/*.jsonl``) of the 5-repeat run has
    each ``bash`` call with ``isError`` and ``details.exitCode``."""
    (session,) = EVIDENCE["session_files"]
    assert session.startswith(".omp/agent/sessions/") and session.endswith(".jsonl")
    entries = [json.loads(line) for line in (REPO / "harness" / "evidence" / "omp" / session)
               .read_text().splitlines()]
    calls = [e["data"]["args"]["command"] for e in entries
             if e.get("customType") == "tool_execution_start" and e["data"]["toolName"] == "bash"]
    results = [(m["isError"], m["details"]["exitCode"]) for e in entries
               if (m := e.get("message") or {}).get("role") == "toolResult"
               and m["toolName"] == "bash"]
    assert calls == ["ls /nonexistent"] * 5
    assert results == [(True, 2)] * 5


# -- the session-log reader ---------------------------------------------------------------------

EVIDENCE_DIR = REPO / "harness" / "evidence"
READER = session_reader("omp")


def _evidence() -> dict[str, Any]:
    return json.loads((EVIDENCE_DIR / "omp.json").read_text())


def _session() -> Path:
    """The 5-repeat shell run's session file, as the evidence lists it."""
    (session,) = _evidence()["session_files"]
    return EVIDENCE_DIR / "omp" / session


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
    ``harness/evidence/omp/<name>/``); skips when the harness has not kept them yet."""
    rels = (_evidence().get("scenario_sessions") or {}).get(name) or []
    paths = [base / rel for rel in ([rels] if isinstance(rels, str) else rels)
             for base in (EVIDENCE_DIR / "omp" / name, EVIDENCE_DIR / "omp")
             if (base / rel).is_file()]
    if not paths:
        pytest.skip(f"no {name!r} scenario session kept yet")
    return paths


def _all_files() -> list[Path]:
    files = [_session()]
    for name, rels in (_evidence().get("scenario_sessions") or {}).items():
        for rel in [rels] if isinstance(rels, str) else rels or []:
            if (EVIDENCE_DIR / "omp" / name / rel).is_file():
                files.append(EVIDENCE_DIR / "omp" / name / rel)
    return files


def test_reader_is_omps_record_route_and_finds_the_real_file() -> None:
    """omp's reader is registered, is omp's record route (its commands never reach bash), shares
    pi's reader (same format family) and its glob, with the default agent directory, matches
    where omp 18.2.3 really wrote the session."""
    assert isinstance(READER, OmpSessionReader) and isinstance(READER, PiSessionReader)
    assert READER.backend == "omp" and READER.kind == "jsonl" and READER.route_records is True
    (session,) = _evidence()["session_files"]
    globs = [g.replace("$PI_CODING_AGENT_DIR", READER.env_defaults["PI_CODING_AGENT_DIR"])
             for g in READER.globs]
    assert any(PurePosixPath(session).match(g) for g in globs)
    assert READER.signal.startswith("~/.omp/agent/sessions/*/*.jsonl: ")


def test_every_line_of_the_real_files_is_recognised() -> None:
    """No line of any real omp session file raises: the title slot, the header, settings
    changes, ``tool_execution_start`` and ``session_exit`` custom entries, the loop-redirect
    custom message and all messages are known; every event is well formed."""
    for path in _all_files():
        lines = _lines(path)
        assert {"title", "session", "message"} <= {line["type"] for line in lines}
        for _, event in _read(lines):
            _check_event(event)


def test_shell_session_gives_the_exact_events() -> None:
    """The stub asked for `ls /nonexistent` 5 times in one turn: the turn starts, each call
    starts and ends (the ``tool_execution_start`` entry between them adds nothing), the final
    answer is text and ends the turn; the loop-redirect message and the exit entry add nothing."""
    run = _evidence()["runs"][-1]
    assert (run["command"], run["repeat"]) == ("ls /nonexistent", 5)
    lines = _lines(_session())
    kinds = [event.kind for _, event in _read(lines)]
    assert kinds == [TURN_START, *[SHELL_START, SHELL_END] * 5, TEXT, TURN_END]
    # The tail starts each file with an empty dict rather than new_file_state(): same events.
    empty: dict[str, Any] = {}
    assert [e for line in lines for e in READER.parse_line(line, empty)] == \
        [event for _, event in _read(lines)]


def test_shell_ends_are_records_with_command_and_exit() -> None:
    """Each ``shell_end`` (an omp record) pairs with its ``shell_start`` by the file's toolCall
    id, carries the command kept from the call (omp's toolResult does not repeat it) and exit 2
    from ``details.exitCode``."""
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


def test_timestamps_are_the_lines_own() -> None:
    """Every event's ``ts`` is its own line's ``timestamp``; the turn starts at the user message
    and ends at the last assistant message."""
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
    ``shell_end`` with its exit, and an empty command (the record then has no command)."""
    lines = _lines(_session())
    line = lines[_messages(lines, "toolResult")[0]]
    (event,) = READER.parse_line(line, READER.new_file_state())
    assert (event.kind, event.call_id, event.command, event.exit, event.failed) == \
        (SHELL_END, line["message"]["toolCallId"], "", 2, True)


def _first(role: str) -> dict[str, Any]:
    lines = _lines(_session())
    return copy.deepcopy(lines[_messages(lines, role)[0]])


def _first_type(kind: str) -> dict[str, Any]:
    return copy.deepcopy(next(line for line in _lines(_session()) if line["type"] == kind))


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
    ("the real title line inside a list", lambda: [_first_type("title")], "not_object"),
    ("the real title line without its type", lambda: _drop(_first_type("title"), ("type",)),
     "no_type"),
    ("the real custom line with an unknown type",
     lambda: _set(_first_type("custom"), ("type",), "custom_v2"), "unknown_type"),
    ("the real user line with a string as message",
     lambda: _set(_first("user"), ("message",), "hi"), "unknown_shape"),
    ("the real call line with a dict as content",
     lambda: _set(_first("assistant"), ("message", "content"), {}), "unknown_shape"),
    ("the real call line with a number as the call's name",
     lambda: _set(_first("assistant"), ("message", "content", 0, "name"), 1), "unknown_shape"),
    ("the real result line without isError",
     lambda: _drop(_first("toolResult"), ("message", "isError")), "unknown_shape"),
    ("the real result line with a string as exitCode",
     lambda: _set(_first("toolResult"), ("message", "details", "exitCode"), "2"), "bad_exit"),
    ("the real result line with a fraction as exitCode",
     lambda: _set(_first("toolResult"), ("message", "details", "exitCode"), 2.5), "bad_exit"),
    ("the real result line with true as exitCode",
     lambda: _set(_first("toolResult"), ("message", "details", "exitCode"), True), "bad_exit"),
    ("the real result line with a timestamp that is not a time",
     lambda: _set(_first("toolResult"), ("timestamp",), "2026-13-45T99:00:00Z"), "bad_ts"),
])
def test_broken_real_lines_raise_reader_format_error(how: str, broken: Any, reason: str) -> None:
    """A real line broken as described raises ReaderFormatError with a fixed reason label that
    never quotes the line."""
    with pytest.raises(ReaderFormatError) as caught:
        READER.parse_line(broken(), READER.new_file_state())
    assert caught.value.reason == reason, how
    assert "nonexistent" not in str(caught.value)


def test_result_of_a_call_omp_never_ran_is_no_record() -> None:
    """The real result line marked as omp marks its placeholder for a call it never ran
    (``details.executed: false``, omp 18.2.3 ``agent-loop.ts``) gives no record."""
    line = _set(_first("toolResult"), ("message", "details"),
                {"__synthetic": True, "source": "assistant_stop_aborted", "executed": False})
    assert READER.parse_line(line, READER.new_file_state()) == []


def test_calls_of_an_aborted_reply_never_start() -> None:
    """The real call line with ``stopReason`` changed to ``aborted`` (omp runs none of its
    calls then) starts no shell call and ends the turn."""
    line = _set(_first("assistant"), ("message", "stopReason"), "aborted")
    assert [e.kind for e in READER.parse_line(line, READER.new_file_state())] == [TURN_END]


def test_calls_cut_by_the_token_limit_never_start_and_the_turn_goes_on() -> None:
    """The real call line with ``stopReason`` changed to ``length``: omp does not run its calls
    (their arguments may be cut) and asks the model again, so no event at all."""
    line = _set(_first("assistant"), ("message", "stopReason"), "length")
    assert READER.parse_line(line, READER.new_file_state()) == []


def test_a_paused_answer_does_not_end_the_turn() -> None:
    """The real final answer line with ``stopDetails.type`` ``pause_turn`` (omp asks the model
    to go on) is text only; unchanged, it ends the turn."""
    answer = _messages(_lines(_session()), "assistant")[-1]
    line = copy.deepcopy(_lines(_session())[answer])
    assert [e.kind for e in READER.parse_line(line, READER.new_file_state())] == [TEXT, TURN_END]
    line["message"]["stopDetails"] = {"type": "pause_turn"}
    assert [e.kind for e in READER.parse_line(line, READER.new_file_state())] == [TEXT]


def test_a_steering_message_does_not_start_a_turn() -> None:
    """The real user line marked ``steering: true`` (typed while the agent works) is not a new
    turn."""
    line = _set(_first("user"), ("message", "steering"), True)
    assert READER.parse_line(line, READER.new_file_state()) == []


_JUNK = (None, True, 0, -1, 2.5, float("inf"), "", "x", [], {}, [None], {"type": "text"})
_DELETE = object()


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
    state = READER.new_file_state()
    for line in _lines(_session()):
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
        pytest.skip(f"omp had not logged the running call when the {name!r} snapshot was taken")
    return [step["arg"] for step in run["steps"] if step["kind"] == "shell"][-1]


def test_read_scenario_is_tool_activity_only() -> None:
    """A file-tool call is a ``tool`` event, never shell activity (no record); the turn starts
    and ends."""
    kinds = [e.kind for e in _scenario_events("read")]
    assert TOOL in kinds and SHELL_START not in kinds and SHELL_END not in kinds
    assert kinds[0] == TURN_START and kinds[-1] == TURN_END


def test_running_scenario_has_an_open_shell_call() -> None:
    """Snapshot while the command runs: its ``shell_start`` has no ``shell_end`` (so no record
    yet) and the turn has not ended."""
    events = _scenario_events("running")
    command = _running_command("running")
    assert [e.command for e in events if e.kind == SHELL_START] == [command]
    assert not [e for e in events if e.kind == SHELL_END]
    assert [e.kind for e in events][0] == TURN_START and TURN_END not in [e.kind for e in events]


def test_midturn_scenario_has_a_failed_call_then_an_open_one() -> None:
    """Snapshot after a failing call finished (one record) and while the next one runs."""
    events = _scenario_events("midturn")
    command = _running_command("midturn")
    shell = [(e.kind, e.command, e.exit, e.failed) for e in events
             if e.kind in (SHELL_START, SHELL_END)]
    assert shell == [(SHELL_START, "ls /nonexistent", None, None),
                     (SHELL_END, "ls /nonexistent", 2, True),
                     (SHELL_START, command, None, None)]
    assert TURN_END not in [e.kind for e in events]
