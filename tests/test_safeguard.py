"""C12 / C-AC10 on real captured sessions: "not receiving data" per covered backend.

Each backend's sessions come from the harness (harness/evidence/<backend>/ and its ``read``,
``running`` and ``midturn`` snapshots, taken while the CLI was still running). Nothing is
invented: time moves through the sidecar's injected clock (the sessions' own times plus 15 or
20 minutes) instead of editing the files, and a turn "in progress" is either a snapshot taken
mid-turn or the real file cut before the line that ends the turn (the file as it was then).
The per-backend checks run on every verified release's captures (issue 15: a version matrix;
``version_params`` of ``tests/sessionlogs.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from harness.evidence import primary
from repeat_failure.sidecar import hook
from repeat_failure.sessions.activity import Activity
from repeat_failure.sidecar.app import Sidecar
from repeat_failure.backends import SHELL_END, SHELL_START, TOOL, TURN_END, session_reader
from repeat_failure.sidecar.checkstate import NOT_RECEIVING_DATA, ON
from repeat_failure.config import AgentSpec
from repeat_failure.rules.detector import Detector
from repeat_failure.backends.coverage import COVERAGE
from repeat_failure.sessions.tail import SessionTail

from harness.checks import LOOP_GUARDED, loop_guard
from sessionlogs import version_params

REPO = Path(__file__).resolve().parent.parent
EVIDENCE = primary()
NO_DATA_S = 900.0
#: Covered backends whose session log is an independent shell-activity signal.
SIGNAL_BACKENDS = sorted(
    b for b, row in COVERAGE.items()
    if row.covered and row.kind == "cli" and (r := session_reader(b)) is not None
    and not r.route_records)
#: ``(backend, evidence root)`` per signal backend and verified release (the pin first), ids
#: ``<backend>-<version>``.
SIGNAL_CASES = [pytest.param(b, *param.values, id=param.id)
                for b in SIGNAL_BACKENDS for param in version_params(b)]


def cases_with(scenario: str) -> list:
    """The :data:`SIGNAL_CASES` whose evidence kept session files of ``scenario``. The harness
    keeps none where the CLI wrote nothing there: Continue CLI 1.5.47 writes its session file
    only when the turn's steps finish (no file 1.5 s into a running command), and Cline CLI
    3.0.65's file tool is not one the stub can ask for (its ``read`` run is skipped)."""
    return [case for case in SIGNAL_CASES
            if ((json.loads((case.values[1] / f"{case.values[0]}.json").read_text())
                 .get("scenario_sessions") or {}).get(scenario))]


#: Verified releases whose session log never ends a turn: Codex before 0.100.0 writes no
#: task_complete (its reader starts a turn at each prompt; issue 26).
NO_TURN_END = {("codex", "0.96.0"), ("codex", "0.64.0")}


def evidence(backend: str, root: Path = EVIDENCE) -> dict:
    return json.loads((root / f"{backend}.json").read_text())


def session_paths(backend: str, scenario: str, root: Path = EVIDENCE) -> list[tuple[str, Path]]:
    """(path under HOME, stored copy) of a scenario's session files under the evidence ``root``;
    ``shell`` is the repeated `ls /nonexistent` run."""
    data = evidence(backend, root)
    if scenario == "shell":
        return [(rel, root / backend / rel) for rel in data["session_files"]]
    rels = (data.get("scenario_sessions") or {}).get(scenario)
    assert rels, f"{backend}: the harness kept no {scenario!r} session (python -m harness run)"
    return [(rel, root / backend / scenario / rel) for rel in rels]


def make_home(tmp: Path, backend: str, scenario: str, cut_before_turn_end: bool = False,
              root: Path = EVIDENCE) -> Path:
    """A home holding the scenario's real session files (of the evidence under ``root``).
    ``cut_before_turn_end`` keeps each JSON Lines file only up to (not including) the first
    line that ends a turn."""
    home = tmp / "home"
    reader = session_reader(backend)
    for rel, src in session_paths(backend, scenario, root):
        dest = home / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        data = src.read_bytes()
        if reader.file_kind(dest) == "jsonl":
            # A snapshot may end in a line the CLI was still writing: keep whole lines.
            data = data[:data.rfind(b"\n") + 1]
            if cut_before_turn_end:
                data = _cut_before_turn_end(reader, data)
        dest.write_bytes(data)
    return home


def _cut_before_turn_end(reader, data: bytes) -> bytes:
    state = reader.new_file_state()
    kept = 0
    for line in data.splitlines(keepends=True):
        events = reader.parse_line(json.loads(line), state) if line.strip() else []
        if any(e.kind == TURN_END for e in events):
            return data[:kept]
        kept += len(line)
    return data


def events_of(backend: str, home: Path, strict: bool = True) -> list:
    """The events the backend's reader gives for every session file under ``home``; with
    ``strict``, no line may be refused."""
    tail = SessionTail(session_reader(backend), home, backfill_s=1e12)
    result = tail.poll()
    assert not strict or result.errors == {}, result.errors
    return result.events


def sidecar(tmp: Path, backend: str, home: Path, clock: list[float], extra: str = "",
            started: float | None = None) -> Sidecar:
    """A sidecar on ``home`` whose clock reads ``clock[0]``; it starts at ``started`` (default:
    an hour before the clock, so the session's calls came after the hook existed), and the
    clock is then put back."""
    config = tmp / "config.yaml"
    config.write_text(f"repeat_failure:\n  enabled: true\n  collect_grace_s: 0.5\n{extra}")
    now = clock[0]
    clock[0] = now - 3600 if started is None else started
    try:
        return Sidecar(tmp / "shared", [AgentSpec("a1", backend, str(home))], config,
                       clock=lambda: clock[0])
    finally:
        clock[0] = now


def state_at(sc: Sidecar, t: float, clock: list[float]) -> str:
    clock[0] = t
    (row,) = sc.rows()
    return row.state


@pytest.mark.parametrize("backend,root", cases_with("midturn"))
def test_shell_activity_without_records_for_15_min(backend: str, root: Path,
                                                   tmp_path: Path) -> None:
    """C-AC10: a turn in progress with a finished shell call and no record for 15 minutes shows
    "not receiving data"; a record arriving clears it. The session is the ``midturn`` snapshot:
    `ls /nonexistent` finished (exit 2), a second command still running."""
    home = make_home(tmp_path, backend, "midturn", root=root)
    events = events_of(backend, home)
    ends = [e for e in events if e.kind == SHELL_END]
    assert [(e.exit, e.failed) for e in ends] in ([(2, True)], [(None, True)])
    assert not [e for e in events if e.kind == TURN_END]
    finished = ends[0].ts
    clock = [max(e.ts for e in events)]
    sc = sidecar(tmp_path, backend, home, clock)
    sc.run_once()
    assert state_at(sc, finished + NO_DATA_S - 1, clock) == ON
    assert state_at(sc, finished + NO_DATA_S, clock) == NOT_RECEIVING_DATA
    (row,) = sc.rows()
    assert row.state_text == "repeat-failure check not receiving data"
    # A record arrives through the real route: the state clears.
    hook.render(tmp_path / "shared", "a1", backend)
    env = {"PATH": os.environ["PATH"], **hook.launch_env(tmp_path / "shared", "a1", {})}
    subprocess.run(["bash", "-c", "true"], env=env, check=True)
    clock[0] = time.time() + 1
    sc.run_once()
    assert state_at(sc, clock[0], clock) == ON


@pytest.mark.parametrize("backend,root", cases_with("read"))
def test_only_reads_for_15_min_is_on(backend: str, root: Path, tmp_path: Path) -> None:
    """C-AC10: an agent that only read files shows "on" 15 minutes (and more) later. The
    session is the ``read`` run, cut before its final answer where the log is JSON Lines, so
    the turn is still in progress."""
    reader = session_reader(backend)
    skipped = (evidence(backend, root).get("scenarios") or {}).get("read", {}).get("skipped")
    if skipped:  # e.g. Codex before 0.130: no file tool for the harness's file-tool model
        pytest.skip(f"{backend}: the harness ran no file-tool turn: {skipped}")
    home = make_home(tmp_path, backend, "read", cut_before_turn_end=True, root=root)
    events = events_of(backend, home)
    kinds = {e.kind for e in events}
    assert TOOL in kinds and not kinds & {SHELL_START, SHELL_END}
    clock = [max(e.ts for e in events)]
    sc = sidecar(tmp_path, backend, home, clock)
    sc.run_once()
    activity = sc.agents["a1"].activity
    # Cut before its answer only where the file is JSON Lines (a JSON document is kept whole).
    cut = all(reader.file_kind(src) == "jsonl" for _, src in session_paths(backend, "read", root))
    assert activity.turn_open is cut
    assert state_at(sc, clock[0] + NO_DATA_S + 60, clock) == ON
    assert state_at(sc, clock[0] + 10 * NO_DATA_S, clock) == ON


@pytest.mark.parametrize("backend,root", cases_with("running"))
def test_one_command_running_for_20_min_is_on(backend: str, root: Path, tmp_path: Path) -> None:
    """C-AC10: a single command running for 20 minutes is not missing data. The session is the
    ``running`` snapshot, taken while `sleep 8` ran; where the CLI logs a call only once it
    finished (the evidence says so), the snapshot shows no call at all."""
    home = make_home(tmp_path, backend, "running", root=root)
    events = events_of(backend, home)
    logged = evidence(backend, root)["scenarios"]["running"]["snapshot"]["running_command_logged"]
    starts = [e for e in events if e.kind == SHELL_START]
    assert len(starts) == (1 if logged else 0)
    assert not [e for e in events if e.kind in (SHELL_END, TURN_END)]
    clock = [max(e.ts for e in events)]
    sc = sidecar(tmp_path, backend, home, clock)
    sc.run_once()
    assert len(sc.agents["a1"].activity.running) == len(starts)
    assert state_at(sc, clock[0] + 20 * 60, clock) == ON


@pytest.mark.parametrize("backend,root", [
    c for c in SIGNAL_CASES if c.values[0] not in LOOP_GUARDED
    # a release that made four of the five calls (Gemini CLI 0.27.0) has no five to count
    and loop_guard(c.values[0], evidence(c.values[0], c.values[1])["version"]) is None])
def test_finished_turn_is_idle(backend: str, root: Path, tmp_path: Path) -> None:
    """The whole repeated-failure session, turn ended, no records: the agent is idle, so its
    row is "on" however long after (the timer waits for the next turn with shell activity).
    A release whose log has no turn end (:data:`NO_TURN_END`) keeps the turn open instead."""
    home = make_home(tmp_path, backend, "shell", root=root)
    events = events_of(backend, home)
    assert len([e for e in events if e.kind == SHELL_END]) == 5
    clock = [max(e.ts for e in events)]
    sc = sidecar(tmp_path, backend, home, clock)
    sc.run_once()
    activity = sc.agents["a1"].activity
    version = evidence(backend, root)["version"]
    assert any(e.kind == TURN_END for e in events) is ((backend, version) not in NO_TURN_END)
    if (backend, version) in NO_TURN_END:
        # Codex before 0.100.0 logs no turn end (issue 26): the turn with unrecorded shell
        # calls stays open, so the row says so once the timer has run.
        assert activity.turn_open is True and activity.unmatched_since is not None
        assert state_at(sc, clock[0] + 2 * NO_DATA_S, clock) == NOT_RECEIVING_DATA
        return
    assert activity.turn_open is False and activity.unmatched_since is not None
    assert state_at(sc, clock[0] + 2 * NO_DATA_S, clock) == ON


def test_not_receiving_data_over_http(tmp_path: Path) -> None:
    """End to end: `repeat-failure run --agent-home` on Claude Code's mid-turn snapshot with
    `no_data_after_s: 1`: /metrics shows the state set at not_receiving_data and the row text,
    /status says the same, and promtool accepts the scrape."""
    home = make_home(tmp_path, "claude", "midturn")
    config = tmp_path / "config.yaml"
    config.write_text("repeat_failure:\n  enabled: true\n  no_data_after_s: 1\n")
    # A sidecar restarted with its state file: it has watched this agent since before the
    # captured session began (calls from before a sidecar first started had no hook).
    started = min(e.ts for e in events_of("claude", home)) - 1
    (tmp_path / "shared" / "state").mkdir(parents=True)
    (tmp_path / "shared" / "state" / "a1.json").write_text(json.dumps(
        {"version": 1, "agent": "a1", "detector": Detector(5, 600).to_dict(),
         "activity": {"not_before": started}}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "repeat_failure", "run", "--config", str(config), "--shared-dir",
         str(tmp_path / "shared"), "--agent", "a1", "--backend", "claude", "--agent-home",
         str(home), "--listen", "127.0.0.1:0"], stderr=subprocess.PIPE, text=True)
    try:
        port = None
        for line in proc.stderr:
            if '"sidecar started"' in line:
                port = json.loads(line)["port"]
                break
        assert port, "the sidecar did not start"
        base = f"http://127.0.0.1:{port}"
        deadline = time.time() + 20
        while True:
            metrics = urllib.request.urlopen(f"{base}/metrics", timeout=5).read().decode()
            if 'state="not_receiving_data"} 1.0' in metrics or time.time() > deadline:
                break
            time.sleep(0.2)
        assert ('hive_repeat_failure_check_state{agent="a1",backend="claude",'
                'state="not_receiving_data"} 1.0') in metrics
        assert ('state="not_receiving_data",state_text="repeat-failure check not receiving data"'
                in metrics)
        assert 'hive_repeat_failure_last_shell_activity_timestamp_seconds{agent="a1"' in metrics
        (row,) = json.loads(urllib.request.urlopen(f"{base}/status", timeout=5).read())["rows"]
        assert (row["state"], row["state_text"]) == (
            "not_receiving_data", "repeat-failure check not receiving data")
        if shutil.which("promtool"):
            done = subprocess.run(["promtool", "check", "metrics"], input=metrics,
                                  capture_output=True, text=True)
            assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_unrecognised_lines_are_counted_in_metrics(tmp_path: Path) -> None:
    """A session line the reader cannot use (a real line cut short) is counted in
    hive_repeat_failure_reader_errors_total by reason; a real line of a type the reader does not
    know (a newer CLI's addition, issue 15) is no error: it is counted in
    hive_repeat_failure_reader_lines_ignored_total. Neither changes anything else; the sidecar
    keeps reading."""
    from prometheus_client import generate_latest

    from repeat_failure.sidecar.exporter import MetricsCollector

    home = make_home(tmp_path, "claude", "shell")
    (path,) = [p for p in home.rglob("*.jsonl")]
    lines = path.read_bytes().splitlines(keepends=True)
    unknown = json.loads(lines[-1])
    unknown["type"] = "renamed-by-a-cli-update"
    path.write_bytes(b"".join(lines) + lines[-1][:40] + b"\n"
                     + json.dumps(unknown).encode() + b"\n")
    clock = [time.time()]
    sc = sidecar(tmp_path, "claude", home, clock)
    sc.run_once()
    sc.registry.register(MetricsCollector(sc))
    text = generate_latest(sc.registry).decode()
    assert ('hive_repeat_failure_reader_errors_total{agent="a1",backend="claude",'
            'reason="not_json"} 1.0') in text
    assert 'reason="unknown_type"' not in text
    assert ('hive_repeat_failure_reader_lines_ignored_total{agent="a1",backend="claude"} 1.0'
            in text)
    assert len([e for e in events_of("claude", home, strict=False) if e.kind == SHELL_END]) == 5


def test_session_activity_while_the_check_was_off_is_not_missing_data(tmp_path: Path, monkeypatch) -> None:
    """C14 with C12: while the check is off there is no hook and the home is not read; the
    shell calls the session log gained meanwhile had no records by design, so turning the check
    on skips them instead of reporting "not receiving data"."""
    monkeypatch.setattr("repeat_failure.sidecar.config_file.OFF_SETTLE_S", 0)  # off at once
    home = make_home(tmp_path, "claude", "midturn")
    clock = [time.time() + 1]
    sc = sidecar(tmp_path, "claude", home, clock)
    (tmp_path / "config.yaml").write_text("repeat_failure:\n  enabled: false\n")
    sc.reload_config(force=True)
    sc.run_once()
    assert sc.agents["a1"].activity.to_dict() == Activity(not_before=clock[0]).to_dict()
    (tmp_path / "config.yaml").write_text("repeat_failure:\n  enabled: true\n")
    sc.reload_config(force=True)
    sc.run_once()
    assert sc.agents["a1"].activity.last_shell_ts is None  # the backlog was skipped
    assert state_at(sc, clock[0] + 2 * NO_DATA_S, clock) == ON


def test_flip_time_is_waited_for_once_and_logged(tmp_path: Path, caplog) -> None:
    """The run loop wakes at the flip to "not receiving data" (one warning log line with
    event not_receiving_data), and once it has flipped there is nothing left to wait for: a
    flip time already past is never a deadline again (it would make the loop spin)."""
    home = make_home(tmp_path, "claude", "midturn")
    events = events_of("claude", home)
    finished = [e for e in events if e.kind == SHELL_END][0].ts
    clock = [max(e.ts for e in events)]
    sc = sidecar(tmp_path, "claude", home, clock)
    caplog.set_level("INFO", logger="repeat_failure")
    sc.run_once()
    assert sc._next_change() == finished + NO_DATA_S
    clock[0] = finished + NO_DATA_S
    sc.expire()
    assert sc._next_change() is None
    flips = [r for r in caplog.records if getattr(r, "event", "").endswith("receiving_data")]
    assert [(r.levelname, r.event, r.agent, r.since) for r in flips] == [
        ("WARNING", "not_receiving_data", "a1", finished)]
    clock[0] += 3600
    sc.expire()  # still not receiving: no second line
    assert len([r for r in caplog.records if getattr(r, "event", "") == "not_receiving_data"]) == 1


def test_no_flip_to_wait_for_where_the_session_log_is_the_route(tmp_path: Path) -> None:
    """omp's session log is its route: no C12 timer runs for it, so its turns with shell calls
    never give the loop a deadline."""
    home = make_home(tmp_path, "omp", "midturn")
    events = events_of("omp", home)
    clock = [max(e.ts for e in events)]
    sc = sidecar(tmp_path, "omp", home, clock, extra="  window_s: 86400\n")
    sc.run_once()
    assert sc.agents["a1"].activity.unmatched_since is not None  # activity is still tracked
    assert sc._next_change() == sc.agents["a1"].detector.next_change()
    assert state_at(sc, clock[0] + 10 * NO_DATA_S, clock) == ON



def test_unreadable_folder_in_the_home_does_not_stop_the_sidecar(tmp_path: Path, monkeypatch):
    """The sidecar may run as a user who cannot read part of the agent's home (EACCES on
    `.claude/projects`): finding the directories to watch and polling carry on, nothing
    raises, and the row stays "on"."""
    home = make_home(tmp_path, "claude", "midturn")
    real_stat = os.stat

    def stat(path, *args, **kwargs):
        if ".claude" in str(path):
            raise PermissionError(13, "Permission denied", str(path))
        return real_stat(path, *args, **kwargs)

    clock = [time.time()]
    sc = sidecar(tmp_path, "claude", home, clock)
    monkeypatch.setattr("repeat_failure.sessions.tail.os.stat", stat)
    assert sc.session_dirs() == []
    sc.poll_sessions(rescan=True)
    sc.run_once()
    assert state_at(sc, clock[0] + 2 * NO_DATA_S, clock) == ON
