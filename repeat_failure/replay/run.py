"""``repeat-failure replay``: what the check would have said on an agent's own history, offline,
before it is turned on (issue 19; the check ships off, spec C14).

Session files (or homes, searched the way the sidecar searches an agent's home:
:func:`repeat_failure.sessions.tail.expand_globs`, :func:`repeat_failure.sessions.tail.discover`) are read with the
sidecar's own readers (:mod:`repeat_failure.backends`; mini-swe-agent and SWE-agent trajectories with
:mod:`repeat_failure.backends.trajectory`), and every finished shell call goes through the sidecar's
own rules: :func:`repeat_failure.rules.pipeline.session_record` (size and exit rules),
:func:`repeat_failure.rules.pipeline.record_command` (scrub, normalize, the cut mark),
:class:`repeat_failure.rules.exclude.Exclusions`, the output digest (:func:`repeat_failure.rules.pipeline.failure_output`)
and :class:`repeat_failure.rules.detector.Detector`, at each record's own time (``now`` is the newest record
time seen, so a failure counts as it would have when it happened, and notes clear when their
failures leave the window). One detector per session file and setting: a session is one agent
run, and the sidecar's detector for an agent starts empty with the check.

Nothing raw is kept or shown: commands are shown as exported (scrubbed, normalized, cut to 200
characters), outputs only through their digests, and file names scrubbed; control characters
are escaped (:func:`repeat_failure.rules.terminal.label_value`). A file that cannot be read, or whose
content no reader understands, is reported by name and skipped; it never stops the replay.

The files are found and read by :mod:`repeat_failure.replay.sources`; what a replay
found, and the report, are :mod:`repeat_failure.replay.report`. Here: the judging.
"""

from __future__ import annotations

import math
import os
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from repeat_failure.backends import SHELL_END, ReaderFormatError, SessionEvent
from repeat_failure.rules.detector import Detector, NoteCleared, NoteRaised
from repeat_failure.rules.exclude import Exclusions
from repeat_failure.rules.normalize import command_label
from repeat_failure.rules.pipeline import failure_output, record_command, session_record
from repeat_failure.sessions.unrecognized import ShellRecognition
from repeat_failure.replay.report import (MAX_NO_RESULT_SHOWN, BadFile, ReplayNote,
                                                  ReplayResult, SessionResult, Setting)
from repeat_failure.replay.sources import Source, error_text, read_events, shown_path

#: The agent name records get (it names nothing outside the replay).
AGENT = "replay"
#: (threshold, window) combinations one replay judges at most: each is a detector per session,
#: and ``--threshold 1,2,…,10000 --window …`` would otherwise run for hours before printing.
MAX_SETTINGS = 100


# -- judging ---------------------------------------------------------------------------------


class _Judge:
    """One setting's detector over one session, and the notes it raised."""

    def __init__(self, setting: Setting) -> None:
        self.detector = Detector(setting.threshold, setting.window_s, setting.match_output)
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
    A call timed more than :data:`~repeat_failure.rules.parse.MAX_CLOCK_SKEW_S` after ``wall_now`` (epoch
    seconds, default the clock now) is counted ``future_ts`` in ``skipped`` and not judged,
    as the sidecar refuses it (:func:`repeat_failure.rules.pipeline.session_record`): taken, one bogus
    time (``created: 1e300``) would move the replay's clock past every later failure's
    window, and the session's notes would vanish."""
    wall = time.time() if wall_now is None else wall_now
    result = SessionResult(shown_path(source.path), source.backend, skipped=skipped or Counter())
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
            _keep_no_result(result, event, source.backend, wall, key)
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


def _keep_no_result(result: SessionResult, event: SessionEvent, backend: str, wall: float,
                    key: bytes) -> None:
    """Keep the command of a call without a result as the report shows it (scrubbed,
    normalized, cut to 200 characters), the first :data:`MAX_NO_RESULT_SHOWN` of a session."""
    if len(result.no_result_calls) >= MAX_NO_RESULT_SHOWN:
        return
    record = session_record(event, AGENT, backend, wall)
    if record is not None:
        result.no_result_calls.append(command_label(record_command(record, record.ts, key)))


def replay(sources: Sequence[Source], settings: Sequence[Setting], exclude: Iterable[str],
           bad: list[BadFile] | None = None,
           progress: Callable[[int], None] | None = None) -> ReplayResult:
    """Replay every source with every setting; ``exclude`` is the C9 list (the config's, or
    the default). A file that cannot be read, or gives nothing but unusable lines, is added to
    the result's ``bad`` files with the reason and skipped; a session log in which the shell
    tool is called but no shell call is recognised is replayed and marked ``unrecognized``
    with the reason (:mod:`repeat_failure.sessions.unrecognized`, issue 26), as the sidecar
    reports it. ``progress`` is called with each file's size in bytes once it is done."""
    result = ReplayResult(list(settings), bad=list(bad or []))
    exclusions = Exclusions(exclude)
    key = os.urandom(16)
    for source in sources:
        skipped: Counter = Counter()
        shell = ShellRecognition()
        try:
            size = os.stat(source.path).st_size
            events = read_events(source, skipped, shell)
        except ReaderFormatError as exc:
            result.bad.append(BadFile(shown_path(source.path), f"not a {source.backend} file: "
                                      f"{error_text(exc)}"))
            size = 0
        except (OSError, sqlite3.Error) as exc:
            result.bad.append(BadFile(shown_path(source.path), f"cannot be read: {error_text(exc)}"))
            size = 0
        else:
            if skipped and not events:
                reasons = ", ".join(f"{r} {n}" for r, n in sorted(skipped.items()))
                result.bad.append(BadFile(shown_path(source.path),
                                          f"not a {source.backend} session log ({reasons})"))
            else:
                session = replay_session(source, events, settings, exclusions, key, skipped)
                session.unrecognized = shell.finish()
                result.sessions.append(session)
        if progress is not None:
            progress(size)
    return result
