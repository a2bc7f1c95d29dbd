"""``repeat-failure replay``: what the check would have said on an agent's own history, offline,
before it is turned on (issue 19; the check ships off, spec C14).

Session files (or homes, searched the way the sidecar searches an agent's home:
:func:`repeat_failure.sessions.tail.expand_globs`, :func:`repeat_failure.sessions.tail.discover`) are read with the
sidecar's own readers (:mod:`repeat_failure.backends`; mini-swe-agent and SWE-agent trajectories with
:mod:`repeat_failure.backends.trajectory`), and every finished shell call goes through the sidecar's
own rules: :func:`repeat_failure.sidecar.pipeline.session_record` (size and exit rules),
:func:`repeat_failure.sidecar.pipeline.record_command` (scrub, normalize, the cut mark),
:class:`repeat_failure.sidecar.exclude.Exclusions`, the output digest (:func:`repeat_failure.sidecar.pipeline.failure_output`)
and :class:`repeat_failure.sidecar.detector.Detector`, at each record's own time (``now`` is the newest record
time seen, so a failure counts as it would have when it happened, and notes clear when their
failures leave the window). One detector per session file and setting: a session is one agent
run, and the sidecar's detector for an agent starts empty with the check.

Nothing raw is kept or shown: commands are shown as exported (scrubbed, normalized, cut to 200
characters), outputs only through their digests, and file names scrubbed; control characters
are escaped (:func:`repeat_failure.terminal.label_value`). A file that cannot be read, or whose
content no reader understands, is reported by name and skipped; it never stops the replay.
"""

from __future__ import annotations

import math
import os
import sqlite3
import stat
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import orjson

from repeat_failure.backends import (SHELL_END, ReaderFormatError, SessionEvent, SessionLogReader,
                              UnusedLine, session_reader, session_readers)
from repeat_failure.backends import trajectory
from repeat_failure.config import open_regular
from repeat_failure.sidecar.detector import Detector, NoteCleared, NoteRaised
from repeat_failure.sidecar.exclude import Exclusions
from repeat_failure.sidecar.normalize import CHANGING, SAME, UNKNOWN, command_label
from repeat_failure.sidecar.parse import MAX_CLOCK_SKEW_S
from repeat_failure.sidecar.pipeline import failure_output, record_command, session_record
from repeat_failure.sidecar.scrub import scrub
from repeat_failure.sessions.tail import MAX_LINE, NOT_JSON, OVERSIZED, READER_BUG, UNREADABLE
from repeat_failure.sessions.tail import _open_db, _stamped, discover, expand_globs
from repeat_failure.terminal import label_value

#: A trajectory document larger than this is reported and skipped (one JSON document is read
#: whole; mini-swe-agent's run on one SWE-bench instance writes well under 10 MiB).
MAX_TRAJECTORY_BYTES = 256 << 20
#: Polls of a SQLite store per replay (each reads every new row; a store needs one or two).
MAX_DB_POLLS = 16
#: The agent name records get (it names nothing outside the replay).
AGENT = "replay"
#: (threshold, window) combinations one replay judges at most: each is a detector per session,
#: and ``--threshold 1,2,…,10000 --window …`` would otherwise run for hours before printing.
MAX_SETTINGS = 100


@dataclass(frozen=True, order=True)
class Setting:
    """One (threshold, window) combination a replay judges: ``threshold`` failures (N, 1 to
    10,000 as in the config), ``window_s`` seconds (> 0, at most 7 days)."""

    threshold: int
    window_s: float


@dataclass
class ReplayNote:
    """A note the sidecar would have raised: ``command`` as exported (scrubbed, normalized,
    cut to 200 characters), ``exit`` (a number or ``"failed"``), ``count`` failures in the
    window and ``minutes`` (first to last, rounded up, at least 1) at its last failure before
    it cleared (or at the end of the session), ``first_ts`` / ``last_ts`` (epoch seconds) of
    those failures, ``raised_ts`` when it was raised, ``output`` ``same`` / ``changing`` /
    ``unknown`` over those failures, ``cleared`` (``success``, ``expired``, ``evicted``, or
    ``""`` when still raised at the end)."""

    command: str
    exit: int | str
    count: int
    minutes: int
    first_ts: float
    last_ts: float
    raised_ts: float
    output: str
    cleared: str = ""

    def to_json(self) -> dict[str, Any]:
        """The note as ``--json`` gives it."""
        return {"command": self.command, "exit": self.exit, "count": self.count,
                "minutes": self.minutes, "first_ts": self.first_ts, "last_ts": self.last_ts,
                "raised_ts": self.raised_ts, "output": self.output, "cleared": self.cleared}


@dataclass
class SessionResult:
    """One session file replayed: its ``path`` (as given or found, scrubbed), ``backend``
    (the reader's name, or ``mini-swe-agent``), ``commands`` (shell calls with a result that
    reached the detector), ``failures`` among them, ``excluded`` (empty or excluded by C9:
    not counted), ``no_result`` (calls whose log gives no result: not counted), ``skipped``
    (lines or rows the reader could not use, by reason) and ``notes`` per setting."""

    path: str
    backend: str
    commands: int = 0
    failures: int = 0
    excluded: int = 0
    no_result: int = 0
    skipped: Counter = field(default_factory=Counter)
    notes: dict[Setting, list[ReplayNote]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The session as ``--json`` gives it (notes flattened, each with its setting)."""
        return {"path": self.path, "backend": self.backend, "commands": self.commands,
                "failures": self.failures, "excluded": self.excluded,
                "no_result": self.no_result, "skipped": dict(sorted(self.skipped.items())),
                "notes": [{"threshold": s.threshold, "window_s": s.window_s, **n.to_json()}
                          for s in sorted(self.notes) for n in self.notes[s]]}


@dataclass(frozen=True)
class BadFile:
    """A file reported and skipped: its ``path`` (scrubbed) and what was wrong."""

    path: str
    reason: str


@dataclass
class SummaryRow:
    """The summary of one setting over all sessions: ``sessions``, ``commands``,
    ``failures``, ``sessions_with_note``, ``notes``, and the notes by output."""

    setting: Setting
    sessions: int = 0
    commands: int = 0
    failures: int = 0
    sessions_with_note: int = 0
    notes: int = 0
    same: int = 0
    changing: int = 0
    unknown: int = 0

    def to_json(self) -> dict[str, Any]:
        """The row as ``--json`` gives it."""
        return {"threshold": self.setting.threshold, "window_s": self.setting.window_s,
                "sessions": self.sessions, "commands": self.commands,
                "failures": self.failures, "sessions_with_note": self.sessions_with_note,
                "notes": self.notes, "output": {SAME: self.same, CHANGING: self.changing,
                                                UNKNOWN: self.unknown}}


@dataclass
class ReplayResult:
    """A whole replay: the ``settings`` judged, the ``sessions`` read (in the order found) and
    the ``bad`` files skipped."""

    settings: list[Setting]
    sessions: list[SessionResult] = field(default_factory=list)
    bad: list[BadFile] = field(default_factory=list)

    def summary(self) -> list[SummaryRow]:
        """One row per setting, in the order given."""
        rows = []
        for setting in self.settings:
            row = SummaryRow(setting, sessions=len(self.sessions))
            for session in self.sessions:
                row.commands += session.commands
                row.failures += session.failures
                notes = session.notes.get(setting, [])
                row.sessions_with_note += bool(notes)
                row.notes += len(notes)
                for note in notes:
                    setattr(row, note.output, getattr(row, note.output) + 1)
            rows.append(row)
        return rows

    def to_json(self) -> dict[str, Any]:
        """The one JSON document ``--json`` prints."""
        return {"settings": [{"threshold": s.threshold, "window_s": s.window_s}
                             for s in self.settings],
                "sessions": [s.to_json() for s in self.sessions],
                "bad_files": [{"path": b.path, "reason": b.reason} for b in self.bad],
                "summary": [r.to_json() for r in self.summary()]}


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
    (the globs of ``backend``'s reader, or of every reader), and for trajectories
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
            bad.append(BadFile(_shown(path), "no such file or directory"))
            continue
        except (OSError, ValueError) as exc:  # a symlink loop, a name too long, a NUL
            bad.append(BadFile(_shown(path), f"cannot be read: {_why(exc)}"))
            continue
        if is_dir:
            found: list[tuple[Path, str]] = []
            for fmt, reader in chosen.items():
                found += [(p, fmt) for p, _ in discover(expand_globs(reader, path), path)]
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
                bad.append(BadFile(_shown(path), "cannot tell which agent wrote it (its path is "
                                   "not where a known CLI keeps its session log); pass "
                                   "--backend NAME"))
    return out


def _shown(path: Path | str) -> str:
    """A path as printed: scrubbed (an agent chose the name), control characters escaped."""
    text = os.fsencode(str(path)).decode("utf-8", "backslashreplace")
    return label_value(scrub(text))


def _why(exc: BaseException) -> str:
    """What went wrong, as printed: an ``OSError``'s ``strerror`` when it has one, else its
    text, which may hold a path (``repeat_failure.sessions.tail._open_db`` names the file it refuses),
    so it is shown as paths are (:func:`_shown`)."""
    text = getattr(exc, "strerror", None) or str(exc) or exc.__class__.__name__
    return _shown(text)


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
          *args: Any) -> list[SessionEvent]:
    """The reader's events, or none after counting why not (as the sidecar's tail does:
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
    return []


def read_events(source: Source, skipped: Counter) -> list[SessionEvent]:
    """Every event of one session file, in file order, with ``ts`` set (a line without a time
    gets the time of the line before it that had one, or the file's modification time) and
    ``call_id`` made per-file as the sidecar does. Lines and rows the reader cannot use are
    counted in ``skipped`` by reason. Raises ``OSError`` when the file cannot be read,
    :class:`ReaderFormatError` when a trajectory is not one."""
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
    if reader.kind == "sqlite":
        mtime = os.stat(source.path).st_mtime
        conn = _open_db(source.path)
        try:
            state = reader.history_state()
            events: list[SessionEvent] = []
            for _ in range(MAX_DB_POLLS):
                got = _call(reader.poll_db, skipped, conn, state)
                if not got and not state.get("pending_error"):
                    break
                events += got
        finally:
            conn.close()
        return _timed(events, mtime)
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
            if got:
                stamped = _stamped(got, last, "f")
                last = stamped[-1].ts or last
                out += stamped
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


# -- judging ---------------------------------------------------------------------------------


class _Judge:
    """One setting's detector over one session, and the notes it raised."""

    def __init__(self, setting: Setting) -> None:
        self.detector = Detector(setting.threshold, setting.window_s)
        self.window_s = setting.window_s
        self.open: dict[str, ReplayNote] = {}
        self.done: list[ReplayNote] = []
        self.expired_at = -math.inf

    def _events(self, events: Iterable[Any], now: float) -> None:
        for event in events:
            if isinstance(event, NoteRaised):
                n = event.note
                self.open[n.command] = ReplayNote(
                    command_label(n.command), n.exit, n.count, n.minutes, n.first_ts,
                    n.last_ts, now, n.output)
            elif isinstance(event, NoteCleared):
                note = self.open.pop(event.command, None)
                if note is not None:
                    note.cleared = event.reason
                    self.done.append(note)

    def feed(self, command: str, exit_: int | None, failed: bool, ts: float, now: float,
             output: int) -> None:
        note = self.open.get(command)
        if now - self.expired_at >= self.window_s or (
                note is not None and self.detector.note(command, now) is None):
            # What the sidecar's timer does: notes whose failures left the window clear (a
            # full pass once per window of record time, and whenever a raised note's did).
            self._events(self.detector.expire(now), now)
            self.expired_at = now
        self._events(self.detector.record(command, exit_, failed, ts, now, output), now)
        if command in self.open:
            view = self.detector.note(command, now)
            if view is not None:
                note = self.open[command]
                note.exit, note.count, note.minutes = view.exit, view.count, view.minutes
                note.first_ts, note.last_ts, note.output = view.first_ts, view.last_ts, view.output

    def notes(self) -> list[ReplayNote]:
        """Every note raised, in the order raised."""
        return sorted(self.done + list(self.open.values()), key=lambda n: (n.raised_ts,
                                                                            n.command))


def replay_session(source: Source, events: Iterable[SessionEvent], settings: Sequence[Setting],
                   exclusions: Exclusions, key: bytes,
                   skipped: Counter | None = None,
                   wall_now: float | None = None) -> SessionResult:
    """Run one session's finished shell calls (``shell_end`` with a command, each call id
    once, as the sidecar delivers them) through the pipeline at their own times, judged by
    each of ``settings``; ``key`` keys the cut marks and output digests (random per replay).
    A call timed more than :data:`~repeat_failure.sidecar.parse.MAX_CLOCK_SKEW_S` after ``wall_now`` (epoch
    seconds, default the clock now) is counted ``future_ts`` in ``skipped`` and not judged,
    as the sidecar refuses it (:func:`repeat_failure.sidecar.pipeline.session_record`): taken, one bogus
    time (``created: 1e300``) would move the replay's clock past every later failure's
    window, and the session's notes would vanish."""
    wall = time.time() if wall_now is None else wall_now
    result = SessionResult(_shown(source.path), source.backend, skipped=skipped or Counter())
    judges = [_Judge(s) for s in settings]
    delivered: set[str] = set()
    now = -math.inf
    for event in events:
        if event.kind != SHELL_END or not event.command:
            continue
        if event.call_id:
            if event.call_id in delivered:
                continue
            delivered.add(event.call_id)
        if event.failed is None and event.exit is None:
            result.no_result += 1
            continue
        record = session_record(event, AGENT, source.backend, wall)
        if record is None:
            result.skipped["future_ts"] += 1
            continue
        now = max(now, record.ts)
        command = record_command(record, now, key)
        if not command or exclusions.matches(command):
            result.excluded += 1
            continue
        result.commands += 1
        result.failures += record.failed
        output = failure_output(event, record.failed, key, now)
        for judge in judges:
            judge.feed(command, record.exit, record.failed, record.ts, now, output)
    result.notes = {j_setting: judge.notes() for j_setting, judge in zip(settings, judges)}
    return result


def replay(sources: Sequence[Source], settings: Sequence[Setting], exclude: Iterable[str],
           bad: list[BadFile] | None = None,
           progress: Callable[[int], None] | None = None) -> ReplayResult:
    """Replay every source with every setting; ``exclude`` is the C9 list (the config's, or
    the default). A file that cannot be read, or gives nothing but unusable lines, is added to
    the result's ``bad`` files with the reason and skipped. ``progress`` is called with each
    file's size in bytes once it is done."""
    result = ReplayResult(list(settings), bad=list(bad or []))
    exclusions = Exclusions(exclude)
    key = os.urandom(16)
    for source in sources:
        skipped: Counter = Counter()
        try:
            size = os.stat(source.path).st_size
            events = read_events(source, skipped)
        except ReaderFormatError as exc:
            result.bad.append(BadFile(_shown(source.path), f"not a {source.backend} file: "
                                      f"{_why(exc)}"))
            size = 0
        except (OSError, sqlite3.Error) as exc:
            result.bad.append(BadFile(_shown(source.path), f"cannot be read: {_why(exc)}"))
            size = 0
        else:
            if skipped and not events:
                reasons = ", ".join(f"{r} {n}" for r, n in sorted(skipped.items()))
                result.bad.append(BadFile(_shown(source.path),
                                          f"not a {source.backend} session log ({reasons})"))
            else:
                result.sessions.append(replay_session(source, events, settings, exclusions,
                                                      key, skipped))
        if progress is not None:
            progress(size)
    return result


# -- showing ---------------------------------------------------------------------------------


def _when(ts: float) -> str:
    try:
        return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return f"{ts:.0f}"


def _setting_text(s: Setting) -> str:
    return f"threshold {s.threshold}, window {s.window_s:g} s"


def format_text(result: ReplayResult) -> str:
    """The replay as text: each bad file, each session with a note (its counts, then per note
    the command as exported, exit, count, minutes, output and when it was raised; under each
    setting when there are several), then the summary table, one row per setting."""
    lines: list[str] = []
    many = len(result.settings) > 1
    for b in result.bad:
        lines.append(f"skipped {b.path}: {b.reason}")
    for s in result.sessions:
        if not any(s.notes.values()):
            continue
        extra = "".join(f", {n} {what}" for n, what in ((s.excluded, "excluded"),
                                                        (s.no_result, "without a result"))
                        if n)
        if s.skipped:
            extra += ", skipped " + ", ".join(f"{r} {n}" for r, n in sorted(s.skipped.items()))
        lines.append(f"{s.path} ({s.backend}): {s.commands} commands, {s.failures} failures"
                     f"{extra}")
        for setting in result.settings:
            notes = s.notes.get(setting, [])
            if many:
                lines.append(f"  {_setting_text(setting)}: {len(notes)} "
                             f"note{'' if len(notes) == 1 else 's'}")
            for n in notes:
                result_text = "(failed)" if n.exit == "failed" else f"(exit {n.exit})"
                lines.append(f"{'    ' if many else '  '}note: {label_value(n.command)} "
                             f"{result_text}: {n.count} failures in {n.minutes} min, output "
                             f"{n.output}, raised {_when(n.raised_ts)}"
                             + (f", cleared ({n.cleared})" if n.cleared else ""))
    if lines:
        lines.append("")
    header = ("threshold", "window_s", "sessions", "commands", "failures",
              "sessions_with_note", "notes", "same", "changing", "unknown")
    rows = [header] + [(str(r.setting.threshold), f"{r.setting.window_s:g}", str(r.sessions),
                        str(r.commands), str(r.failures), str(r.sessions_with_note),
                        str(r.notes), str(r.same), str(r.changing), str(r.unknown))
                       for r in result.summary()]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        lines.append("  ".join(cell.rjust(w) for cell, w in zip(row, widths)).rstrip())
    return "\n".join(lines) + "\n"


class Progress:
    """Progress over the bytes to replay, on stderr: a tqdm bar that shows only when stderr is
    a terminal (tqdm's ``disable=None``) and the replay takes over half a second (``delay``),
    so a short replay, a pipe or a CI log never gets one. Issue 19 chose tqdm (one pure-Python
    wheel of 80 KB, no dependency on Linux; 24 ms to import after the sidecar's own modules,
    about 0.3 µs per update; see the closing note of issue 19)."""

    def __init__(self, total: int, stream=None) -> None:
        from tqdm import tqdm

        self._bar = tqdm(total=total, unit="B", unit_scale=True, delay=0.5, leave=False,
                         disable=None, file=stream or sys.stderr, desc="replay")

    def __call__(self, n: int) -> None:
        self._bar.update(n)

    def close(self) -> None:
        """Remove the bar."""
        self._bar.close()
