"""The SQLite session stores some CLIs keep (opencode, Kilo Code CLI): opened read-only for
:class:`repeat_failure.sessions.tail.SessionTail` and ``repeat-failure replay``
(:func:`open_db`), and the change stamp a poll compares (:func:`stamp`). Moved out of
``tail`` whole (issue 26: that module had reached the package's 600-line bound).
"""

from __future__ import annotations

import os
import sqlite3
import stat
import urllib.parse
from pathlib import Path


def open_db(path: Path) -> sqlite3.Connection:
    """A read-only connection to the SQLite database at ``path`` (``mode=ro``,
    ``query_only``; text that is not UTF-8 decoded with replacement, so one bad row cannot stop
    a reader). The database and its ``-wal``, ``-shm`` and ``-journal`` files must be regular
    files or absent: SQLite would block opening a FIFO. On a read-only mount a WAL database
    whose CLI is not running (no ``-wal`` file, so no ``-shm`` either) cannot be opened that
    way, since SQLite would have to create the ``-shm`` index; with no writer it is opened
    ``immutable`` instead (only a WAL database: a rollback-journal database that cannot be
    opened is locked or broken, and is retried later). Raises ``sqlite3.Error`` or
    ``OSError``."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            mode = os.lstat(f"{path}{suffix}").st_mode
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(mode):
            raise OSError(f"{path}{suffix} is not a regular file")
    uri = f"file:{urllib.parse.quote(str(path))}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=0.5, isolation_level=None,
                           check_same_thread=False)
    try:
        conn.execute("PRAGMA query_only = 1")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError:
        conn.close()
        if os.path.exists(f"{path}-wal") or not is_wal(path):
            raise
        conn = sqlite3.connect(f"{uri}&immutable=1", uri=True, isolation_level=None,
                               check_same_thread=False)
        conn.execute("PRAGMA query_only = 1")
    conn.text_factory = lambda data: data.decode("utf-8", "replace")
    return conn


def is_wal(path: Path) -> bool:
    """True when the database file's header says WAL mode (bytes 18 and 19 are 2)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        header = os.pread(fd, 20, 0)
    finally:
        os.close(fd)
    return header[18:20] == b"\x02\x02"


def stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)
