"""Collector (DESIGN.md "Pipeline"): rename-then-read, grace for late writers, leftovers,
bad files, and C-AC14a (records survive repeated collection)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from repeat_failure.sidecar import hook
from repeat_failure.sidecar.collector import COLLECTING, Collector, _Lines


class Clock:
    """A settable monotonic clock."""

    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def records_dir(tmp_path: Path) -> Path:
    hook.prepare_shared_dir(tmp_path)
    return tmp_path / "records"


def leftovers(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


def test_lines_split_and_reject() -> None:
    """Complete lines pass; a line of 4096+ bytes is 'oversized' without being buffered;
    a partial last line is 'torn'."""
    lines = _Lines()
    out = list(lines.feed(b'a\nbb\n' + b"x" * 5000))
    out += list(lines.feed(b"y" * 10_000_000 + b"\nc\nd"))
    out += list(lines.finish())
    assert out == [b"a", b"bb", "oversized", b"c", "torn"]
    exact = _Lines()
    assert list(exact.feed(b"z" * 4096 + b"\n" + b"w" * 4095 + b"\n")) == ["oversized", b"w" * 4095]


def test_rename_read_delete(tmp_path: Path) -> None:
    """The live file is renamed away, read, and gone after release."""
    d = records_dir(tmp_path)
    (d / "a1.jsonl").write_bytes(b"one\ntwo\n")
    col = Collector(d, grace_s=0)
    batch = col.collect("a1")
    assert batch.lines == [b"one", b"two"]
    assert [n.startswith("a1.jsonl" + COLLECTING) for n in leftovers(d)] == [True]
    assert batch.done == leftovers(d)
    col.release(batch)
    assert leftovers(d) == []
    assert col.collect("a1").lines == []


def test_late_writer_is_read_during_grace(tmp_path: Path) -> None:
    """A writer that opened the file before the rename still gets read (grace period); the
    collected file stays on disk until its grace period is over, then it is deleted."""
    d = records_dir(tmp_path)
    clock = Clock()
    live = d / "a1.jsonl"
    live.write_bytes(b"early\n")
    late = open(live, "ab", buffering=0)  # opened before the rename, like a slow hook
    col = Collector(d, grace_s=5, clock=clock)
    batch = col.collect("a1")
    col.release(batch)
    assert batch.lines == [b"early"] and batch.done == []
    (name,) = leftovers(d)
    assert batch.checkpoint == {name: 6}
    late.write(b"late\npartial")
    late.close()
    clock.t += 1
    batch = col.collect("a1")
    assert batch.lines == [b"late"] and batch.checkpoint == {name: 11}
    assert col.holding() == 1
    clock.t += 5
    batch = col.collect("a1")
    assert batch.lines == ["torn"] and batch.done == [name]
    col.release(batch)
    assert col.holding() == 0 and leftovers(d) == []


def test_restart_resumes_at_the_checkpoint(tmp_path: Path) -> None:
    """A sidecar that died after saving a checkpoint resumes the leftover file there: the lines
    it already counted are not counted again, the rest is not lost."""
    d = records_dir(tmp_path)
    (d / "a1.jsonl").write_bytes(b"one\ntwo\n")
    first = Collector(d, grace_s=5, clock=Clock())
    batch = first.collect("a1")
    assert batch.lines == [b"one", b"two"]
    (name,) = leftovers(d)
    with open(d / name, "ab") as f:  # a late writer, after the pass; then the sidecar dies
        f.write(b"three\n")
    second = Collector(d, grace_s=0, clock=Clock())
    second.restore(batch.checkpoint)
    again = second.collect("a1")
    assert again.lines == [b"three"]
    second.release(again)
    assert leftovers(d) == []


def test_slices_keep_the_file_until_read(tmp_path: Path) -> None:
    """A file bigger than the byte budget is read over several passes and deleted only after
    its last slice."""
    d = records_dir(tmp_path)
    (d / "a1.jsonl").write_bytes(b"x" * 99 + b"\n" * 1 + (b"y" * 99 + b"\n") * 9)
    col = Collector(d, grace_s=0, clock=Clock(), budget=300)
    seen = []
    for _ in range(5):
        batch = col.collect("a1")
        seen += batch.lines
        col.release(batch)
        if not batch.more:
            break
    assert seen == [b"x" * 99] + [b"y" * 99] * 9
    assert leftovers(d) == []


def test_leftover_collecting_files_are_read(tmp_path: Path) -> None:
    """Leftover .collecting.* files (a sidecar that died mid-pass) are processed first."""
    d = records_dir(tmp_path)
    (d / f"a1.jsonl{COLLECTING}1-0").write_bytes(b"old\n")
    (d / "a1.jsonl").write_bytes(b"new\n")
    (d / f"a10.jsonl{COLLECTING}1-0").write_bytes(b"other agent\n")
    col = Collector(d, grace_s=0)
    batch = col.collect("a1")
    assert batch.lines == [b"old", b"new"]
    col.release(batch)
    assert leftovers(d) == [f"a10.jsonl{COLLECTING}1-0"]


def test_symlink_and_fifo_are_refused(tmp_path: Path) -> None:
    """A record path that is a symlink or a FIFO is 'unreadable', removed, never followed."""
    d = records_dir(tmp_path)
    secret = tmp_path / "outside.txt"
    secret.write_bytes(b"must not be read\n")
    (d / "a1.jsonl").symlink_to(secret)
    col = Collector(d, grace_s=0)
    assert col.collect("a1").lines == ["unreadable"]
    assert secret.read_bytes() == b"must not be read\n" and leftovers(d) == []
    os.mkfifo(d / "a1.jsonl")
    assert col.collect("a1").lines == ["unreadable"]
    assert leftovers(d) == []


@pytest.mark.parametrize("mode, owner, group, verdict", [
    (0o660, "me", "dir", [b"a record"]),
    (0o600, "other", "dir", [b"a record"]),     # an agent user in the shared group (fsGroup)
    (0o640, "me", "other", [b"a record"]),
    (0o644, "me", "dir", ["insecure"]),         # others may read it
    (0o662, "me", "dir", ["insecure"]),         # others may write it
    (0o660, "other", "other", ["insecure"]),    # a user outside the shared group
])
def test_record_file_others_can_read_or_foreign_is_refused(
        tmp_path: Path, mode: int, owner: str, group: str, verdict: list) -> None:
    """A record file that others may read or write, or that belongs to a user neither the
    sidecar's nor in the records directory's group, is refused unread and removed: one
    ``insecure`` rejection. (Runs as root here, so the test can hand files to other ids.)"""
    d = records_dir(tmp_path)
    foreign = 54321
    os.chown(d, -1, os.getegid())
    path = d / "a1.jsonl"
    path.write_bytes(b"a record\n")
    os.chmod(path, mode)
    if os.geteuid() == 0:
        os.chown(path, foreign if owner == "other" else 0,
                 foreign if group == "other" else os.getegid())
    elif (owner, group) != ("me", "dir"):
        pytest.skip("needs root to give a file to another user or group")
    col = Collector(d, grace_s=0)
    batch = col.collect("a1")
    assert batch.lines == verdict
    col.release(batch)
    assert leftovers(d) == []


def test_record_file_the_sidecar_may_not_open_is_removed_once(tmp_path: Path,
                                                               monkeypatch) -> None:
    """A record file the sidecar is not allowed to open (an agent with umask 077 and another
    uid; simulated here, since root opens anything) is one ``unreadable`` and is removed, not
    counted again at every pass."""
    import repeat_failure.sidecar.collector as collector_mod

    d = records_dir(tmp_path)
    (d / "a1.jsonl").write_bytes(b"a record\n")
    real_open = os.open

    def deny(path, flags, mode=0o777, *, dir_fd=None):
        if isinstance(path, str) and path.startswith("a1.jsonl" + COLLECTING):
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(collector_mod.os, "open", deny)
    col = Collector(d, grace_s=0)
    assert col.collect("a1").lines == ["unreadable"]
    assert leftovers(d) == []
    assert col.collect("a1").lines == []


def test_hard_link_at_the_record_path_is_refused(tmp_path: Path) -> None:
    """A hard link planted at the record path (to a file elsewhere on the volume) is refused
    unread: one ``insecure``; the link is removed and the linked file keeps its content."""
    d = records_dir(tmp_path)
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_bytes(b"not a record\n")
    os.chmod(elsewhere, 0o660)
    os.link(elsewhere, d / "a1.jsonl")
    col = Collector(d, grace_s=0)
    batch = col.collect("a1")
    assert batch.lines == ["insecure"]
    col.release(batch)
    assert leftovers(d) == [] and elsewhere.read_bytes() == b"not a record\n"


def test_1000_failing_commands_survive_repeated_collection(tmp_path: Path) -> None:
    """C-AC14a: 1,000 failing real `bash -c` commands while the collector runs repeatedly give
    1,000 complete records, none torn; the collected files are gone afterwards."""
    path = hook.render(tmp_path, "a1", "bash")
    d = tmp_path / "records"
    # A writer opens the live file, then appends: under load (2 cores, 4 writers) that gap can
    # be tens of ms, so keep the collected file open for the config minimum of 0.5 s.
    col = Collector(d, grace_s=0.5)
    lines: list = []
    done = threading.Event()

    def collect_loop() -> None:
        while not done.is_set():
            batch = col.collect("a1")
            lines.extend(batch.lines)
            col.release(batch)

    # The driver loop is not an agent command: only the inner `bash -c` gets BASH_ENV.
    env = {"PATH": os.environ["PATH"], "HOOK": str(path), "HOME": str(tmp_path)}
    script = ('for i in $(seq 250); do BASH_ENV=$HOOK bash -c "ls /nonexistent/$1-$i" 2>/dev/null;'
              " done; true")
    collector = threading.Thread(target=collect_loop)
    collector.start()
    writers = [subprocess.Popen(["bash", "-c", script, "x", str(w)], env=env) for w in range(4)]
    assert [w.wait() for w in writers] == [0, 0, 0, 0]
    done.set()
    collector.join()
    # Drain: end the held files' grace, then take whatever is still in the live file (a pass
    # at the cap of held files leaves it for later), then end that file's grace too.
    for _ in range(2):
        for batch in col.flush():
            lines.extend(batch.lines)
            col.release(batch)
        batch = col.collect("a1")
        lines.extend(batch.lines)
        col.release(batch)
    for batch in col.flush():
        lines.extend(batch.lines)
        col.release(batch)
    records = [json.loads(line) for line in lines]
    assert len(records) == 1000
    assert {r["exit"] for r in records} == {2}
    assert sorted(r["cmd"] for r in records) == sorted(
        f"ls /nonexistent/{w}-{i}" for w in range(4) for i in range(1, 251))
    assert leftovers(d) == []


QUEUE_LIMIT = Path("/proc/sys/fs/inotify/max_queued_events")


def test_inotify_queue_overflow_wakes_everything(tmp_path: Path) -> None:
    """IN_Q_OVERFLOW (the kernel dropped events) reads as "records, config and session logs
    may all have changed", so the caller collects and nothing waits for the timer. The queue
    is really overflowed: its limit is lowered to 16 events for the watcher made here (the
    limit applies to instances created while it is set) and restored."""
    import pytest

    from repeat_failure.sidecar.collector import Watcher

    try:
        old = QUEUE_LIMIT.read_text()
        QUEUE_LIMIT.write_text("16\n")
    except OSError:
        pytest.skip("cannot set fs.inotify.max_queued_events here")
    try:
        watcher = Watcher(records_dir(tmp_path))
    finally:
        QUEUE_LIMIT.write_text(old)
    try:
        for i in range(200):
            (tmp_path / "records" / f"a{i}.jsonl").write_bytes(b"x\n")
        assert watcher.wait(1.0) == (True, True, True)
    finally:
        watcher.close()


def test_watch_survives_its_directory_deleted_and_recreated(tmp_path: Path) -> None:
    """The records directory deleted (the watch is dropped: IN_IGNORED) and made again: the
    next wait says records may have changed, re-arms on the new directory, and a write there
    wakes the wait after it."""
    import shutil

    from repeat_failure.sidecar.collector import Watcher

    d = records_dir(tmp_path)
    watcher = Watcher(d)
    try:
        shutil.rmtree(d)
        assert watcher.wait(1.0)[0] is True
        records_dir(tmp_path)
        assert watcher.wait(0.05) == (False, False, False)  # re-armed on the new directory
        (d / "a1.jsonl").write_bytes(b"x\n")
        assert watcher.wait(1.0)[0] is True
    finally:
        watcher.close()


def test_each_rejected_file_is_named_with_what_was_wrong(tmp_path: Path) -> None:
    """Issue 17: a rejected file moved only a counter. The batch names each file removed unread
    with its reason and what was wrong with it (the live name for the file renamed from it)."""
    d = records_dir(tmp_path)
    os.chown(d, -1, os.getegid())
    (d / "a1.jsonl").symlink_to(tmp_path / "nowhere")
    os.mkfifo(d / "a1.jsonl.collecting.fifo")
    (d / "a1.jsonl.collecting.open").write_bytes(b"x\n")
    os.chmod(d / "a1.jsonl.collecting.open", 0o666)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"x\n")
    os.chmod(elsewhere, 0o660)
    os.link(elsewhere, d / "a1.jsonl.collecting.link")
    (d / "a1.jsonl.collecting.dir").mkdir()
    batch = Collector(d, grace_s=0).collect("a1")
    assert sorted(batch.rejected_files) == [
        ("a1.jsonl", "unreadable", "a symlink"),
        ("a1.jsonl.collecting.dir", "unreadable", "a directory"),
        ("a1.jsonl.collecting.fifo", "unreadable", "a FIFO"),
        ("a1.jsonl.collecting.link", "insecure", "it has 2 names (a hard link)"),
        ("a1.jsonl.collecting.open", "insecure", "others may read or write it (mode 0666)")]
    assert sorted(batch.lines) == ["insecure", "insecure", "unreadable", "unreadable",
                                   "unreadable"]
    assert leftovers(d) == []


def test_a_foreign_owner_is_named(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give a file to another user")
    d = records_dir(tmp_path)
    path = d / "a1.jsonl"
    path.write_bytes(b"a record\n")
    os.chmod(path, 0o660)
    os.chown(path, 54321, 54321)
    (rejected,) = Collector(d, grace_s=0).collect("a1").rejected_files
    assert rejected == ("a1.jsonl", "insecure", "owned by uid 54321 and gid 54321: neither the "
                                                "sidecar's user nor the records directory's group")


def test_collection_never_stalls_at_the_bound_of_held_files(tmp_path: Path) -> None:
    """Issue 28 item 14: with exactly MAX_HELD_PER_AGENT files held in their grace period, the
    live file was not taken (only below the bound) and no held file was closed early (only
    above it): collection stalled until a grace period ended. Now the oldest file read to the
    end is closed early to make room, every pass takes the live file, and no more than the
    bound are ever held."""
    from repeat_failure.sidecar.collector import MAX_HELD_PER_AGENT

    d = records_dir(tmp_path)
    clock = Clock()
    col = Collector(d, grace_s=60, clock=clock)
    names = []
    for i in range(MAX_HELD_PER_AGENT + 3):
        (d / "a1.jsonl").write_bytes(f"r{i}\n".encode())
        batch = col.collect("a1")
        assert batch.lines == [f"r{i}".encode()], i
        assert col.holding() == min(i + 1, MAX_HELD_PER_AGENT)
        names += [n for n in batch.checkpoint if n not in names]
        # Past the bound, each pass closes (and its release deletes) the oldest held file.
        assert batch.done == ([names[i - MAX_HELD_PER_AGENT]] if i >= MAX_HELD_PER_AGENT
                              else [])
        col.release(batch)
        clock.t += 0.025  # 40 records/s
    assert len(leftovers(d)) == MAX_HELD_PER_AGENT


def test_the_watcher_names_the_agents_and_session_files_that_changed(tmp_path: Path) -> None:
    """Issue 28 items 16 and 13: the inotify events' names say which agents' record files and
    which session files changed, so a pass collects only those agents and a poll looks at
    those files."""
    from repeat_failure.sidecar.collector import Watcher

    d = records_dir(tmp_path)
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    watcher = Watcher(d)
    try:
        watcher.watch_session_dirs([sessions])
        (d / "a3.jsonl").write_bytes(b"x\n")
        (d / "a3.jsonl.collecting.1-0").write_bytes(b"x\n")  # the collector's own: no wake
        (sessions / "s.jsonl").write_bytes(b"{}\n")
        assert watcher.wait(1.0) == (True, False, True)
        assert watcher.take_changed_agents() == {"a3"}
        assert watcher.take_session_paths() == {sessions / "s.jsonl"}
        assert (watcher.take_changed_agents(), watcher.take_session_paths()) == (set(), set())
    finally:
        watcher.close()
