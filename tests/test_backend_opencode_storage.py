"""opencode before 1.2: its sessions as JSON files under ``~/.local/share/opencode/storage/``
(issue 26 item 3), read by :mod:`repeat_failure.backends.opencode_storage` through
:class:`~repeat_failure.backends.opencode.OpencodeReader`.

Every test reads the real files the harness kept for opencode 1.1.65 (the newest release before
the SQLite store) and 1.0.152 (the oldest release of the row's range that runs here:
``harness/evidence/versions/opencode/<version>/``); ids, times and outputs come from the files,
never written here.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

import pytest

from harness import checks
from repeat_failure.backends import (SHELL_END, SHELL_START, TEXT, TURN_END, TURN_START,
                                     ReaderFormatError, SessionEvent, session_reader)
from repeat_failure.backends.opencode_storage import ACTIVE, MAX_MESSAGES, read_storage
from repeat_failure.sessions.stores import UNCHANGED
from repeat_failure.cli import main
from repeat_failure.sessions.tail import SessionTail, discover, expand_globs

from sessionlogs import EVIDENCE_DIR, evidence_of

READER = session_reader("opencode")
#: The kept releases that keep sessions as JSON files, newest first.
STORAGE_RELEASES = ["1.1.65", "1.0.152"]
STORAGE = ".local/share/opencode/storage"


def root_of(version: str) -> Path:
    return EVIDENCE_DIR / "versions" / "opencode" / version


def home_copy(version: str, tmp_path: Path, where: str = "") -> Path:
    """A copy of a kept run's agent home (the shell run's, or a scenario's: ``running``,
    ``verdict/ok``, ...)."""
    home = tmp_path / "home"
    shutil.copytree(root_of(version) / "opencode" / where / ".local", home / ".local")
    return home


def files(home: Path, kind: str) -> list[dict]:
    """Every ``storage/<kind>/*/*.json`` object under ``home``, by file name."""
    paths = sorted((home / STORAGE / kind).glob("*/*.json"), key=lambda p: p.name)
    return [json.loads(p.read_text()) for p in paths]


def expected(home: Path) -> list[SessionEvent]:
    """What the repeated run's files must give (times in ms from the files): the prompt, each
    bash part's start and end with its exit and output, the answer's text, the turn's end at
    the ``stop`` step's ``time.completed``."""
    messages, parts = files(home, "message"), files(home, "part")
    (user,) = [m for m in messages if m["role"] == "user"]
    turn = user["id"]
    out = [SessionEvent(TURN_START, user["time"]["created"] / 1000, turn_id=turn)]
    roles = {m["id"]: m["role"] for m in messages}
    for p in parts:
        if p["type"] == "tool" and p["tool"] == "bash":
            s = p["state"]
            out.append(SessionEvent(SHELL_START, s["time"]["start"] / 1000, call_id=p["callID"],
                                    command=s["input"]["command"], tool="bash", turn_id=turn))
            out.append(SessionEvent(SHELL_END, s["time"]["end"] / 1000, call_id=p["callID"],
                                    command=s["input"]["command"], exit=s["metadata"]["exit"],
                                    failed=s["metadata"]["exit"] != 0, tool="bash",
                                    turn_id=turn, output=s["output"]))
        elif p["type"] == "text" and roles[p["messageID"]] == "assistant":
            out.append(SessionEvent(TEXT, p["time"]["start"] / 1000, turn_id=turn))
    (last,) = [m for m in messages if m.get("finish") == "stop"]
    out.append(SessionEvent(TURN_END, last["time"]["completed"] / 1000, turn_id=turn))
    return sorted(out, key=lambda e: e.ts)


def bare(events: list[SessionEvent]) -> list[SessionEvent]:
    """Events without the tail's ``source`` and call-id prefix, and without the outputs the
    tail drops (a success's)."""
    return [dataclasses.replace(e, source="", call_id=e.call_id.partition(":")[2])
            for e in events]


def test_the_kept_storage_releases() -> None:
    """1.1.65 and 1.0.152 are kept, each with the session, message and part files of every
    run and no SQLite store; the coverage row's range reaches 1.0.152."""
    for version in STORAGE_RELEASES:
        data = evidence_of("opencode", root_of(version))
        assert data["version"] == version
        kinds = {rel.split("/")[4] for rel in data["session_files"]}
        assert kinds == {"session", "message", "part"}
        assert all(rel.startswith(STORAGE + "/") for rel in data["session_files"])


@pytest.mark.parametrize("version", STORAGE_RELEASES)
def test_shell_run_gives_the_exact_events(version: str, tmp_path: Path) -> None:
    """The sidecar's tail finds the session file through the reader's glob (``XDG_DATA_HOME``
    unset) and gives the repeated run's turn exactly: the prompt, five ``ls /nonexistent``
    calls ending with exit 2, failed, and ``ls``'s message, the answer, the turn's end; all
    from one source; a second poll gives nothing."""
    home = home_copy(version, tmp_path)
    found = discover(expand_globs(READER, home, env={}), home)
    assert [p.relative_to(home).parts[:5] for p, _ in found] == [
        (".local", "share", "opencode", "storage", "session")]
    tail = SessionTail(READER, home, env={}, backfill_s=float("inf"))
    result = tail.poll(rescan=True)
    assert not result.errors and len({e.source for e in result.events}) == 1
    assert bare(result.events) == expected(home)
    ends = [(e.command, e.exit, e.failed, e.output) for e in result.events if e.kind == SHELL_END]
    assert ends == [("ls /nonexistent", 2, True,
                     "ls: cannot access '/nonexistent': No such file or directory\n")] * 5
    assert tail.poll(rescan=True).events == []


@pytest.mark.parametrize("version", STORAGE_RELEASES)
def test_harness_checks_hold(version: str) -> None:
    """``python -m harness``'s checks of the kept evidence hold: the route's five records and
    the note, the reader's five ends in the shell run and no reader error in any captured home,
    the verdicts (ok, agent_no_output, agent_error; a killed run's turn never ends)."""
    found = checks.check("opencode", root_of(version))
    assert found == {"route": [], "readers": [], "verdicts": [], "notes": []}


@pytest.mark.parametrize("version", STORAGE_RELEASES)
def test_running_command_is_seen(version: str, tmp_path: Path) -> None:
    """The ``running`` snapshot (taken while the command ran): its bash part is ``running``
    with its command, so the call has started and not ended."""
    home = home_copy(version, tmp_path, "running")
    events = SessionTail(READER, home, env={}, backfill_s=float("inf")).poll(rescan=True).events
    shell = [(e.kind, e.exit) for e in events if e.kind in (SHELL_START, SHELL_END)]
    assert shell == [(SHELL_START, None)]
    (part,) = [p for p in files(home, "part") if p.get("tool") == "bash"]
    assert part["state"]["status"] == "running"
    (start,) = [e for e in events if e.kind == SHELL_START]
    assert start.command == part["state"]["input"]["command"]


def test_tail_gives_what_is_new_as_files_come_and_change(tmp_path: Path) -> None:
    """The session as opencode writes it: first the prompt and a first step whose bash part is
    still ``running``, then that part rewritten ``completed``, then the rest of the files. Each
    poll gives only what is new (the running call's end once, never its start again); a part
    file caught half-written is counted ``not_json`` while the others are read, then read
    when whole; after a restart (the saved state in a new tail) nothing is given twice."""
    whole = home_copy("1.1.65", tmp_path / "whole")
    want = expected(whole)
    home = tmp_path / "home"
    store = home / STORAGE
    (store / "session").mkdir(parents=True)
    shutil.copytree(whole / STORAGE / "session", store / "session", dirs_exist_ok=True)
    messages = sorted((whole / STORAGE / "message").glob("*/*.json"), key=lambda p: p.name)

    def put(path: Path, text: str | None = None) -> Path:
        dest = store / path.relative_to(whole / STORAGE)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(path.read_text() if text is None else text)
        return dest

    put(messages[0])
    put(messages[1])
    parts = sorted((whole / STORAGE / "part" / messages[1].stem).glob("*.json"))
    (bash,) = [p for p in parts if json.loads(p.read_text()).get("tool") == "bash"]
    running = json.loads(bash.read_text())
    running["state"] = {"status": "running", "input": running["state"]["input"],
                        "time": {"start": running["state"]["time"]["start"]}}
    put(bash, json.dumps(running))
    tail = SessionTail(READER, home, env={}, backfill_s=float("inf"))
    first = tail.poll(rescan=True).events
    assert [e.kind for e in first] == [TURN_START, SHELL_START]
    put(bash)
    second = tail.poll(rescan=True).events
    assert [(e.kind, e.exit) for e in second] == [(SHELL_END, 2)]
    rest = sorted((whole / STORAGE / "part").glob("*/*.json"))
    (answer,) = [p for p in rest if json.loads(p.read_text())["type"] == "text"
                 and p.parent.name == messages[-1].stem]
    half = put(answer, answer.read_text()[:10])
    for path in messages[2:] + [p for p in rest if p not in (answer, bash)]:
        put(path)
    cut = tail.poll(rescan=True)
    assert dict(cut.errors) == {} and TEXT not in [e.kind for e in cut.events]
    put(answer)
    last = tail.poll(rescan=True).events
    assert [e.kind for e in last] == [TEXT]
    got = bare(first + second + cut.events + last)
    assert sorted(got, key=lambda e: e.ts) == want
    again = SessionTail(READER, home, env={}, backfill_s=float("inf"))
    again.load_dict(json.loads(json.dumps(tail.to_dict())))
    os.utime(half)
    assert again.poll(rescan=True).events == []


def test_bad_files_are_counted_never_raised_past_good_ones(tmp_path: Path) -> None:
    """Only bad files (no event from any file): the first bad file's reason is raised; a bad
    part beside good ones is skipped and counted in the state, the good ones given."""
    home = home_copy("1.1.65", tmp_path)
    ((session, _),) = discover(expand_globs(READER, home, env={}), home)
    doc = read_storage(session, None, 8 << 20).doc
    bad = {"opencode_storage": 1, "session": doc["session"],
           "messages": [{"info": None, "parts": []}]}
    with pytest.raises(ReaderFormatError) as caught:
        READER.parse_document(bad, READER.new_file_state())
    assert caught.value.reason == "not_json"
    doc["messages"][1]["parts"][1] = None
    state = READER.new_file_state()
    events = READER.parse_document(doc, state)
    assert state["errors"] == {"not_json": 1}
    assert [e.kind for e in events].count(SHELL_END) == 4
    with pytest.raises(ReaderFormatError) as caught:
        READER.parse_document({"messages": []}, READER.new_file_state())
    assert caught.value.reason == "unknown_shape"


def test_newest_messages_only_and_stamp(tmp_path: Path) -> None:
    """The gathered document holds the newest :data:`MAX_MESSAGES` messages at most, and fewer
    when their files pass the byte limit (the newest kept); an unchanged session gives the
    same stamp (not read again)."""
    home = home_copy("1.1.65", tmp_path)
    ((session, _),) = discover(expand_globs(READER, home, env={}), home)
    got = read_storage(session, None, 8 << 20)
    assert len(got.doc["messages"]) == 7 and MAX_MESSAGES == 512
    assert read_storage(session, got.stamp, 8 << 20).doc is not got.doc
    assert read_storage(session, got.stamp, 8 << 20).size == 0
    small = read_storage(session, None, 3000)
    ids = [m["info"]["id"] for m in got.doc["messages"]]
    assert [m["info"]["id"] for m in small.doc["messages"]] == ids[-len(small.doc["messages"]):]
    assert 1 <= len(small.doc["messages"]) < 7


@pytest.mark.parametrize("version", STORAGE_RELEASES)
def test_replay_reads_the_storage_session(version: str, tmp_path: Path, capsys) -> None:
    """``repeat-failure replay`` on the kept home: five failures of ``ls /nonexistent`` and the
    note, from the session's own files."""
    home = home_copy(version, tmp_path)
    assert main(["replay", str(home)]) == 0
    out = capsys.readouterr().out
    assert "(opencode): 5 commands, 5 failures\n" in out
    assert "  note: ls /nonexistent (exit 2): 5 failures in 1 min, output same" in out


def test_after_a_first_read_only_recent_messages_are_looked_at(tmp_path: Path) -> None:
    """A long session costs a listing of its messages, not of every message's parts: after the
    first read only the :data:`ACTIVE` newest messages and those written since the last read
    are looked at. With every message but the newest four written in 2001: rewriting an old part
    file changes nothing (opencode writes a message's parts while it is among the newest);
    rewriting the newest message's part is seen, and the document holds the four newest."""
    home = home_copy("1.1.65", tmp_path)
    ((session, _),) = discover(expand_globs(READER, home, env={}), home)
    messages = sorted((home / STORAGE / "message").glob("*/*.json"), key=lambda p: p.name)
    old = 1_000_000_000  # 2001: older than any capture, whenever the test runs
    for path in messages[:-ACTIVE]:
        for f in [path, *(home / STORAGE / "part" / path.stem).glob("*.json")]:
            os.utime(f, (old, old))
    first = read_storage(session, None, 8 << 20)
    assert len(first.doc["messages"]) == 7
    stamp = read_storage(session, first.stamp, 8 << 20).stamp  # the recent view's own stamp
    assert read_storage(session, stamp, 8 << 20).doc is UNCHANGED
    (old_part, *_) = sorted((home / STORAGE / "part" / messages[1].stem).glob("*.json"))
    old_part.write_text(old_part.read_text())
    os.utime(old_part, (old, old + 1))
    assert read_storage(session, stamp, 8 << 20).doc is UNCHANGED
    (new_part, *_) = sorted((home / STORAGE / "part" / messages[-1].stem).glob("*.json"))
    os.utime(new_part)
    again = read_storage(session, stamp, 8 << 20)
    assert [m["info"]["id"] for m in again.doc["messages"]] == [p.stem for p in messages[-ACTIVE:]]
