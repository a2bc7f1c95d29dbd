"""pi's session-log reader (issue 5; issue 15: every verified release), on the harness's real
session files only.

Every test runs on each verified release's captures (``version_params("pi")`` of
``tests/sessionlogs.py``, from ``harness.evidence.versions``: the pin, pi 1.6.0 of
``@earendil-works/pi-coding-agent``, then the kept captures of 0.73.1, the last release of
``@mariozechner/pi-coding-agent``, 0.31.1, the oldest whose bash tool is bash (session format
v2), and 0.27.9, whose session log (format v1) is read though its ``sh -c`` commands are never
recorded: issue 26 item 3). The files are found through each release's
``pi.json`` (``session_files``, ``scenario_sessions``, ``verdict_scenarios``), never named here: a
harness re-run replaces them with new ids and times. Every id and time a test expects is read
from the file itself. The checks every JSON Lines reader passes come from ``tests/sessionlogs.py``
(:class:`SessionLogChecks`); the tests below are pi's own. Error handling is tested on real lines
broken on purpose (each test says how). pi's wrapper facts (none: it runs ``/bin/bash -c``) are in
``tests/test_backend_bare.py``.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from harness import checks
from harness import evidence as evidence_dirs
from repeat_failure.backends import (ERROR, SHELL_END, TURN_END, TURN_START, SHELL_START,
                              UnusedLine)
from repeat_failure.backends.pi import ABORTED, PiSessionReader
from repeat_failure.sessions.tail import SessionTail

from sessionlogs import (
    JUNK,
    PiLogChecks,
    SessionLog,
    SessionLogChecks,
    assert_reader_error,
    drop_path,
    field_paths,
    first_pi_message,
    iso_ts,
    pi_messages,
    set_path,
    version_params,
)

#: pi's real session logs of each verified release, the pin first.
VERSIONS = [SessionLog("pi", param.values[0]) for param in version_params("pi")]
#: What each verified release's captures show (from its real files and its bundle): its npm
#: package, whether it logs the system prompt as a leading ``system`` message, and what its
#: ``killed`` verdict capture (SIGTERM while ``sleep 8`` ran) ends with after the call starts.
FACTS = {
    "1.6.0": {"package": "@earendil-works/pi-coding-agent", "system_message": True,
              "killed_tail": [SHELL_END, ERROR, TURN_END]},
    "0.73.1": {"package": "@mariozechner/pi-coding-agent", "system_message": False,
               "killed_tail": []},
    "0.31.1": {"package": "@mariozechner/pi-coding-agent", "system_message": False,
               "killed_tail": []},
    "0.27.9": {"package": "@mariozechner/pi-coding-agent", "system_message": False,
               "killed_tail": []},
}
READER = VERSIONS[0].reader


def by_version(test):
    """Parametrize ``test``'s ``log`` argument (a :class:`SessionLog`) over every verified
    release (ids: ``pi-<version>``)."""
    return pytest.mark.parametrize("log", VERSIONS, ids=[p.id for p in version_params("pi")])(test)


def test_the_pin_and_the_previous_pin_are_verified() -> None:
    """The versions matrix is pi 1.6.0 (the pin, in the primary evidence), 0.73.1, 0.31.1 and
    0.27.9 (kept under ``harness/evidence/versions/pi/``), each the real run of its own
    package."""
    assert [v.version for v in VERSIONS] == ["1.6.0", "0.73.1", "0.31.1", "0.27.9"]
    assert VERSIONS[0].root == evidence_dirs.primary()
    for log in VERSIONS[1:]:
        assert log.root == evidence_dirs.primary() / "versions" / "pi" / log.version
    for log in VERSIONS:
        evidence = log.evidence()
        assert (evidence["package"], evidence["version"]) == (FACTS[log.version]["package"],
                                                              log.version)


class TestSessionLog(SessionLogChecks, PiLogChecks):
    """The checks every JSON Lines reader passes and those of pi's log format, on each verified
    release's real files: every entry type and role present is read without an error; the final
    answer (no tool call) ends the turn."""

    log = VERSIONS[0]  # the machinery points it at each release (SessionLogChecks)
    reader_class = PiSessionReader
    line_kinds_in_every_file = frozenset({"session", "message"})


def test_reader_is_not_pis_record_route() -> None:
    """pi's commands reach bash (the neutral route records them), so its reader is not pi's
    record route; the glob's default agent directory and the coverage text name where pi
    writes the sessions (the same in 1.6.0 and 0.73.1)."""
    assert READER.route_records is False
    assert READER.env_defaults == {"PI_CODING_AGENT_DIR": ".pi/agent"}
    assert READER.signal.startswith("~/.pi/agent/sessions/*/*.jsonl: ")


@by_version
def test_the_logged_system_prompt_is_read_as_nothing(log: SessionLog) -> None:
    """pi 1.6.0 writes the system prompt as the first ``message`` (role ``system``, before the
    user's prompt) of every session file; it gives no event and no error. 0.73.1 writes none."""
    for path in log.all_files():
        lines = log.lines(path)
        systems = pi_messages(lines, "system")
        if not FACTS[log.version]["system_message"]:
            assert systems == []
            continue
        assert systems and systems[0] < pi_messages(lines, "user")[0], path.name
        for i in systems:
            assert READER.parse_line(lines[i], READER.new_file_state()) == []


def _system_line() -> dict[str, Any]:
    (log,) = [v for v in VERSIONS if FACTS[v.version]["system_message"]]
    return first_pi_message(log, "system")


def test_no_field_of_the_system_message_is_read() -> None:
    """The real 1.6.0 ``system`` message is a message this reader does not use: with any one of
    its message's fields (``content``, ``sections``, ``toolsAdded``, ``timestamp`` and every
    field inside them) deleted or replaced by each junk value, it still gives no event and no
    error. What is read of it is only its entry's shape (``message`` an object with a string
    ``role``) and time."""
    line = _system_line()
    count = 0
    for path in field_paths(line["message"], ("message",)):
        if path == ("message", "role"):
            continue
        broken = copy.deepcopy(line)
        assert READER.parse_line(drop_path(broken, path), READER.new_file_state()) == [], path
        for value in JUNK:
            broken = copy.deepcopy(line)
            assert READER.parse_line(set_path(broken, path, value),
                                     READER.new_file_state()) == [], (path, value)
        count += 1
    assert count > 20


@pytest.mark.parametrize(("how", "broken", "reason"), [
    ("the real system line with its role changed to one pi never wrote",
     lambda: set_path(_system_line(), ("message", "role"), "narrator"), "unknown_type"),
    ("the real system line with a list as message",
     lambda: set_path(_system_line(), ("message",), []), "unknown_shape"),
    ("the real system line with a timestamp that is not a time",
     lambda: set_path(_system_line(), ("timestamp",), "yesterday"), "bad_ts"),
], ids=["unknown role", "list as message", "bad timestamp"])
def test_the_system_line_broken_where_it_is_read(how: str, broken: Any, reason: str) -> None:
    """What the reader does read of the real 1.6.0 system line (its entry's ``message`` object,
    its ``role``, its ``timestamp``) still raises when broken as described."""
    assert_reader_error(READER, broken(), reason)


#: (how, a function of a release's log giving the broken line, reason).
BROKEN = [
    ("the real user line inside a list", lambda log: [first_pi_message(log, "user")],
     "not_object"),
    ("the real user line's JSON as a string",
     lambda log: json.dumps(first_pi_message(log, "user")), "not_object"),
    ("the real user line without its type",
     lambda log: drop_path(first_pi_message(log, "user"), ("type",)), "no_type"),
    ("the real user line with a number as type",
     lambda log: set_path(first_pi_message(log, "user"), ("type",), 3), "no_type"),
    ("the real user line with an unknown type",
     lambda log: set_path(first_pi_message(log, "user"), ("type",), "message_v2"),
     "unknown_type"),
    ("the real user line with a list as message",
     lambda log: set_path(first_pi_message(log, "user"), ("message",), []), "unknown_shape"),
    ("the real user line without a role",
     lambda log: drop_path(first_pi_message(log, "user"), ("message", "role")),
     "unknown_shape"),
    ("the real user line with an unknown role",
     lambda log: set_path(first_pi_message(log, "user"), ("message", "role"), "narrator"),
     "unknown_type"),
    ("the real call line with its content as a string",
     lambda log: set_path(first_pi_message(log, "assistant"), ("message", "content"), "ls"),
     "unknown_shape"),
    ("the real call line without its stopReason",
     lambda log: drop_path(first_pi_message(log, "assistant"), ("message", "stopReason")),
     "unknown_shape"),
    ("the real call line with a number as the call's id",
     lambda log: set_path(first_pi_message(log, "assistant"),
                          ("message", "content", 0, "id"), 55), "unknown_shape"),
    ("the real result line with isError as a string",
     lambda log: set_path(first_pi_message(log, "toolResult"), ("message", "isError"), "true"),
     "unknown_shape"),
    ("the real result line with a number as toolCallId",
     lambda log: set_path(first_pi_message(log, "toolResult"), ("message", "toolCallId"), 55),
     "unknown_shape"),
    ("the real result line with its content as a number",
     lambda log: set_path(first_pi_message(log, "toolResult"), ("message", "content"), 2),
     "unknown_shape"),
    ("the real result line's exit notice with a word for the code",
     lambda log: set_path(first_pi_message(log, "toolResult"), ("message", "content", 0, "text"),
                          first_pi_message(log, "toolResult")["message"]["content"][0]["text"]
                          .replace("code 2", "code two")), "bad_exit"),
    ("the real result line with a timestamp that is not a time",
     lambda log: set_path(first_pi_message(log, "toolResult"), ("timestamp",), "yesterday"),
     "bad_ts"),
    ("the real result line with a list as timestamp",
     lambda log: set_path(first_pi_message(log, "toolResult"), ("timestamp",), []), "bad_ts"),
]


@by_version
@pytest.mark.parametrize(("how", "broken", "reason"), BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_real_lines_raise_reader_format_error(log: SessionLog, how: str, broken: Any,
                                                     reason: str) -> None:
    """A real line broken as described raises ReaderFormatError with a fixed reason label that
    never quotes the line: ``unknown_type`` for a line of a kind (entry type, message role) the
    reader does not use, a shape error for a line of a kind it reads."""
    assert_reader_error(READER, broken(log), reason)


@by_version
def test_calls_of_a_failed_or_aborted_reply_never_start(log: SessionLog) -> None:
    """The real call line with ``stopReason`` changed to ``error`` or ``aborted``: pi ends the
    run without running its calls (``agent-loop.js`` of both releases), so no shell call starts;
    the turn ends on its terminal error (turn verdicts, issue 8): the ``errorMessage``, for an
    abort without one :data:`ABORTED`."""
    for stop, message, detail in (("error", None, ""), ("aborted", None, ABORTED),
                                  ("aborted", "   ", ABORTED),
                                  ("aborted", "This operation was aborted",
                                   "This operation was aborted"),
                                  ("error", "400 status code", "400 status code")):
        line = set_path(first_pi_message(log, "assistant"), ("message", "stopReason"), stop)
        if message is not None:
            line["message"]["errorMessage"] = message
        events = READER.parse_line(line, READER.new_file_state())
        assert [(e.kind, e.detail) for e in events] == [(ERROR, detail), (TURN_END, "")]


@by_version
def test_the_users_own_bang_command_is_not_agent_activity(log: SessionLog) -> None:
    """The real result line with its role changed to ``bashExecution`` (the message pi writes
    for the user's own ``!`` command, ``messages.d.ts``) gives no event: it is not an agent
    tool call."""
    line = set_path(first_pi_message(log, "toolResult"), ("message", "role"), "bashExecution")
    assert READER.parse_line(line, READER.new_file_state()) == []


@by_version
def test_pi_16s_usage_and_context_edit_entries_are_read_as_nothing(log: SessionLog) -> None:
    """The real user line retyped as each entry type pi 1.6.0's ``session-manager.d.ts`` lists
    that its captures do not show (``usage``, ``context_edit``) gives no event and no error."""
    for kind in ("usage", "context_edit"):
        line = set_path(first_pi_message(log, "user"), ("type",), kind)
        assert READER.parse_line(line, READER.new_file_state()) == []


def _killed(log: SessionLog) -> tuple[list[Any], dict[str, Any]]:
    """The decoded lines of the release's ``killed`` verdict capture and its evidence."""
    run = log.evidence()["verdict_scenarios"]["killed"]
    (rel,) = run["session_files"]
    return log.lines(log.home / "verdict" / "killed" / rel), run


@by_version
def test_a_killed_run(log: SessionLog) -> None:
    """SIGTERM while the turn's one shell call (``touch <marker> && sleep 8``) ran. pi 1.6.0
    aborts the run before it exits: the call's result is ``Command aborted`` (failed, no exit
    code), then an assistant message ``stopReason: "aborted"`` with ``errorMessage`` "This
    operation was aborted" ends the turn on that error (so the turn is ``agent_error``). pi
    0.73.1, 0.31.1 and 0.27.9 wrote nothing after the call: the turn has no end (not
    classified)."""
    lines, run = _killed(log)
    assert run["cli_exit"] == 143
    events = log.read_indexed(lines)
    (command,) = [step["arg"] for step in run["steps"]]
    kinds = [e.kind for _, e in events]
    assert kinds == [TURN_START, SHELL_START, *FACTS[log.version]["killed_tail"]]
    for i, event in events:
        assert event.ts == iso_ts(lines[i]["timestamp"])
    start = events[1][1]
    assert (start.command, start.tool) == (command, "bash")
    if log.version != "1.6.0":
        return
    (_, end), (error_at, error), (end_at, turn_end) = events[2:]
    assert (end.call_id, end.command, end.exit, end.failed) == (start.call_id, command, None,
                                                                True)
    assert error.detail == "This operation was aborted"
    assert error_at == end_at == pi_messages(lines, "assistant")[-1]
    result = lines[pi_messages(lines, "toolResult")[-1]]["message"]
    assert (result["content"][0]["text"], result["isError"]) == ("Command aborted", True)
    assert lines[end_at]["message"]["stopReason"] == "aborted"


@by_version
def test_an_unknown_role_is_not_a_broken_message(log: SessionLog) -> None:
    """A ``message`` whose role this reader does not know is a line it does not use: its reason
    (``unknown_type``) is not one of the shape errors of the lines it reads, and the lines after
    it are read as before (the file's state is untouched)."""
    lines = log.session_lines()
    state = READER.new_file_state()
    whole = log.read(lines)
    out = []
    for i, line in enumerate(lines):
        if i == pi_messages(lines, "user")[0] + 1:
            odd = set_path(copy.deepcopy(lines[pi_messages(lines, "toolResult")[0]]),
                           ("message", "role"), "auditor")
            with pytest.raises(UnusedLine) as raised:
                READER.parse_line(odd, state)
            assert raised.value.reason == "unknown_type"
        out += READER.parse_line(line, state)
    assert out == whole


@by_version
def test_lines_of_unknown_kinds_are_ignored_not_errors_in_the_tail(log: SessionLog,
                                                                  tmp_path) -> None:
    """The real shell-run session in an agent home, with two lines added after its prompt: the
    real user line retyped as an entry type pi never wrote, and the real result line with a role
    pi never wrote. The sidecar's tail counts both as ignored (``reader_lines_ignored_total``),
    none as a reader error, and gives exactly the events of the real file."""
    (path,) = log.session_files()
    rel = path.relative_to(log.home)
    lines = path.read_bytes().splitlines(keepends=True)
    prompt = pi_messages(log.lines(path), "user")[0]
    odd_type = set_path(first_pi_message(log, "user"), ("type",), "message_v2")
    odd_role = set_path(first_pi_message(log, "toolResult"), ("message", "role"), "auditor")
    added = [json.dumps(odd_type).encode() + b"\n", json.dumps(odd_role).encode() + b"\n"]
    dest = tmp_path / "home" / rel
    dest.parent.mkdir(parents=True)
    dest.write_bytes(b"".join(lines[:prompt + 1] + added + lines[prompt + 1:]))
    result = SessionTail(READER, tmp_path / "home", backfill_s=float("inf")).poll(rescan=True)
    assert (result.ignored, dict(result.errors)) == (2, {})
    real = log.read(log.lines(path))
    assert [(e.kind, e.ts, e.command, e.exit) for e in result.events] == \
        [(e.kind, e.ts, e.command, e.exit) for e in real]


@by_version
def test_every_check_drift_applies_holds(log: SessionLog) -> None:
    """``harness.checks`` (what ``python -m harness drift`` and the fresh-evidence tests apply)
    finds nothing wrong in each verified release's captures: route, readers and verdicts, the
    verdicts per release (``checks.session_verdicts``: killed is agent_error on 1.6.0 and not
    classified on 0.73.1 and the releases before it)."""
    assert checks.check("pi", log.root) == {"route": [], "readers": [], "verdicts": [],
                                            "notes": []}
    killed = checks.session_verdicts("pi", log.version)["killed"]
    assert killed == ("agent_error" if FACTS[log.version]["killed_tail"] else None)
