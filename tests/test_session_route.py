"""The session-log route (C3) end to end on omp's real session: omp runs its commands in an
embedded shell, so its own log is the route. Records, the note, a CLI rewriting its file, and a
sidecar restart, on the file the harness captured (harness/evidence/omp/)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.evidence import primary
from repeat_failure.sidecar.app import Sidecar
from repeat_failure.sidecar.checkstate import ON
from repeat_failure.config import AgentSpec

EVIDENCE = primary()
NOTE = "Repeating failure: ls /nonexistent failed 5 times in 1 min (exit 2)"
ROUTE = ("omp", "omp_session_log", "failure")


@pytest.fixture
def omp(tmp_path: Path):
    """(state file path, omp's real five-failure session file in a home, sidecar factory)."""
    evidence = json.loads((EVIDENCE / "omp.json").read_text())
    (rel,) = evidence["session_files"]
    home = tmp_path / "home"
    (home / rel).parent.mkdir(parents=True)
    (home / rel).write_bytes((EVIDENCE / "omp" / rel).read_bytes())
    now = max(r["ts"] for r in evidence["runs"][-1]["session_records"]) + 1
    config = tmp_path / "config.yaml"
    config.write_text("repeat_failure:\n  enabled: true\n  collect_grace_s: 0.5\n")

    def make() -> Sidecar:
        return Sidecar(tmp_path / "shared", [AgentSpec("a1", "omp", str(home))], config,
                       clock=lambda: now)

    return tmp_path / "shared" / "state" / "a1.json", home / rel, make


def test_session_log_records_raise_the_note(omp) -> None:
    """omp's five failing `bash` tool calls become five records of route omp_session_log and
    raise the note; the row is `on` (the safeguard does not apply to a route's own log)."""
    _, _, make = omp
    sc = make()
    sc.run_once()
    assert dict(sc.agents["a1"].records) == {ROUTE: 5}
    (row,) = sc.rows()
    assert (row.state, row.message) == (ON, NOTE)
    assert sc.agents["a1"].safeguard is False


def test_rewritten_file_is_not_counted_again(omp) -> None:
    """omp rewrites its first line (the title slot) in place and sometimes the whole file
    under a new inode: the calls already delivered are not delivered again."""
    _, path, make = omp
    sc = make()
    sc.run_once()
    data = path.read_bytes()
    first_end = data.index(b"\n")
    with open(path, "r+b") as f:  # the title slot, same length, other bytes
        f.write(data[:first_end].replace(b'"', b"'"))
    sc.poll_sessions(rescan=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(path.read_bytes())
    os.replace(tmp, path)  # the same content under a new inode
    sc.poll_sessions(rescan=True)
    assert dict(sc.agents["a1"].records) == {ROUTE: 5}


@pytest.mark.parametrize("restart", [False, True])
def test_renamed_session_file_is_not_counted_again(omp, restart: bool) -> None:
    """Issue 17: omp's session file renamed (in its directory) was read again as a new file,
    its calls delivered again under new ids: the note went from 5 failures to 10. It keeps its
    position (and its calls their ids), also when renamed while the sidecar is down."""
    _, path, make = omp
    sc = make()
    sc.run_once()
    path.rename(path.with_name("renamed-" + path.name))
    if restart:
        sc = make()
    sc.poll_sessions(rescan=True)
    sc.run_once()
    assert dict(sc.agents["a1"].records) == {ROUTE: 5}
    (row,) = sc.rows()
    assert row.message == NOTE


@pytest.mark.parametrize("lose_offsets", [False, True])
def test_restart_resumes_without_double_counting(omp, lose_offsets: bool) -> None:
    """A restarted sidecar resumes from its state file: the note is still raised and no call
    is delivered again, even when the saved offsets are lost (the delivered call ids, which
    the state file keeps, stop the replay)."""
    state_file, _, make = omp
    make().run_once()
    state = json.loads(state_file.read_text())
    assert len(state["session_calls"]) == 5
    if lose_offsets:
        state["sessions"] = {}
        state_file.write_text(json.dumps(state))
    again = make()
    again.run_once()
    assert dict(again.agents["a1"].records) == {ROUTE: 5}  # restored, none counted again
    (row,) = again.rows()
    assert row.message == NOTE


def test_omp_without_a_home_is_not_available(tmp_path: Path, caplog) -> None:
    """Without the agent's home an omp agent records nothing: its row says "not available"
    (never a silent `on`) and start-up logs an error naming the flag."""
    caplog.set_level("INFO", logger="repeat_failure")
    config = tmp_path / "config.yaml"
    config.write_text("repeat_failure:\n  enabled: true\n")
    sc = Sidecar(tmp_path / "shared", [AgentSpec("a1", "omp")], config)
    (row,) = sc.rows()
    assert (row.state, row.state_text) == (
        "not_available", "repeat-failure check not available for this backend")
    (line,) = [r for r in caplog.records if r.levelname == "ERROR"]
    assert "--agent-home" in line.getMessage() and line.agent == "a1"


@pytest.mark.parametrize("make_home, level", [
    (lambda p: p.mkdir(), "INFO"),           # a readable directory
    (lambda p: None, "WARNING"),             # missing
    (lambda p: p.write_text("x"), "WARNING"),  # a file
])
def test_start_up_says_where_the_session_log_is_read(tmp_path: Path, caplog, make_home,
                                                     level: str) -> None:
    """Start-up logs each agent's home and the paths looked at, and warns when the home is not
    a readable directory (a wrong mount otherwise looks like an idle agent)."""
    home = tmp_path / "home"
    make_home(home)
    caplog.set_level("INFO", logger="repeat_failure")
    Sidecar(tmp_path / "shared", [AgentSpec("a1", "omp", str(home))])
    (line,) = [r for r in caplog.records if getattr(r, "home", None) == str(home)]
    assert (line.levelname, line.agent, line.globs) == (
        level, "a1", [f"{home}/.omp/agent/sessions/*/*.jsonl"])


def test_session_route_records_follow_the_neutral_routes_rules(omp) -> None:
    """A finished call of omp's real session, altered the ways a log could be wrong: an exit
    outside 0-255 is kept as "failed" only; a time far ahead is refused and counted
    (future_ts); a command longer than a record line is cut and marked so (the scrubber's
    bounded path), like the hook's."""
    import dataclasses

    from repeat_failure.backends import SHELL_END
    from repeat_failure.rules.parse import MAX_LINE_BYTES
    from repeat_failure.sessions.tail import SessionTail

    _, path, make = omp
    sc = make()
    state = sc.agents["a1"]
    (end, *_) = [e for e in SessionTail(state.tail.reader, path.parents[4]).poll().events
                 if e.kind == SHELL_END]
    now = end.ts + 1
    odd = sc._session_record(state, dataclasses.replace(end, exit=-1), now)
    assert (odd.exit, odd.failed, odd.route) == (None, True, "omp_session_log")
    assert sc._session_record(state, dataclasses.replace(end, ts=now + 301), now) is None
    assert state.reader_errors == {"future_ts": 1}
    long = sc._session_record(state, dataclasses.replace(end, command="x" * 10 * MAX_LINE_BYTES),
                              now)
    assert (len(long.cmd), long.cut) == (MAX_LINE_BYTES, True)
