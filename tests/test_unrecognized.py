"""A session file whose shell calls the reader cannot read is never silent (issue 26, C12).

Every file here is a real capture of the harness (``harness/evidence/<backend>/``, found
through the evidence JSON), some with lines rewritten on purpose to a shape no reader knows,
standing for the next CLI release that changes its log (the way Codex 0.98-0.114 end a shell
call differently from 0.171.0). What each rewrite does is said where it is made; nothing else
in the files is changed, so every time and id a test expects is read from them.

- :func:`unknown_end_codex`: the real Codex 0.171.0 rollout with the two lines that end each
  shell call (``event_msg`` ``item_completed`` of a ``CommandExecution``, ``response_item``
  ``function_call_output``) renamed to payload types no reader knows: the calls start and
  never end (reason ``no_end``).
- :func:`unknown_call_claude`: the real Claude Code session with its ``tool_use`` content blocks
  renamed ``tool_call``: the reader sees no call at all, only lines naming ``Bash`` beside a
  call's ``id`` and ``input`` (reason ``unread_call``).
"""

from __future__ import annotations

import itertools
import json
import logging
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from repeat_failure.backends import SHELL_END, TURN_END, log_timestamp, session_reader
from repeat_failure.cli import main
from repeat_failure.config import AgentSpec
from repeat_failure.sessions.activity import Activity
from repeat_failure.sessions.tail import SessionTail
from repeat_failure.sessions.unrecognized import (MIN_OPEN, OPEN_LIMIT, ShellRecognition,
                                                  names_shell_call)
from repeat_failure.sidecar.app import Sidecar
from repeat_failure.sidecar.checkstate import ON, SESSION_LOG_UNRECOGNIZED
from repeat_failure.sidecar.exporter import MetricsCollector

from sessionlogs import EVIDENCE_DIR, evidence_of

UNRECOGNIZED = "hive_repeat_failure_session_files_unrecognized_total"


def capture(backend: str, scenario: str = "") -> tuple[str, Path]:
    """(path under the home, stored copy) of the backend's first kept session file of
    ``scenario`` (``""``: the repeated `ls /nonexistent` run)."""
    data = evidence_of(backend)
    rel = data["session_files"][0] if not scenario else data["scenario_sessions"][scenario][0]
    return rel, EVIDENCE_DIR / backend / scenario / rel if scenario else EVIDENCE_DIR / backend / rel


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_lines(dest: Path, objs: list[dict]) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("".join(json.dumps(o, separators=(",", ":")) + "\n" for o in objs))


def unknown_end_codex(home: Path) -> tuple[str, float]:
    """The real Codex rollout in ``home`` with the lines that end each shell call renamed to
    payload types no reader knows (``command_finished_v9``, ``tool_output_v9``); returns the
    path under the home and the time of its ``task_complete`` line (the turn's end)."""
    rel, src = capture("codex")
    objs = lines_of(src)
    renamed = 0
    for obj in objs:
        payload = obj.get("payload") or {}
        item = payload.get("item") if isinstance(payload.get("item"), dict) else {}
        if payload.get("type") == "item_completed" and item.get("type") == "CommandExecution":
            payload["type"] = "command_finished_v9"
            renamed += 1
        elif payload.get("type") == "function_call_output":
            payload["type"] = "tool_output_v9"
            renamed += 1
    assert renamed == 10  # five calls, two end lines each
    write_lines(home / rel, objs)
    (end,) = [o for o in objs if (o.get("payload") or {}).get("type") == "task_complete"]
    return rel, log_timestamp(end["timestamp"])


def unknown_call_claude(home: Path) -> tuple[str, float]:
    """The real Claude Code session in ``home`` with each ``tool_use`` content block renamed
    ``tool_call``; returns the path under the home and the time of the turn's end (the line the
    reader ends the turn at, read from the real file)."""
    rel, src = capture("claude")
    reader, state = session_reader("claude"), session_reader("claude").new_file_state()
    (end,) = [o for o in lines_of(src)
              if any(e.kind == TURN_END for e in reader.parse_line(o, state))]
    objs = lines_of(src)
    renamed = 0
    for obj in objs:
        content = (obj.get("message") or {}).get("content") if obj.get("type") == "assistant" \
            else None
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_use":
                block["type"] = "tool_call"
                renamed += 1
    assert renamed == 5
    write_lines(home / rel, objs)
    return rel, log_timestamp(end["timestamp"])


def sidecar(tmp: Path, backend: str, home: Path, clock: list[float]) -> Sidecar:
    """A sidecar with the check on, reading ``home`` for agent ``a1``; its clock reads
    ``clock[0]`` (epoch seconds); history up to a day old is read."""
    config = tmp / "config.yaml"
    config.write_text("repeat_failure:\n  enabled: true\n  collect_grace_s: 0.5\n")
    sc = Sidecar(tmp / "shared", [AgentSpec("a1", backend, str(home))], config,
                 clock=lambda: clock[0], monotonic=itertools.count(0, 10).__next__)
    sc.registry.register(MetricsCollector(sc))
    for state in sc.agents.values():
        state.tail.backfill_s = 86400.0
    return sc


def series(sc: Sidecar, name: str) -> list[str]:
    text = generate_latest(sc.registry).decode()
    return [line for line in text.splitlines() if line.startswith(name + "{")]


def flagged_logs(caplog) -> list[tuple]:
    return [(r.levelname, r.agent, r.backend, r.reason, r.file) for r in caplog.records
            if getattr(r, "event", "") == "session_log_unrecognized"]


def test_codex_calls_that_never_end_are_counted_logged_and_shown(tmp_path: Path,
                                                                 caplog) -> None:
    """The rewritten Codex rollout: the tail reports the file once, at its turn's end, reason
    no_end; the sidecar counts it (the other reason exported at 0), logs one warning naming the
    file (its path under the home), and the row says session_log_unrecognized instead of on.
    Polling again adds nothing. A later real rollout whose shell call ends (the harness's
    ``midturn`` run, a second later: one call ended, one running) puts the row back to on; the
    count stays."""
    home = tmp_path / "home"
    rel, turn_end = unknown_end_codex(home)
    clock = [turn_end + 60]
    caplog.set_level(logging.INFO, logger="repeat_failure")
    sc = sidecar(tmp_path, "codex", home, clock)
    sc.run_once()
    assert series(sc, UNRECOGNIZED) == [
        f'{UNRECOGNIZED}{{agent="a1",backend="codex",reason="unread_call"}} 0.0',
        f'{UNRECOGNIZED}{{agent="a1",backend="codex",reason="no_end"}} 1.0']
    (row,) = sc.rows()
    assert (row.state, row.state_text) == (
        SESSION_LOG_UNRECOGNIZED, "repeat-failure check cannot read this agent's session log")
    assert sc.agents["a1"].activity.unrecognized_ts == turn_end
    assert flagged_logs(caplog) == [("WARNING", "a1", "codex", "no_end", rel)]
    assert ('hive_repeat_failure_check_state{agent="a1",backend="codex",'
            'state="session_log_unrecognized"} 1.0') in series(
                sc, "hive_repeat_failure_check_state")
    assert sc.agents["a1"].records == {}  # nothing was read as a command

    sc.run_once()
    assert len(flagged_logs(caplog)) == 1

    ok_rel, ok_src = capture("codex", "midturn")
    (home / ok_rel).parent.mkdir(parents=True, exist_ok=True)
    (home / ok_rel).write_bytes(ok_src.read_bytes())
    clock[0] = turn_end + 120
    sc.poll_sessions(rescan=True)
    (row,) = sc.rows()
    assert row.state == ON
    assert series(sc, UNRECOGNIZED)[1] == (
        f'{UNRECOGNIZED}{{agent="a1",backend="codex",reason="no_end"}} 1.0')
    assert len(flagged_logs(caplog)) == 1


def test_a_restart_neither_counts_nor_logs_the_file_again(tmp_path: Path, caplog) -> None:
    """The tail keeps each file's tracker in the state file: a restarted sidecar reading the same
    rewritten rollout does not report it again (its counter starts at 0, no second log line),
    and the row keeps saying session_log_unrecognized (the agent's activity is restored)."""
    home = tmp_path / "home"
    _, turn_end = unknown_end_codex(home)
    clock = [turn_end + 60]
    caplog.set_level(logging.INFO, logger="repeat_failure")
    sc = sidecar(tmp_path, "codex", home, clock)
    sc.run_once()
    saved = json.loads((tmp_path / "shared" / "state" / "a1.json").read_text())
    (entry,) = saved["sessions"].values()
    assert entry["shell"] == {"open": 5, "unread": 0, "quiet": 0, "ended": False,
                              "reason": "no_end"}
    again = sidecar(tmp_path, "codex", home, clock)
    again.run_once()
    assert series(again, UNRECOGNIZED)[1] == (
        f'{UNRECOGNIZED}{{agent="a1",backend="codex",reason="no_end"}} 0.0')
    assert again.rows()[0].state == SESSION_LOG_UNRECOGNIZED
    assert len(flagged_logs(caplog)) == 1


def test_claude_calls_written_in_an_unknown_block_are_unread_calls(tmp_path: Path) -> None:
    """The rewritten Claude Code session gives no shell_start at all (its results still give
    shell_end events, but with no command and no start: no call read); its assistant lines name
    Bash beside a call's id and input, so at the turn's end the file is reported unread_call."""
    home = tmp_path / "home"
    _, turn_end = unknown_call_claude(home)
    tail = SessionTail(session_reader("claude"), home, backfill_s=1e12)
    result = tail.poll()
    assert [e.command for e in result.events if e.kind == SHELL_END] == [""] * 5
    assert [(u.reason, u.ts) for u in result.unrecognized] == [("unread_call", turn_end)]
    assert tail.poll(rescan=True).unrecognized == []


def test_no_real_capture_is_reported(tmp_path: Path, capsys) -> None:
    """Every real capture the harness kept (each CLI's main run and its read, running, midturn
    and verdict runs, and the older releases kept: 80 session files when this was written,
    more as captures are added; among them calls still running, a CLI killed during its first
    call, turns with no shell call and sessions whose lines list the shell tool among the
    tools offered) is read with no file reported. Every folder holding a CLI's hidden folder
    is given as a home."""
    evidence = Path(EVIDENCE_DIR)
    homes = sorted({str(p.parent) for p in evidence.rglob(".*")
                    if p.is_dir() and not any(part.startswith(".") for part in
                                              p.parent.relative_to(evidence).parts)})
    assert main(["replay", "--json", *homes]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["sessions"]) >= 80
    assert (doc["unrecognized"], [s["path"] for s in doc["sessions"] if s["unrecognized"]]) == (
        0, [])


def test_tool_lists_are_not_calls() -> None:
    """names_shell_call on the real Claude Code 2.1.332 lines that name Bash: the tool list of
    ``api-request-shape`` and ``attachment`` lines and the ``tools-used`` list are not calls;
    the assistant line's ``tool_use`` block is."""
    _, src = capture("claude")
    names = session_reader("claude").shell_tools
    found: dict[str, set[bool]] = {}
    for obj in lines_of(src):
        if "Bash" in json.dumps(obj):
            found.setdefault(obj["type"], set()).add(names_shell_call(obj, names))
    assert found == {"api-request-shape": {False}, "attachment": {False},
                     "api-request-blob": {False}, "tools-used": {False},
                     "assistant": {True}}


def test_the_rules_count_by_count() -> None:
    """ShellRecognition on its own: one call started and never ended at a turn's end is a CLI
    killed in its first call, not a format (MIN_OPEN is 2); a recognised end means never
    flagged; without any turn end OPEN_LIMIT calls flag the file; a call of the shell tool the
    reader gave as another tool counts as unread. Activity ignores a file found unrecognised
    before the agent's newest recognised call."""
    from repeat_failure.backends import SHELL_START, TOOL, SessionEvent

    start, end = SessionEvent(SHELL_START, 1.0, command="ls"), SessionEvent(TURN_END, 2.0)
    one = ShellRecognition()
    assert one.on_events([start, end], frozenset()) is None
    assert one.on_events([start, end], frozenset()) == ("no_end", 2.0)
    assert MIN_OPEN == 2 and OPEN_LIMIT == 8
    read = ShellRecognition()
    assert read.on_events([start, start, SessionEvent(SHELL_END, 3.0, command="ls"), end],
                          frozenset()) is None
    assert read.finish() == ""
    many = ShellRecognition()
    assert [many.on_events([start], frozenset()) for _ in range(8)][-2:] == [None, ("no_end", 1.0)]
    tool = ShellRecognition()
    assert tool.on_events([SessionEvent(TOOL, 5.0, tool="exec_command"), end],
                          frozenset({"exec_command"})) == ("unread_call", 2.0)
    assert ShellRecognition.from_dict(tool.to_dict()) == tool
    assert ShellRecognition.from_dict({"open": -1, "reason": "x", "ended": 1}) == ShellRecognition()

    activity = Activity()
    activity.on_event(SessionEvent(SHELL_END, 100.0, command="ls", source="s"))
    activity.on_unrecognized(90.0)
    assert not activity.unrecognized
    activity.on_unrecognized(110.0)
    assert activity.unrecognized_ts == 110.0
    activity.on_event(SessionEvent(SHELL_END, 109.0, command="ls", source="t"))
    assert activity.unrecognized
    activity.on_event(SessionEvent(SHELL_END, 110.0, command="ls", source="t"))
    assert not activity.unrecognized


def test_replay_reports_the_file(tmp_path: Path, capsys) -> None:
    """`repeat-failure replay` on the rewritten rollout: it is read (exit 0), gives no command,
    and says so in the text report (a line naming it, the total before the table) and in
    --json (the session's reason, the total)."""
    home = tmp_path / "home"
    rel, _ = unknown_end_codex(home)
    assert main(["replay", str(home)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[:3] == [
        f"unrecognized {home}/{rel} (codex): the shell tool is called but no shell call was "
        "recognised (its shell calls start and never end): its commands are not judged; a CLI "
        "release whose session log this version does not read?",
        "session logs not recognised: 1 (their commands are not judged)", ""]
    assert main(["replay", "--json", str(home)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["unrecognized"] == 1
    assert [(s["path"], s["commands"], s["unrecognized"]) for s in doc["sessions"]] == [
        (f"{home}/{rel}", 0, "no_end")]


@pytest.mark.parametrize("backend", ["claude", "codex"])
def test_the_unmodified_capture_is_not_reported(backend: str, tmp_path: Path) -> None:
    """The same captures as the rewrites above, unchanged: read, and no file reported."""
    rel, src = capture(backend)
    home = tmp_path / "home"
    (home / rel).parent.mkdir(parents=True)
    (home / rel).write_bytes(src.read_bytes())
    result = SessionTail(session_reader(backend), home, backfill_s=1e12).poll()
    assert len([e for e in result.events if e.kind == SHELL_END and e.command]) == 5
    assert result.unrecognized == []


def test_turning_the_check_off_and_on_reports_the_file_again(tmp_path: Path, caplog, monkeypatch) -> None:
    """With the check off the row and its state are gone (C14); turned on again, the agent's
    rollout, still written in the rewritten shape (its lines appended once more: another turn),
    is reported again at that turn's end: a second log line, the count at 2 (counters stay),
    the row session_log_unrecognized."""
    monkeypatch.setattr("repeat_failure.sidecar.config_file.OFF_SETTLE_S", 0)  # off at once
    home = tmp_path / "home"
    rel, turn_end = unknown_end_codex(home)
    clock = [turn_end + 60]
    caplog.set_level(logging.INFO, logger="repeat_failure")
    sc = sidecar(tmp_path, "codex", home, clock)
    sc.run_once()
    config = tmp_path / "config.yaml"
    config.write_text("repeat_failure:\n  enabled: false\n  collect_grace_s: 0.5\n")
    sc.reload_config(force=True)
    assert sc.rows() == [] and sc.agents["a1"].activity.unrecognized_ts is None
    config.write_text("repeat_failure:\n  enabled: true\n  collect_grace_s: 0.5\n")
    sc.reload_config(force=True)
    with open(home / rel, "a") as f:
        f.write((home / rel).read_text())
    sc.run_once()
    assert [r[3] for r in flagged_logs(caplog)] == ["no_end", "no_end"]
    assert series(sc, UNRECOGNIZED)[1] == (
        f'{UNRECOGNIZED}{{agent="a1",backend="codex",reason="no_end"}} 2.0')
    assert sc.rows()[0].state == SESSION_LOG_UNRECOGNIZED


def test_a_json_document_whose_calls_never_end_is_reported_by_the_tail(tmp_path: Path) -> None:
    """The sidecar's tail judges JSON documents a CLI rewrites whole as it judges JSON Lines
    (before, only ``repeat-failure replay`` did): the real Cline CLI 2.18.0 task log of the
    repeated run (``harness/evidence/versions/cline/2.18.0/``) with every model request that
    carries a call's result taken out, as a release that logs results elsewhere would leave it:
    five calls start, none ends, the task's error ends the turn, and the file is reported
    ``no_end`` at the error's time; the unmodified log is not reported."""
    root = EVIDENCE_DIR / "versions" / "cline" / "2.18.0" / "cline"
    (src,) = (root / ".cline" / "data" / "tasks").glob("*/ui_messages.json")
    messages = json.loads(src.read_text())
    kept = [m for m in messages if not (m.get("say") == "api_req_started"
                                        and "Result:" in m.get("text", ""))]
    (error,) = [m for m in kept if m.get("say") == "error"]
    for name, doc, reported in (("changed", kept, [("no_end", error["ts"] / 1000)]),
                                ("real", messages, [])):
        home = tmp_path / name
        dest = home / src.relative_to(root)
        dest.parent.mkdir(parents=True)
        dest.write_text(json.dumps(doc))
        result = SessionTail(session_reader("cline"), home, backfill_s=1e12).poll()
        assert [(u.reason, u.ts) for u in result.unrecognized] == reported, name
