"""Continue CLI's session-log reader (C12's shell-activity signal, issue 19's failure output, the
turn verdicts), on the harness's real session documents of Continue CLI 1.5.47.

Every test reads the real files the harness kept (``harness/evidence/continue.json`` →
``session_files``, ``verdict_scenarios``); a document "as the CLI had written it earlier" is
the real one with only its first history items.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from harness import checks
from repeat_failure.backends import (SHELL_END, SHELL_START, TEXT, TOOL, TURN_END, TURN_START,
                                     ReaderFormatError, SessionEvent, session_reader)
from repeat_failure.backends.continue_cli import ContinueReader, call_result
from repeat_failure.backends.coverage import COVERAGE
from repeat_failure.sessions.tail import SessionTail, expand_globs
from repeat_failure.turns.verdict import OK, TurnTracker

from sessionlogs import EVIDENCE_DIR, check_event, evidence_of, junk_variants, version_params

READER = session_reader("continue")
EVIDENCE = evidence_of("continue")
HOME = EVIDENCE_DIR / "continue"
OUTPUT = "ls: cannot access '/nonexistent': No such file or directory\n"


def _session_rel(files: list[str]) -> str:
    (rel,) = [f for f in files if not f.endswith("/sessions.json")]
    return rel


def shell_doc() -> dict:
    return json.loads((HOME / _session_rel(EVIDENCE["session_files"])).read_text())


def verdict_doc(name: str) -> dict:
    files = EVIDENCE["verdict_scenarios"][name]["session_files"]
    return json.loads((HOME / "verdict" / name / _session_rel(files)).read_text())


def read(doc, state: dict | None = None) -> list[SessionEvent]:
    return READER.parse_document(doc, READER.new_file_state() if state is None else state)


def test_reader_kind_glob_signal_and_row() -> None:
    """A JSON-document reader; its glob (``CONTINUE_GLOBAL_DIR`` unset: ``~/.continue``) finds
    the session document the harness kept and leaves ``sessions.json`` out; the coverage row
    names its signal."""
    assert isinstance(READER, ContinueReader) and READER.kind == "json"
    assert READER.route_records is False
    assert COVERAGE["continue"].shell_activity == READER.signal
    ((base, pattern),) = expand_globs(READER, HOME, env={})
    found = sorted(p.relative_to(HOME).as_posix() for p in base.glob(pattern))
    assert found == [_session_rel(EVIDENCE["session_files"])]
    assert ".continue/sessions/sessions.json" in EVIDENCE["session_files"]
    index = json.loads((HOME / ".continue/sessions/sessions.json").read_text())
    assert read(index) == []


def test_shell_run_gives_the_exact_events() -> None:
    """The repeated run: the prompt starts the turn (id ``<sessionId>#0``: the history has no
    ids); five ``ls /nonexistent`` calls start and end with exit 2 and the command's output
    (without ``Error executing tool Bash: Error (exit code 2): ``); the answer is text and ends
    the turn. The history has no times."""
    doc = shell_doc()
    turn = f"{doc['sessionId']}#0"
    expected = [SessionEvent(TURN_START, turn_id=turn)]
    for item in doc["history"][1:-1]:
        (call,) = item["toolCallStates"]
        assert call["status"] == "errored"
        expected += [
            SessionEvent(SHELL_START, call_id=call["toolCallId"], command="ls /nonexistent",
                         tool="Bash", turn_id=turn),
            SessionEvent(SHELL_END, call_id=call["toolCallId"], command="ls /nonexistent",
                         exit=2, failed=True, tool="Bash", turn_id=turn, output=OUTPUT)]
    expected += [SessionEvent(TEXT, turn_id=turn), SessionEvent(TURN_END, turn_id=turn)]
    assert len(expected) == 13
    assert read(doc) == expected
    run = EVIDENCE["runs"][-1]
    assert [r["exit"] for r in run["records"]] == [e.exit for e in expected
                                                   if e.kind == SHELL_END]


def test_every_version_of_the_document_gives_only_what_is_new() -> None:
    """The real document as it grew (its first 1, 2, ... history items), read with one state
    that goes through JSON between reads: the events of one read, each once."""
    doc = shell_doc()
    state = READER.new_file_state()
    got = []
    for n in range(1, len(doc["history"]) + 1):
        got += read(dict(doc, history=doc["history"][:n]), state)
        state = json.loads(json.dumps(state))
    assert got == read(doc)
    assert read(doc, state) == []


def test_a_call_written_before_it_finished_ends_when_it_does() -> None:
    """A real call item whose state was still ``calling`` (no output): only its start; the
    same item finished: its end, once."""
    doc = shell_doc()
    calling = copy.deepcopy(doc["history"][1])
    calling["toolCallStates"][0]["status"] = "calling"
    del calling["toolCallStates"][0]["output"]
    state = READER.new_file_state()
    read(dict(doc, history=doc["history"][:1]), state)
    assert [e.kind for e in read(dict(doc, history=[doc["history"][0], calling]), state)] == \
        [SHELL_START]
    ends = read(dict(doc, history=doc["history"][:2]), state)
    assert [(e.kind, e.exit) for e in ends] == [(SHELL_END, 2)]


def test_ok_and_empty_verdict_runs() -> None:
    """``ok``: ``echo harness-ok`` ends with exit 0 (status ``done``), the answer ends the
    turn. ``empty``: only the prompt was written (no end, not classified); the ``error`` and
    ``killed`` runs wrote no session file."""
    ok = read(verdict_doc("ok"))
    assert [e.kind for e in ok] == [TURN_START, SHELL_START, SHELL_END, TEXT, TURN_END]
    assert (ok[2].command, ok[2].exit, ok[2].failed, ok[2].output) == (
        "echo harness-ok", 0, False, "harness-ok\n")
    assert [e.kind for e in read(verdict_doc("empty"))] == [TURN_START]
    for name in ("error", "killed"):
        assert EVIDENCE["verdict_scenarios"][name]["session_files"] == []


@pytest.mark.parametrize("name", ["ok", "empty", "error", "killed"])
def test_session_verdicts(name: str) -> None:
    """The sidecar's tail and turn tracker on each verdict run's home give what
    ``harness.checks.SESSION_VERDICTS`` names: ``ok`` for the ok run, no verdict for the
    others."""
    expected = checks.SESSION_VERDICTS["continue"][name]
    assert expected == (OK if name == "ok" else None)
    tracker = TurnTracker(READER.edit_tools)
    result = SessionTail(READER, HOME / "verdict" / name, backfill_s=float("inf")).poll(
        rescan=True)
    assert [t.verdict for e in result.events for t in tracker.on_event(e)] == \
        ([expected] if expected else [])
    assert not result.errors


def test_call_result_rules() -> None:
    """The real failing output gives exit 2 and the command's output; ``done`` without the
    error text is exit 0; ``errored`` without it (a tool error with no exit) and
    ``canceled`` are no number, failed; an output that is not a list is unknown_shape."""
    output = shell_doc()["history"][1]["toolCallStates"][0]["output"]
    assert call_result("errored", output) == (2, True, OUTPUT)
    plain = [dict(output[0], content="fine\n")]
    assert call_result("done", plain) == (0, False, "fine\n")
    assert call_result("errored", plain) == (None, True, "fine\n")
    assert call_result("canceled", None) == (None, True, None)
    with pytest.raises(ReaderFormatError) as caught:
        call_result("done", {"content": "x"})
    assert caught.value.reason == "unknown_shape"


def test_other_tools_are_tools_and_a_call_without_states_starts() -> None:
    """A real call renamed ``Read`` is a tool event; an item with ``toolCalls`` and no
    ``toolCallStates`` (the model asked, the CLI has not run it) starts a shell call."""
    doc = shell_doc()
    renamed = copy.deepcopy(doc["history"][1])
    renamed["toolCallStates"][0]["toolCall"]["function"]["name"] = "Read"
    events = read(dict(doc, history=[doc["history"][0], renamed]))
    assert [(e.kind, e.tool) for e in events[1:]] == [(TOOL, "Read")]
    asked = copy.deepcopy(doc["history"][1])
    del asked["toolCallStates"]
    events = read(dict(doc, history=[doc["history"][0], asked]))
    assert [(e.kind, e.command) for e in events[1:]] == [(SHELL_START, "ls /nonexistent")]


def test_junk_in_any_field_never_raises_anything_else() -> None:
    """Every field of the real document at every depth, in turn deleted or replaced by junk:
    events well formed, or ReaderFormatError."""
    count = 0
    for broken in junk_variants(shell_doc()):
        count += 1
        try:
            events = read(broken)
        except ReaderFormatError:
            continue
        for event in events:
            check_event(event)
    assert count > 1000
    for bad in ("x", 3, {"history": {}}, {"history": [1]}, {"history": [{"message": 1}]}):
        with pytest.raises(ReaderFormatError) as caught:
            read(bad)
        assert caught.value.reason == "unknown_shape"


def test_harness_checks_hold() -> None:
    """``python -m harness``'s checks of the committed evidence hold (route, reader,
    verdicts)."""
    found = checks.check("continue", Path(EVIDENCE_DIR))
    assert {k: found[k] for k in ("route", "readers", "verdicts")} == {
        "route": [], "readers": [], "verdicts": []}


@pytest.mark.parametrize("root", version_params("continue"))
def test_every_release_shell_run_and_checks(root: Path) -> None:
    """Each kept release (1.5.47, and 1.5.11, the oldest served here; issue 26 item 3): the
    repeated run's five ``ls /nonexistent`` calls end with exit 2, failed and the command's
    output, the hook recorded the same exits, and ``python -m harness``'s checks hold."""
    evidence = evidence_of("continue", root)
    doc = json.loads((root / "continue" / _session_rel(evidence["session_files"])).read_text())
    ends = [(e.command, e.exit, e.failed, e.output) for e in read(doc) if e.kind == SHELL_END]
    assert ends == [("ls /nonexistent", 2, True, OUTPUT)] * 5
    assert [r["exit"] for r in evidence["runs"][-1]["records"]] == [2] * 5
    found = checks.check("continue", root)
    assert {k: found[k] for k in ("route", "readers", "verdicts")} == {
        "route": [], "readers": [], "verdicts": []}
