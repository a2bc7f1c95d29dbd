"""pi's session-log reader (issue 5), on the harness's real session files only.

The files are found through ``harness/evidence/pi.json`` (``session_files``, and
``scenario_sessions`` when the harness kept them), never named here: a harness re-run replaces
them with new ids and times. Every id and time a test expects is read from the file itself. The
checks every JSON Lines reader passes come from ``tests/sessionlogs.py`` (:class:`TestSessionLog`);
the tests below are pi's own. Error handling is tested on real lines broken on purpose (each test
says how). pi's wrapper facts (none: it runs ``/bin/bash -c``) are in
``tests/test_backend_bare.py``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from sidecar.backends import ERROR, TURN_END
from sidecar.backends.pi import PiSessionReader

from sessionlogs import (
    PiLogChecks,
    SessionLog,
    SessionLogChecks,
    assert_reader_error,
    drop_path,
    first_pi_message,
    set_path,
)

LOG = SessionLog("pi")
READER = LOG.reader


class TestSessionLog(SessionLogChecks, PiLogChecks):
    """The checks every JSON Lines reader passes and those of pi's log format, on pi 0.73.1's
    real files: every entry type and role present is known; the final answer (no tool call)
    ends the turn."""

    log = LOG
    reader_class = PiSessionReader
    line_kinds_in_every_file = frozenset({"session", "message"})


def test_reader_is_not_pis_record_route() -> None:
    """pi's commands reach bash (the neutral route records them), so its reader is not pi's
    record route; the glob's default agent directory and the coverage text name where pi 0.73.1
    writes the sessions."""
    assert READER.route_records is False
    assert READER.env_defaults == {"PI_CODING_AGENT_DIR": ".pi/agent"}
    assert READER.signal.startswith("~/.pi/agent/sessions/*/*.jsonl: ")


def _first(role: str) -> dict[str, Any]:
    return first_pi_message(LOG, role)


@pytest.mark.parametrize(("how", "broken", "reason"), [
    ("the real user line inside a list", lambda: [_first("user")], "not_object"),
    ("the real user line's JSON as a string", lambda: json.dumps(_first("user")), "not_object"),
    ("the real user line without its type", lambda: drop_path(_first("user"), ("type",)),
     "no_type"),
    ("the real user line with a number as type", lambda: set_path(_first("user"), ("type",), 3),
     "no_type"),
    ("the real user line with an unknown type",
     lambda: set_path(_first("user"), ("type",), "message_v2"), "unknown_type"),
    ("the real user line with a list as message",
     lambda: set_path(_first("user"), ("message",), []), "unknown_shape"),
    ("the real user line with an unknown role",
     lambda: set_path(_first("user"), ("message", "role"), "narrator"), "unknown_shape"),
    ("the real call line with its content as a string",
     lambda: set_path(_first("assistant"), ("message", "content"), "ls"), "unknown_shape"),
    ("the real call line without its stopReason",
     lambda: drop_path(_first("assistant"), ("message", "stopReason")), "unknown_shape"),
    ("the real call line with a number as the call's id",
     lambda: set_path(_first("assistant"), ("message", "content", 0, "id"), 55),
     "unknown_shape"),
    ("the real result line with isError as a string",
     lambda: set_path(_first("toolResult"), ("message", "isError"), "true"), "unknown_shape"),
    ("the real result line with a number as toolCallId",
     lambda: set_path(_first("toolResult"), ("message", "toolCallId"), 55), "unknown_shape"),
    ("the real result line's exit notice with a word for the code",
     lambda: set_path(_first("toolResult"), ("message", "content", 0, "text"),
                      _first("toolResult")["message"]["content"][0]["text"]
                      .replace("code 2", "code two")), "bad_exit"),
    ("the real result line with a timestamp that is not a time",
     lambda: set_path(_first("toolResult"), ("timestamp",), "yesterday"), "bad_ts"),
    ("the real result line with a list as timestamp",
     lambda: set_path(_first("toolResult"), ("timestamp",), []), "bad_ts"),
])
def test_broken_real_lines_raise_reader_format_error(how: str, broken: Any, reason: str) -> None:
    """A real line broken as described raises ReaderFormatError with a fixed reason label that
    never quotes the line."""
    assert_reader_error(READER, broken(), reason)


def test_calls_of_a_failed_or_aborted_reply_never_start() -> None:
    """The real call line with ``stopReason`` changed to ``error`` or ``aborted``: pi 0.73.1
    ends the run without running its calls, so no shell call starts and the turn ends; an
    ``error`` stop is the turn's terminal error (turn verdicts, issue 8)."""
    for stop, kinds in (("error", [ERROR, TURN_END]), ("aborted", [TURN_END])):
        line = set_path(_first("assistant"), ("message", "stopReason"), stop)
        assert [e.kind for e in READER.parse_line(line, READER.new_file_state())] == kinds


def test_the_users_own_bang_command_is_not_agent_activity() -> None:
    """The real result line with its role changed to ``bashExecution`` (the message pi 0.73.1
    writes for the user's own ``!`` command, ``messages.d.ts``) gives no event: it is not an
    agent tool call."""
    line = set_path(_first("toolResult"), ("message", "role"), "bashExecution")
    assert READER.parse_line(line, READER.new_file_state()) == []
