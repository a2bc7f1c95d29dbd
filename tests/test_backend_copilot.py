"""GitHub Copilot CLI's shells (spec C7, C8, C-AC1), on the harness's real records.

Copilot CLI 1.0.102 runs its ``bash`` tool as ``/bin/bash --norc --noprofile -c <cmd>`` with the
agent's command as is: no wrapper, so ``copilot`` needs no wrapper stripper. It removes
``BASH_ENV`` from tool shells unless launched with ``--bash-env on``; its one helper shell (a
``bash -l -c`` that prints the login environment) never gets ``BASH_ENV``, so every record is an
agent command.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import runner
from harness.backends.copilot import BACKEND

EVIDENCE_DIR = Path(__file__).resolve().parent.parent / "harness" / "evidence"
EVIDENCE = json.loads((EVIDENCE_DIR / "copilot.json").read_text())


def test_route_is_a_launch_flag_not_a_settings_file(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Copilot strips BASH_ENV unless launched with `--bash-env on`; the harness passes the flag
    and writes no Copilot settings file of its own."""
    monkeypatch.setattr(runner, "CACHE", tmp_path / "cache")
    argv = BACKEND.argv("copilot", "prompt")
    assert argv[argv.index("--bash-env") + 1] == "on"
    home = tmp_path / "home"
    home.mkdir()
    env = BACKEND.prepare(home, tmp_path, "http://127.0.0.1:1")
    assert not (home / ".copilot").exists()
    assert env["COPILOT_PROVIDER_BASE_URL"].startswith("http://127.0.0.1:")
    assert env["COPILOT_OFFLINE"] == "true"


def test_session_log_has_exit_codes() -> None:
    """The session log kept with the evidence carries each bash call's exit code
    (`tool.execution_complete` → `shellExecution.exitCode`), matching the records."""
    (rel,) = EVIDENCE["session_files"]
    events = [json.loads(line) for line in
              (EVIDENCE_DIR / "copilot" / rel).read_text().splitlines() if line.strip()]
    exits = [e["data"]["shellExecution"]["exitCode"] for e in events
             if e["type"] == "tool.execution_complete"]
    assert exits == [r["exit"] for r in EVIDENCE["runs"][-1]["records"]] == [2] * 5


# -- the session-log reader ------------------------------------------------------------------------
#
# Every test below reads the real events.jsonl file(s) the harness kept (``session_files`` of
# ``harness/evidence/copilot.json``, Copilot CLI 1.0.102, the session of the last run: the stub
# asked for ``ls /nonexistent`` five times in one prompt). Ids, times and exits come from the files;
# a test of error handling takes a real line and breaks it (says how in its docstring).

import copy  # noqa: E402
import re  # noqa: E402
from datetime import datetime  # noqa: E402

import orjson  # noqa: E402

from sidecar.backends import (SHELL_END, SHELL_START, TEXT, TOOL, TURN_END,  # noqa: E402
                              TURN_START, ReaderFormatError, SessionEvent, session_reader)
from sidecar.backends.copilot import CopilotReader  # noqa: E402

READER = session_reader("copilot")


def _evidence() -> dict:
    """The evidence as it is now (another run of the harness may have replaced it)."""
    return json.loads((EVIDENCE_DIR / "copilot.json").read_text())


def _session_files() -> list[Path]:
    return [EVIDENCE_DIR / "copilot" / rel for rel in _evidence()["session_files"]]


def _lines(path: Path) -> list:
    """The decoded whole lines of ``path``, as a tailer reads them: a last line without its
    newline (a snapshot taken while the CLI was writing) is not read yet."""
    data = path.read_bytes()
    whole = data[:data.rfind(b"\n") + 1]
    return [orjson.loads(line) for line in whole.split(b"\n") if line.strip()]


def _read(lines: list) -> list[SessionEvent]:
    state = READER.new_file_state()
    return [event for obj in lines for event in READER.parse_line(obj, state)]


def _ts(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def _shell_session() -> list:
    """The lines of the session of the 5-repeat run (the last run)."""
    files = _session_files()
    assert files
    return _lines(files[-1])


def _of(lines: list, kind: str) -> list[dict]:
    return [copy.deepcopy(o) for o in lines if o["type"] == kind]


def test_reader_is_registered() -> None:
    """The copilot reader is registered, reads events.jsonl, and does not make records (the
    neutral route records Copilot's commands when it runs with `--bash-env on`)."""
    assert isinstance(READER, CopilotReader)
    assert READER.globs == (".copilot/session-state/*/events.jsonl",)
    assert READER.kind == "jsonl" and READER.route_records is False
    assert "tool.execution_complete" in READER.signal and "exitCode" in READER.signal


def test_session_file_matches_the_glob() -> None:
    """The kept session file sits where the reader's glob looks."""
    assert set((EVIDENCE_DIR / "copilot").glob(READER.globs[0])) >= set(_session_files())


def test_every_real_line_is_recognised() -> None:
    """No line of any real session file raises; the event types in them are listed here, so a
    new one in a later run shows up."""
    kinds = set()
    for path in _session_files():
        lines = _lines(path)
        _read(lines)
        kinds |= {o["type"] for o in lines}
    assert kinds <= {"session.start", "user.message", "system.message", "assistant.turn_start",
                     "session.usage_record", "assistant.message", "tool.execution_start",
                     "tool.execution_complete", "assistant.turn_end", "session.shutdown"}


def test_shell_session_event_sequence() -> None:
    """One prompt: its start, five bash calls each started and finished, the final text, the
    end (one turn although the file has one assistant.turn_start/turn_end pair per request)."""
    lines = _shell_session()
    repeat = _evidence()["runs"][-1]["repeat"]
    kinds = [e.kind for e in _read(lines)]
    assert repeat == 5
    assert len(_of(lines, "assistant.turn_end")) == repeat + 1
    assert kinds == [TURN_START, *[SHELL_START, SHELL_END] * repeat, TEXT, TURN_END]


def test_shell_calls_have_the_files_ids_commands_exits_and_times() -> None:
    """Start: tool.execution_start's time, toolCallId and arguments.command; end: its
    tool.execution_complete's time and shellExecution.exitCode (2, failed although the event
    says success: true) — the exits the neutral route recorded in that run."""
    lines = _shell_session()
    run = _evidence()["runs"][-1]
    (prompt,) = _of(lines, "user.message")
    turn = prompt["data"]["interactionId"]
    starts = {o["data"]["toolCallId"]: o for o in _of(lines, "tool.execution_start")}
    expected = []
    for done in _of(lines, "tool.execution_complete"):
        start = starts[done["data"]["toolCallId"]]
        command = start["data"]["arguments"]["command"]
        assert done["data"]["success"] is True
        expected += [
            SessionEvent(SHELL_START, _ts(start["timestamp"]), call_id=start["data"]["toolCallId"],
                         command=command, tool="bash", turn_id=turn),
            SessionEvent(SHELL_END, _ts(done["timestamp"]), call_id=done["data"]["toolCallId"],
                         command=command, exit=done["data"]["shellExecution"]["exitCode"],
                         failed=True, tool="bash", turn_id=turn)]
    events = _read(lines)
    assert [e for e in events if e.kind in (SHELL_START, SHELL_END)] == expected
    ends = [e for e in events if e.kind == SHELL_END]
    assert [(e.command, e.exit, e.failed) for e in ends] == [("ls /nonexistent", 2, True)] * 5
    assert [e.exit for e in ends] == [r["exit"] for r in run["records"]]


def test_turn_bounds_and_text() -> None:
    """turn_start is the user.message (its time, its interactionId); the text is the final
    assistant.message; turn_end is the assistant.turn_end after that message, which asked for no
    tool; all times ascend."""
    lines = _shell_session()
    (prompt,) = _of(lines, "user.message")
    final = [o for o in _of(lines, "assistant.message") if not o["data"]["toolRequests"]][-1]
    last_end = _of(lines, "assistant.turn_end")[-1]
    turn = prompt["data"]["interactionId"]
    events = _read(lines)
    assert events[0] == SessionEvent(TURN_START, _ts(prompt["timestamp"]), turn_id=turn)
    assert events[-2:] == [SessionEvent(TEXT, _ts(final["timestamp"]), turn_id=turn),
                           SessionEvent(TURN_END, _ts(last_end["timestamp"]), turn_id=turn)]
    times = [e.ts for e in events]
    assert times == sorted(times)


def test_exit_from_result_text_when_shell_execution_is_missing() -> None:
    """A real tool.execution_complete with `shellExecution` deleted: the exit comes from the
    result's last line `<shellId: N completed with exit code 2>`; with that line deleted too,
    there is no exit and `failed` follows `success`."""
    lines = _shell_session()
    state = READER.new_file_state()
    start = _of(lines, "tool.execution_start")[0]
    done = _of(lines, "tool.execution_complete")[0]
    del done["data"]["shellExecution"]
    READER.parse_line(start, state)
    (end,) = READER.parse_line(done, state)
    assert (end.kind, end.exit, end.failed, end.command) == (SHELL_END, 2, True,
                                                             "ls /nonexistent")
    state = READER.new_file_state()
    READER.parse_line(start, state)
    done["data"]["result"]["content"] = re.sub(r"\n?<shellId: [^>]*>", "",
                                               done["data"]["result"]["content"])
    (end,) = READER.parse_line(done, state)
    assert (end.exit, end.failed) == (None, False)
    done["data"]["success"] = False
    READER.parse_line(start, state)
    (end,) = READER.parse_line(done, state)
    assert (end.exit, end.failed) == (None, True)


def test_end_without_its_start() -> None:
    """After a sidecar restart (fresh state) a real tool.execution_complete still ends a shell
    call (it carries shellExecution), without the command (the event does not repeat it)."""
    done = _of(_shell_session(), "tool.execution_complete")[0]
    (end,) = READER.parse_line(done, READER.new_file_state())
    assert (end.kind, end.call_id, end.command, end.exit, end.failed) == \
        (SHELL_END, done["data"]["toolCallId"], "", 2, True)


@pytest.mark.parametrize("value", ["2", None, [2], 2.5, True])
def test_exit_code_that_is_not_a_number(value) -> None:
    """A real tool.execution_complete whose shellExecution.exitCode was changed to a
    non-number: bad_exit."""
    done = _of(_shell_session(), "tool.execution_complete")[0]
    done["data"]["shellExecution"]["exitCode"] = value
    with pytest.raises(ReaderFormatError) as err:
        READER.parse_line(done, READER.new_file_state())
    assert err.value.reason == "bad_exit"


def test_broken_real_lines_raise_format_errors() -> None:
    """Real lines broken on purpose: a list (not_object), `type` deleted (no_type), `data` made
    a string (unknown_shape), a start without toolName (unknown_shape), a complete without
    `success` (unknown_shape), a timestamp made a number (bad_ts)."""
    lines = _shell_session()
    start = _of(lines, "tool.execution_start")[0]
    no_type = copy.deepcopy(start)
    del no_type["type"]
    bad_data = copy.deepcopy(start)
    bad_data["data"] = "x"
    no_name = copy.deepcopy(start)
    del no_name["data"]["toolName"]
    no_success = _of(lines, "tool.execution_complete")[0]
    del no_success["data"]["success"]
    bad_ts = copy.deepcopy(start)
    bad_ts["timestamp"] = 1764500000
    for reason, obj in [("not_object", [start]), ("no_type", no_type),
                        ("unknown_shape", bad_data), ("unknown_shape", no_name),
                        ("unknown_shape", no_success), ("bad_ts", bad_ts)]:
        with pytest.raises(ReaderFormatError) as err:
            READER.parse_line(obj, READER.new_file_state())
        assert err.value.reason == reason, reason


def test_other_tools_and_unknown_types() -> None:
    """A real bash tool.execution_start renamed to `view`: a tool event, and its completion
    (shellExecution deleted: only shell calls carry it) gives nothing; a real line whose type was
    renamed to one the reader does not use still has the event shape and gives nothing."""
    lines = _shell_session()
    state = READER.new_file_state()
    start = _of(lines, "tool.execution_start")[0]
    start["data"]["toolName"] = "view"
    done = _of(lines, "tool.execution_complete")[0]
    del done["data"]["shellExecution"]
    (event,) = READER.parse_line(start, state)
    assert (event.kind, event.tool) == (TOOL, "view")
    assert READER.parse_line(done, state) == []
    other = copy.deepcopy(lines[0])
    other["type"] = "session.some_future_event"
    assert READER.parse_line(other, READER.new_file_state()) == []


def test_sub_agent_answer_does_not_end_the_turn() -> None:
    """The real final assistant.message and assistant.turn_end with `agentId` added (a
    sub-agent's, per the 1.0.102 event schema): the text is reported, the turn does not end."""
    lines = _shell_session()
    state = READER.new_file_state()
    READER.parse_line(_of(lines, "user.message")[0], state)
    final = [o for o in _of(lines, "assistant.message") if not o["data"]["toolRequests"]][-1]
    end = _of(lines, "assistant.turn_end")[-1]
    final["agentId"] = end["agentId"] = "sub-agent-1"
    assert [e.kind for e in READER.parse_line(final, state)] == [TEXT]
    assert READER.parse_line(end, state) == []


_DELETE = object()
_JUNK = [_DELETE, None, 0, -1, 2.5, True, "", "x", [], [1], {}, {"type": 1}]


def _mangled(line: dict, paths: list[tuple]):
    """Copies of ``line`` with each key of each object at ``paths`` deleted or replaced by each
    value of :data:`_JUNK`."""
    for path in paths:
        node = line
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            continue
        for key in list(node):
            for value in _JUNK:
                broken = copy.deepcopy(line)
                target = broken
                for step in path:
                    target = target[step]
                if value is _DELETE:
                    del target[key]
                else:
                    target[key] = value
                yield broken


def test_mangled_real_lines_raise_nothing_else() -> None:
    """Every real line with each key of the line, its data, arguments, shellExecution and
    result deleted or replaced by values of every JSON type, read after the real lines before
    it: events or ReaderFormatError, nothing else."""
    count = 0
    paths = [(), ("data",), ("data", "arguments"), ("data", "shellExecution"), ("data", "result")]
    for path in _session_files():
        lines = _lines(path)
        for i, line in enumerate(lines):
            for broken in _mangled(line, paths):
                count += 1
                state = READER.new_file_state()
                for before in lines[max(0, i - 3):i]:
                    READER.parse_line(before, state)
                try:
                    READER.parse_line(broken, state)
                except ReaderFormatError:
                    pass
    assert count > 1000


# -- scenario snapshots (read / running / midturn), when the harness has kept them -----------------

def _scenario(name: str) -> list[Path]:
    """The session files of scenario ``name`` listed under ``scenario_sessions`` (paths relative
    to ``harness/evidence/copilot/``, or to its ``<name>/`` folder); skips when there are none."""
    listed = _evidence().get("scenario_sessions") or {}
    rels = listed.get(name) if isinstance(listed, dict) else None
    if isinstance(rels, str):
        rels = [rels]
    paths = []
    for rel in rels or []:
        for base in (EVIDENCE_DIR / "copilot", EVIDENCE_DIR / "copilot" / name):
            if (base / rel).is_file():
                paths.append(base / rel)
                break
    if not paths:
        pytest.skip(f"no {name!r} scenario session kept yet")
    return paths


def _snapshot(name: str) -> dict:
    """What the harness says about the moment it copied scenario ``name``'s files:
    ``cli_running`` (the turn still open) and ``running_command_logged`` (the copies mention
    the running command)."""
    return (_evidence().get("scenarios") or {}).get(name, {}).get("snapshot") or {}


def test_read_scenario() -> None:
    """The `read` scenario: tool events only (view), no shell activity, inside one turn."""
    for path in _scenario("read"):
        kinds = [e.kind for e in _read(_lines(path))]
        assert TOOL in kinds
        assert SHELL_START not in kinds and SHELL_END not in kinds
        assert kinds[0] == TURN_START and kinds[-1] == TURN_END


def test_running_scenario() -> None:
    """The `running` scenario (the copy was taken while a command ran): one shell start without
    its end, and the turn not ended. Should the harness say the CLI had not yet logged the
    running call when it copied the files, the copy holds no open call at all."""
    snapshot = _snapshot("running")
    for path in _scenario("running"):
        events = _read(_lines(path))
        starts = [e.call_id for e in events if e.kind == SHELL_START]
        ends = [e.call_id for e in events if e.kind == SHELL_END]
        assert [e.kind for e in events][0] == TURN_START
        assert len(set(starts) - set(ends)) == \
            (1 if snapshot.get("running_command_logged", True) else 0)
        if snapshot.get("cli_running", True):
            assert TURN_END not in [e.kind for e in events]


def test_midturn_scenario() -> None:
    """The `midturn` scenario: one finished failing call (`ls /nonexistent`, its exit) and one
    call still running (unless the harness says the CLI had not logged it yet), the turn not
    ended."""
    snapshot = _snapshot("midturn")
    for path in _scenario("midturn"):
        events = _read(_lines(path))
        ends = [e for e in events if e.kind == SHELL_END]
        starts = [e.call_id for e in events if e.kind == SHELL_START]
        assert len(ends) == 1
        assert (ends[0].command, ends[0].exit, ends[0].failed) == ("ls /nonexistent", 2, True)
        assert len(set(starts) - {ends[0].call_id}) == \
            (1 if snapshot.get("running_command_logged", True) else 0)
        if snapshot.get("cli_running", True):
            assert TURN_END not in [e.kind for e in events]
