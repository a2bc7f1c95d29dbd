"""Cline CLI's session-log reader (C12's shell-activity signal, issue 19's failure output, the
turn verdicts) and the tail's reading of JSON documents a CLI rewrites whole, on the harness's
real ``messages.json`` files of Cline CLI 3.0.65.

Every test reads the real files the harness kept (``harness/evidence/cline.json`` →
``session_files``, ``scenario_sessions``, ``verdict_scenarios``); ids and times come from the
files. A document "as the CLI had written it earlier" is the real one with only its first
messages (Cline appends messages and writes the whole file again).
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

from harness import checks
from repeat_failure.backends import (ERROR, SHELL_END, SHELL_START, TEXT, TURN_END, TURN_START,
                                     ReaderFormatError, SessionEvent, session_reader)
from repeat_failure.backends.cline import ClineReader, command_result
from repeat_failure.backends.coverage import COVERAGE
from repeat_failure.sessions.tail import SessionTail, expand_globs
from repeat_failure.turns.verdict import AGENT_ERROR, OK, TurnTracker

from sessionlogs import EVIDENCE_DIR, check_event, evidence_of, junk_variants

READER = session_reader("cline")
EVIDENCE = evidence_of("cline")
HOME = EVIDENCE_DIR / "cline"
OUTPUT = "[stderr]\nls: cannot access '/nonexistent': No such file or directory\n"


def _messages_rel(files: list[str]) -> str:
    (rel,) = [f for f in files if f.endswith(".messages.json")]
    return rel


def shell_doc() -> dict:
    """The repeated run's real ``messages.json``."""
    return json.loads((HOME / _messages_rel(EVIDENCE["session_files"])).read_text())


def doc_of(where: str) -> dict:
    """A scenario's (``running``, ``midturn``) or a verdict run's (``verdict/ok``, ...) real
    document."""
    if where.startswith("verdict/"):
        files = EVIDENCE["verdict_scenarios"][where.split("/")[1]]["session_files"]
    else:
        files = EVIDENCE["scenario_sessions"][where]
    return json.loads((HOME / where / _messages_rel(files)).read_text())


def read(doc: dict, state: dict | None = None) -> list[SessionEvent]:
    return READER.parse_document(doc, READER.new_file_state() if state is None else state)


def test_reader_kind_glob_signal_and_row(tmp_path: Path) -> None:
    """A JSON-document reader whose glob, expanded as the sidecar does, finds the kept
    ``messages.json`` (and not the metadata ``<id>.json`` nor the SQLite index); the coverage
    row names its signal."""
    assert isinstance(READER, ClineReader) and READER.kind == "json"
    assert READER.route_records is False
    assert COVERAGE["cline"].shell_activity == READER.signal
    base, pattern = expand_globs(READER, HOME, env={})[0]  # 3.x's; [1] is 2.x's task log
    found = sorted(p.relative_to(HOME).as_posix() for p in base.glob(pattern))
    assert found == [_messages_rel(EVIDENCE["session_files"])]


def test_shell_run_gives_the_exact_events() -> None:
    """The repeated run: the prompt starts the turn; four ``ls /nonexistent`` calls end with
    exit 2 and the command's output (without Cline's ``[Command exited with code 2]`` line);
    the fifth, which Cline's loop tracker aborted before it ran, ends failed with no exit and
    no output; the turn has no end (nothing follows the abort). Times are the messages' own."""
    doc = shell_doc()
    msgs = doc["messages"]
    turn = msgs[0]["id"]
    expected = [SessionEvent(TURN_START, msgs[0]["ts"] / 1000, turn_id=turn)]
    for call, result in zip(msgs[1::2], msgs[2::2]):
        (use,) = call["content"]
        (block,) = result["content"]
        aborted = block["content"][0]["error"] == "Command failed: Command was aborted"
        expected += [
            SessionEvent(SHELL_START, call["ts"] / 1000, call_id=use["id"],
                         command="ls /nonexistent", tool="run_commands", turn_id=turn),
            SessionEvent(SHELL_END, result["ts"] / 1000, call_id=use["id"],
                         command="ls /nonexistent", exit=None if aborted else 2, failed=True,
                         tool="run_commands", turn_id=turn, output=None if aborted else OUTPUT)]
    assert len(expected) == 11
    assert read(doc) == expected
    ends = [(e.exit, e.failed) for e in expected if e.kind == SHELL_END]
    assert ends == [(2, True)] * checks.LOOP_GUARDED["cline"] + [(None, True)]


def test_every_version_of_the_document_gives_only_what_is_new() -> None:
    """The real document read as it grew (its first 1, 2, ... messages, then whole), with one
    state, and again after the state went through JSON (a sidecar restart): the same events
    as one read, each once; reading it again gives nothing."""
    doc = shell_doc()
    whole = read(doc)
    state = READER.new_file_state()
    got = []
    for n in range(1, len(doc["messages"]) + 1):
        grown = dict(doc, messages=doc["messages"][:n])
        got += read(grown, state)
        state = json.loads(json.dumps(state))
    assert got == whole
    assert read(doc, state) == []
    assert "nonexistent" not in json.dumps(state)


@pytest.mark.parametrize("name", ["running", "midturn"])
def test_running_command_is_in_the_document(name: str) -> None:
    """The snapshots taken while ``touch ... && sleep 8`` ran: its call has started and has no
    end; ``midturn`` first has the finished failing ``ls /nonexistent``; the turn is open."""
    assert EVIDENCE["scenarios"][name]["snapshot"]["running_command_logged"] is True
    events = read(doc_of(name))
    shells = [(e.kind, e.command, e.exit, e.failed) for e in events
              if e.kind in (SHELL_START, SHELL_END)]
    running = EVIDENCE["scenarios"][name]["steps"][-1]["arg"]
    assert shells == ([(SHELL_START, "ls /nonexistent", None, None),
                       (SHELL_END, "ls /nonexistent", 2, True)] if name == "midturn" else []) \
        + [(SHELL_START, running, None, None)]
    assert events[0].kind == TURN_START and TURN_END not in [e.kind for e in events]


@pytest.mark.parametrize("name,kinds,detail", [
    ("ok", [TURN_START, SHELL_START, SHELL_END, TEXT, TURN_END], ""),
    ("empty", [TURN_START, ERROR, TURN_END], "Model returned empty response"),
    ("error", [TURN_START, ERROR, TURN_END], "harness: stub refused the request"),
    ("killed", [TURN_START, SHELL_START, SHELL_END, TEXT, TURN_END], ""),
])
def test_verdict_runs(name: str, kinds: list, detail: str) -> None:
    """The verdict runs' documents: the error reply (``metadata.displayRole: "error"``) is the
    turn's error; ``ok``'s ``echo harness-ok`` ends with exit 0; the ``killed`` run was not
    stopped by SIGTERM (Cline exited 0 after its answer)."""
    events = read(doc_of(f"verdict/{name}"))
    assert [e.kind for e in events] == kinds
    assert [e.detail for e in events if e.kind == ERROR] == ([detail] if detail else [])
    if name == "ok":
        end = events[2]
        assert (end.command, end.exit, end.failed, end.output) == (
            "echo harness-ok", 0, False, "harness-ok\n")
    if name == "killed":
        assert EVIDENCE["verdict_scenarios"]["killed"]["cli_exit"] == 0


@pytest.mark.parametrize("name,expected", [("ok", OK), ("empty", AGENT_ERROR),
                                           ("error", AGENT_ERROR), ("killed", OK)])
def test_session_verdicts(name: str, expected: str) -> None:
    """The sidecar's tail and turn tracker on each verdict run's home give the verdict
    ``harness.checks.SESSION_VERDICTS`` names."""
    assert checks.SESSION_VERDICTS["cline"][name] == expected
    tracker = TurnTracker(READER.edit_tools)
    result = SessionTail(READER, HOME / "verdict" / name, backfill_s=float("inf")).poll(
        rescan=True)
    assert [t.verdict for e in result.events for t in tracker.on_event(e)] == [expected]
    assert not result.errors


def test_several_commands_in_one_call() -> None:
    """A real ``run_commands`` call and its result given a second command (the tool takes a
    list): one start and one end per command, the second under ``<id>#1``."""
    doc = shell_doc()
    call, result = copy.deepcopy(doc["messages"][1]), copy.deepcopy(doc["messages"][2])
    call["content"][0]["input"]["commands"].append("false")
    item = copy.deepcopy(result["content"][0]["content"][0])
    item.update(query="false", result="[Command exited with code 1]\n", error=None)
    result["content"][0]["content"].append(item)
    events = read(dict(doc, messages=[doc["messages"][0], call, result]))
    use_id = call["content"][0]["id"]
    assert [(e.kind, e.call_id, e.command, e.exit) for e in events[1:]] == [
        (SHELL_START, use_id, "ls /nonexistent", None),
        (SHELL_START, f"{use_id}#1", "false", None),
        (SHELL_END, use_id, "ls /nonexistent", 2),
        (SHELL_END, f"{use_id}#1", "false", 1)]
    assert events[-1].output == ""


def test_command_result_rules() -> None:
    """A real failing item: the exit from its result's first line; without that line, from
    its ``error``; with neither and ``success: false``, no exit; ``success`` not a boolean is
    unknown_shape."""
    item = shell_doc()["messages"][2]["content"][0]["content"][0]
    assert command_result(item) == (2, True, OUTPUT)
    no_line = dict(item, result=OUTPUT)
    assert command_result(no_line) == (2, True, OUTPUT)
    neither = dict(item, result=OUTPUT, error="Command timed out")
    assert command_result(neither) == (None, True, OUTPUT)
    with pytest.raises(ReaderFormatError) as caught:
        command_result(dict(item, success="no"))
    assert caught.value.reason == "unknown_shape"


def test_junk_in_any_field_never_raises_anything_else() -> None:
    """Every field of the real document (at every depth, the long system prompt aside), in
    turn deleted or replaced by junk: events well formed, or ReaderFormatError."""
    doc = shell_doc()
    doc["system_prompt"] = "x"
    count = 0
    for broken in junk_variants(doc):
        count += 1
        try:
            events = read(broken)
        except ReaderFormatError:
            continue
        for event in events:
            check_event(event)
    assert count > 1000
    assert read([]) == []  # a JSON list is a 2.x task's ui_messages.json (empty: nothing)
    for bad in ([1], "x", {"messages": {}}, {"messages": [1]}):
        with pytest.raises(ReaderFormatError) as caught:
            read(bad)
        assert caught.value.reason == "unknown_shape"


# -- the tail's JSON-document kind ---------------------------------------------------------------

def _home_with(tmp_path: Path, doc: dict) -> tuple[Path, Path]:
    rel = _messages_rel(EVIDENCE["session_files"])
    path = tmp_path / "home" / rel
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(doc))
    return tmp_path / "home", path


def test_tail_reads_the_document_again_only_when_it_changed(tmp_path: Path) -> None:
    """The sidecar's tail on a home whose ``messages.json`` grows as Cline writes it: each
    poll gives what is new; an unchanged file is not read again; a file caught half-written is
    counted ``not_json`` once, then read when whole; after a restart (the tail's saved state
    loaded into a new tail) nothing is given twice."""
    doc = shell_doc()
    whole = read(doc)
    home, path = _home_with(tmp_path, dict(doc, messages=doc["messages"][:3]))
    tail = SessionTail(READER, home, backfill_s=float("inf"))
    first = tail.poll(rescan=True)
    assert [e.kind for e in first.events] == [TURN_START, SHELL_START, SHELL_END]
    assert tail.poll(rescan=True).events == []
    text = json.dumps(doc)
    path.write_text(text[: len(text) // 2])
    cut = tail.poll(rescan=True)
    assert (cut.events, dict(cut.errors)) == ([], {"not_json": 1})
    assert dict(tail.poll(rescan=True).errors) == {}
    path.write_text(text)
    rest = tail.poll(rescan=True).events
    got = [e for e in first.events + rest]
    assert [(e.kind, e.call_id.partition(":")[2], e.exit) for e in got] == \
        [(e.kind, e.call_id, e.exit) for e in whole]
    saved = json.loads(json.dumps(tail.to_dict()))
    again = SessionTail(READER, home, backfill_s=float("inf"))
    again.load_dict(saved)
    os.utime(path)
    assert again.poll(rescan=True).events == []


def test_tail_skips_history_of_an_old_document(tmp_path: Path) -> None:
    """A document last changed before the backfill window is read once with its events
    dropped (history before the sidecar ran); what the CLI adds later is given."""
    doc = shell_doc()
    home, path = _home_with(tmp_path, dict(doc, messages=doc["messages"][:3]))
    os.utime(path, (1_000_000_000, 1_000_000_000))
    tail = SessionTail(READER, home, backfill_s=3600)
    assert tail.poll(rescan=True).events == []
    path.write_text(json.dumps(dict(doc, messages=doc["messages"][:5])))
    assert [e.kind for e in tail.poll(rescan=True).events] == [SHELL_START, SHELL_END]


def test_harness_checks_hold() -> None:
    """``python -m harness``'s checks of the committed evidence hold: the route's four
    guarded records, the reader's five ends (the aborted fifth with no exit), the verdicts."""
    found = checks.check("cline", Path(EVIDENCE_DIR))
    assert {k: found[k] for k in ("route", "readers", "verdicts")} == {
        "route": [], "readers": [], "verdicts": []}
