"""Cline CLI 2.x's task log ``~/.cline/data/tasks/<id>/ui_messages.json`` (issue 26 item 3), read
by :mod:`repeat_failure.backends.cline_tasks` through :class:`~repeat_failure.backends.cline.ClineReader`.

Every test reads the real files the harness kept for Cline CLI 2.18.0 and 2.14.0 (the oldest
2.x release served here; ``harness/evidence/versions/cline/<version>/``); times, commands and
outputs come from the files.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from harness import checks
from repeat_failure.backends import (ERROR, SHELL_END, SHELL_START, TOOL, TURN_END, TURN_START,
                                     session_reader)
from repeat_failure.backends.cline_tasks import command_end
from repeat_failure.sessions.tail import SessionTail, discover, expand_globs

from sessionlogs import EVIDENCE_DIR, evidence_of

READER = session_reader("cline")
VERSIONS = ["2.18.0", "2.14.0"]
OUTPUT = "ls: cannot access '/nonexistent': No such file or directory"


def root(version: str) -> Path:
    return EVIDENCE_DIR / "versions" / "cline" / version


def home_copy(version: str, tmp_path: Path, where: str = "") -> Path:
    home = tmp_path / "home"
    shutil.copytree(root(version) / "cline" / where / ".cline", home / ".cline")
    return home


def ui_messages(home: Path) -> list[dict]:
    (path,) = (home / ".cline" / "data" / "tasks").glob("*/ui_messages.json")
    return json.loads(path.read_text())


def poll(home: Path):
    return SessionTail(READER, home, env={}, backfill_s=float("inf")).poll(rescan=True)


@pytest.mark.parametrize("version", VERSIONS)
def test_kept_capture_and_glob(version: str, tmp_path: Path) -> None:
    """The release is kept with its task files; the reader's glob finds the task's
    ``ui_messages.json`` only (not ``api_conversation_history.json`` nor
    ``task_metadata.json``)."""
    data = evidence_of("cline", root(version))
    assert data["version"] == version
    assert {Path(rel).name for rel in data["session_files"]} == {
        "ui_messages.json", "api_conversation_history.json", "task_metadata.json"}
    home = home_copy(version, tmp_path)
    found = discover(expand_globs(READER, home, env={}), home)
    assert [p.name for p, _ in found] == ["ui_messages.json"]


@pytest.mark.parametrize("version", VERSIONS)
def test_shell_run_gives_the_exact_events(version: str, tmp_path: Path) -> None:
    """The repeated run: the task starts the turn; each ``say command`` starts a call and the
    next request's ``execute_command`` result ends it with its exit code (2) and the
    ``command_output`` text; the fifth call ran (its output is logged) but the task failed
    before any request carried its result ("Too many consecutive mistakes"), so it starts and
    never ends; the error ends the turn."""
    home = home_copy(version, tmp_path)
    msgs = ui_messages(home)
    result = poll(home)
    assert not result.errors
    got = [dataclasses.replace(e, source="", call_id=e.call_id.partition(":")[2])
           for e in result.events]
    commands = [m for m in msgs if m.get("say") == "command"]
    turn = str(msgs[0]["ts"])
    assert got[0] == dataclasses.replace(got[0], kind=TURN_START, ts=msgs[0]["ts"] / 1000,
                                         turn_id=turn)
    starts = [e for e in got if e.kind == SHELL_START]
    assert [(e.call_id, e.command, e.ts) for e in starts] == [
        (str(m["ts"]), m["text"], m["ts"] / 1000) for m in commands]
    ends = [e for e in got if e.kind == SHELL_END]
    assert [(e.command, e.exit, e.failed, " ".join(e.output.split())) for e in ends] == \
        [("ls /nonexistent", 2, True, OUTPUT)] * 4
    (error,) = [m for m in msgs if m.get("say") == "error"]
    assert [(e.kind, e.ts, e.detail) for e in got[-2:]] == [
        (ERROR, error["ts"] / 1000, error["text"]), (TURN_END, error["ts"] / 1000, "")]
    assert len(starts) == 5 and len(commands) == 5


@pytest.mark.parametrize("version", VERSIONS)
def test_document_read_as_it_grew(version: str, tmp_path: Path) -> None:
    """The real list read as it grew (its first 1, 2, ... messages, then whole) with one state
    that goes through JSON each time: the same events as one read, each once; an error with
    nothing after it yet waits for the next message."""
    msgs = ui_messages(home_copy(version, tmp_path))
    whole = READER.parse_document(msgs, READER.new_file_state())
    state: dict = READER.new_file_state()
    got = []
    for n in range(1, len(msgs) + 1):
        got += READER.parse_document(msgs[:n], state)
        state = json.loads(json.dumps(state))
    assert got == whole
    assert READER.parse_document(msgs, state) == []


def test_command_end_rules() -> None:
    """The result texts 2.18.0 writes, and the other forms the rule names."""
    assert command_end("Command failed with exit code 2.\nOutput:\nx") == (2, True)
    assert command_end("Command executed successfully (exit code 0).\nOutput:\nok") == (0, False)
    assert command_end("Command executed.\nOutput:\nok") == (None, False)
    assert command_end("Command is still running in the user's terminal.") is None
    assert command_end("The user denied this operation.") == (None, True)


@pytest.mark.parametrize("version", VERSIONS)
def test_harness_checks_hold(version: str) -> None:
    """``python -m harness``'s checks of the kept evidence hold, with its own loop
    guard and verdicts (``harness/checks.py``)."""
    found = checks.check("cline", root(version))
    assert {k: found[k] for k in ("route", "readers", "verdicts")} == {
        "route": [], "readers": [], "verdicts": []}


@pytest.mark.parametrize("version", VERSIONS)
def test_file_read_is_a_tool_call(version: str, tmp_path: Path) -> None:
    """The ``read`` run: its ``say tool`` message (``readFile``) is a ``tool`` event at the
    message's time, and no shell call."""
    home = home_copy(version, tmp_path, "read")
    (read,) = [m for m in ui_messages(home) if m.get("say") == "tool"]
    events = poll(home).events
    tools = [(e.kind, e.tool, e.ts) for e in events if e.kind in (TOOL, SHELL_START, SHELL_END)]
    assert tools == [(TOOL, "readFile", read["ts"] / 1000)]
