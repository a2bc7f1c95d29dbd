"""Opening the session stores that are not JSON Lines files, for the tail
(:mod:`repeat_failure.sessions.tail`) and ``repeat-failure replay``: a CLI's SQLite database,
opened read-only (opencode, Kilo Code CLI), and a JSON document the CLI rewrites whole, read
whole when it changed (Cline CLI's ``messages.json``, Continue CLI's session files). Nothing here
logs what a file holds.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import urllib.parse
from pathlib import Path
from typing import Any, NamedTuple

import orjson

#: :attr:`Document.doc` when the file has not changed since the stamp given.
UNCHANGED: Any = object()


class Document(NamedTuple):
    """What :func:`read_document` found: ``doc`` (the decoded document, or
    :data:`UNCHANGED`, or ``None`` with an ``error``), ``stamp`` (the file's ``(mtime_ns,
    size)`` read now, ``None`` when it could not be opened), ``size`` (bytes read) and
    ``error`` (``""``, ``not_json``, ``oversized`` or ``unreadable``: the tail's reasons)."""

    doc: Any
    stamp: tuple[int, int] | None
    size: int
    error: str


def read_document(path: Path, last: tuple[int, int] | tuple[()] | None,
                  limit: int = 8 << 20) -> Document:
    """The JSON document at ``path`` when its ``(mtime_ns, size)`` differs from ``last``.
    Opened without following a symlink or blocking on a FIFO; not a regular file is
    ``unreadable``; over ``limit`` bytes is ``oversized`` (not read); text that is not JSON
    (also a file caught while the CLI was writing it) is ``not_json``. A file that vanished
    gives ``Document(UNCHANGED, None, 0, "")`` (the next scan forgets it). Never raises for what
    the file holds."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return Document(UNCHANGED, None, 0, "")
    except OSError:
        return Document(None, None, 0, "unreadable")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return Document(None, None, 0, "unreadable")
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp == last:
            return Document(UNCHANGED, stamp, 0, "")
        if st.st_size > limit:
            return Document(None, stamp, 0, "oversized")
        data = os.pread(fd, st.st_size, 0)
    finally:
        os.close(fd)
    try:
        return Document(orjson.loads(data), stamp, len(data), "")
    except orjson.JSONDecodeError:
        return Document(None, stamp, len(data), "not_json")


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


