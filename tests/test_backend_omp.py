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
The checks every JSON Lines reader passes come from ``tests/sessionlogs.py``
(:class:`TestSessionLog`); the tests below are omp's own. Error handling is tested on real lines
broken on purpose (each test says how).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from repeat_failure.backends import SHELL_END, TEXT, TURN_END
from repeat_failure.backends.omp import OmpSessionReader
from repeat_failure.backends.pi import PiSessionReader

from sessionlogs import (
    EVIDENCE_DIR,
    PiLogChecks,
    SessionLog,
    SessionLogChecks,
    assert_reader_error,
    drop_path,
    first_pi_message,
    pi_messages,
    set_path,
    version_params,
)

EVIDENCE = json.loads((EVIDENCE_DIR / "omp.json").read_text())


def test_evidence_is_a_real_omp_run() -> None:
    """The evidence comes from the pinned CLI, whose own --version output it keeps."""
    assert (EVIDENCE["package"], EVIDENCE["version"]) == ("@oh-my-pi/pi-coding-agent", "18.2.3")
    assert EVIDENCE["version_output"] == "omp/18.2.3"


def test_the_neutral_route_records_nothing_and_the_session_log_route_everything() -> None:
    """Each run asked the stub for the tool call(s) and the final answer (one request per tool
    result plus one) and finished normally; the neutral route wrote no record, the session-log
    route (omp_session_log) found every call with its exit, and the sidecar raised the note
    from it."""
    expected_exit = {"ls /nonexistent": 2, "false": 1, "echo harness-ok": None}
    for run in EVIDENCE["runs"]:
        assert run["cli_exit"] == 0
        assert run["stub_requests"] == ["POST /v1/chat/completions"] * (run["repeat"] + 1)
        assert run["records"] == []
        command = run["command"]
        assert [(r["command"], r["exit"], r["failed"]) for r in run["session_records"]] == [
            (command, expected_exit[command], command != "echo harness-ok")] * run["repeat"]
    assert EVIDENCE["runs"][-1]["note"] == (
        "Repeating failure: ls /nonexistent failed 5 times in 1 min (exit 2)")


def test_session_log_has_the_commands_and_exit_codes() -> None:
    """omp's session log (``~/.omp/agent/sessions/<cwd-slug>/*.jsonl``) of the 5-repeat run has
    each ``bash`` call with ``isError`` and ``details.exitCode``."""
    (session,) = EVIDENCE["session_files"]
    assert session.startswith(".omp/agent/sessions/") and session.endswith(".jsonl")
    entries = [json.loads(line) for line in (EVIDENCE_DIR / "omp" / session)
               .read_text().splitlines()]
    calls = [e["data"]["args"]["command"] for e in entries
             if e.get("customType") == "tool_execution_start" and e["data"]["toolName"] == "bash"]
    results = [(m["isError"], m["details"]["exitCode"]) for e in entries
               if (m := e.get("message") or {}).get("role") == "toolResult"
               and m["toolName"] == "bash"]
    assert calls == ["ls /nonexistent"] * 5
    assert results == [(True, 2)] * 5


# -- the session-log reader ---------------------------------------------------------------------

LOG = SessionLog("omp")
READER = LOG.reader


class TestSessionLog(SessionLogChecks, PiLogChecks):
    """The checks every JSON Lines reader passes and those of pi's log format (omp's is pi's
    with more entry types and the exit code in ``details.exitCode``), on omp 18.2.3's real
    files: the title slot, the
    header, settings changes, ``tool_execution_start`` and ``session_exit`` custom entries, the
    loop-redirect custom message and all messages are known (the ``tool_execution_start`` entry
    between a call's start and end adds nothing); omp's reader is its record route, so its
    ``shell_end`` events are omp's records."""

    log = LOG  # the machinery points it at each kept release (SessionLogChecks)
    reader_class = OmpSessionReader
    route_records = True
    # 14.9.9 writes no ``title`` slot and no ``custom`` entries (17.2.15 and 18.2.3 do).
    line_kinds_in_every_file = frozenset({"session", "message"})


#: omp's real session logs of each kept release, the pin first (issue 26 item 3): 17.2.15 is the
#: oldest here whose bash results carry ``details.exitCode``; 14.9.9 (the oldest that installs:
#: 13.19.0's postinstall downloads a browser) writes ``details: {}`` and the exit code only in
#: the result text's last line ``Command exited with code N``.
VERSIONS = [SessionLog("omp", param.values[0]) for param in version_params("omp")]
HAS_EXIT_CODE = {"18.2.3": True, "17.2.15": True, "14.9.9": False}


def test_the_kept_releases() -> None:
    """The pin 18.2.3, 17.2.15 and 14.9.9, each the real run of its release."""
    assert [v.version for v in VERSIONS] == ["18.2.3", "17.2.15", "14.9.9"]
    for log in VERSIONS:
        assert log.evidence()["version_output"] == f"omp/{log.version}"


@pytest.mark.parametrize("log", VERSIONS, ids=[p.id for p in version_params("omp")])
def test_every_kept_release_is_recorded_by_its_session_log(log: SessionLog) -> None:
    """The session-log route of each kept release found the five ``ls /nonexistent`` calls
    with exit 2 and raised the note; the exit is in ``details.exitCode`` where
    :data:`HAS_EXIT_CODE` says, else only in the text's last line, and the reader gives 2
    either way."""
    run = log.shell_run()
    assert run["records"] == []
    assert [(r["command"], r["exit"], r["failed"]) for r in run["session_records"]] == \
        [("ls /nonexistent", 2, True)] * 5
    assert run["note"] == "Repeating failure: ls /nonexistent failed 5 times in 1 min (exit 2)"
    results = [m for line in log.session_lines()
               if (m := line.get("message") or {}).get("role") == "toolResult"]
    assert len(results) == 5
    for message in results:
        assert ("exitCode" in message["details"]) is HAS_EXIT_CODE[log.version]
        assert message["content"][-1]["text"].endswith("\nCommand exited with code 2")
    ends = [e for e in log.read(log.session_lines()) if e.kind == SHELL_END]
    assert [(e.command, e.exit, e.failed) for e in ends] == [("ls /nonexistent", 2, True)] * 5


def test_reader_is_omps_record_route_and_shares_pis() -> None:
    """omp's reader is omp's record route (its commands never reach bash) and shares pi's reader
    (same format family); the glob's default agent directory and the coverage text name where
    omp 18.2.3 writes the sessions."""
    assert isinstance(READER, PiSessionReader) and READER.route_records is True
    assert READER.env_defaults == {"PI_CODING_AGENT_DIR": ".omp/agent"}
    assert READER.signal.startswith("~/.omp/agent/sessions/*/*.jsonl: ")


def _first(role: str) -> dict[str, Any]:
    return first_pi_message(LOG, role)


def _first_type(kind: str) -> dict[str, Any]:
    return copy.deepcopy(next(line for line in LOG.session_lines() if line["type"] == kind))


@pytest.mark.parametrize(("how", "broken", "reason"), [
    ("the real title line inside a list", lambda: [_first_type("title")], "not_object"),
    ("the real title line without its type",
     lambda: drop_path(_first_type("title"), ("type",)), "no_type"),
    ("the real custom line with an unknown type",
     lambda: set_path(_first_type("custom"), ("type",), "custom_v2"), "unknown_type"),
    ("the real user line with a string as message",
     lambda: set_path(_first("user"), ("message",), "hi"), "unknown_shape"),
    ("the real call line with a dict as content",
     lambda: set_path(_first("assistant"), ("message", "content"), {}), "unknown_shape"),
    ("the real call line with a number as the call's name",
     lambda: set_path(_first("assistant"), ("message", "content", 0, "name"), 1),
     "unknown_shape"),
    ("the real result line without isError",
     lambda: drop_path(_first("toolResult"), ("message", "isError")), "unknown_shape"),
    ("the real result line with a string as exitCode",
     lambda: set_path(_first("toolResult"), ("message", "details", "exitCode"), "2"),
     "bad_exit"),
    ("the real result line with a fraction as exitCode",
     lambda: set_path(_first("toolResult"), ("message", "details", "exitCode"), 2.5),
     "bad_exit"),
    ("the real result line with true as exitCode",
     lambda: set_path(_first("toolResult"), ("message", "details", "exitCode"), True),
     "bad_exit"),
    ("the real result line with a timestamp that is not a time",
     lambda: set_path(_first("toolResult"), ("timestamp",), "2026-13-45T99:00:00Z"), "bad_ts"),
])
def test_broken_real_lines_raise_reader_format_error(how: str, broken: Any, reason: str) -> None:
    """A real line broken as described raises ReaderFormatError with a fixed reason label that
    never quotes the line."""
    assert_reader_error(READER, broken(), reason)


def test_result_of_a_call_omp_never_ran_is_no_record() -> None:
    """The real result line marked as omp marks its placeholder for a call it never ran
    (``details.executed: false``, omp 18.2.3 ``agent-loop.ts``) gives no record."""
    line = set_path(_first("toolResult"), ("message", "details"),
                    {"__synthetic": True, "source": "assistant_stop_aborted", "executed": False})
    assert READER.parse_line(line, READER.new_file_state()) == []


def test_calls_of_an_aborted_reply_never_start() -> None:
    """The real call line with ``stopReason`` changed to ``aborted`` (omp runs none of its
    calls then) starts no shell call and ends the turn."""
    line = set_path(_first("assistant"), ("message", "stopReason"), "aborted")
    assert [e.kind for e in READER.parse_line(line, READER.new_file_state())] == [TURN_END]


def test_calls_cut_by_the_token_limit_never_start_and_the_turn_goes_on() -> None:
    """The real call line with ``stopReason`` changed to ``length``: omp does not run its calls
    (their arguments may be cut) and asks the model again, so no event at all."""
    line = set_path(_first("assistant"), ("message", "stopReason"), "length")
    assert READER.parse_line(line, READER.new_file_state()) == []


def test_a_paused_answer_does_not_end_the_turn() -> None:
    """The real final answer line with ``stopDetails.type`` ``pause_turn`` (omp asks the model
    to go on) is text only; unchanged, it ends the turn."""
    lines = LOG.session_lines()
    line = copy.deepcopy(lines[pi_messages(lines, "assistant")[-1]])
    assert [e.kind for e in READER.parse_line(line, READER.new_file_state())] == [TEXT, TURN_END]
    line["message"]["stopDetails"] = {"type": "pause_turn"}
    assert [e.kind for e in READER.parse_line(line, READER.new_file_state())] == [TEXT]


def test_a_steering_message_does_not_start_a_turn() -> None:
    """The real user line marked ``steering: true`` (typed while the agent works) is not a new
    turn."""
    line = set_path(_first("user"), ("message", "steering"), True)
    assert READER.parse_line(line, READER.new_file_state()) == []
