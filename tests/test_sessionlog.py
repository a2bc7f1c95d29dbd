"""Session-log tailing (repeat_failure.sessions.tail): files appearing, growing, replaced, truncated,
vanishing; partial and oversized lines; offsets that survive a restart; bounded backfill.

The file content is a real captured Claude Code session (harness/evidence/claude/); the reader
here is a probe that turns each line into one TEXT event carrying the line's ``uuid``, so the
tests see exactly which lines were handed over, and how often.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import subprocess
from pathlib import Path

import orjson
import pytest

from harness.evidence import primary
from repeat_failure.sessions import tail as sessionlog
from repeat_failure.backends import TEXT, ReaderFormatError, SessionEvent, SessionLogReader
from repeat_failure.sessions.tail import SessionTail, expand_globs

REPO = Path(__file__).resolve().parent.parent
EVIDENCE = json.loads((primary() / "claude.json").read_text())
(SESSION,) = [primary() / "claude" / p for p in EVIDENCE["session_files"]]
LINES = [line for line in SESSION.read_bytes().splitlines(keepends=True) if line.strip()]
IDS = [json.loads(line).get("uuid", "") for line in LINES]
NOW = 1_800_000_000.0


class Probe(SessionLogReader):
    """One TEXT event per JSON object (``call_id`` = its ``uuid``); a non-object is refused."""

    backend = "probe"
    globs = ("sessions/*/*.jsonl",)

    def parse_line(self, obj, state):
        if not isinstance(obj, dict):
            raise ReaderFormatError("unknown_shape")
        state["n"] = state.get("n", 0) + 1
        return [SessionEvent(TEXT, None, call_id=str(obj.get("uuid", "")))]


def tail_of(home: Path, **kw) -> SessionTail:
    return SessionTail(Probe(), home, clock=lambda: NOW, **kw)


def ids(result) -> list[str]:
    """The probe's ids of the events, without the tail's ``<source>:`` prefix."""
    return [e.call_id.split(":", 1)[1] if e.call_id else "" for e in result.events]


def key(rel: str) -> str:
    """The tail's key for a file at ``rel`` under the home (a digest: no name is stored)."""
    return hashlib.blake2b(rel.encode(), digest_size=8).hexdigest()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "sessions" / "a").mkdir(parents=True)
    return tmp_path


def write(path: Path, data: bytes, mode: str = "ab") -> None:
    with open(path, mode) as f:
        f.write(data)
    os.utime(path, (NOW, NOW))


def test_reads_a_growing_file_once_each_line(home: Path) -> None:
    """Lines are handed over once, in order, as the file grows; the time of a line without
    one is the time it was read."""
    path = home / "sessions" / "a" / "s.jsonl"
    write(path, b"".join(LINES[:3]))
    tail = tail_of(home)
    first = tail.poll()
    assert ids(first) == IDS[:3] and all(e.ts == NOW for e in first.events)
    source = key("sessions/a/s.jsonl")
    assert [e.call_id for e in first.events] == [f"{source}:{i}" if i else "" for i in IDS[:3]]
    assert {e.source for e in first.events} == {source}
    assert ids(tail.poll()) == []
    write(path, b"".join(LINES[3:]))
    assert ids(tail.poll()) == IDS[3:]


def test_partial_line_waits_for_its_newline(home: Path) -> None:
    path = home / "sessions" / "a" / "s.jsonl"
    write(path, LINES[0] + LINES[1][:10])
    tail = tail_of(home)
    assert ids(tail.poll()) == IDS[:1]
    write(path, LINES[1][10:])
    assert ids(tail.poll()) == IDS[1:2]


def test_new_file_in_new_directory_is_found(home: Path) -> None:
    tail = tail_of(home)
    assert ids(tail.poll()) == []
    (home / "sessions" / "b").mkdir()
    write(home / "sessions" / "b" / "t.jsonl", LINES[0])
    assert ids(tail.poll(rescan=True)) == IDS[:1]


def test_replaced_file_is_read_from_its_start(home: Path) -> None:
    """A new inode under the old name (an editor's atomic save, a rotation) is a new file."""
    path = home / "sessions" / "a" / "s.jsonl"
    write(path, b"".join(LINES[:4]))
    tail = tail_of(home)
    tail.poll()
    replacement = home / "sessions" / "a" / "new.tmp"
    write(replacement, b"".join(LINES[4:6]))
    os.replace(replacement, path)
    assert ids(tail.poll()) == IDS[4:6]


def test_first_line_rewritten_in_place_is_not_a_new_file(home: Path) -> None:
    """omp 18.2.3 overwrites its first line (a fixed-size title slot) in place and sometimes
    writes the whole file again under a new inode: neither replays the lines already read."""
    path = home / "sessions" / "a" / "s.jsonl"
    write(path, b"".join(LINES[:4]))
    tail = tail_of(home)
    assert ids(tail.poll()) == IDS[:4]
    with open(path, "r+b") as f:  # the same length, other bytes, in place
        f.write(LINES[0][:-1].replace(b'"', b"'") + b"\n")
    assert ids(tail.poll()) == []
    copy = home / "sessions" / "a" / "rewrite.tmp"
    write(copy, path.read_bytes() + LINES[4])
    os.replace(copy, path)  # a new inode with the same content, one line longer
    assert ids(tail.poll()) == IDS[4:5]


def test_truncated_file_is_read_from_its_start(home: Path) -> None:
    path = home / "sessions" / "a" / "s.jsonl"
    write(path, b"".join(LINES[:4]))
    tail = tail_of(home)
    tail.poll()
    write(path, LINES[5], mode="wb")
    assert ids(tail.poll()) == IDS[5:6]


def test_vanished_file_is_forgotten(home: Path) -> None:
    path = home / "sessions" / "a" / "s.jsonl"
    write(path, LINES[0])
    tail = tail_of(home)
    tail.poll()
    path.unlink()
    assert ids(tail.poll(rescan=True)) == [] and tail.to_dict() == {}


def test_bad_lines_are_counted_and_good_ones_kept(home: Path) -> None:
    """A line that is not JSON and a JSON value the reader refuses are counted by reason; the
    real lines around them still arrive."""
    path = home / "sessions" / "a" / "s.jsonl"
    write(path, LINES[0] + LINES[1][:-20] + b"\n" + b"[1, 2]\n" + LINES[2])
    result = tail_of(home).poll()
    assert ids(result) == [IDS[0], IDS[2]]
    assert result.errors == {"not_json": 1, "unknown_shape": 1}


def test_reader_bug_is_counted_not_raised(home: Path) -> None:
    class Broken(Probe):
        def parse_line(self, obj, state):
            raise KeyError("a bug")

    write(home / "sessions" / "a" / "s.jsonl", LINES[0])
    result = SessionTail(Broken(), home, clock=lambda: NOW).poll()
    assert result.events == [] and result.errors == {"reader_bug": 1}


def test_oversized_line_is_skipped(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A line longer than MAX_LINE is dropped (also when it arrives in pieces); the next line
    is read."""
    small = min(range(len(LINES)), key=lambda i: len(LINES[i]))
    monkeypatch.setattr(sessionlog, "MAX_LINE", len(LINES[small]) + 10)
    big = max(LINES, key=len)
    assert len(big) > 3 * len(LINES[small])
    path = home / "sessions" / "a" / "s.jsonl"
    write(path, big[:len(LINES[small]) + 20])
    tail = tail_of(home)
    assert tail.poll().errors == {"oversized": 1}
    write(path, big[len(LINES[small]) + 20:] + LINES[small])
    result = tail.poll()
    assert ids(result) == [IDS[small]] and result.errors == {}


def test_offsets_survive_a_restart(home: Path) -> None:
    """to_dict/load_dict: a new tail resumes after the last complete line, keeping a partial
    line for later."""
    path = home / "sessions" / "a" / "s.jsonl"
    write(path, b"".join(LINES[:3]) + LINES[3][:7])
    tail = tail_of(home)
    tail.poll()
    saved = json.loads(json.dumps(tail.to_dict()))
    start = len(LINES[0])  # the fingerprint is taken right after the first line
    head = hashlib.blake2b(path.read_bytes()[start:start + 256], digest_size=16).hexdigest()
    assert saved == {key("sessions/a/s.jsonl"): {"dev": os.stat(path).st_dev, "ino": os.stat(path).st_ino,
                                            "offset": len(b"".join(LINES[:3])), "head": head,
                                            "head_start": start, "head_len": 256}}
    write(path, LINES[3][7:])
    again = tail_of(home)
    again.load_dict(saved)
    assert ids(again.poll()) == IDS[3:4]


def test_saved_offset_of_a_replaced_file_is_not_used(home: Path) -> None:
    """A file deleted and written again is read from its start, even when the file system
    reuses its inode number (the first bytes' digest differs)."""
    path = home / "sessions" / "a" / "s.jsonl"
    write(path, b"".join(LINES[:3]))
    tail = tail_of(home)
    tail.poll()
    saved = tail.to_dict()
    path.unlink()
    write(path, b"".join(LINES[3:5]))
    again = tail_of(home)
    again.load_dict(saved)
    assert ids(again.poll()) == IDS[3:5]


@pytest.mark.parametrize("saved", [None, [], {"x": 1}, {key("sessions/a/s.jsonl"): {"offset": -1}},
                                   {key("sessions/a/s.jsonl"): {"dev": "1", "ino": 2, "offset": 3}}])
def test_malformed_saved_offsets_are_ignored(home: Path, saved) -> None:
    write(home / "sessions" / "a" / "s.jsonl", LINES[0])
    tail = tail_of(home)
    tail.load_dict(saved)
    assert ids(tail.poll()) == IDS[:1]


def test_old_history_is_not_replayed(home: Path) -> None:
    """A file last changed before the backfill horizon starts at its end; lines added later
    are read."""
    path = home / "sessions" / "a" / "s.jsonl"
    write(path, LINES[0])
    os.utime(path, (NOW - 7200, NOW - 7200))
    tail = tail_of(home, backfill_s=3600)
    assert ids(tail.poll()) == []
    write(path, LINES[1])
    assert ids(tail.poll()) == IDS[1:2]


def test_files_followed_are_bounded(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the MAX_FILES most recently modified files are followed."""
    monkeypatch.setattr(sessionlog, "MAX_FILES", 2)
    for i in range(4):
        path = home / "sessions" / "a" / f"s{i}.jsonl"
        write(path, LINES[i])
        os.utime(path, (NOW - 100 + i, NOW - 100 + i))
    assert sorted(ids(tail_of(home).poll())) == sorted(IDS[2:4])


def test_symlinked_file_is_not_read(home: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A session file that is a symlink (pointing anywhere) is not followed."""
    outside = tmp_path_factory.mktemp("outside") / "secret.jsonl"
    outside.write_bytes(LINES[0])
    (home / "sessions" / "a" / "s.jsonl").symlink_to(outside)
    assert tail_of(home).poll().events == []


def test_budget_spreads_a_backlog_over_polls(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sessionlog, "READ_BUDGET", 2000)
    path = home / "sessions" / "a" / "s.jsonl"
    write(path, b"".join(LINES))
    tail = tail_of(home)
    got: list[str] = []
    for _ in range(100):
        got += ids(tail.poll())
    assert got == IDS


def test_env_var_globs() -> None:
    """`$VAR/` globs: a value given for the agent is a path under its home, none means the
    reader's default, a variable with neither skips the glob; the sidecar's own environment is
    never read, and a value outside the home is refused."""

    class Codexish(Probe):
        globs = ("$CODEX_HOME/sessions/*.jsonl", "$NOPE/x/*.jsonl", "plain/*.jsonl")
        env_defaults = {"CODEX_HOME": ".codex"}

    home = Path("/h")
    os.environ["NOPE"] = "/etc"
    try:
        assert expand_globs(Codexish(), home, {}) == [(Path("/h/.codex"), "sessions/*.jsonl"),
                                                    (Path("/h"), "plain/*.jsonl")]
    finally:
        del os.environ["NOPE"]
    assert expand_globs(Codexish(), home, {"CODEX_HOME": "alt"})[0] == (Path("/h/alt"),
                                                                        "sessions/*.jsonl")
    for bad in ("/srv/c", "../c", "a/../../c"):
        with pytest.raises(ValueError, match=f"session_env CODEX_HOME='{re.escape(bad)}'"):
            expand_globs(Codexish(), home, {"CODEX_HOME": bad})


def test_sqlite_store_is_polled_read_only_when_it_changes(home: Path) -> None:
    """A SQLite reader gets a read-only connection, only when the database changed; its
    state (watermarks) is saved with the offsets. Writing through the connection fails."""
    db = home / "sessions" / "a" / "store.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    conn.executemany("INSERT INTO t (v) VALUES (?)", [(i,) for i in IDS[:3]])
    conn.commit()
    os.utime(db, (NOW, NOW))
    calls: list[str] = []

    class Db(Probe):
        globs = ("sessions/*/*.db",)
        kind = "sqlite"

        def poll_db(self, c, state):
            calls.append("poll")
            with pytest.raises(sqlite3.OperationalError):
                c.execute("INSERT INTO t (v) VALUES ('x')")
            rows = c.execute("SELECT id, v FROM t WHERE id > ? ORDER BY id",
                             (state.get("last", 0),)).fetchall()
            if rows:
                state["last"] = rows[-1][0]
            return [SessionEvent(TEXT, None, call_id=v) for _, v in rows]

    tail = SessionTail(Db(), home, clock=lambda: NOW)
    assert ids(tail.poll()) == IDS[:3]
    assert ids(tail.poll()) == [] and calls == ["poll"]  # unchanged: not queried again
    conn.execute("INSERT INTO t (v) VALUES (?)", (IDS[3],))
    conn.commit()
    os.utime(db, (NOW + 5, NOW + 5))
    assert ids(tail.poll()) == IDS[3:4]
    assert tail.to_dict()[key("sessions/a/store.db")]["db"] == {"last": 4}
    conn.close()


def _ro_bind(src: Path, dest: Path) -> None:
    dest.mkdir()
    done = subprocess.run(f"mount --bind {src} {dest} && mount -o remount,ro,bind {dest}",
                          shell=True, capture_output=True)
    if done.returncode:
        subprocess.run(["umount", str(dest)], capture_output=True)
        pytest.skip("no permission to make a read-only bind mount here")


@pytest.mark.parametrize("writer_open", [True, False])
def test_wal_database_on_a_read_only_mount(tmp_path: Path, writer_open: bool) -> None:
    """The agent's home is mounted read-only into the sidecar. A WAL database (opencode's and
    kilo's) is read there both while its CLI has it open (``-wal``/``-shm`` exist) and after the
    CLI exited (no ``-shm``: opened immutable), and sees rows the CLI commits later."""
    src = tmp_path / "src" / "sessions" / "a"
    src.mkdir(parents=True)
    writer = sqlite3.connect(src / "store.db")
    writer.execute("PRAGMA journal_mode = WAL")
    writer.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    writer.execute("INSERT INTO t (v) VALUES (?)", (IDS[0],))
    writer.commit()
    if not writer_open:
        writer.close()  # checkpoints and removes -wal and -shm
        assert sorted(p.name for p in src.iterdir()) == ["store.db"]
    os.utime(src / "store.db", (NOW, NOW))
    _ro_bind(tmp_path / "src", tmp_path / "ro")
    try:
        class Db(Probe):
            globs = ("sessions/*/*.db",)
            kind = "sqlite"

            def poll_db(self, c, state):
                rows = c.execute("SELECT id, v FROM t WHERE id > ?", (state.get("last", 0),))
                rows = rows.fetchall()
                state["last"] = rows[-1][0] if rows else state.get("last", 0)
                return [SessionEvent(TEXT, None, call_id=v) for _, v in rows]

        tail = SessionTail(Db(), tmp_path / "ro", clock=lambda: NOW)
        result = tail.poll()
        assert (ids(result), result.errors) == (IDS[:1], {})
        if writer_open:
            writer.execute("INSERT INTO t (v) VALUES (?)", (IDS[1],))
            writer.commit()
            assert ids(tail.poll()) == IDS[1:2]
    finally:
        # SQLite keeps a closed reader's descriptor until the same process's writer lets go
        # of its locks on that file: close the writer first.
        writer.close()
        done = subprocess.run(["umount", str(tmp_path / "ro")], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr


def test_any_file_name_is_safe_in_the_state(home: Path) -> None:
    """A session file whose name is not UTF-8 (or holds a token) is read, and the saved
    offsets hold only a digest of its path, so they always serialise."""
    name = os.fsdecode(b"s-\xff-ghp_" + b"a" * 36 + b".jsonl")
    write(home / "sessions" / "a" / name, LINES[0])
    tail = tail_of(home)
    assert ids(tail.poll()) == IDS[:1]
    text = orjson.dumps(tail.to_dict()).decode()
    assert "ghp_" not in text and "s-" not in text


def test_symlinked_directory_out_of_the_home_is_not_read(home: Path, tmp_path_factory) -> None:
    outside = tmp_path_factory.mktemp("outside")
    (outside / "s.jsonl").write_bytes(LINES[0])
    (home / "sessions" / "evil").symlink_to(outside, target_is_directory=True)
    assert tail_of(home).poll().events == []


def test_fifo_beside_a_database_is_refused_not_waited_on(home: Path) -> None:
    """SQLite would block opening a FIFO planted as the database's -journal (or -wal, -shm):
    the poll counts it unreadable and returns at once."""

    class Db(Probe):
        globs = ("sessions/*/*.db",)
        kind = "sqlite"

        def poll_db(self, c, state):
            raise AssertionError("never opened")

    db = home / "sessions" / "a" / "store.db"
    sqlite3.connect(db).execute("CREATE TABLE t (x)").connection.close()
    os.utime(db, (NOW, NOW))
    os.mkfifo(f"{db}-journal")
    assert SessionTail(Db(), home, clock=lambda: NOW).poll().errors == {"unreadable": 1}


def test_old_database_history_is_not_replayed(home: Path) -> None:
    """A database last changed before the backfill horizon is read once with its events
    dropped; rows added later arrive."""
    db = home / "sessions" / "a" / "store.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    conn.execute("INSERT INTO t (v) VALUES (?)", (IDS[0],))
    conn.commit()
    os.utime(db, (NOW - 7200, NOW - 7200))

    class Db(Probe):
        globs = ("sessions/*/*.db",)
        kind = "sqlite"

        def poll_db(self, c, state):
            rows = c.execute("SELECT id, v FROM t WHERE id > ?", (state.get("last", 0),)).fetchall()
            state["last"] = rows[-1][0] if rows else state.get("last", 0)
            return [SessionEvent(TEXT, None, call_id=v) for _, v in rows]

    tail = SessionTail(Db(), home, clock=lambda: NOW, backfill_s=3600)
    assert ids(tail.poll()) == []
    conn.execute("INSERT INTO t (v) VALUES (?)", (IDS[1],))
    conn.commit()
    os.utime(db, (NOW, NOW))
    assert ids(tail.poll()) == IDS[1:2]
    conn.close()


def test_a_big_file_does_not_starve_a_new_one(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Polls take the files in turn: a session appearing next to a large backlog is read
    within a couple of polls, not after the backlog."""
    monkeypatch.setattr(sessionlog, "READ_BUDGET", 2000)
    write(home / "sessions" / "a" / "big.jsonl", b"".join(LINES) * 20)
    tail = tail_of(home)
    tail.poll()
    write(home / "sessions" / "a" / "new.jsonl", LINES[1])
    got = []
    for _ in range(3):
        got += [e for e in tail.poll(rescan=True).events if e.source == key("sessions/a/new.jsonl")]
    assert len(got) == 1


def test_unfinished_lines_are_bounded_over_all_files(home: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Partial lines held across files stay under MAX_PENDING: the one that would pass it is
    skipped as oversized."""
    monkeypatch.setattr(sessionlog, "MAX_PENDING", 1000)
    for i in range(3):
        write(home / "sessions" / "a" / f"s{i}.jsonl", b'{"uuid": "' + b"x" * 400)
    result = tail_of(home).poll()
    assert result.errors == {"oversized": 1}


# -- issue 17: renames ------------------------------------------------------------------------


def test_a_renamed_file_keeps_its_position_and_source(home: Path) -> None:
    """Issue 17: a session file renamed in its directory (a Claude session a.jsonl -> b.jsonl)
    was read again from its start, its turns counted twice. It is the same file (device and
    inode): only what is written after is read, and its events keep their source."""
    path = home / "sessions" / "a" / "a.jsonl"
    write(path, b"".join(LINES[:3]))
    tail = tail_of(home)
    first = tail.poll()
    assert ids(first) == IDS[:3]
    source = first.events[0].source
    path.rename(home / "sessions" / "a" / "b.jsonl")
    assert ids(tail.poll(rescan=True)) == []
    write(home / "sessions" / "a" / "b.jsonl", LINES[3])
    again = tail.poll()
    assert ids(again) == IDS[3:4] and {e.source for e in again.events} == {source}
    assert list(tail.to_dict()) == [key("sessions/a/b.jsonl")]
    assert tail.to_dict()[key("sessions/a/b.jsonl")]["source"] == source == key("sessions/a/a.jsonl")


def test_a_file_moved_to_another_watched_directory_keeps_its_position(home: Path) -> None:
    """A move between globbed directories (Codex files its rollouts by day; Claude Code's
    project folders) is a rename too."""
    path = home / "sessions" / "a" / "s.jsonl"
    write(path, b"".join(LINES[:3]))
    tail = tail_of(home)
    assert ids(tail.poll()) == IDS[:3]
    (home / "sessions" / "b").mkdir()
    path.rename(home / "sessions" / "b" / "s.jsonl")
    write(home / "sessions" / "b" / "s.jsonl", LINES[3])
    assert ids(tail.poll(rescan=True)) == IDS[3:4]


def test_a_rename_while_stopped_resumes_from_the_saved_position(home: Path) -> None:
    """Renamed while the sidecar was down: the saved offset (found by device and inode) still
    applies, and the source with it."""
    path = home / "sessions" / "a" / "a.jsonl"
    write(path, b"".join(LINES[:3]))
    tail = tail_of(home)
    source = tail.poll().events[0].source
    saved = json.loads(json.dumps(tail.to_dict()))
    path.rename(home / "sessions" / "a" / "b.jsonl")
    write(home / "sessions" / "a" / "b.jsonl", LINES[3])
    again = tail_of(home)
    again.load_dict(saved)
    result = again.poll()
    assert ids(result) == IDS[3:4] and result.events[0].source == source
    third = tail_of(home)
    third.load_dict(json.loads(json.dumps(again.to_dict())))
    write(home / "sessions" / "a" / "b.jsonl", LINES[4])
    result = third.poll()
    assert ids(result) == IDS[4:5] and result.events[0].source == source


def test_a_rotation_reads_the_new_file_and_not_the_old_one_again(home: Path) -> None:
    """s.jsonl renamed to t.jsonl and a new s.jsonl started in one go: t.jsonl keeps the
    position, s.jsonl is read from its start."""
    path = home / "sessions" / "a" / "s.jsonl"
    write(path, b"".join(LINES[:3]))
    tail = tail_of(home)
    assert ids(tail.poll()) == IDS[:3]
    path.rename(home / "sessions" / "a" / "t.jsonl")
    write(path, b"".join(LINES[4:6]))
    write(home / "sessions" / "a" / "t.jsonl", LINES[3])
    assert sorted(ids(tail.poll(rescan=True))) == sorted(IDS[3:6])


def test_a_hard_link_is_not_a_rename(home: Path) -> None:
    """A second name for a followed file (its first name still there) is a file of its own,
    as before."""
    path = home / "sessions" / "a" / "s.jsonl"
    write(path, b"".join(LINES[:2]))
    tail = tail_of(home)
    assert ids(tail.poll()) == IDS[:2]
    os.link(path, home / "sessions" / "a" / "t.jsonl")
    assert ids(tail.poll(rescan=True)) == IDS[:2]
    assert sorted(tail.to_dict()) == sorted([key("sessions/a/s.jsonl"), key("sessions/a/t.jsonl")])


def test_only_a_failures_output_is_kept_and_it_is_cut() -> None:
    """Issue 19: a poll holds its events at once, so an event keeps its output only when the
    call failed (only a failure's output is digested), cut to its first and last 8 KiB."""
    from repeat_failure.backends import SHELL_END, SessionEvent
    from repeat_failure.rules.normalize import OUTPUT_EDGE_CHARS
    from repeat_failure.sessions.tail import _stamped

    big = "a" * OUTPUT_EDGE_CHARS + "b" * 100_000 + "c" * OUTPUT_EDGE_CHARS
    ok, bad, unknown = _stamped([
        SessionEvent(SHELL_END, 1.0, command="x", exit=0, failed=False, output="fine"),
        SessionEvent(SHELL_END, 2.0, command="x", exit=2, failed=True, output=big),
        SessionEvent(SHELL_END, 3.0, command="x", exit=None, failed=None, output="?")], 9.0, "s")
    assert (ok.output, unknown.output) == (None, None)
    assert bad.output == ("a" * OUTPUT_EDGE_CHARS + f"\n[{len(big)} chars]\n"
                          + "c" * OUTPUT_EDGE_CHARS)


def test_a_rescan_costs_nothing_per_file_that_does_not_change(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 28 item 13: every rescan ran lstat and realpath on every glob match (60,000 old
    Claude Code session files: 30 % of a core, over 100 MB). Now a rescan of 500 unchanged
    files lstats only the MAX_FILES followed ones and resolves no path; a new file costs one
    lstat more and is followed; a followed file that disappears makes the next newest one
    followed (a full scan)."""
    import time as time_mod


    old = time_mod.time() - 86_400
    project = home / "sessions" / "a"
    for i in range(500):
        path = project / f"s{i:04}.jsonl"
        path.write_bytes(LINES[0])
        os.utime(path, (old + i, old + i))
    os.utime(project, (old, old))  # the directories' last changes are long past
    os.utime(home / "sessions", (old, old))
    tail = tail_of(home)
    tail.poll(rescan=True)
    followed = sorted(f.path.name for f in tail._files.values())
    assert followed == [f"s{i:04}.jsonl" for i in range(500 - sessionlog.MAX_FILES, 500)]

    calls: list[str] = []
    real_lstat, real_realpath, real_scandir = os.lstat, os.path.realpath, os.scandir
    monkeypatch.setattr(os, "lstat", lambda p, *a, **k: calls.append("lstat") or
                        real_lstat(p, *a, **k))
    monkeypatch.setattr(os.path, "realpath", lambda p, *a, **k: calls.append("realpath") or
                        real_realpath(p, *a, **k))
    monkeypatch.setattr(os, "scandir", lambda p, *a, **k: calls.append("scandir") or
                        real_scandir(p, *a, **k))
    tail.poll(rescan=True)
    # No directory is listed again (neither sessions/, for the glob's `*`, nor sessions/a).
    assert sorted(calls) == ["lstat"] * sessionlog.MAX_FILES

    calls.clear()
    new = project / "new.jsonl"
    new.write_bytes(LINES[1])
    tail.poll(rescan=True)
    assert sorted(calls) == ["lstat"] * (sessionlog.MAX_FILES + 1) + ["scandir"]
    assert "new.jsonl" in {f.path.name for f in tail._files.values()}
    assert "s0436.jsonl" not in {f.path.name for f in tail._files.values()}  # 65th newest

    (project / "s0499.jsonl").unlink()
    tail.poll(rescan=True)
    assert "s0436.jsonl" in {f.path.name for f in tail._files.values()}


def test_an_old_file_growing_again_is_found_when_inotify_names_it(home: Path) -> None:
    """Issue 28 item 13: a rescan no longer looks at unchanged files, so an old file outside
    the MAX_FILES followed that grows again (its directory unchanged) is found at the next
    full scan, or at once when the sidecar's inotify watch names it (``changed``)."""
    import time as time_mod

    old = time_mod.time() - 86_400
    project = home / "sessions" / "a"
    for i in range(sessionlog.MAX_FILES + 5):
        path = project / f"s{i:04}.jsonl"
        path.write_bytes(LINES[0])
        os.utime(path, (old + i, old + i))
    os.utime(project, (old, old))
    os.utime(home / "sessions", (old, old))
    tail = tail_of(home)
    tail.poll(rescan=True)
    first = project / "s0000.jsonl"
    assert first not in {f.path for f in tail._files.values()}
    with open(first, "ab") as f:
        f.write(LINES[1])
    tail.poll(rescan=True)
    assert first not in {f.path for f in tail._files.values()}  # not looked at
    tail.poll(changed=[first, project / "other.txt"])
    assert first in {f.path for f in tail._files.values()}
