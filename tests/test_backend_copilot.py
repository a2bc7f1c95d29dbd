"""GitHub Copilot CLI's shells (spec C7, C8, C-AC1), on the harness's real records.

Copilot CLI 1.0.102 runs its ``bash`` tool as ``/bin/bash --norc --noprofile -c <cmd>`` with the
agent's command as is: no wrapper, so ``copilot`` needs no wrapper stripper. It removes
``BASH_ENV`` from tool shells unless launched with ``--bash-env on``; its one helper shell (a
``bash -l -c`` that prints the login environment) never gets ``BASH_ENV``, so every record is an
agent command.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from harness import install
from harness.backends.copilot import BACKEND
from repeat_failure.backends import (ERROR, SHELL_END, SHELL_START, TEXT, TOOL, TURN_END, TURN_START,
                              SessionEvent)
from repeat_failure.backends.copilot import CopilotReader
from repeat_failure.backends.coverage import COVERAGE

from sessionlogs import (EVIDENCE_DIR, SHELL_COMMAND, SHELL_EXIT, SHELL_REPEAT, SessionLog,
                         SessionLogChecks, assert_reader_error, iso_ts, version_params)

EVIDENCE = json.loads((EVIDENCE_DIR / "copilot.json").read_text())


def test_route_is_a_launch_flag_not_a_settings_file(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Copilot strips BASH_ENV unless launched with `--bash-env on`; the harness passes the flag
    and writes no Copilot settings file of its own."""
    monkeypatch.setattr(install, "CACHE", tmp_path / "cache")
    argv = BACKEND.argv("copilot", "prompt")
    assert argv[argv.index("--bash-env") + 1] == "on"
    home = tmp_path / "home"
    home.mkdir()
    env = BACKEND.prepare(home, tmp_path, "http://127.0.0.1:1")
    assert not (home / ".copilot").exists()
    assert env["COPILOT_PROVIDER_BASE_URL"].startswith("http://127.0.0.1:")
    assert env["COPILOT_OFFLINE"] == "true"


def test_an_earlier_release_runs_with_its_own_cache_and_all_paths(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch
                                                                  ) -> None:
    """``--release 1.0.11``: the same route flag, ``--allow-all-paths`` added (1.0.11 denies
    ``ls /nonexistent`` without it), and its unpacked files in a cache of its own version."""
    monkeypatch.setattr(install, "CACHE", tmp_path / "cache")
    old = BACKEND.at_release("1.0.11")
    assert (old.version, old.package) == ("1.0.11", BACKEND.package)
    argv = old.argv("copilot", "prompt")
    assert argv[argv.index("--bash-env") + 1] == "on" and "--allow-all-paths" in argv
    assert "--allow-all-paths" not in BACKEND.argv("copilot", "prompt")
    home = tmp_path / "home"
    home.mkdir()
    env = old.prepare(home, tmp_path, "http://127.0.0.1:1")
    assert env["COPILOT_PKG_CACHE_HOME"] == str(tmp_path / "cache" / "copilot-1.0.11" /
                                                "pkg-cache")


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
# a test of error handling takes a real line and breaks it (says how in its docstring). The checks
# every JSON Lines reader passes come from ``tests/sessionlogs.py`` (:class:`TestSessionLog`).

LOG = SessionLog("copilot")
READER = LOG.reader
#: Copilot CLI's real session logs of each kept release, the pin first (issue 26 item 3).
VERSIONS = [SessionLog("copilot", param.values[0]) for param in version_params("copilot")]
#: Where each kept release writes a bash call's exit code (found by bisecting the installable
#: releases): ``shellExecution.exitCode`` from 1.0.85; before it only the result text's last
#: line, ``<shellId: N completed with exit code N>`` from 1.0.60, ``<exited with exit code N>``
#: in 1.0.11 to 1.0.59.
EXIT_LINE = {"1.0.102": "shellId", "1.0.85": "shellId", "1.0.62": "shellId", "1.0.11": "exited"}
HAS_SHELL_EXECUTION = {"1.0.102": True, "1.0.85": True, "1.0.62": False, "1.0.11": False}
LAST_LINE = {"shellId": re.compile(r"\n<shellId: \d+ completed with exit code 2>\Z"),
             "exited": re.compile(r"\n<exited with exit code 2>\Z")}
OUTPUT = "ls: cannot access '/nonexistent': No such file or directory"


def test_the_kept_releases() -> None:
    """The pin 1.0.102, then 1.0.85 (first with ``shellExecution``), 1.0.62 (first whose
    commands BASH_ENV sees) and 1.0.11 (the oldest that runs against the stub; read only)."""
    assert [v.version for v in VERSIONS] == ["1.0.102", "1.0.85", "1.0.62", "1.0.11"]
    row = COVERAGE["copilot"]
    assert [row.version, *row.also_verified, *row.read_only] == [v.version for v in VERSIONS]


@pytest.mark.parametrize("log", VERSIONS, ids=[p.id for p in version_params("copilot")])
def test_exit_code_where_each_release_writes_it(log: SessionLog) -> None:
    """Each kept release's five ``tool.execution_complete`` lines carry the exit where
    :data:`EXIT_LINE` and :data:`HAS_SHELL_EXECUTION` say, and the reader gives exit 2, failed,
    and the output without the tool's last line, whichever form it has."""
    lines = log.session_lines()
    done = _of(lines, "tool.execution_complete")
    assert len(done) == SHELL_REPEAT
    for line in done:
        data = line["data"]
        assert ("shellExecution" in data) is HAS_SHELL_EXECUTION[log.version]
        if HAS_SHELL_EXECUTION[log.version]:
            assert data["shellExecution"]["exitCode"] == SHELL_EXIT
        assert LAST_LINE[EXIT_LINE[log.version]].search(data["result"]["content"])
        assert data["success"] is True
    ends = [e for e in log.read(lines) if e.kind == SHELL_END]
    assert [(e.command, e.exit, e.failed, e.output) for e in ends] == \
        [(SHELL_COMMAND, SHELL_EXIT, True, OUTPUT)] * SHELL_REPEAT


class TestSessionLog(SessionLogChecks):
    """The checks every JSON Lines reader passes, on each kept release's real files (1.0.102,
    1.0.85, 1.0.62, 1.0.11): one turn per prompt although the file has one
    assistant.turn_start/turn_end pair per model request; the event types in the files are
    listed here, so a new one in a later run shows up (``session.model_change`` in 1.0.11 and
    1.0.62, ``hook.start`` / ``hook.end`` in 1.0.62, ``session.usage_record`` in 1.0.102: each
    read as nothing)."""

    log = LOG  # the machinery points it at each release (SessionLogChecks)
    reader_class = CopilotReader
    known_line_kinds = frozenset({
        "session.start", "user.message", "system.message", "assistant.turn_start",
        "session.usage_record", "assistant.message", "tool.execution_start",
        "tool.execution_complete", "assistant.turn_end", "session.shutdown",
        "session.model_change", "hook.start", "hook.end"})


def _of(lines: list, kind: str) -> list[dict]:
    return [copy.deepcopy(o) for o in lines if o["type"] == kind]


def test_reader_glob_and_signal() -> None:
    """The copilot reader reads events.jsonl, and does not make records (the neutral route
    records Copilot's commands when it runs with `--bash-env on`); its coverage text names the
    call's end and its exit code."""
    assert READER.globs == (".copilot/session-state/*/events.jsonl",)
    assert READER.route_records is False
    assert "tool.execution_complete" in READER.signal and "exitCode" in READER.signal


def test_one_turn_end_per_prompt_not_per_request() -> None:
    """The file ends each model request with an assistant.turn_end (one per tool call, plus the
    answer's), yet the prompt's turn ends once."""
    lines = LOG.session_lines()
    assert len(_of(lines, "assistant.turn_end")) == LOG.shell_run()["repeat"] + 1
    assert [e.kind for e in LOG.read(lines)].count(TURN_END) == 1


def test_shell_calls_have_the_files_ids_commands_exits_and_times() -> None:
    """Start: tool.execution_start's time, toolCallId and arguments.command; end: its
    tool.execution_complete's time and shellExecution.exitCode (2, failed although the event
    says success: true)."""
    lines = LOG.session_lines()
    (prompt,) = _of(lines, "user.message")
    turn = prompt["data"]["interactionId"]
    starts = {o["data"]["toolCallId"]: o for o in _of(lines, "tool.execution_start")}
    expected = []
    for done in _of(lines, "tool.execution_complete"):
        start = starts[done["data"]["toolCallId"]]
        command = start["data"]["arguments"]["command"]
        assert done["data"]["success"] is True
        expected += [
            SessionEvent(SHELL_START, iso_ts(start["timestamp"]),
                         call_id=start["data"]["toolCallId"], command=command, tool="bash",
                         turn_id=turn),
            SessionEvent(SHELL_END, iso_ts(done["timestamp"]), call_id=done["data"]["toolCallId"],
                         command=command, exit=done["data"]["shellExecution"]["exitCode"],
                         failed=True, tool="bash", turn_id=turn,
                         output="ls: cannot access '/nonexistent': No such file or directory")]
    # The output (issue 19) is the result's text without the tool's own last line, which
    # names its shell: "<shellId: 0 completed with exit code 2>".
    assert all(done["data"]["result"]["content"].endswith(">")
               for done in _of(lines, "tool.execution_complete"))
    assert [e for e in LOG.read(lines) if e.kind in (SHELL_START, SHELL_END)] == expected


def test_turn_bounds_and_text() -> None:
    """turn_start is the user.message (its time, its interactionId); the text is the final
    assistant.message; turn_end is the assistant.turn_end after that message, which asked for no
    tool."""
    lines = LOG.session_lines()
    (prompt,) = _of(lines, "user.message")
    final = [o for o in _of(lines, "assistant.message") if not o["data"]["toolRequests"]][-1]
    last_end = _of(lines, "assistant.turn_end")[-1]
    turn = prompt["data"]["interactionId"]
    events = LOG.read(lines)
    assert events[0] == SessionEvent(TURN_START, iso_ts(prompt["timestamp"]), turn_id=turn)
    assert events[-2:] == [SessionEvent(TEXT, iso_ts(final["timestamp"]), turn_id=turn),
                           SessionEvent(TURN_END, iso_ts(last_end["timestamp"]), turn_id=turn)]


def test_exit_from_result_text_when_shell_execution_is_missing() -> None:
    """A real tool.execution_complete with `shellExecution` deleted: the exit comes from the
    result's last line `<shellId: N completed with exit code 2>`; with that line deleted too,
    there is no exit and `failed` follows `success`."""
    lines = LOG.session_lines()
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
    done = _of(LOG.session_lines(), "tool.execution_complete")[0]
    (end,) = READER.parse_line(done, READER.new_file_state())
    assert (end.kind, end.call_id, end.command, end.exit, end.failed) == \
        (SHELL_END, done["data"]["toolCallId"], "", 2, True)


@pytest.mark.parametrize("value", ["2", None, [2], 2.5, True])
def test_exit_code_that_is_not_a_number(value) -> None:
    """A real tool.execution_complete whose shellExecution.exitCode was changed to a
    non-number: bad_exit."""
    done = _of(LOG.session_lines(), "tool.execution_complete")[0]
    done["data"]["shellExecution"]["exitCode"] = value
    assert_reader_error(READER, done, "bad_exit")


def test_broken_real_lines_raise_format_errors() -> None:
    """Real lines broken on purpose: a list (not_object), `type` deleted (no_type), `data` made
    a string (unknown_shape), a start without toolName (unknown_shape), a complete without
    `success` (unknown_shape), a timestamp made a number (bad_ts)."""
    lines = LOG.session_lines()
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
        assert_reader_error(READER, obj, reason)


def test_other_tools_and_unknown_types() -> None:
    """A real bash tool.execution_start renamed to `view`: a tool event, and its completion
    (shellExecution deleted: only shell calls carry it) gives nothing; a real line whose type was
    renamed to one the reader does not use still has the event shape and gives nothing."""
    lines = LOG.session_lines()
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
    lines = LOG.session_lines()
    state = READER.new_file_state()
    READER.parse_line(_of(lines, "user.message")[0], state)
    final = [o for o in _of(lines, "assistant.message") if not o["data"]["toolRequests"]][-1]
    end = _of(lines, "assistant.turn_end")[-1]
    final["agentId"] = end["agentId"] = "sub-agent-1"
    assert [e.kind for e in READER.parse_line(final, state)] == [TEXT]
    assert READER.parse_line(end, state) == []


def _verdict_lines(name: str) -> list[dict]:
    evidence = json.loads((EVIDENCE_DIR / "copilot.json").read_text())
    [rel] = evidence["verdict_scenarios"][name]["session_files"]
    path = EVIDENCE_DIR / "copilot" / "verdict" / name / rel
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_session_error_ends_an_open_turn_only() -> None:
    """The real `error` capture: its session.error (after the turn's assistant.turn_end) is the
    turn's error and ends it; the same line before any prompt (an error at start-up) ends no
    turn."""
    lines = _verdict_lines("error")
    state = READER.new_file_state()
    kinds = [e.kind for line in lines for e in READER.parse_line(line, state)]
    assert kinds == [TURN_START, ERROR, TURN_END]
    [error] = [line for line in lines if line["type"] == "session.error"]
    assert READER.parse_line(error, READER.new_file_state()) == []
    [event, _] = READER.parse_line(copy.deepcopy(error), {**READER.new_file_state(),
                                                          "open": True})
    assert event.detail == "400 harness: stub refused the request"
