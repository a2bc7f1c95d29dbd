"""Session-log tailing: the backend's own session files → :class:`SessionEvent` values.

The sidecar mounts the agent's home read-only. :class:`SessionTail` finds the files the
backend's reader names (:attr:`SessionLogReader.globs`), remembers how far it read each one (by
device, inode and byte offset, saved in the sidecar's state file so a restart resumes), and hands
every new complete line to the reader. It copes with files appearing, growing, being replaced
(a new inode: read from the start), being truncated (size below the offset: read from the
start), being renamed or moved between the globbed directories (the same device and inode under
a new name, as Vector's and mtail's tailers fingerprint files: it keeps its offset and its
events their ``source``, also across a restart; before, a renamed file was read again from the
start and its turns and failures counted twice, issue 17) and vanishing (forgotten). SQLite stores (:meth:`SessionLogReader.file_kind` ``"sqlite"``) are
opened read-only and polled through :meth:`SessionLogReader.poll_db` when the database or its
WAL changed. A JSON document a CLI rewrites whole (:meth:`SessionLogReader.file_kind` ``"json"``)
is read whole, up to :data:`MAX_LINE` bytes, each time its size or time changed, and handed to
:meth:`SessionLogReader.parse_document`, whose per-file state says what it already gave.

Bounds: at most :data:`MAX_FILES` files are followed (the most recently modified; finding them
costs nothing per file that does not change, :mod:`repeat_failure.sessions.scan`), at most
:data:`READ_BUDGET` bytes are read per poll (the rest next time), a line longer than
:data:`MAX_LINE` is skipped and counted ``oversized``. A file first seen while its last change
is older than ``backfill_s`` starts at its end: history from before the sidecar ran is not
replayed. Nothing here logs a line's text; errors are counted by reason
(``hive_repeat_failure_reader_errors_total``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import os
import re
import sqlite3
import stat
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from repeat_failure.backends import ReaderFormatError, SessionEvent, SessionLogReader, UnusedLine
from repeat_failure.sessions.stores import UNCHANGED as _UNCHANGED, open_db as _open_db
from repeat_failure.sessions.scan import Scanner, discover  # noqa: F401 (discover: replay's)
from repeat_failure.sessions.unrecognized import ShellRecognition, Unrecognized
from repeat_failure.rules.normalize import OUTPUT_EDGE_CHARS, cut_output

log = logging.getLogger("repeat_failure")

#: Files followed per agent: the most recently modified win.
MAX_FILES = 64
#: Bytes read per poll over all files of one agent (the rest is read at the next poll).
READ_BUDGET = 1 << 20
#: A longer line is skipped (Claude Code logs whole tool outputs on one line; 8 MiB is generous).
MAX_LINE = 8 << 20
#: Unfinished lines held over all files at most; a line that would pass it is skipped as
#: oversized (64 files each holding most of a MAX_LINE would otherwise cost 512 MiB).
MAX_PENDING = 16 << 20
#: Seconds between full rescans of the globs (new files); inotify wakes polls in between.
SCAN_INTERVAL_S = 10.0

#: Reasons counted besides the readers' own :class:`ReaderFormatError` reasons.
NOT_JSON, OVERSIZED, UNREADABLE, READER_BUG = "not_json", "oversized", "unreadable", "reader_bug"

#: A file is known by the digest of up to this many bytes after its first line (inode numbers
#: are reused, and some CLIs rewrite a file under a new inode with the same content).
FINGERPRINT_BYTES = 256
#: Where the first line's end is looked for; a longer first line puts the window at offset 0.
FINGERPRINT_SEARCH = 64 << 10

_VAR = re.compile(r"\A\$([A-Za-z_][A-Za-z0-9_]*)/")
#: A file's key and its events' ``source`` (:meth:`SessionTail._key`: 16 hex digits).
_SOURCE = re.compile(r"[0-9a-f]{16}")
#: A call id kept as the CLI wrote it: the ids CLIs write (``toolu_01…``, ``call_…``) are
#: short and plain. Any other is kept as its digest: the state file keeps thousands of them
#: (the sidecar's delivered calls, the running shell calls), and one of a megabyte, or of
#: characters JSON escapes into six bytes, would grow it past what a restart loads.
_PLAIN_CALL_ID = re.compile(r"[A-Za-z0-9._:@+=/-]{1,96}")


def expand_globs(reader: SessionLogReader, home: Path,
                 env: Mapping[str, str] | None = None) -> list[tuple[Path, str]]:
    """``(base directory, pattern)`` pairs for the reader's globs under ``home``.

    A glob starting with ``$VAR/`` uses ``env[VAR]`` when given and otherwise
    ``reader.env_defaults[VAR]``; either is a path relative to ``home`` (the agent's own
    environment is not the sidecar's, and an absolute path in the agent's container means
    nothing in the sidecar's, so the sidecar's environment is never read). A ``$VAR`` with
    neither is skipped. Source: Codex moves its files with ``CODEX_HOME`` (default
    ``~/.codex``), opencode and kilo follow ``XDG_DATA_HOME``, Claude Code
    ``CLAUDE_CONFIG_DIR``, pi and omp ``PI_CODING_AGENT_DIR``. Raises ValueError for an
    ``env`` value that is absolute or climbs out of the home."""
    env = env or {}
    for var, value in env.items():
        if os.path.isabs(value) or ".." in Path(value).parts:
            raise ValueError(f"session_env {var}={value!r}: expected a path inside the agent's "
                             "home, relative to it")
    out = []
    for pattern in reader.globs:
        base = home
        match = _VAR.match(pattern)
        if match:
            var = match.group(1)
            value = env.get(var) or reader.env_defaults.get(var)  # type: ignore[assignment]
            if not value:
                continue
            base = home / value
            pattern = pattern[match.end():]
        out.append((base, pattern))
    return out


@dataclass
class _File:
    """What the tail knows of one followed file."""

    path: Path
    dev: int
    ino: int
    offset: int = 0
    #: Its events' ``source``: the key of the name it was first seen under (kept when renamed).
    source: str = ""
    pending: bytearray = field(default_factory=bytearray)
    skipping: bool = False  # inside an oversized line: drop bytes until the next newline
    state: dict[str, Any] = field(default_factory=dict)  # the reader's per-file state (raw)
    stamp: tuple = ()  # sqlite: (mtime_ns, size) of the db and its WAL when last polled
    head: str = ""  # digest of `head_len` bytes at `head_start` ("" until the file has them)
    head_start: int = 0
    head_len: int = 0
    discard: bool = False  # sqlite: drop the first poll's events (history before we ran)
    shell: ShellRecognition = field(default_factory=ShellRecognition)  # issue 26


@dataclass
class PollResult:
    """What one :meth:`SessionTail.poll` found: ``events`` in file order (``ts`` always set),
    ``errors`` counted by reason, ``ignored``: lines of a type the reader does not know
    (:class:`~repeat_failure.backends.UnusedLine`; not errors), and the files found
    ``unrecognized`` by this poll (each file once)."""

    events: list[SessionEvent] = field(default_factory=list)
    errors: Counter = field(default_factory=Counter)
    ignored: int = 0
    unrecognized: list[Unrecognized] = field(default_factory=list)


class SessionTail:
    """Follows one agent's session files for one backend reader.

    ``home`` is the agent's home as the sidecar sees it (usually a read-only mount). ``clock``
    gives seconds since the epoch (for events whose line has no time, and the backfill cut).
    ``backfill_s``: a file first seen whose last change is older than this starts at its end.
    """

    def __init__(self, reader: SessionLogReader, home: str | os.PathLike[str],
                 env: Mapping[str, str] | None = None, backfill_s: float = 3600.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.reader = reader
        self.home = Path(home)
        self.clock = clock
        self.backfill_s = backfill_s
        self.globs = expand_globs(reader, self.home, env)
        self._rotation = 0  # which file a poll starts with, so one big file starves none
        self._pending_total = 0  # bytes of unfinished lines held over all files
        self._files: dict[str, _File] = {}  # key (digest of the path, _key) -> file
        self._saved: dict[str, dict] = {}  # restored offsets not yet matched to a file
        self._scanned_at: float | None = None
        self._scanner = Scanner(self.globs, self.home)  # issue 28 item 13

    # -- discovery ---------------------------------------------------------------------------

    def _key(self, path: Path) -> str:
        """The file's key in the state file and its events' ``source``: a digest of its path
        under the home, so no file name (which may hold anything, even a token or bytes that
        are not UTF-8) is ever stored."""
        try:
            rel = path.relative_to(self.home)
        except ValueError:
            rel = path
        return hashlib.blake2b(os.fsencode(rel), digest_size=8).hexdigest()

    def watch_dirs(self) -> list[Path]:
        """Directories whose changes should wake a poll: each followed file's directory and
        each glob's existing fixed prefix (so a new session directory is noticed)."""
        dirs = {f.path.parent for f in self._files.values()}
        for base, pattern in self.globs:
            fixed = base
            for part in Path(pattern).parts[:-1]:
                if any(c in part for c in "*?["):
                    break
                fixed = fixed / part
            dirs.add(fixed)
        return sorted(d for d in dirs if _is_dir(d))

    def scan(self, hints: Iterable[Path] = ()) -> None:
        """Find the session files now (bounded): new ones are followed, vanished ones
        forgotten, at most :data:`MAX_FILES` (the most recently modified). The files that did
        not change are not looked at again (:class:`repeat_failure.sessions.scan.Scanner`);
        ``hints`` are files inotify saw change, looked at too."""
        found = {self._key(path): (path, st) for path, st in self._scanner.scan(
            [f.path for f in self._files.values()], MAX_FILES, hints)}
        newest = sorted(found.items(), key=lambda kv: kv[1][1].st_mtime_ns, reverse=True)
        keep = dict(newest[:MAX_FILES])
        renamed = self._renamed(keep)
        carried = {key: self._files.pop(old) for key, old in renamed.items()}
        for key in list(self._files):
            if key not in keep:
                del self._files[key]
        for key, f in carried.items():
            f.path = keep[key][0]
            self._files[key] = f
        saved_moved = self._renamed(keep, {k: (e["dev"], e["ino"]) for k, e in self._saved.items()})
        now = self.clock()
        for key, (path, st) in keep.items():
            if key in self._files:
                continue
            saved = self._saved.pop(key, None) if key not in saved_moved else None
            if key in saved_moved:
                saved = self._saved.pop(saved_moved[key], None)
            f = _File(path, st.st_dev, st.st_ino, state=self.reader.new_file_state(), source=key)
            if saved:
                # Whether it is still the same file is decided when it is read (_same_file).
                f.dev, f.ino, f.offset = saved["dev"], saved["ino"], saved["offset"]
                if isinstance(saved.get("source"), str) and _SOURCE.fullmatch(saved["source"]):
                    f.source = saved["source"]
                elif key in saved_moved:
                    f.source = saved_moved[key]
                f.head = str(saved.get("head", ""))
                f.head_start, f.head_len = _nat(saved.get("head_start")), _nat(saved.get("head_len"))
                f.skipping = saved.get("skipping") is True
                f.shell = ShellRecognition.from_dict(saved.get("shell"))
                if isinstance(saved.get("db"), dict):
                    f.state = saved["db"]
            elif now - st.st_mtime > self.backfill_s:
                # History from before we ran is not replayed: a JSON Lines file starts at its
                # end; a database is read once with its events dropped (the reader's state
                # then points past them).
                f.offset = st.st_size
                f.discard = self.reader.file_kind(path) in ("sqlite", "json")
            self._files[key] = f
        self._scanned_at = now

    def _renamed(self, keep: dict[str, tuple[Path, os.stat_result]],
                 known: dict[str, tuple[int, int]] | None = None) -> dict[str, str]:
        """``{new key: old key}`` for the files renamed since they were known: a name found now
        (``keep``) that is not known with its device and inode, whose device and inode are
        those of a known file (``known``: key -> (dev, ino); default the followed files) that
        is no longer at its own name (gone, or another inode there: a rotation). A hard link,
        whose first name still holds its inode, is not a rename. Whether the content is still
        the same is checked when the file is read (:func:`_same_file`: an inode number reused
        by another file reads from the start)."""
        if known is None:
            known = {key: (f.dev, f.ino) for key, f in self._files.items()}
        here = {key: (st.st_dev, st.st_ino) for key, (_, st) in keep.items()}
        away = {inode: key for key, inode in known.items() if here.get(key) != inode}
        if not away:
            return {}
        out = {}
        for key, inode in here.items():
            old = away.get(inode)
            if old is not None and old != key and known.get(key) != inode:
                out[key] = old
        return out

    # -- reading -----------------------------------------------------------------------------

    def poll(self, rescan: bool = False, changed: Iterable[Path] = ()) -> PollResult:
        """Read what was added since the last poll. Rescans the globs first when ``rescan``,
        when :data:`SCAN_INTERVAL_S` passed, or when ``changed`` (files inotify saw change)
        names a file not followed. Never raises for what the files contain."""
        now = self.clock()
        hints = {Path(p) for p in changed} - {f.path for f in self._files.values()}
        if (rescan or hints or self._scanned_at is None
                or now - self._scanned_at >= SCAN_INTERVAL_S):
            self.scan(hints)
        result = PollResult()
        budget = READ_BUDGET
        files = list(self._files.items())
        if files:
            self._rotation = (self._rotation + 1) % len(files)
            files = files[self._rotation:] + files[:self._rotation]
        for key, f in files:
            if budget <= 0:
                break
            kind = self.reader.file_kind(f.path)
            if kind == "sqlite":
                self._poll_db(key, f, result, now)
            elif kind == "json":
                budget -= self._poll_document(key, f, result, now)
            else:
                budget -= self._poll_jsonl(key, f, result, budget, now)
        return result

    def _poll_jsonl(self, key: str, f: _File, result: PollResult, budget: int,
                    now: float) -> int:
        try:
            fd = os.open(f.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return 0  # gone: the next scan forgets it
        except OSError:
            result.errors[UNREADABLE] += 1
            return 0
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                result.errors[UNREADABLE] += 1
                return 0
            if not _same_file(f, fd, st):
                # Replaced by other content (a new inode, or a reused one) or truncated: a new
                # file under the old name, read from the start.
                f.offset = 0
                f.pending.clear()
                f.skipping = False
                f.state = self.reader.new_file_state()
                f.head, f.head_start, f.head_len = "", 0, 0
                f.shell = ShellRecognition()
            f.dev, f.ino = st.st_dev, st.st_ino
            if f.head_len < FINGERPRINT_BYTES:
                _fingerprint(f, fd, st.st_size)
            if st.st_size <= f.offset:
                return 0
            data = os.pread(fd, min(budget, st.st_size - f.offset), f.offset)
        finally:
            os.close(fd)
        f.offset += len(data)
        self._pending_total -= len(f.pending)
        self._lines(key, f, data, result, now)
        self._pending_total += len(f.pending)
        return len(data)

    def _lines(self, key: str, f: _File, data: bytes, result: PollResult, now: float) -> None:
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                rest = data[start:]
                if f.skipping:
                    return
                if (len(f.pending) + len(rest) > MAX_LINE
                        or self._pending_total + len(f.pending) + len(rest) > MAX_PENDING):
                    result.errors[OVERSIZED] += 1
                    f.pending.clear()
                    f.skipping = True
                else:
                    f.pending += rest
                return
            chunk = data[start:end]
            start = end + 1
            if f.skipping:
                f.skipping = False
                continue
            if f.pending:
                f.pending += chunk
                line = bytes(f.pending)
                f.pending.clear()
            else:
                line = chunk
            if len(line) > MAX_LINE:
                result.errors[OVERSIZED] += 1
                continue
            if line.strip():
                self._parse(f.source or key, f, line, result, now)

    def _parse(self, key: str, f: _File, line: bytes, result: PollResult, now: float) -> None:
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            result.errors[NOT_JSON] += 1
            return
        events = self._call_reader(result, self.reader.parse_line, obj, f.state)
        if events is not None:
            events = _stamped(events, now, key)
            result.events.extend(events)
        if not self.reader.never_runs(obj, f.state):  # Claude Code's warmup subagents
            self._flag(key, f, f.shell.on_line(line, obj, events, self.reader.shell_tools),
                       result, now)

    def _flag(self, key: str, f: _File, flagged: tuple[str, float | None] | None,
              result: PollResult, now: float) -> None:
        """Report ``f`` unrecognised when its shell-call tracker just flagged it."""
        if flagged:
            result.unrecognized.append(Unrecognized(key, f.path, flagged[0], flagged[1] or now))

    def _call_reader(self, result: PollResult, method: Callable[..., list[SessionEvent]],
                     *args: Any) -> list[SessionEvent] | None:
        """``method(*args)`` of the reader, or None after counting why it failed: the reader's
        own reason (a line of a type it does not know is counted in ``ignored`` instead),
        ``unreadable`` for a database that cannot be read now (the next poll tries
        again), ``reader_bug`` (logged by class name only, never the data) for anything else."""
        try:
            return method(*args)
        except UnusedLine:
            result.ignored += 1
        except ReaderFormatError as exc:
            result.errors[exc.reason] += 1
        except sqlite3.Error:
            result.errors[UNREADABLE] += 1
        except Exception as exc:  # noqa: BLE001 - a reader bug must not stop the sidecar
            result.errors[READER_BUG] += 1
            log.error("session-log reader failed (its input not logged)",
                      extra={"backend": self.reader.backend, "error": exc.__class__.__name__})
        return None

    def _poll_document(self, key: str, f: _File, result: PollResult, now: float) -> int:
        """Read a whole JSON document again when its ``(mtime_ns, size)`` changed
        (:meth:`SessionLogReader.read_document`) and hand it to the reader.
        Returns the bytes read."""
        got = self.reader.read_document(f.path, f.stamp, MAX_LINE)
        if got.error:
            result.errors[got.error] += 1
        f.stamp = got.stamp or f.stamp
        if got.doc is _UNCHANGED or got.error:
            return got.size
        events = self._call_reader(result, self.reader.parse_document, got.doc, f.state)
        if events is not None:
            if f.discard:
                f.discard = False
            else:
                events = _stamped(events, now, f.source or key)
                result.events.extend(events)
                # issue 26: shell calls that start and never end are reported here too
                self._flag(f.source or key, f,
                           f.shell.on_events(events, self.reader.shell_tools), result, now)
        return got.size

    def _poll_db(self, key: str, f: _File, result: PollResult, now: float) -> None:
        stamp = tuple(_stamp(Path(f"{f.path}{s}")) for s in ("", "-wal"))
        if stamp == f.stamp:
            return
        try:
            conn = _open_db(f.path)
        except (sqlite3.Error, OSError):
            result.errors[UNREADABLE] += 1
            return
        try:
            events = self._call_reader(result, self.reader.poll_db, conn, f.state)
        finally:
            conn.close()
        if events is None:
            return
        f.stamp = stamp
        if f.discard:
            f.discard = False
            return
        events = _stamped(events, now, f.source or key)
        result.events.extend(events)
        self._flag(f.source or key, f, f.shell.on_events(events, self.reader.shell_tools),
                   result, now)

    # -- state -------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, dict]:
        """Where each followed file was read to, for the state file:
        ``{path: {"dev", "ino", "offset", "head", "head_start", "head_len"[, "skipping"][,
        "source"][, "shell"][, "db"]}}`` (``source`` when a rename gave the file another key;
        ``shell``: its :class:`ShellRecognition` counts). Holds no text of the files (a SQLite
        reader's state holds ids and watermarks only). A partial line at the end is re-read
        after a restart: the offset saved is the end of the last complete line."""
        out = {}
        for key, f in self._files.items():
            entry: dict[str, Any] = {"dev": f.dev, "ino": f.ino,
                                     "offset": f.offset - len(f.pending), "head": f.head,
                                     "head_start": f.head_start, "head_len": f.head_len}
            if f.skipping:
                entry["skipping"] = True
            if f.source and f.source != key:
                entry["source"] = f.source
            if f.shell != ShellRecognition():
                entry["shell"] = f.shell.to_dict()
            if self.reader.file_kind(f.path) in ("sqlite", "json"):
                entry["db"] = f.state
            out[key] = entry
        return out

    def forget_reports(self) -> None:
        """Forget which files were reported unrecognised (the check was turned off): one that
        still is is reported again at its next turn's end (its counts are kept)."""
        for f in self._files.values():
            f.shell.reason = ""

    def load_dict(self, data: Any) -> None:
        """Resume from :meth:`to_dict`'s output; anything malformed is ignored (the files are
        then read as if first seen)."""
        if not isinstance(data, dict):
            return
        for key, entry in data.items():
            if (isinstance(key, str) and isinstance(entry, dict)
                    and all(isinstance(entry.get(k), int) and entry.get(k) >= 0  # type: ignore[operator]
                            for k in ("dev", "ino", "offset"))):
                self._saved[key] = entry
        self._scanned_at = None


def _is_dir(path: Path) -> bool:
    """True for a directory we may list; never raises (a folder the sidecar's user may not
    read is the agent's business, not a reason to stop)."""
    try:
        return stat.S_ISDIR(os.stat(path).st_mode) and os.access(path, os.R_OK | os.X_OK)
    except (OSError, ValueError):
        return False


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _nat(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _same_file(f: _File, fd: int, st: os.stat_result) -> bool:
    """Is the open file the one ``f`` describes? By content where a fingerprint exists (omp
    18.2.3 rewrites its first line, a 256-byte title slot, in place, and sometimes writes the
    whole file again under a new inode), else by device and inode; never when it shrank."""
    if st.st_size < f.offset:
        return False
    if f.head_len:
        return _digest(os.pread(fd, f.head_len, f.head_start)) == f.head
    return (st.st_dev, st.st_ino) == (f.dev, f.ino)


def _fingerprint(f: _File, fd: int, size: int) -> None:
    """Set (or grow to :data:`FINGERPRINT_BYTES`) ``f``'s fingerprint: the digest of the bytes
    right after the first line, or from offset 0 when the first line is longer than
    :data:`FINGERPRINT_SEARCH`. Nothing until the first line is complete."""
    first = os.pread(fd, min(size, FINGERPRINT_SEARCH), 0)
    newline = first.find(b"\n")
    if newline < 0 and size < FINGERPRINT_SEARCH:
        return
    start = newline + 1 if newline >= 0 else 0
    length = min(FINGERPRINT_BYTES, size - start)
    if length > f.head_len:
        f.head_start, f.head_len = start, length
        f.head = _digest(os.pread(fd, length, start))


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def _stamped(events: Iterable[SessionEvent], now: float, source: str) -> list[SessionEvent]:
    """The events with ``ts`` set (a line without a time, or NaN/inf: when we read it),
    ``output`` kept for failures only and cut to its edges (:func:`repeat_failure.rules.normalize.cut_output`:
    a poll holds its events at once, issue 19),
    ``source`` set to the file's key, and ``call_id`` made unique across files
    (``<source>:<id>``; CLIs number calls per session) and bounded: an id that is not up to 96
    plain characters (:data:`_PLAIN_CALL_ID`) becomes ``#`` and the digest of its UTF-8 bytes
    (a lone surrogate from ``\\udXXX`` in the JSON escaped), so it can be stored."""
    out = []
    for e in events:
        if e.output is not None and (e.failed is False or (e.failed is None and not e.exit)):
            e = dataclasses.replace(e, output=None)  # only a failure's output is ever used
        elif e.output is not None and len(e.output) > 2 * OUTPUT_EDGE_CHARS:
            e = dataclasses.replace(e, output=cut_output(e.output))
        ts = e.ts if e.ts is not None and math.isfinite(e.ts) else now
        call_id = e.call_id
        if call_id:
            if not _PLAIN_CALL_ID.fullmatch(call_id):
                call_id = "#" + _digest(call_id.encode("utf-8", "backslashreplace"))
            call_id = f"{source}:{call_id}"
        out.append(dataclasses.replace(e, ts=ts, call_id=call_id, source=source))
    return out
