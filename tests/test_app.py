"""The wired pipeline (repeat_failure.sidecar.app) on real files with an injected clock: exclusion, off means
off, secrets, restarts, bad input, config reload."""

from __future__ import annotations

import io
import itertools
import json
import logging
import os
import re
from pathlib import Path

import orjson
import pytest
from prometheus_client import generate_latest

from repeat_failure.sidecar import hook
from repeat_failure.jsonlog import configure_logging
from repeat_failure.sidecar.app import Sidecar
from repeat_failure.config import AgentSpec
from repeat_failure.sidecar.exporter import MetricsCollector, status_json

T0 = 1_800_000_000.0


class Clock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def write_config(path: Path, enabled: bool = True, extra: str = "") -> Path:
    path.write_text(f"repeat_failure:\n  enabled: {str(enabled).lower()}\n"
                    f"  collect_grace_s: 1\n{extra}")
    return path


def append(shared: Path, agent: str, cmd: str, exit_status: int, ts: float,
           backend: str = "bash") -> None:
    line = orjson.dumps({"v": 1, "ts": ts, "agent": agent, "backend": backend,
                         "route": "bash_env", "exit": exit_status, "cmd": cmd})
    with open(hook.records_path(shared, agent), "ab") as f:
        f.write(line + b"\n")


def make(tmp_path: Path, enabled: bool = True, backend: str = "bash", extra: str = "",
         clock: Clock | None = None) -> Sidecar:
    cfg = write_config(tmp_path / "config.yaml", enabled, extra)
    # Every reading of the monotonic clock is 10 s later: a collected file's 1 s grace period
    # has always ended by the next pass, so tests see late lines and torn tails at once.
    sc = Sidecar(tmp_path / "shared", [AgentSpec("a1", backend)], cfg, clock=clock or Clock(),
                 monotonic=itertools.count(0, 10).__next__)
    sc.registry.register(MetricsCollector(sc))
    return sc


def metrics(sc: Sidecar) -> str:
    return generate_latest(sc.registry).decode()


def series(sc: Sidecar, name: str) -> list[str]:
    return [line for line in metrics(sc).splitlines() if line.startswith(name + "{")]


def test_waiting_loops_raise_nothing(tmp_path: Path) -> None:
    """C-AC6: gh pr checks and gh pr checks 123 --watch failing 10 times each → nothing."""
    sc = make(tmp_path)
    for i in range(10):
        append(sc.shared_dir, "a1", "gh pr checks", 1, T0 - 20 + i)
        append(sc.shared_dir, "a1", "gh  pr checks 123 --watch", 8, T0 - 20 + i)
    sc.run_once()
    assert sc.rows()[0].notes == ()
    assert series(sc, "hive_repeat_failure_records_total") == [
        'hive_repeat_failure_records_total{agent="a1",backend="bash",outcome="excluded",'
        'route="bash_env"} 20.0']
    assert series(sc, "hive_repeat_failure_command_failures") == []


def test_note_metrics_and_row(tmp_path: Path) -> None:
    """Five failures raise the note: note gauge, row_info, check state, counters, /status."""
    clock = Clock()
    sc = make(tmp_path, clock=clock)
    for i in range(5):
        append(sc.shared_dir, "a1", "ls /nonexistent", 2, T0 - 50 + i * 10)
    sc.run_once()
    msg = "Repeating failure: ls /nonexistent failed 5 times in 1 min (exit 2)"
    assert series(sc, "hive_repeat_failure_note") == [
        'hive_repeat_failure_note{agent="a1",backend="bash",command="ls /nonexistent",exit="2",output="unknown"} 5.0']
    assert series(sc, "hive_repeat_failure_row_info") == [
        'hive_repeat_failure_row_info{agent="a1",backend="bash",command="ls /nonexistent",'
        'exit="2",state="on",state_text=""} 1.0']
    assert series(sc, "hive_repeat_failure_note_span_seconds") == [
        'hive_repeat_failure_note_span_seconds{agent="a1",backend="bash",'
        'command="ls /nonexistent",exit="2",output="unknown"} 40.0']
    assert series(sc, "hive_repeat_failure_notes_active") == [
        'hive_repeat_failure_notes_active{agent="a1",backend="bash"} 1.0']
    assert series(sc, "hive_repeat_failure_check_state") == [
        'hive_repeat_failure_check_state{agent="a1",backend="bash",state="on"} 1.0',
        'hive_repeat_failure_check_state{agent="a1",backend="bash",state="not_available"} 0.0',
        'hive_repeat_failure_check_state{agent="a1",backend="bash",state="not_receiving_data"} 0.0',
        'hive_repeat_failure_check_state{agent="a1",backend="bash",state="session_log_unrecognized"} 0.0']
    assert series(sc, "hive_repeat_failure_notes_raised_total") == [
        'hive_repeat_failure_notes_raised_total{agent="a1",backend="bash"} 1.0']
    assert series(sc, "hive_repeat_failure_last_record_timestamp_seconds") == [
        'hive_repeat_failure_last_record_timestamp_seconds{agent="a1",backend="bash"} 1.79999999e+09']
    status = json.loads(status_json(sc))
    assert status == {"rows": [{
        "agent": "a1", "backend": "bash", "state": "on", "state_text": "", "message": msg,
        "notes": [{"command": "ls /nonexistent", "exit": 2, "count": 5, "minutes": 1,
                   "first_ts": T0 - 50, "last_ts": T0 - 10, "output": "unknown",
                   "message": msg}]}]}
    # The series disappears with the note (expiry uses the clock).
    clock.t = T0 - 10 + 600
    sc.run_once()
    assert series(sc, "hive_repeat_failure_note") == []
    assert sc.rows()[0].message == ""


def test_not_covered_backend_row(tmp_path: Path) -> None:
    """C-AC9: an agent on a backend not covered shows the not-available state text."""
    sc = make(tmp_path, backend="muse")
    (row,) = sc.rows()
    assert (row.state, row.state_text) == (
        "not_available", "repeat-failure check not available for this backend")
    assert 'state="not_available"} 1.0' in "\n".join(series(sc, "hive_repeat_failure_check_state"))


def test_off_means_off(tmp_path: Path, monkeypatch) -> None:
    """C-AC12 (sidecar side): with the default config nothing is rendered or exported; on → off
    removes the hook file and the check-state series; raw records are still deleted."""
    monkeypatch.setattr("repeat_failure.sidecar.config_file.OFF_SETTLE_S", 0)  # off at once
    sc = make(tmp_path, enabled=False)
    shared = sc.shared_dir
    assert sorted(p.name for p in (shared / "hook").iterdir()) == []
    assert sc.rows() == []
    text = metrics(sc)
    assert "hive_repeat_failure_check_state{" not in text and "row_info{" not in text

    cfg = write_config(tmp_path / "config.yaml", True)
    assert sc.reload_config(force=True)
    assert sorted(p.name for p in (shared / "hook").iterdir()) == ["a1.sh", "a1.slow.bash"]
    for i in range(5):
        append(shared, "a1", "false", 1, T0 - 5 + i)
    sc.run_once()
    assert len(series(sc, "hive_repeat_failure_check_state")) == 4
    assert len(series(sc, "hive_repeat_failure_note")) == 1

    write_config(cfg, False)
    assert sc.reload_config(force=True)
    assert sorted(p.name for p in (shared / "hook").iterdir()) == []
    assert series(sc, "hive_repeat_failure_check_state") == []
    assert series(sc, "hive_repeat_failure_note") == []
    assert not (shared / "state" / "a1.json").exists()
    append(shared, "a1", "false", 1, T0)  # a record left by a shell that started before "off"
    sc.run_once()
    sc.run_once()  # its grace period over, the collected raw file is deleted unread
    assert list((shared / "records").iterdir()) == []
    assert sc.rows() == []


def test_secrets_scrubbed_everywhere(tmp_path: Path) -> None:
    """C-AC13: a token-shaped command is scrubbed in /metrics, /status, the log and the state
    file, and the raw file is gone after collection."""
    token = "ghp_" + "A1b2C3d4E5" * 3 + "F6g7H8"  # built here: the shape of a GitHub token
    stream = io.StringIO()
    configure_logging(stream)
    sc = make(tmp_path)
    for i in range(5):
        append(sc.shared_dir, "a1", f"gh api -H 'Authorization: token {token}' /user", 1, T0 - 9 + i)
    sc.run_once()
    sc.run_once()  # the collected raw file's grace period is over: it is deleted
    scrubbed = "gh api -H 'Authorization: token [REDACTED]' /user"
    outputs = {
        "metrics": metrics(sc), "status": status_json(sc).decode(), "log": stream.getvalue(),
        "state": (sc.shared_dir / "state" / "a1.json").read_text(),
    }
    for name, text in outputs.items():
        assert token not in text, name
        assert scrubbed in text, name
    assert list((sc.shared_dir / "records").iterdir()) == []
    (line,) = [json.loads(ln) for ln in stream.getvalue().splitlines() if "note_raised" in ln]
    assert (line["event"], line["command"], line["exit"], line["count"]) == (
        "note_raised", scrubbed, 1, 5)
    logging.getLogger("repeat_failure").handlers.clear()


def test_restart_keeps_open_notes(tmp_path: Path) -> None:
    """A restarted sidecar reads state/<agent>.json and keeps its open note."""
    sc = make(tmp_path)
    for i in range(5):
        append(sc.shared_dir, "a1", "make", 2, T0 - 9 + i)
    sc.run_once()
    again = make(tmp_path)
    assert again.rows()[0].message == "Repeating failure: make failed 5 times in 1 min (exit 2)"


@pytest.mark.parametrize("content", [b"{torn", b"[]", b'{"version": 99}', b"\xff\xfe"])
def test_bad_state_file_ignored(tmp_path: Path, content: bytes) -> None:
    """A torn, wrong or future state file is ignored with a log line, never a crash."""
    shared = tmp_path / "shared"
    hook.prepare_shared_dir(shared)
    (shared / "state" / "a1.json").write_bytes(content)
    stream = io.StringIO()
    configure_logging(stream)
    sc = make(tmp_path)
    assert sc.rows()[0].notes == ()
    assert "state file ignored" in stream.getvalue()
    logging.getLogger("repeat_failure").handlers.clear()


def test_bad_input_counted_and_dropped(tmp_path: Path) -> None:
    """Garbage, truncated JSON, a 10 MB line, non-UTF-8 bytes → counted, dropped, still running."""
    sc = make(tmp_path)
    good = orjson.dumps({"v": 1, "ts": T0 - 1, "agent": "a1", "backend": "bash",
                         "route": "bash_env", "exit": 1, "cmd": "false \xff"})
    bad_utf8 = good.replace("false \xff".encode(), b"false \xff\xfe")
    data = (b"garbage\n" + good[:40] + b"\n" + b"x" * 10_000_000 + b"\n" + bad_utf8 + b"\n"
            + b'{"v":1,"ts":1e400,"agent":"a1","backend":"bash","route":"r","exit":1,"cmd":"x"}\n'
            + b'{"v":1,"ts":1,"agent":"a2","backend":"bash","route":"r","exit":1,"cmd":"x"}\n'
            + b'{"v":1,"ts":1,"agent":"a1","backend":"bash","route":"r","exit":300,"cmd":"x"}\n'
            + good + b"\n" + b"partial")
    hook.records_path(sc.shared_dir, "a1").write_bytes(data)
    sc.run_once()
    sc.run_once()  # the grace period has ended: the partial last line is torn
    assert series(sc, "hive_repeat_failure_records_rejected_total") == [
        'hive_repeat_failure_records_rejected_total{agent="a1",reason="malformed"} 5.0',
        'hive_repeat_failure_records_rejected_total{agent="a1",reason="oversized"} 1.0',
        'hive_repeat_failure_records_rejected_total{agent="a1",reason="torn"} 1.0']
    assert series(sc, "hive_repeat_failure_command_failures") == [
        'hive_repeat_failure_command_failures{agent="a1",backend="bash",command="false \xff",exit="1"} 1.0',
        'hive_repeat_failure_command_failures{agent="a1",backend="bash",command="false \ufffd\ufffd",exit="1"} 1.0']


def test_invalid_config_change_keeps_last_good(tmp_path: Path) -> None:
    """A config edit that does not validate is refused; the last good config stays in force."""
    sc = make(tmp_path)
    (tmp_path / "config.yaml").write_text("repeat_failure:\n  enabled: maybe\n")
    assert sc.reload_config(force=True) is False
    assert sc.config.enabled is True
    assert hook.hook_path(sc.shared_dir, "a1").exists()


def test_long_command_label_is_cut(tmp_path: Path) -> None:
    """`command` labels are cut to 200 characters ending in …"""
    sc = make(tmp_path, extra="  threshold: 1\n")
    append(sc.shared_dir, "a1", "echo " + "x" * 400, 1, T0 - 1)
    sc.run_once()
    (line,) = series(sc, "hive_repeat_failure_note")
    label = line.split('command="', 1)[1].split('"', 1)[0]
    assert label == "echo " + "x" * 194 + "…" and len(label) == 200


def test_deleted_layout_is_recreated(tmp_path: Path) -> None:
    """A shared dir emptied while the sidecar runs gets its folders and hook files back at the
    next pass, and records written after that are collected."""
    import shutil

    sc = make(tmp_path, extra="  threshold: 1\n")
    shutil.rmtree(sc.shared_dir / "records")
    shutil.rmtree(sc.shared_dir / "hook")
    sc.run_once()
    assert sorted(p.name for p in (sc.shared_dir / "hook").iterdir()) == ["a1.sh", "a1.slow.bash"]
    assert oct((sc.shared_dir / "records").stat().st_mode & 0o7777) == "0o2770"
    append(sc.shared_dir, "a1", "false", 1, T0 - 1)
    sc.run_once()
    assert [n.command for n in sc.rows()[0].notes] == ["false"]


def test_records_dir_opened_to_others_gets_its_mode_back(tmp_path: Path) -> None:
    """``records/`` chmod-ed to 0777 (anyone could plant records) is set back to 2770 at the
    next pass, with one log line; an unchanged layout logs nothing."""
    sc = make(tmp_path)
    stream = io.StringIO()
    configure_logging(stream)
    try:
        sc.run_once()
        assert "layout" not in stream.getvalue()
        os.chmod(sc.shared_dir / "records", 0o777)
        sc.run_once()
        sc.run_once()
    finally:
        logging.getLogger("repeat_failure").handlers.clear()
    assert oct((sc.shared_dir / "records").stat().st_mode & 0o7777) == "0o2770"
    assert stream.getvalue().count("its modes changed, recreating") == 1


def test_records_dir_replaced_by_an_agents_own_is_moved_aside(tmp_path: Path) -> None:
    """An agent renames ``records/`` away and makes its own (the volume's root is writable by
    the agent): the next pass moves the foreign folder aside, makes ours again (2770, owned by
    the sidecar's user), logs it once, and collects what is written after that. Never raises,
    also at a restart."""
    import shutil

    if os.geteuid() != 0:
        pytest.skip("needs root to give the folder to another user")
    sc = make(tmp_path, extra="  threshold: 1\n")
    records = sc.shared_dir / "records"
    records.rename(sc.shared_dir / "records.old")
    records.mkdir()
    os.chmod(records, 0o777)
    os.chown(records, 54321, 54321)
    stream = io.StringIO()
    configure_logging(stream)
    try:
        sc.run_once()
        again = make(tmp_path, extra="  threshold: 1\n")  # a restart meanwhile: no crash
    finally:
        logging.getLogger("repeat_failure").handlers.clear()
    info = records.stat()
    assert (info.st_uid, oct(info.st_mode & 0o7777)) == (0, "0o2770")
    (aside,) = [p.name for p in sc.shared_dir.iterdir() if p.name.startswith(".records.foreign.")]
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line.get("moved_to") for line in lines if "moved_to" in line] == [aside]
    append(sc.shared_dir, "a1", "false", 1, T0 - 1)
    again.run_once()
    assert [n.command for n in again.rows()[0].notes] == ["false"]
    shutil.rmtree(sc.shared_dir / "records.old")


# --- findings of the break-it review ------------------------------------------------------------

def test_failed_state_save_keeps_the_raw_files_and_counts_each_record_once(
        tmp_path: Path, monkeypatch) -> None:
    """A state save that fails (a full disk) is logged and the collected raw file is kept
    (issue 17: deleting it lost its records at the next restart); the records are counted once,
    exported once saved, and the file goes once the save succeeds."""
    sc = make(tmp_path)
    write_atomic = hook.write_atomic

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(hook, "write_atomic", full_disk)
    append(sc.shared_dir, "a1", "false", 1, T0 - 1)
    for _ in range(3):
        sc.run_once()
    assert dict(sc.agents["a1"].records) == {("bash", "bash_env", "failure"): 1}
    assert series(sc, "hive_repeat_failure_records_total") == []  # not saved yet
    (kept,) = [p.name for p in (sc.shared_dir / "records").iterdir()]
    assert kept.startswith("a1.jsonl.collecting.")
    monkeypatch.setattr(hook, "write_atomic", write_atomic)
    sc.run_once()
    assert series(sc, "hive_repeat_failure_records_total") == [
        'hive_repeat_failure_records_total{agent="a1",backend="bash",outcome="failure",'
        'route="bash_env"} 1.0']
    assert list((sc.shared_dir / "records").iterdir()) == []


def test_directory_planted_at_record_path(tmp_path: Path) -> None:
    """A directory at records/<agent>.jsonl is counted unreadable and removed; collection goes on."""
    sc = make(tmp_path, extra="  threshold: 1\n")
    (hook.records_path(sc.shared_dir, "a1")).mkdir()
    (hook.records_path(sc.shared_dir, "a1") / "inner").write_text("x")
    sc.run_once()
    append(sc.shared_dir, "a1", "false", 1, T0 - 1)
    sc.run_once()
    sc.run_once()
    assert series(sc, "hive_repeat_failure_records_rejected_total") == [
        'hive_repeat_failure_records_rejected_total{agent="a1",reason="unreadable"} 1.0']
    assert [n.command for n in sc.rows()[0].notes] == ["false"]
    assert list((sc.shared_dir / "records").iterdir()) == []


def test_records_dir_replaced_by_symlink(tmp_path: Path) -> None:
    """records/ swapped for a symlink at runtime is never followed: the outside files stay, the
    symlink is replaced by a fresh directory."""
    sc = make(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a1.jsonl").write_text("not ours\n")
    (outside / "a1.jsonl.collecting.keep").write_text("not ours either\n")
    records = sc.shared_dir / "records"
    records.rename(sc.shared_dir / "records.old")
    records.symlink_to(outside)
    sc.run_once()
    assert sorted(p.name for p in outside.iterdir()) == ["a1.jsonl", "a1.jsonl.collecting.keep"]
    assert records.is_dir() and not records.is_symlink()


def test_label_values_come_from_the_agent_not_the_record(tmp_path: Path) -> None:
    """A record naming another backend, an unknown route or a far-future time is malformed, so
    no record text becomes a label and no note sticks forever."""
    sc = make(tmp_path, extra="  threshold: 1\n")
    base = {"v": 1, "agent": "a1", "backend": "bash", "route": "bash_env", "exit": 1, "cmd": "x"}
    lines = [
        {**base, "ts": T0, "backend": "claude"},
        {**base, "ts": T0, "route": "ghp_" + "x" * 36},
        {**base, "ts": T0 + 301},
        {**base, "ts": 1e300},
    ]
    hook.records_path(sc.shared_dir, "a1").write_bytes(b"".join(orjson.dumps(ln) + b"\n" for ln in lines))
    sc.run_once()
    assert series(sc, "hive_repeat_failure_records_rejected_total") == [
        'hive_repeat_failure_records_rejected_total{agent="a1",reason="malformed"} 4.0']
    assert series(sc, "hive_repeat_failure_records_total") == []
    assert sc.rows()[0].notes == ()


def test_empty_config_on_reload_is_refused(tmp_path: Path) -> None:
    """Truncating the config file while running keeps the check on (and its notes)."""
    sc = make(tmp_path, extra="  threshold: 1\n")
    append(sc.shared_dir, "a1", "false", 1, T0 - 1)
    sc.run_once()
    (tmp_path / "config.yaml").write_text("")
    assert sc.reload_config(force=True) is False
    assert sc.config.enabled and [n.command for n in sc.rows()[0].notes] == ["false"]


def test_lower_threshold_raises_at_once(tmp_path: Path) -> None:
    """Lowering the threshold on reload raises the notes the counted failures now justify."""
    sc = make(tmp_path)
    for i in range(4):
        append(sc.shared_dir, "a1", "make", 2, T0 - 10 + i)
    sc.run_once()
    assert sc.rows()[0].notes == ()
    write_config(tmp_path / "config.yaml", True, "  threshold: 3\n")
    assert sc.reload_config(force=True)
    assert sc.rows()[0].message == "Repeating failure: make failed 4 times in 1 min (exit 2)"
    assert sc.snapshot()[0].notes_raised == 1


def test_state_file_fifo_or_symlink_is_ignored(tmp_path: Path) -> None:
    """A FIFO or a symlink planted as the state file is ignored at start, never read or waited on."""
    import os

    shared = tmp_path / "shared"
    hook.prepare_shared_dir(shared)
    os.mkfifo(shared / "state" / "a1.json")
    assert make(tmp_path).rows()[0].notes == ()
    (shared / "state" / "a1.json").unlink()
    (shared / "state" / "a1.json").symlink_to("/dev/zero")
    assert make(tmp_path).rows()[0].notes == ()


def test_huge_file_is_taken_in_slices(tmp_path: Path) -> None:
    """A record file far bigger than the per-pass budget is processed completely, in slices."""
    sc = make(tmp_path)
    sc.collector.budget = 64 * 1024
    line = orjson.dumps({"v": 1, "ts": T0 - 1, "agent": "a1", "backend": "bash",
                         "route": "bash_env", "exit": 0, "cmd": "true " + "x" * 200}) + b"\n"
    hook.records_path(sc.shared_dir, "a1").write_bytes(line * 5000)
    sc.run_once()
    assert series(sc, "hive_repeat_failure_records_total") == [
        'hive_repeat_failure_records_total{agent="a1",backend="bash",outcome="success",'
        'route="bash_env"} 5000.0']


def test_crash_mid_file_loses_nothing_and_counts_nothing_twice(tmp_path: Path) -> None:
    """A sidecar killed while working through a large file (after saving a slice) is replaced;
    the new one resumes at the saved checkpoint: every record counted exactly once."""
    sc = make(tmp_path, extra="  threshold: 10000\n")
    sc.collector.budget = 32 * 1024
    n = 3000
    lines = b"".join(orjson.dumps({"v": 1, "ts": T0 - 300 + i * 0.01, "agent": "a1",
                                   "backend": "bash", "route": "bash_env", "exit": 1,
                                   "cmd": "make check"}) + b"\n" for i in range(n))
    hook.records_path(sc.shared_dir, "a1").write_bytes(lines)
    state = sc.agents["a1"]
    batch = sc.collector.collect("a1")  # one slice, saved, then the process "dies"
    sc._handle(state, batch, T0)
    sc._save_state(state)
    first = len(batch.lines)
    assert 0 < first < n
    again = make(tmp_path, extra="  threshold: 10000\n")
    again.run_once()
    again.run_once()
    assert again.snapshot()[0].failures == (("make check", 1, n),)
    assert list((again.shared_dir / "records").iterdir()) == []


class Crash(BaseException):
    """The process dying at a chosen point (a BaseException: no handler in the sidecar catches
    it, as none would survive a SIGKILL)."""


def _crash_records() -> bytes:
    """600 records over four commands: `make check` fails 300 times with exit 2 (a note at
    threshold 5), `npm test` fails 150 times and then succeeds (its note raised and cleared),
    `true` succeeds 150 times; 1 s apart, the last one 10 s before T0."""
    lines = []
    for i in range(600):
        cmd, code = (("make check", 2) if i % 2 == 0 else
                     ("npm test", 1) if i % 4 == 1 and i < 597 else
                     ("npm test", 0) if i == 597 else ("true", 0))
        lines.append(orjson.dumps({"v": 1, "ts": T0 - 610 + i, "agent": "a1", "backend": "bash",
                                   "route": "bash_env", "exit": code, "cmd": cmd}) + b"\n")
    return b"".join(lines)


def _die(sc: Sidecar) -> None:
    """What the kernel does to a killed process's collected files: their descriptors close."""
    for held in list(sc.collector._held):
        os.close(held.fd)
    sc.collector._held.clear()


CRASH_POINTS = ["after_rename", "mid_batch", "while_saving", "after_save_before_delete",
                "between_slices", "during_grace"]


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_each_crash_point_loses_nothing_and_counts_nothing_twice(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str) -> None:
    """The sidecar dies at each point of a pass (renamed but not read; records processed but
    the state not saved; the state file half written; the state saved but the file not deleted;
    between two slices of a large file; while a read file is held open for late writers). A new
    sidecar on the same shared dir ends with exactly the failure counts and notes of a straight
    replay of the same records, and no collected file is left."""
    data = _crash_records()
    (tmp_path / "reference").mkdir()
    reference = make(tmp_path / "reference", extra="  window_s: 3600\n")
    hook.records_path(reference.shared_dir, "a1").write_bytes(data)
    reference.run_once()
    reference.run_once()
    expected = reference.snapshot()[0]
    assert expected.failures == (("make check", 2, 300),)
    assert [n.message for n in reference.rows()[0].notes] == [
        "Repeating failure: make check failed 300 times in 10 min (exit 2)"]

    grace_clock = iter(itertools.repeat(0.0)) if point == "during_grace" else None
    cfg = write_config(tmp_path / "config.yaml", extra="  window_s: 3600\n")
    sc = Sidecar(tmp_path / "shared", [AgentSpec("a1", "bash")], cfg, clock=Clock(),
                 monotonic=(grace_clock.__next__ if grace_clock
                            else itertools.count(0, 10).__next__))
    hook.records_path(sc.shared_dir, "a1").write_bytes(data)
    state = sc.agents["a1"]
    if point == "after_rename":
        def take(*args, **kwargs):
            raise Crash
        monkeypatch.setattr(sc.collector, "_take", take)
    elif point == "mid_batch":
        seen = itertools.count()
        process = sc._process_line

        def process_line(*args):
            if next(seen) == 400:
                raise Crash
            process(*args)
        monkeypatch.setattr(sc, "_process_line", process_line)
    elif point == "while_saving":
        def torn_write(path: Path, payload: bytes, mode: int) -> None:
            path.with_name(f".{path.name}.tmp.999").write_bytes(payload[:100])
            raise Crash
        monkeypatch.setattr(hook, "write_atomic", torn_write)
    elif point == "after_save_before_delete":
        def release(batch):
            if batch.done:
                raise Crash
        monkeypatch.setattr(sc.collector, "release", release)
    elif point == "between_slices":
        sc.collector.budget = 8 * 1024
        slices = itertools.count()
        collect = sc.collector.collect

        def collect_slice(agent):
            if next(slices) == 2:
                raise Crash
            return collect(agent)
        monkeypatch.setattr(sc.collector, "collect", collect_slice)
    with pytest.raises(Crash):
        sc.run_once()
        if point == "after_save_before_delete":  # the file is deleted once its grace is over
            assert state.checkpoint and not state.dirty
            sc.run_once()
        if point == "during_grace":  # the first pass read everything; the file is held open
            assert state.checkpoint and sc.collector.holding() == 1
            raise Crash
    _die(sc)
    monkeypatch.undo()

    again = make(tmp_path, extra="  window_s: 3600\n")
    for _ in range(3):
        again.run_once()
    assert again.snapshot()[0].failures == expected.failures
    assert [(n.command, n.count) for n in again.rows()[0].notes] == [("make check", 300)]
    assert list((again.shared_dir / "records").iterdir()) == []
    saved = orjson.loads((again.shared_dir / "state" / "a1.json").read_bytes())
    assert saved["collecting"] == {}


def _saved_state(tmp_path: Path) -> bytes:
    """A real state file: an open note on `make` (exit 2, 5 failures) and a success."""
    sc = make(tmp_path)
    for i in range(5):
        append(sc.shared_dir, "a1", "make", 2, T0 - 9 + i)
    append(sc.shared_dir, "a1", "true", 0, T0 - 2)
    sc.run_once()
    return (sc.shared_dir / "state" / "a1.json").read_bytes()


def test_state_file_cut_at_every_byte_is_ignored_or_whole(tmp_path: Path) -> None:
    """A state file torn at any byte (a crash mid-write on a file system without atomic
    rename, a full disk) is ignored with a log line: no crash, no note from half a file. Only
    the whole file restores the note."""
    data = _saved_state(tmp_path)
    state_file = tmp_path / "shared" / "state" / "a1.json"
    stream = io.StringIO()
    configure_logging(stream)
    try:
        for cut in [*range(0, len(data), max(1, len(data) // 400)), len(data) - 1]:
            state_file.write_bytes(data[:cut])
            restored = [(n.command, n.count) for n in make(tmp_path).rows()[0].notes]
            assert restored == [], cut
        state_file.write_bytes(data)
        assert [(n.command, n.count) for n in make(tmp_path).rows()[0].notes] == [("make", 5)]
    finally:
        logging.getLogger("repeat_failure").handlers.clear()
    assert stream.getvalue().count("state file ignored") >= 400


def test_state_file_with_wrong_values_never_crashes(tmp_path: Path) -> None:
    """A state file of the right version whose fields hold random JSON (hypothesis) loads
    without an exception, and what the sidecar then exports renders."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    base = orjson.loads(_saved_state(tmp_path))
    state_file = tmp_path / "shared" / "state" / "a1.json"
    values = st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
            st.text(max_size=8), inner, max_size=3), max_leaves=12)
    paths = [(k,) for k in base if k != "version"] + [
        ("detector", k) for k in base["detector"]] + [
        ("detector", "commands", 0, k) for k in base["detector"]["commands"][0]]

    @settings(max_examples=150, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(paths), values)
    def check(path: tuple, value: object) -> None:
        data = orjson.loads(orjson.dumps(base))
        target = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        state_file.write_bytes(json.dumps(data).encode())  # NaN and inf too
        sc = make(tmp_path)
        metrics(sc)
        status_json(sc)

    logging.disable(logging.WARNING)
    try:
        check()
    finally:
        logging.disable(logging.NOTSET)


# -- issue 17: a planted state path, records counted once across restarts ---------------------


def test_directory_planted_at_the_state_path_is_moved_aside(tmp_path: Path, log_stream) -> None:
    """A directory at state/<agent>.json made every save fail while the raw records were still
    deleted, so a restart lost every note (issue 17). It is moved aside (logged) and the state
    saved; a restart keeps the note."""
    sc = make(tmp_path, extra="  threshold: 2\n")
    planted = sc.shared_dir / "state" / "a1.json"
    planted.mkdir()
    (planted / "inner").write_text("x")
    append(sc.shared_dir, "a1", "false", 1, T0 - 2)
    append(sc.shared_dir, "a1", "false", 1, T0 - 1)
    sc.run_once()
    assert planted.is_file() and json.loads(planted.read_bytes())["agent"] == "a1"
    (aside,) = [p for p in (sc.shared_dir / "state").iterdir() if p.name != "a1.json"]
    assert aside.name.startswith(".a1.json.foreign.") and (aside / "inner").read_text() == "x"
    lines = [json.loads(x) for x in log_stream.getvalue().splitlines()]
    assert [(x["msg"], x["moved_to"]) for x in lines if "moved_to" in x] == [
        ("a directory stood at the state file's path; moved aside", aside.name)]
    assert not [x for x in lines if x["level"] == "error"]
    again = make(tmp_path, extra="  threshold: 2\n")
    assert [n.message for n in again.rows()[0].notes] == [
        "Repeating failure: false failed 2 times in 1 min (exit 1)"]


def _increase(before: float, after: float) -> float:
    """What Prometheus counts between two samples of a counter: a drop is a restart from 0."""
    return after - before if after >= before else after


def test_records_are_counted_once_across_a_crash(tmp_path: Path, monkeypatch) -> None:
    """Issue 17 item 8: records read again after a crash are not counted again. A sidecar
    counts 3 records (saved), then 2 more whose save fails, and dies; the next one reads those
    2 again from the saved checkpoint. Scraped before and after, records_total grew by exactly
    the 5 records (before: the counter restarted at 0 and counted the 2 twice), and
    notes_raised_total by the one note."""
    sc = make(tmp_path, extra="  threshold: 4\n")
    for i in range(3):
        append(sc.shared_dir, "a1", "make", 2, T0 - 10 + i)
    sc.run_once()

    def total(s: Sidecar, name: str) -> float:
        return sum(float(x.rsplit(" ", 1)[1]) for x in series(s, name))

    assert total(sc, "hive_repeat_failure_records_total") == 3
    write_atomic = hook.write_atomic
    monkeypatch.setattr(hook, "write_atomic",
                        lambda *a, **k: (_ for _ in ()).throw(OSError(28, "No space left")))
    append(sc.shared_dir, "a1", "make", 2, T0 - 5)
    append(sc.shared_dir, "a1", "make", 0, T0 - 4)
    sc.run_once()
    assert len(sc.rows()[0].notes) == 0  # the success cleared the note raised at the 4th
    before = {name: total(sc, name) for name in ("hive_repeat_failure_records_total",
                                                 "hive_repeat_failure_notes_raised_total")}
    monkeypatch.setattr(hook, "write_atomic", write_atomic)
    del sc  # a crash: nothing more is saved
    again = make(tmp_path, extra="  threshold: 4\n")
    again.run_once()
    again.run_once()  # the files' grace period ends: deleted
    after = {name: total(again, name) for name in before}
    assert _increase(before["hive_repeat_failure_records_total"],
                     after["hive_repeat_failure_records_total"]) == 2
    assert after == {"hive_repeat_failure_records_total": 5,
                     "hive_repeat_failure_notes_raised_total": 1}
    assert dict(again.agents["a1"].records) == {("bash", "bash_env", "failure"): 4,
                                                ("bash", "bash_env", "success"): 1}
    assert list((again.shared_dir / "records").iterdir()) == []


def test_saved_counters_of_another_shape_are_left_out(tmp_path: Path) -> None:
    """Counters restored from the state file must name this agent's backend, a known route,
    outcome or reason, and a count >= 0; anything else starts again at 0."""
    sc = make(tmp_path)
    append(sc.shared_dir, "a1", "false", 1, T0 - 1)
    sc.run_once()
    path = sc.shared_dir / "state" / "a1.json"
    data = json.loads(path.read_bytes())
    data["counters"] = {"records": [["bash", "bash_env", "failure", 7],
                                    ["claude", "bash_env", "failure", 1],
                                    ["bash", "evil_route", "failure", 1],
                                    ["bash", "bash_env", "other", 1],
                                    ["bash", "bash_env", "success", -1],
                                    ["bash", "bash_session_log", "success", True], "x"],
                        "rejected": {"torn": 2, "made_up": 3, "malformed": 1.5},
                        "notes_raised": "many"}
    path.write_bytes(orjson.dumps(data))
    again = make(tmp_path)
    view = again.snapshot()[0]
    assert (view.records, view.rejected, view.notes_raised) == (
        {("bash", "bash_env", "failure"): 7}, {"torn": 2}, 0)


def test_two_long_cut_commands_stay_two_notes(tmp_path: Path, clean_env, log_stream) -> None:
    """Issue 17 item 7: two different 100 KB commands, run through the real hook, are cut to
    fit a record and lose their last word to the scrubber: both were `ls [REDACTED]`, one note
    counting both. Each now ends in its own keyed digest (shown as is, also in the 200-character
    label); nothing of the cut tail is stored, logged or exported; a restart keeps the key."""
    import subprocess
    import time

    clock = Clock(time.time() + 120)  # the hook writes the real time
    sc = make(tmp_path, extra="  threshold: 3\n", clock=clock)
    env = {**clean_env, **hook.launch_env(sc.shared_dir, "a1", clean_env)}
    first, second = "/nonexistent_" + "a" * 100_000, "/other_dir_" + "b" * 100_000
    for path in (first, second, first, second, first, second):
        subprocess.run(["bash", "-c", f"ls {path}"], env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=30, check=False)
    lines = hook.records_path(sc.shared_dir, "a1").read_bytes().splitlines()
    assert len(lines) == 6 and all(json.loads(x)["cut"] is True for x in lines)
    sc.run_once()
    notes = sc.rows()[0].notes
    assert len(notes) == 2 and {n.count for n in notes} == {3}
    marks = {n.command for n in notes}
    assert all(re.fullmatch(r"ls \[REDACTED\] \[cut:[0-9a-f]{12}\]", c) for c in marks), marks
    labels = {line.split('command="', 1)[1].split('"', 1)[0]
              for line in series(sc, "hive_repeat_failure_note")}
    assert labels == marks
    everything = metrics(sc) + log_stream.getvalue() + (
        sc.shared_dir / "state" / "a1.json").read_text()
    assert "aaaa" not in everything and "bbbb" not in everything
    again = make(tmp_path, extra="  threshold: 3\n", clock=clock)
    subprocess.run(["bash", "-c", f"ls {first}"], env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=30, check=False)
    again.run_once()
    assert sorted(n.count for n in again.rows()[0].notes) == [3, 4]
    assert {n.command for n in again.rows()[0].notes} == marks


def test_a_cut_command_label_keeps_its_mark() -> None:
    """A label cut to 200 characters keeps a cut command's mark after the …; other commands are
    cut as before."""
    from repeat_failure.rules.normalize import command_label, mark_cut

    long = mark_cut("gh api " + "x" * 300, "gh api " + "x" * 300 + "yz", b"k" * 16)
    mark = long[-19:]
    assert re.fullmatch(r" \[cut:[0-9a-f]{12}\]", mark)
    assert command_label(long) == "gh api " + "x" * 173 + "…" + mark
    assert len(command_label(long)) == 200
    other = mark_cut("gh api " + "x" * 300, "gh api " + "x" * 300 + "yy", b"k" * 16)
    assert command_label(other) != command_label(long)
    assert mark_cut("a", "b", b"k" * 16) != mark_cut("a", "b", b"j" * 16)
    assert command_label("echo " + "x" * 400) == "echo " + "x" * 194 + "…"


def test_rejected_record_files_are_logged_scrubbed_and_rate_limited(tmp_path: Path,
                                                                    log_stream) -> None:
    """Issue 17 item 9: a rejected record file (symlink, FIFO, insecure mode, hard link) only
    moved a counter. Each is one warning line naming the file (scrubbed: a token-shaped name is
    redacted), the reason and what was wrong; at most 10 lines a minute per agent, the next line
    after that says how many were left out."""
    clock = Clock(100.0)
    cfg = write_config(tmp_path / "config.yaml")
    sc = Sidecar(tmp_path / "shared", [AgentSpec("a1", "bash")], cfg, clock=Clock(),
                 monotonic=clock)
    records = sc.shared_dir / "records"
    token = "ghp_" + "A1b2" * 9
    (records / f"a1.jsonl.collecting.0-{token}").symlink_to(tmp_path / "nowhere")
    os.mkfifo(records / "a1.jsonl.collecting.1")
    for i in range(2, 13):
        (records / f"a1.jsonl.collecting.{i:02d}").symlink_to(tmp_path / "nowhere")
    sc.run_once()
    lines = [json.loads(x) for x in log_stream.getvalue().splitlines()]
    rejected = [x for x in lines if x.get("event") == "record_file_rejected"]
    assert [(x["file"], x["reason"], x["detail"]) for x in rejected[:2]] == [
        ("records/a1.jsonl.collecting.0-[REDACTED]", "unreadable", "a symlink"),
        ("records/a1.jsonl.collecting.02", "unreadable", "a symlink")]
    assert len(rejected) == 10 and all(x["level"] == "warning" and x["agent"] == "a1"
                                       and "unlogged" not in x for x in rejected)
    assert rejected[0]["msg"] == "record file rejected and removed unread"
    assert token not in log_stream.getvalue()
    assert sc.snapshot()[0].rejected == {"unreadable": 13}
    clock.t += 30
    (records / "a1.jsonl").symlink_to(tmp_path / "nowhere")
    sc.run_once()
    clock.t += 31
    (records / "a1.jsonl").mkdir()
    sc.run_once()
    lines = [json.loads(x) for x in log_stream.getvalue().splitlines()]
    rejected = [x for x in lines if x.get("event") == "record_file_rejected"]
    assert len(rejected) == 11
    assert (rejected[-1]["file"], rejected[-1]["detail"], rejected[-1]["unlogged"]) == (
        "records/a1.jsonl", "a directory", 4)


# -- issue 17 item 3: a relative shared dir, a collection failing every pass --------------------


def test_a_relative_shared_dir_is_made_absolute_at_start(tmp_path: Path, monkeypatch,
                                                          clean_env) -> None:
    """`run --shared-dir shared` (relative) failed every pass on the hook's absolute-path rule,
    rendered no hook and looked healthy. It is resolved against the current directory at start:
    the hook is rendered with absolute paths and a command through it is collected. `hook env`
    prints the absolute BASH_ENV too."""
    import subprocess

    from repeat_failure.cli import main

    monkeypatch.chdir(tmp_path)
    cfg = write_config(tmp_path / "config.yaml", extra="  threshold: 1\n")
    import time

    wall = Clock(time.time() + 60)  # the hook writes the real time
    sc = Sidecar("shared", [AgentSpec("a1", "bash")], "config.yaml", clock=wall)
    assert sc.shared_dir == tmp_path / "shared"
    rendered = hook.hook_path(tmp_path / "shared", "a1").read_text() + \
        hook.slow_path(tmp_path / "shared", "a1").read_text()
    assert f"{tmp_path}/shared/records/a1.jsonl" in rendered
    env = {**clean_env, **hook.launch_env(sc.shared_dir, "a1", clean_env)}
    subprocess.run(["bash", "-c", "false"], env=env, timeout=30, check=False)
    sc.run_once()
    assert sc.collect_stats() == ({"ok": 1, "failed": 0}, wall.t)
    assert [n.command for n in sc.rows()[0].notes] == ["false"]
    out = io.StringIO()
    from contextlib import redirect_stdout
    with redirect_stdout(out):
        assert main(["hook", "env", "--config", str(cfg), "--shared-dir", "shared",
                     "--agent", "a1"]) == 0
    assert f"export BASH_ENV={tmp_path}/shared/hook/a1.sh\n" in out.getvalue()


def test_a_shared_dir_the_hook_cannot_name_is_refused_at_start(tmp_path: Path) -> None:
    """A shared dir whose path the hook refuses (a space in it) is exit 2 at start, not a pass
    failing every time."""
    import subprocess
    import sys

    cfg = write_config(tmp_path / "config.yaml")
    done = subprocess.run(
        [sys.executable, "-m", "repeat_failure", "run", "--config", str(cfg), "--shared-dir",
         str(tmp_path / "my shared"), "--agent", "a1", "--backend", "bash", "--listen",
         "127.0.0.1:0"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert done.stderr == (
        f"repeat-failure: shared dir '{tmp_path}/my shared' must be an absolute path of "
        "letters, digits and ._/@+- only\n")


class _Steady:
    """A settable monotonic clock."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_a_collection_failing_every_pass_fails_healthz_and_is_counted(tmp_path: Path,
                                                                      monkeypatch) -> None:
    """Passes that fail are counted (collect_passes_total{outcome="failed"}), and /healthz
    fails once none has completed for UNHEALTHY_AFTER_S (120 s); a pass that completes makes it
    healthy again and sets last_collect_timestamp_seconds."""
    import http.client

    from repeat_failure.sidecar.loop import UNHEALTHY_AFTER_S
    from repeat_failure.sidecar.exporter import Server

    mono, wall = _Steady(), Clock()
    sc = Sidecar(tmp_path / "shared", [AgentSpec("a1", "bash")],
                 write_config(tmp_path / "config.yaml"), clock=wall, monotonic=mono)
    server = Server(sc, "127.0.0.1:0").start()

    def get(path: str) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def broken(agents=None) -> None:
        raise hook.HookError("shared dir 'shared' must be an absolute path")

    try:
        assert UNHEALTHY_AFTER_S == 120
        assert get("/healthz") == (200, b"ok\n")
        monkeypatch.setattr(sc, "_repair_layout", broken)
        for _ in range(4):
            mono.t += 30
            with pytest.raises(hook.HookError):
                sc.run_once()
        text = get("/metrics")[1].decode()
        assert 'hive_repeat_failure_collect_passes_total{outcome="failed"} 4.0' in text
        assert 'hive_repeat_failure_collect_passes_total{outcome="ok"} 0.0' in text
        assert "hive_repeat_failure_last_collect_timestamp_seconds" not in text
        assert get("/healthz") == (503, b"unhealthy: no collection pass has completed for 120 s"
                                        b" (4 failed; the log says why: \"collection pass "
                                        b"failed\")\n")
        assert get("/readyz") == (200, b"ok\n")
        monkeypatch.undo()
        wall.t += 5
        sc.run_once()
        assert get("/healthz") == (200, b"ok\n")
        text = get("/metrics")[1].decode()
        assert 'hive_repeat_failure_collect_passes_total{outcome="ok"} 1.0' in text
        assert f"hive_repeat_failure_last_collect_timestamp_seconds {T0 + 5:.9e}" in text
    finally:
        server.stop()


def test_a_missing_trap_helper_of_a_chained_hook_is_rendered_again(tmp_path: Path) -> None:
    """A chained hook has a third file, the trap helper (``hook/<agent>.trap.bash``); without it
    a shell whose original BASH_ENV sets an EXIT trap is not recorded, so a pass that finds it
    missing renders the hook again, as for the other two files."""
    original = tmp_path / "original.sh"
    original.write_text("trap 'echo bye >/dev/null' EXIT\n")
    cfg = write_config(tmp_path / "config.yaml", True, "")
    sc = Sidecar(tmp_path / "shared", [AgentSpec("a1", "bash")], cfg, clock=Clock(),
                 monotonic=itertools.count(0, 10).__next__, chain_bash_env=str(original))
    sc.run_once()
    names = ["a1.sh", "a1.slow.bash", "a1.trap.bash"]
    assert sorted(p.name for p in (sc.shared_dir / "hook").iterdir()) == names
    (sc.shared_dir / "hook" / "a1.trap.bash").unlink()
    sc.run_once()
    assert sorted(p.name for p in (sc.shared_dir / "hook").iterdir()) == names


def test_a_config_rewritten_line_by_line_never_turns_the_check_off(tmp_path: Path,
                                                                   caplog) -> None:
    """Issue 28 item 12: a config rewritten in several writes (truncate, then a line at a time)
    validated part-way without ``enabled`` (which is off): the sidecar removed the hooks and
    deleted the state and the records not yet read. A change to "off" now needs the file to read
    the same OFF_SETTLE_S seconds apart; every record written meanwhile is counted, and a real
    "off" still takes effect once the file settles."""
    from repeat_failure.sidecar.config_file import OFF_SETTLE_S

    caplog.set_level(logging.INFO, logger="repeat_failure")
    mono = Clock(0.0)
    cfg = tmp_path / "config.yaml"
    full = ["repeat_failure:\n", "  collect_grace_s: 1\n", "  window_s: 600\n",
            "  threshold: 5\n", "  enabled: true\n"]
    cfg.write_text("".join(full))
    sc = Sidecar(tmp_path / "shared", [AgentSpec("a1", "bash")], cfg, clock=Clock(),
                 monotonic=mono)
    hook_file = hook.hook_path(sc.shared_dir, "a1")
    written = 0
    for rewrite in range(3):
        cfg.write_text("")
        for n in range(len(full)):
            with open(cfg, "a") as f:
                f.write(full[n])
            os.utime(cfg, ns=(rewrite * 10**9 + n, rewrite * 10**9 + n))  # a new stamp each
            append(sc.shared_dir, "a1", f"make check {rewrite}", 2, T0)
            written += 1
            sc.reload_config()
            sc.run_once(sessions=False)
            mono.t += 0.01
            assert (sc.config.enabled, hook_file.exists()) == (True, True), (rewrite, n)
    sc.drain()
    assert sum(sc.snapshot()[0].records.values()) == written == 15
    assert (sc.config.window_s, sc.config.threshold) == (600, 5)

    cfg.write_text("repeat_failure:\n  enabled: false\n")  # a real "off"
    assert sc.reload_config() is False and sc.config.enabled and sc.config_changed()
    mono.t += OFF_SETTLE_S - 0.01
    assert sc.reload_config() is False and sc.config.enabled
    mono.t += 0.01
    assert sc.reload_config() is True
    assert (sc.config.enabled, hook_file.exists(), sc.config_changed()) == (False, False, False)
    assert [r.getMessage() for r in caplog.records if "settle" in r.getMessage()] == [
        "config turns the check off: waiting for the file to settle"] * 4
