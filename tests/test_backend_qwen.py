"""Qwen Code's session-log reader (C12's shell-activity signal, issue 19's failure output, the
turn verdicts), on the harness's real chat files of Qwen Code 0.24.4.

Every test reads the real files the harness kept (``harness/evidence/qwen.json`` →
``session_files``, ``scenario_sessions``, ``verdict_scenarios``); ids and times come from the
files; a test of error handling takes a real line and breaks it (its docstring says how).
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from harness import checks
from harness.evidence import COMMITTED
from repeat_failure.backends import (ERROR, SHELL_END, SHELL_START, TEXT, TOOL, TURN_END,
                                     TURN_START, SessionEvent, UnusedLine)
from repeat_failure.backends.coverage import COVERAGE
from repeat_failure.backends.qwen import QwenReader
from repeat_failure.sessions.tail import SessionTail
from repeat_failure.turns.verdict import AGENT_ERROR, OK, TurnTracker

from repeat_failure.backends.qwen import strip
from repeat_failure.rules.normalize import normalize
from sessionlogs import (EVIDENCE_DIR, SHELL_REPEAT, SessionLog, SessionLogChecks,
                         assert_reader_error, evidence_of, iso_ts, version_params)

LOG = SessionLog("qwen")
READER = LOG.reader
OUTPUT = "ls: cannot access '/nonexistent': No such file or directory"
#: Qwen Code sometimes logs a fast command's output as empty (``Output: (empty)``, ``output:
#: ""``): its capture races the command's exit (seen in real runs: 1 call in 4 in one CI run,
#: the ok run's ``echo`` in another). The reader must give what the log holds, so a call's
#: output is ``ls``'s message or "".
MAY_LOSE = ("",)


def _logged_output(result_line: dict) -> str:
    """The output a 0.24.x ``tool_result`` line's ``resultDisplay`` object holds."""
    return result_line["toolCallResult"]["resultDisplay"]["output"]


class TestSessionLog(SessionLogChecks):
    """The checks every JSON Lines reader passes, on every kept release. Where Qwen Code's loop
    guard stopped the repeated run at its fifth identical call (0.24.4, 0.5.0): four calls,
    and no answer (the log ends on the fourth result); where it did not (0.12.0): five calls
    and the answer (``harness.checks.loop_guard``)."""

    log = LOG
    reader_class = QwenReader

    @property
    def shell_repeat(self) -> int:  # type: ignore[override]
        """The calls the release's loop guard let through (five without one)."""
        return checks.loop_guard("qwen", self.log.version) or SHELL_REPEAT

    @property
    def answered(self) -> bool:  # type: ignore[override]
        """Whether the repeated run ended with the answer (no guard stopped it)."""
        return checks.loop_guard("qwen", self.log.version) is None

    known_line_kinds = frozenset({"user", "assistant", "tool_result", "system"})
    line_kinds_in_every_file = frozenset({"user", "system"})


def _verdict_lines(name: str) -> list:
    (rel,) = LOG.evidence()["verdict_scenarios"][name]["session_files"]
    return LOG.lines(LOG.home / "verdict" / name / rel)


def _first(lines: list, kind: str) -> dict:
    return copy.deepcopy(next(o for o in lines if o["type"] == kind))


def test_reader_glob_signal_and_row() -> None:
    """The reader reads the chat files, is not the record route (the hook records Qwen Code's
    plain ``bash -c``), and the coverage row names its signal instead of "safeguard
    unavailable"."""
    assert READER.globs == (".qwen/projects/*/chats/*.jsonl",)
    assert READER.route_records is False
    assert COVERAGE["qwen"].shell_activity == READER.signal
    assert READER.signal.startswith("~/.qwen/projects/*/chats/*.jsonl: ")


def test_shell_calls_have_the_files_ids_times_exits_and_output() -> None:
    """Start: the assistant line's time, the call's id and ``args.command``; end: the
    tool_result line's time, ``resultDisplay.exitCode`` (2) and the command's own output (no
    ``Command:`` / ``Exit Code:`` lines)."""
    lines = LOG.session_lines()
    turn = lines[0]["uuid"]
    expected = []
    results = {o["toolCallResult"]["callId"]: o for o in lines if o["type"] == "tool_result"}
    for obj in (o for o in lines if o["type"] == "assistant"):
        call = obj["message"]["parts"][0]["functionCall"]
        end = results[call["id"]]
        expected += [
            SessionEvent(SHELL_START, iso_ts(obj["timestamp"]), call_id=call["id"],
                         command="ls /nonexistent", tool="run_shell_command", turn_id=turn),
            SessionEvent(SHELL_END, iso_ts(end["timestamp"]), call_id=call["id"],
                         command="ls /nonexistent", exit=2, failed=True,
                         tool="run_shell_command", turn_id=turn, output=_logged_output(end))]
        assert _logged_output(end) in (OUTPUT, *MAY_LOSE)
    assert len(expected) == 8
    assert [e for e in LOG.read(lines) if e.kind in (SHELL_START, SHELL_END)] == expected


def test_ok_turn_exit_0_text_and_end() -> None:
    """The ``ok`` verdict run: ``echo harness-ok`` ends with exit 0, not failed, output
    ``harness-ok``; the answer ("Done: the command ran.") is text and ends the turn."""
    lines = _verdict_lines("ok")
    events = LOG.read(lines)
    turn = lines[0]["uuid"]
    assert [e.kind for e in events] == [TURN_START, SHELL_START, SHELL_END, TEXT, TURN_END]
    end = events[2]
    assert (end.command, end.exit, end.failed, end.turn_id) == (
        "echo harness-ok", 0, False, turn)
    assert end.output in ("harness-ok", *MAY_LOSE)
    assert events[-1].ts == iso_ts(lines[-1]["timestamp"])


def test_error_turn_is_the_api_error() -> None:
    """The ``error`` verdict run (HTTP 400, which Qwen Code does not retry): the api_error
    telemetry line ends the turn with its message."""
    lines = _verdict_lines("error")
    events = LOG.read(lines)
    assert [e.kind for e in events] == [TURN_START, ERROR, TURN_END]
    assert events[1].detail == "400 harness: stub refused the request"
    assert events[1].ts == iso_ts(lines[-1]["timestamp"])


@pytest.mark.parametrize("status", [429, 500, 503, None, "400"])
def test_retried_or_unknown_api_errors_do_not_end_the_turn(status) -> None:
    """The real api_error line with a status Qwen Code retries (429, 5xx), none, or a status
    that is not a number: no event, the turn stays open."""
    lines = _verdict_lines("error")
    state = READER.new_file_state()
    READER.parse_line(lines[0], state)
    line = copy.deepcopy(lines[-1])
    line["systemPayload"]["uiEvent"]["status_code"] = status
    assert READER.parse_line(line, state) == [] and state["open"] is True


def test_killed_call_is_cancelled_without_exit() -> None:
    """The ``killed`` verdict run: the running command's result says ``cancelled`` with no
    display: it ended failed with no exit number and no output; the turn has no end. In a fresh
    capture the kill can land before qwen writes that result (seen in a CI run, 2026-12-02):
    then the call is only started; the committed capture holds the result."""
    events = LOG.read(_verdict_lines("killed"))
    kinds = [e.kind for e in events]
    if EVIDENCE_DIR != COMMITTED and kinds == [TURN_START, SHELL_START]:
        return
    assert kinds == [TURN_START, SHELL_START, SHELL_END]
    assert (events[2].exit, events[2].failed, events[2].output) == (None, True, None)


def test_empty_reply_leaves_the_turn_open() -> None:
    """The ``empty`` verdict run: five requests, no reply and no error written: only the
    turn's start."""
    assert [e.kind for e in LOG.read(_verdict_lines("empty"))] == [TURN_START]


@pytest.mark.parametrize("name,expected", [("ok", OK), ("error", AGENT_ERROR), ("empty", None),
                                           ("killed", None)])
def test_session_verdicts(name: str, expected) -> None:
    """The sidecar's tail and turn tracker on each verdict run's home: the verdict
    ``harness.checks.SESSION_VERDICTS`` names (None: no end, not classified)."""
    assert checks.SESSION_VERDICTS["qwen"][name] == expected
    tracker = TurnTracker(READER.edit_tools)
    result = SessionTail(READER, EVIDENCE_DIR / "qwen" / "verdict" / name,
                         backfill_s=float("inf")).poll(rescan=True)
    turns = [t for e in result.events for t in tracker.on_event(e)]
    assert [t.verdict for t in turns] == ([expected] if expected else [])
    assert not result.errors and result.ignored == 0


def test_exit_from_the_text_when_no_display() -> None:
    """A real failing result without its ``resultDisplay``: the exit comes from the
    response's ``Exit Code: 2`` line and the output from its ``Output:`` line;
    ``Exit Code: (none)`` is no number, failed; ``Exit Code:
    two`` is bad_exit."""
    line = _first(LOG.session_lines(), "tool_result")
    logged = _logged_output(line)
    del line["toolCallResult"]["resultDisplay"]
    (end,) = READER.parse_line(line, READER.new_file_state())
    assert (end.kind, end.exit, end.failed, end.output) == (SHELL_END, 2, True, logged)
    response = line["message"]["parts"][0]["functionResponse"]["response"]
    response["error"] = response["error"].replace("Exit Code: 2", "Exit Code: (none)")
    (end,) = READER.parse_line(line, READER.new_file_state())
    assert (end.exit, end.failed) == (None, True)
    response["error"] = response["error"].replace("Exit Code: (none)", "Exit Code: two")
    assert_reader_error(READER, line, "bad_exit")


def test_exit_code_that_is_not_a_number() -> None:
    """A real result whose ``resultDisplay.exitCode`` became ``"2"`` or ``2.5``: bad_exit."""
    for value in ("2", 2.5):
        line = _first(LOG.session_lines(), "tool_result")
        line["toolCallResult"]["resultDisplay"]["exitCode"] = value
        assert_reader_error(READER, line, "bad_exit")


def test_thought_is_not_text_and_other_tools_are_tools() -> None:
    """The ``read`` snapshot's answer marked ``thought: true`` gives no text and no end; its
    ``read_file`` call is a tool event, and its result gives nothing."""
    (path,) = LOG.scenario_files("read")
    lines = LOG.lines(path)
    events = LOG.read(lines)
    assert [(e.kind, e.tool) for e in events] == [
        (TURN_START, ""), (TOOL, "read_file"), (TEXT, ""), (TURN_END, "")]
    answer = copy.deepcopy(lines[-1])
    answer["message"]["parts"][0]["thought"] = True
    state = READER.new_file_state()
    for line in lines[:-1]:
        READER.parse_line(line, state)
    assert READER.parse_line(answer, state) == []


def test_a_call_seen_twice_starts_once_and_a_result_without_its_start_ends() -> None:
    """An assistant line read again gives nothing; a tool_result read with a fresh state (its
    call before the sidecar started) still ends the call, with the command unknown."""
    lines = LOG.session_lines()
    state = READER.new_file_state()
    call = _first(lines, "assistant")
    assert [e.kind for e in READER.parse_line(call, state)] == [SHELL_START]
    assert READER.parse_line(call, state) == []
    (end,) = READER.parse_line(_first(lines, "tool_result"), READER.new_file_state())
    assert (end.kind, end.command, end.exit, end.tool) == (SHELL_END, "", 2, "run_shell_command")


def test_unknown_line_type_is_unused_and_broken_lines_are_errors() -> None:
    """A real line with a new ``type`` is skipped (UnusedLine); real lines broken on purpose
    raise: ``message.parts`` an object, a call without ``id``, a result without ``callId``, a
    timestamp a number."""
    lines = LOG.session_lines()
    other = _first(lines, "user")
    other["type"] = "compaction"
    with pytest.raises(UnusedLine):
        READER.parse_line(other, READER.new_file_state())
    parts_obj = _first(lines, "assistant")
    parts_obj["message"]["parts"] = parts_obj["message"]["parts"][0]
    no_id = _first(lines, "assistant")
    del no_id["message"]["parts"][0]["functionCall"]["id"]
    no_call = _first(lines, "tool_result")
    del no_call["toolCallResult"]["callId"]
    bad_ts = _first(lines, "assistant")
    bad_ts["timestamp"] = 1764500000
    for reason, obj in [("unknown_shape", parts_obj), ("unknown_shape", no_id),
                        ("unknown_shape", no_call), ("bad_ts", bad_ts),
                        ("not_object", [lines[0]])]:
        assert_reader_error(READER, obj, reason)


def test_harness_checks_hold() -> None:
    """``python -m harness``'s checks of the committed evidence: the route, the reader (four
    guarded calls) and the verdicts all hold."""
    found = checks.check("qwen", Path(EVIDENCE_DIR))
    assert {k: found[k] for k in ("route", "readers", "verdicts")} == {
        "route": [], "readers": [], "verdicts": []}


@pytest.mark.parametrize("root", version_params("qwen"))
def test_every_release_gives_exit_failed_and_output(root: Path) -> None:
    """On each kept release's repeated run (0.24.4's ``resultDisplay`` object, 0.12.0's
    display string with ``status: success`` for a failure, 0.5.0's): every call ends with exit
    2, failed, the command and ``ls``'s own message as output; as many calls as the release's
    loop guard let through."""
    log = SessionLog("qwen", root)
    ends = [(e.command, e.exit, e.failed, e.output)
            for e in log.read(log.session_lines()) if e.kind == SHELL_END]
    calls = checks.loop_guard("qwen", log.version) or SHELL_REPEAT
    assert [e[:3] for e in ends] == [("ls /nonexistent", 2, True)] * calls
    assert all(e[3] in (OUTPUT, *MAY_LOSE) for e in ends), ends


@pytest.mark.parametrize("root", version_params("qwen"))
def test_every_release_route_records_the_agents_command(root: Path) -> None:
    """The hook's records of each kept release, stripped of the release's wrapper (0.5.0: ``{
    <cmd>; }; __code=$?; pgrep -g 0 >... 2>&1; exit $__code;``; 0.12.0 and 0.24.4: none), are
    the commands the stub asked for, with their exits."""
    for run in evidence_of("qwen", root)["runs"]:
        got = [(normalize(r["raw"], "qwen"), r["exit"]) for r in run["records"]]
        times = min(run["repeat"], checks.loop_guard("qwen", evidence_of("qwen", root)["version"])
                    or run["repeat"])
        assert got == [(run["command"], checks.EXITS[run["command"]])] * times


def test_strip_takes_off_the_older_wrapper_only() -> None:
    """The 0.5.0 wrapper around a command (the recorded form), around one ending with ``&``
    (no ``;`` added), a plain command, a user's own brace group and a wrapper cut before its
    tail: only the complete wrapper is taken off."""
    tail = " }; __code=$?; pgrep -g 0 >/tmp/shell_pgrep_3ead38395c97.tmp 2>&1; exit $__code;"
    assert strip("{ ls /nonexistent;" + tail) == "ls /nonexistent"
    assert strip("{ sleep 9 &" + tail) == "sleep 9 &"
    assert strip("{ a; b; }; echo done") == "{ a; b; }; echo done"
    assert strip("ls /nonexistent") == "ls /nonexistent"
    cut = "{ ls /nonexistent; }; __code=$?; pgrep"
    assert strip(cut) == cut


def _release_verdict(root: Path, name: str) -> list[SessionEvent]:
    log = SessionLog("qwen", root)
    (rel,) = log.evidence()["verdict_scenarios"][name]["session_files"]
    return log.read(log.lines(log.home / "verdict" / name / rel))


@pytest.mark.parametrize("root", version_params("qwen"))
def test_every_release_error_and_ok_runs(root: Path) -> None:
    """Each kept release's ``error`` run (HTTP 400) ends the turn with the message: 0.5.0
    writes ``status_code: null`` and ``error: "400 ..."``, 0.12.0 the status and ``error``,
    0.24.2 and 0.24.4 ``error_message``; its ``ok`` run's call ends with exit 0, not failed,
    output ``harness-ok``."""
    events = _release_verdict(root, "error")
    assert [e.kind for e in events] == [TURN_START, ERROR, TURN_END]
    assert events[1].detail == "400 harness: stub refused the request"
    ends = [(e.command, e.exit, e.failed, e.output)
            for e in _release_verdict(root, "ok") if e.kind == SHELL_END]
    assert [e[:3] for e in ends] == [("echo harness-ok", 0, False)]
    assert ends[0][3] in ("harness-ok", *MAY_LOSE)


def test_older_api_error_without_a_status_code() -> None:
    """0.5.0's real api_error line (``status_code: null``): the status comes from the ``error``
    text; a network error text with no leading status, or a 429 / 503 there, does not end the
    turn."""
    root = next(p.values[0] for p in version_params("qwen") if p.id == "qwen-0.5.0")
    log = SessionLog("qwen", root)
    (rel,) = log.evidence()["verdict_scenarios"]["error"]["session_files"]
    lines = log.lines(log.home / "verdict" / "error" / rel)
    event = lines[-1]["systemPayload"]["uiEvent"]
    assert (event["status_code"], event["error"]) == (
        None, "400 harness: stub refused the request")
    for text in ("Connection error.", "429 slow down", "503 unavailable"):
        state = READER.new_file_state()
        READER.parse_line(lines[0], state)
        line = copy.deepcopy(lines[-1])
        line["systemPayload"]["uiEvent"]["error"] = text
        assert READER.parse_line(line, state) == [] and state["open"] is True
