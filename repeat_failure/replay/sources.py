"""Which files ``repeat-failure replay`` (:mod:`repeat_failure.replay.run`) reads, and how:
finding the session files (a file as given, a directory searched as an agent's home the way
the sidecar searches it: :func:`find_sources`) and reading one into its events with the
sidecar's own readers (:func:`read_events`). A path that does not exist, cannot be read or
whose format cannot be told is reported by name (scrubbed, :func:`shown_path`) and skipped.
"""

from __future__ import annotations

import math
import os
import sqlite3
import stat
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import orjson

from repeat_failure.backends import (ReaderFormatError, SessionEvent, SessionLogReader, UnusedLine,
                                     session_reader, session_readers)
from repeat_failure.backends import trajectory
from repeat_failure.config import open_regular
from repeat_failure.replay.report import BadFile
from repeat_failure.rules.scrub import scrub
from repeat_failure.sessions.tail import MAX_LINE, NOT_JSON, OVERSIZED, READER_BUG, UNREADABLE
from repeat_failure.sessions.stores import open_db
from repeat_failure.sessions.tail import _stamped, discover, expand_globs
from repeat_failure.sessions.unrecognized import ShellRecognition
from repeat_failure.rules.terminal import label_value

#: A trajectory document larger than this is reported and skipped (one JSON document is read
#: whole; mini-swe-agent's run on one SWE-bench instance writes well under 10 MiB).
MAX_TRAJECTORY_BYTES = 256 << 20
#: Polls of a SQLite store per replay (each reads every new row; a store needs one or two).
MAX_DB_POLLS = 16
#: A directory that is not a home is searched for homes this many levels down
#: (``/data/homes/<team>/<user>/``), over at most :data:`MAX_HOME_DIRS` directories.
MAX_HOME_DEPTH = 4
MAX_HOME_DIRS = 10_000


# -- finding the files -----------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """A file to replay: its ``path`` and the format (a backend with a session-log reader, or
    :data:`repeat_failure.backends.trajectory.FORMAT`)."""

    path: Path
    backend: str


def formats() -> list[str]:
    """The names ``--backend`` takes: every backend whose session log has a reader (those
    that share a reader, like the inference backends with Claude Code's, are listed once, by
    the reader's own backend), and ``mini-swe-agent`` (also SWE-agent's ``.traj``)."""
    return sorted({r.backend for r in session_readers().values()}) + [trajectory.FORMAT]


def _readers() -> dict[str, SessionLogReader]:
    out = {}
    for name in formats():
        reader = session_reader(name)
        if reader is not None:
            out[name] = reader
    return out


def _matches(path: Path, reader: SessionLogReader) -> bool:
    """Whether ``path`` ends like one of the reader's globs under any home (the glob with its
    ``$VAR/`` replaced by the default directory), e.g. ``…/.claude/projects/x/y.jsonl``."""
    parts = path.parts
    for base, pattern in expand_globs(reader, Path("/")):
        glob_parts = (base / pattern).parts[1:]
        if len(parts) >= len(glob_parts) and fnmatch(
                "/".join(parts[-len(glob_parts):]), "/".join(glob_parts)):
            return True
    return False


def find_sources(paths: Sequence[str], backend: str | None = None,
                 bad: list[BadFile] | None = None) -> list[Source]:
    """The session files named by ``paths``: a file is taken as it is (its format is
    ``backend`` when given, else a trajectory by its name, else the one reader whose globs its
    path ends like); a directory is searched as an agent's home, as the sidecar searches it
    (the globs of ``backend``'s reader, or of every reader), or, when it is none, as a
    directory of homes (:func:`_in_homes_below`), and for trajectories
    (``**/*.traj.json``, ``**/*.traj``) unless ``backend`` names another format. Paths that do
    not exist, or files whose format cannot be told, go to ``bad`` by name. Each file is listed
    once, in the order found (a directory's files sorted by path)."""
    bad = bad if bad is not None else []
    readers = _readers()
    if backend is not None and backend not in readers and backend != trajectory.FORMAT:
        raise ValueError(f"--backend {backend!r}: expected one of {', '.join(formats())} "
                         "(a backend whose session log the sidecar reads, or mini-swe-agent)")
    chosen = {backend: readers[backend]} if backend in readers else (
        {} if backend == trajectory.FORMAT else readers)
    seen: set[Path] = set()
    out: list[Source] = []

    def add(path: Path, fmt: str) -> None:
        key = Path(os.path.abspath(path))
        if key not in seen:
            seen.add(key)
            out.append(Source(path, fmt))

    for name in paths:
        path = Path(name)
        try:
            is_dir = stat.S_ISDIR(os.stat(path).st_mode)
        except FileNotFoundError:
            bad.append(BadFile(shown_path(path), "no such file or directory"))
            continue
        except (OSError, ValueError) as exc:  # a symlink loop, a name too long, a NUL
            bad.append(BadFile(shown_path(path), f"cannot be read: {error_text(exc)}"))
            continue
        if is_dir:
            found = _in_home(path, chosen) or _in_homes_below(path, chosen)
            if backend in (None, trajectory.FORMAT):
                found += [(p, trajectory.FORMAT) for p, _ in
                          discover([(path, g) for g in trajectory.GLOBS], path)]
            for p, fmt in sorted(found, key=lambda pf: str(pf[0])):
                add(p, fmt)
        elif backend is not None:
            add(path, backend)
        elif trajectory.is_trajectory(path.name):
            add(path, trajectory.FORMAT)
        else:
            fits = [fmt for fmt, reader in readers.items() if _matches(path, reader)]
            if len(fits) == 1:
                add(path, fits[0])
            else:
                bad.append(BadFile(shown_path(path), "cannot tell which agent wrote it (its path is "
                                   "not where a known CLI keeps its session log); pass "
                                   "--backend NAME"))
    return out


def _in_home(home: Path, readers: dict[str, SessionLogReader]) -> list[tuple[Path, str]]:
    """``(file, format)`` of the session files ``readers`` find in ``home`` searched as an
    agent's home, as the sidecar searches it (:func:`repeat_failure.sessions.tail.discover`)."""
    found: list[tuple[Path, str]] = []
    for fmt, reader in readers.items():
        found += [(p, fmt) for p, _ in discover(expand_globs(reader, home), home)]
    return found


def _in_homes_below(root: Path, readers: dict[str, SessionLogReader]) -> list[tuple[Path, str]]:
    """The session files of the homes below ``root`` (a directory that is not one, like
    ``/data/homes`` holding ``alice/.claude/…`` and ``bob/.codex/…``, issue 26): each
    subdirectory is searched as a home (:func:`_in_home`); one that is a home is not searched
    further down, one that is not is searched for homes below it, down to
    :data:`MAX_HOME_DEPTH` levels under ``root`` and over at most :data:`MAX_HOME_DIRS`
    directories, in name order. Hidden directories (a CLI's own ``.codex``, ``.git``) and
    symlinks are not entered; a directory that cannot be listed is passed over."""
    found: list[tuple[Path, str]] = []
    level, listed = [root], 0
    for _ in range(MAX_HOME_DEPTH):
        below: list[Path] = []
        for directory in level:
            if listed >= MAX_HOME_DIRS:
                return found
            listed += 1
            try:
                with os.scandir(directory) as entries:
                    subdirs = sorted(Path(e.path) for e in entries if not e.name.startswith(".")
                                     and e.is_dir(follow_symlinks=False))
            except OSError:
                continue
            for sub in subdirs:
                home_files = _in_home(sub, readers)
                if home_files:
                    found += home_files
                else:
                    below.append(sub)
        level = below
    return found


def shown_path(path: Path | str) -> str:
    """A path as printed: scrubbed (an agent chose the name), control characters escaped."""
    text = os.fsencode(str(path)).decode("utf-8", "backslashreplace")
    return label_value(scrub(text))


def error_text(exc: BaseException) -> str:
    """What went wrong, as printed: an ``OSError``'s ``strerror`` when it has one, else its
    text, which may hold a path (``repeat_failure.sessions.stores.open_db`` names the file it refuses),
    so it is shown as paths are (:func:`shown_path`)."""
    text = getattr(exc, "strerror", None) or str(exc) or exc.__class__.__name__
    return shown_path(text)


def _open_regular(path: Path):
    """``path`` opened for reading in binary, only when it is a regular file
    (:func:`repeat_failure.config.open_regular`: a FIFO named on the command line is refused at once,
    where the sidecar's discovery never returns one, :func:`repeat_failure.sessions.tail.discover`).
    Raises ``OSError`` (``strerror`` saying what the path is instead)."""
    fd = open_regular(path)
    try:
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


# -- reading one file ------------------------------------------------------------------------


def _call(reader_call: Callable[..., list[SessionEvent]], skipped: Counter,
          *args: Any) -> list[SessionEvent] | None:
    """The reader's events, or None after counting why not (as the sidecar's tail does:
    :meth:`repeat_failure.sessions.tail.SessionTail._call_reader`)."""
    try:
        return reader_call(*args)
    except UnusedLine:
        skipped["unknown_type"] += 1
    except ReaderFormatError as exc:
        skipped[exc.reason] += 1
    except sqlite3.Error:
        skipped[UNREADABLE] += 1
    except Exception:  # noqa: BLE001 - a reader bug must not stop the replay
        skipped[READER_BUG] += 1
    return None


def read_events(source: Source, skipped: Counter,
                shell: ShellRecognition | None = None) -> list[SessionEvent]:
    """Every event of one session file, in file order, with ``ts`` set (a line without a time
    gets the time of the line before it that had one, or the file's modification time) and
    ``call_id`` made per-file as the sidecar does. Lines and rows the reader cannot use are
    counted in ``skipped`` by reason; a session log's lines and events also go to ``shell``
    when given, as the sidecar's tail gives them (:mod:`repeat_failure.sessions.unrecognized`:
    the caller asks it :meth:`~repeat_failure.sessions.unrecognized.ShellRecognition.finish`).
    Raises ``OSError`` when the file cannot be read, :class:`ReaderFormatError` when a
    trajectory is not one."""
    if source.backend == trajectory.FORMAT:
        with _open_regular(source.path) as f:
            mtime = os.fstat(f.fileno()).st_mtime
            data = f.read(MAX_TRAJECTORY_BYTES + 1)
        if len(data) > MAX_TRAJECTORY_BYTES:
            raise ReaderFormatError("oversized", f"over {MAX_TRAJECTORY_BYTES} bytes")
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise ReaderFormatError(NOT_JSON, "not a JSON document") from None
        return _timed(trajectory.read_trajectory(doc), mtime)
    reader = session_reader(source.backend)
    assert reader is not None
    kind = reader.file_kind(source.path)
    if kind == "sqlite":
        mtime = os.stat(source.path).st_mtime
        conn = open_db(source.path)
        try:
            state = reader.history_state()
            events: list[SessionEvent] = []
            for _ in range(MAX_DB_POLLS):
                got = _call(reader.poll_db, skipped, conn, state)
                if not got and not state.get("pending_error"):
                    break
                events += got  # type: ignore[arg-type]
        finally:
            conn.close()
        events = _timed(events, mtime)
        if shell is not None:
            shell.on_events(events, reader.shell_tools)
        return events
    if kind == "json" and type(reader).read_document is not SessionLogReader.read_document:
        # a session spread over several files (opencode before 1.2), gathered by its reader
        gathered = reader.read_document(source.path, None, MAX_LINE)
        if gathered.error or gathered.stamp is None:
            skipped[gathered.error or UNREADABLE] += 1
            return []
        doc, mtime = gathered.doc, gathered.stamp[0] / 1e9
    elif kind == "json":
        with _open_regular(source.path) as f:
            mtime = os.fstat(f.fileno()).st_mtime
            data = f.read(MAX_LINE + 1)
        if len(data) > MAX_LINE:
            skipped[OVERSIZED] += 1
            return []
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError:
            skipped[NOT_JSON] += 1
            return []
    if kind == "json":
        events = _timed(_call(reader.parse_document, skipped, doc, reader.history_state()),  # type: ignore[arg-type]
                        mtime)
        if shell is not None:
            shell.on_events(events, reader.shell_tools)
        return events
    state = reader.new_file_state()
    out: list[SessionEvent] = []
    with _open_regular(source.path) as f:
        last = os.fstat(f.fileno()).st_mtime
        for line in _lines(f, skipped):
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                skipped[NOT_JSON] += 1
                continue
            got = _call(reader.parse_line, skipped, obj, state)
            stamped = None if got is None else _stamped(got, last, "f")
            if stamped:
                last = stamped[-1].ts or last
                out += stamped
            if shell is not None and not reader.never_runs(obj, state):
                shell.on_line(line, obj, stamped, reader.shell_tools)
    return out


def _timed(events: list[SessionEvent], mtime: float) -> list[SessionEvent]:
    """``events`` with ``ts`` set as :func:`read_events` says, and per-file call ids."""
    out = []
    fallback = mtime
    for e in events:
        if e.ts is not None and math.isfinite(e.ts):
            fallback = e.ts
        out.extend(_stamped([e], fallback, "f"))
    return out


def _lines(f: Any, skipped: Counter) -> Iterator[bytes]:
    """The non-blank lines of a JSON Lines file open in binary (``f``), a line over
    :data:`repeat_failure.sessions.tail.MAX_LINE` skipped and counted ``oversized`` (as the tail does);
    a last line without its newline is read too (the session is over)."""
    pending = bytearray()
    skipping = False
    while chunk := f.read(1 << 20):
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                if not skipping:
                    pending += chunk[start:]
                    if len(pending) > MAX_LINE:
                        skipped[OVERSIZED] += 1
                        pending.clear()
                        skipping = True
                break
            piece = chunk[start:end]
            start = end + 1
            if skipping:
                skipping = False
                continue
            line = bytes(pending + piece) if pending else piece
            pending.clear()
            if len(line) > MAX_LINE:
                skipped[OVERSIZED] += 1
            elif line.strip():
                yield line
    if pending.strip() and not skipping:
        yield bytes(pending)
