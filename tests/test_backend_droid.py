"""Factory Droid (issue 26 item 2): the neutral route records the command its supervisor's nested
shell runs, and its session-log reader (C12's signal, issue 19's failure output, the turn
verdicts), on the harness's real runs of Droid 0.215.0.

Every test reads the real files the harness kept (``harness/evidence/droid.json`` →
``runs``, ``session_files``, ``scenario_sessions``, ``verdict_scenarios``); ids and times come
from the files; a test of error handling takes a real line and breaks it.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from harness import checks
from repeat_failure.backends import (ERROR, SHELL_END, SHELL_START, TEXT, TURN_END, TURN_START,
                                     SessionEvent, UnusedLine, wrapper_stripper)
from repeat_failure.backends.coverage import COVERAGE
from repeat_failure.backends.droid import DroidReader, execute_result
from repeat_failure.sessions.tail import SessionTail
from repeat_failure.rules.normalize import normalize
from repeat_failure.turns.verdict import AGENT_ERROR, AGENT_NO_OUTPUT, OK, TurnTracker

from sessionlogs import EVIDENCE_DIR, SessionLog, SessionLogChecks, assert_reader_error, iso_ts

LOG = SessionLog("droid")
READER = LOG.reader
EXITS = {"ls /nonexistent": 2, "false": 1, "echo harness-ok": 0}
NOTE = "Repeating failure: ls /nonexistent failed 5 times in 1 min (exit 2)"
#: The command's output as the reader gives it: the blank lines before Droid's ``[Process exited
#: with code N]`` line go with that line.
OUTPUT = "ls: cannot access '/nonexistent': No such file or directory"


class TestSessionLog(SessionLogChecks):
    """The checks every JSON Lines reader passes, on Droid 0.215.0's real session files."""

    log = LOG
    reader_class = DroidReader
    known_line_kinds = frozenset({"session_start", "message", "agent_turn_outcome"})
    line_kinds_in_every_file = frozenset({"session_start", "message"})


def _verdict_lines(name: str) -> list:
    (rel,) = LOG.evidence()["verdict_scenarios"][name]["session_files"]
    return LOG.lines(LOG.home / "verdict" / name / rel)


def _message(lines: list, role: str, block: str) -> dict:
    """A copy of the first message of ``role`` holding a ``block`` content block."""
    return copy.deepcopy(next(
        o for o in lines if o["type"] == "message" and o["message"]["role"] == role
        and any(b.get("type") == block for b in o["message"]["content"]
                if isinstance(o["message"]["content"], list))))


def test_route_records_the_inner_command() -> None:
    """C-AC1 through the supervisor: each run's records are the command the stub asked for, as
    is (no stripper), once per request, with its exit status; the five-times run raised the
    note naming the command (before issue 26 every record was the supervisor script)."""
    assert wrapper_stripper("droid") is None
    runs = LOG.evidence()["runs"]
    for run in runs:
        got = [(r["raw"], normalize(r["raw"], "droid"), r["exit"]) for r in run["records"]]
        assert got == [(run["command"], run["command"], EXITS[run["command"]])] * run["repeat"]
    assert runs[-1]["note"] == NOTE


def test_row_is_covered_with_its_signal() -> None:
    """The droid row is covered on the pinned release's evidence, beyond Hive's list, through
    the neutral route, and names the reader's signal."""
    row = COVERAGE["droid"]
    assert (row.covered, row.route, row.version, row.hive) == (True, "bash_env", "0.215.0", False)
    assert row.evidence == "harness/evidence/droid.json"
    assert row.shell_activity == READER.signal
    assert READER.globs == (".factory/sessions/*/*.jsonl",) and READER.route_records is False


def test_shell_calls_have_the_files_ids_times_exits_and_output() -> None:
    """Start: the assistant message's time, ``tool_use.id`` and ``input.command``; end: the
    tool_result message's time, the exit from ``[Process exited with code 2]`` and the output
    without Droid's ``Error: Command failed`` and ``[Process exited ...]`` lines."""
    lines = LOG.session_lines()
    prompt = next(o for o in lines if o["type"] == "message"
                  and o["message"]["role"] == "user" and "visibility" not in o["message"]
                  and o["message"]["content"][0]["type"] == "text")
    expected = []
    results = {b["tool_use_id"]: o for o in lines if o["type"] == "message"
               for b in o["message"]["content"] if b.get("type") == "tool_result"}
    for obj in lines:
        if obj["type"] != "message" or obj["message"]["role"] != "assistant":
            continue
        for block in obj["message"]["content"]:
            if block["type"] != "tool_use":
                continue
            end = results[block["id"]]
            expected += [
                SessionEvent(SHELL_START, iso_ts(obj["timestamp"]), call_id=block["id"],
                             command="ls /nonexistent", tool="Execute", turn_id=prompt["id"]),
                SessionEvent(SHELL_END, iso_ts(end["timestamp"]), call_id=block["id"],
                             command="ls /nonexistent", exit=2, failed=True, tool="Execute",
                             turn_id=prompt["id"], output=OUTPUT)]
    assert len(expected) == 10
    assert [e for e in LOG.read(lines) if e.kind in (SHELL_START, SHELL_END)] == expected


def test_turn_outcome_ends_the_turn_at_the_last_message_time() -> None:
    """``agent_turn_outcome`` (no time of its own) ends the turn its ``turnId`` names, at the
    time of the message before it."""
    lines = LOG.session_lines()
    (outcome,) = [o for o in lines if o["type"] == "agent_turn_outcome"]
    last = [o for o in lines if o["type"] == "message"][-1]
    events = LOG.read(lines)
    assert events[-1] == SessionEvent(TURN_END, iso_ts(last["timestamp"]),
                                      turn_id=outcome["turnId"])
    assert events[0].turn_id == outcome["turnId"]


@pytest.mark.parametrize("name,kinds,expected", [
    ("ok", [TURN_START, SHELL_START, SHELL_END, TEXT, TURN_END], OK),
    ("empty", [TURN_START, TURN_END], AGENT_NO_OUTPUT),
    ("error", [TURN_START, ERROR, TURN_END], AGENT_ERROR),
    ("killed", [TURN_START, SHELL_START, SHELL_END, TEXT, TURN_END], OK),
])
def test_verdict_runs(name: str, kinds: list, expected: str) -> None:
    """The verdict runs: ``ok``'s ``echo harness-ok`` ends with exit 0; the empty reply is a
    turn with no output (Droid's notice to the person is not model text); the provider's error
    is the turn's error (``reason: model_request_rejected``, the text of Droid's notice); the
    killed run's command ends failed with no exit (``terminated by signal: SIGTERM``), then
    Droid answered. The sidecar's tail and tracker give ``SESSION_VERDICTS``'s verdict."""
    events = LOG.read(_verdict_lines(name))
    assert [e.kind for e in events] == kinds
    if name == "ok":
        assert (events[2].command, events[2].exit, events[2].failed) == ("echo harness-ok", 0,
                                                                         False)
    if name == "error":
        assert events[1].detail.startswith("BYOK Error: 400 harness: stub refused the request")
    if name == "killed":
        assert (events[2].exit, events[2].failed, events[2].output) == (
            None, True, "Error: Command terminated by signal: SIGTERM")
    assert checks.SESSION_VERDICTS["droid"][name] == expected
    tracker = TurnTracker(READER.edit_tools)
    result = SessionTail(READER, EVIDENCE_DIR / "droid" / "verdict" / name,
                         backfill_s=float("inf")).poll(rescan=True)
    assert [t.verdict for e in result.events for t in tracker.on_event(e)] == [expected]
    assert not result.errors and result.ignored == 0


def test_execute_result_rules() -> None:
    """The real failing result gives exit 2 and the bare output; without its last line the exit
    comes from the first; a success text with neither is exit 0; ``is_error`` true with neither
    is no number, failed; ``is_error`` not a boolean is unknown_shape."""
    block = next(b for b in _message(LOG.session_lines(), "user", "tool_result")["message"]
                 ["content"] if b["type"] == "tool_result")
    text = block["content"]
    assert execute_result(text, True) == (2, True, OUTPUT)
    head_only = text[:text.index("\n\n\n[Process exited")]
    assert execute_result(head_only, True) == (2, True, OUTPUT)
    assert execute_result("done\n", False) == (0, False, "done\n")
    assert execute_result("Error: Command timed out", True) == (None, True,
                                                                "Error: Command timed out")
    line = _message(LOG.session_lines(), "user", "tool_result")
    line["message"]["content"][0]["is_error"] = "yes"
    state = READER.new_file_state()
    for obj in LOG.session_lines():
        if obj["type"] == "message" and obj["message"]["role"] == "assistant":
            READER.parse_line(obj, state)
            break
    assert_reader_error(READER, line, "unknown_shape", state)


def test_a_result_whose_start_was_not_read_still_ends() -> None:
    """A real tool_result read with a fresh state (its call came before the sidecar read the
    file): a shell end with the command unknown, recognised by its ``[Process exited ...]``."""
    line = _message(LOG.session_lines(), "user", "tool_result")
    (end,) = READER.parse_line(line, READER.new_file_state())
    assert (end.kind, end.command, end.exit, end.tool) == (SHELL_END, "", 2, "Execute")


def test_unknown_types_and_broken_lines() -> None:
    """A line of a new type is skipped (UnusedLine); real lines broken: ``content`` a number,
    a tool_use without ``id``, an outcome without ``reason``, a timestamp a number."""
    lines = LOG.session_lines()
    other = copy.deepcopy(lines[0])
    other["type"] = "compaction"
    with pytest.raises(UnusedLine):
        READER.parse_line(other, READER.new_file_state())
    use = _message(lines, "assistant", "tool_use")
    bad_content = copy.deepcopy(use)
    bad_content["message"]["content"] = 3
    no_id = copy.deepcopy(use)
    del no_id["message"]["content"][0]["id"]
    outcome = copy.deepcopy(next(o for o in lines if o["type"] == "agent_turn_outcome"))
    del outcome["reason"]
    bad_ts = copy.deepcopy(use)
    bad_ts["timestamp"] = 1764500000
    for reason, obj in [("unknown_shape", bad_content), ("unknown_shape", no_id),
                        ("unknown_shape", outcome), ("bad_ts", bad_ts)]:
        assert_reader_error(READER, obj, reason)


def test_harness_checks_hold() -> None:
    """``python -m harness``'s checks of the committed evidence: route, reader and verdicts."""
    found = checks.check("droid", Path(EVIDENCE_DIR))
    assert {k: found[k] for k in ("route", "readers", "verdicts")} == {
        "route": [], "readers": [], "verdicts": []}
